"""pycocoevalcap 1.2's ``bleu``, without Java (see :mod:`capeval.compat.pycocoevalcap`)."""
