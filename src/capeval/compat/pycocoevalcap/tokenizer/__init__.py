"""pycocoevalcap 1.2's ``tokenizer``, without Java (see :mod:`capeval.compat.pycocoevalcap`)."""
