"""pycocoevalcap 1.2's ``meteor``, without Java (see :mod:`capeval.compat.pycocoevalcap`)."""
