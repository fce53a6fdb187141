"""CAPTURE (Dong et al. 2024): scene-graph elements of detailed captions matched exactly, by
WordNet synonyms and by Sentence-BERT; see :mod:`capeval.metrics.capture.scorer`."""
