"""Polos (Wada et al., CVPR 2024): the released regression model, without its old pins.

``head``: the layer mix and the regression MLP with the released checkpoint's key names;
``scorer``: the text/image encoders around it and the :class:`~capeval.scorer.ScorerBase`.
"""
