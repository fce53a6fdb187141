"""SPICE (Anderson et al., ECCV 2016) in Python.

The parser half turns a caption into SPICE's proposed tuples without Java:
:mod:`~capeval.metrics.spice.parser` (``SceneGraphParser``, spaCy) over
:mod:`~capeval.metrics.spice.basic` (spaCy -> CoreNLP basic UD v1),
:mod:`~capeval.metrics.spice.collapse` (collapsed CC-processed dependencies),
:mod:`~capeval.metrics.spice.enhance` (the scene-graph enhancer steps SPICE runs),
:mod:`~capeval.metrics.spice.rules` (SPICE's Semgrex patterns),
:mod:`~capeval.metrics.spice.lemma` (CoreNLP-style lemmas) and
:mod:`~capeval.metrics.spice.depgraph` (the graph, with Java's iteration orders).
Nothing is imported here, so importing the package stays light (spaCy loads lazily).
"""
