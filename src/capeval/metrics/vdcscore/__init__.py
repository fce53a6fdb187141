"""VDCscore (Chai et al., ICLR 2025, AuroraCap / VDC): question answering over a detailed video caption.

:mod:`.prompts` holds the official prompts, :mod:`.qa` the released question files,
:mod:`.reply` the reading and aggregation of the judge's replies, :mod:`.scorer` the scorer.
"""
