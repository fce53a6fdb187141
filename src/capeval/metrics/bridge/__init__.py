"""BRIDGE (Sarto et al. 2024, ECCV): learnable reference-free caption metric with visual pseudo-tokens.

``templates`` (noun chunks, masked replicas), ``mapping`` (psi, ablations, regulariser),
``checkpoint`` (safetensors + config), ``sources`` (template captions, cached), ``scorer``
(the ``bridge`` metric). Training: :mod:`capeval.train.bridge`.
"""
