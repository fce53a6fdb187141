"""CAPability (Liu et al. 2025, arXiv 2502.14914; ali-vilab/CAPability): precision, recall, F1 and
hit rate of a caption over 13 annotated visual dimensions, judged by an LLM.

:mod:`.prompts` (the official prompts, as data), :mod:`.parse` (reading and checking a reply,
the counts), :mod:`.data` (the released annotations and captions), :mod:`.scorer` (the judge
runs, :class:`~capeval.metrics.capability.scorer.CAPability`). See docs/question-based.md.
"""
