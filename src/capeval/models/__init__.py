"""Model code the learned metrics share: CLIP (:mod:`capeval.models.clip`), the checkpoint
table and :func:`capeval.models.download.download`, and :class:`capeval.models.cache.ModelCache`
(one load per backbone, shared between metrics). Importing this package loads nothing heavy."""
