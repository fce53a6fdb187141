"""AMBER's hallucination metrics (Wang et al. 2023; junyangwang0410/AMBER ``inference.py``):
generative CHAIR, Cover, Hal, Cog and the yes/no Accuracy, Precision, Recall, F1."""
