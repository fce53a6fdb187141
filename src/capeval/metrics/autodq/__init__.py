"""DREAM-1K AutoDQ (Wang et al. 2024, Tarsier): events extracted from the two descriptions by an
LLM, each checked for entailment by the other description (:mod:`.official`, :mod:`.scorer`,
:mod:`.dream1k`)."""
