"""pycocoevalcap 1.2's ``spice``, without Java (see :mod:`capeval.compat.pycocoevalcap`)."""
