"""BERTScore (Zhang et al., ICLR 2020) on transformers: formulas, model, baseline files, scorer."""
