"""pycocoevalcap 1.2's ``rouge``, without Java (see :mod:`capeval.compat.pycocoevalcap`)."""
