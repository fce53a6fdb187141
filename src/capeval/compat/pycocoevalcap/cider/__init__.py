"""pycocoevalcap 1.2's ``cider``, without Java (see :mod:`capeval.compat.pycocoevalcap`)."""
