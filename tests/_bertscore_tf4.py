"""Runs bert_score 0.3.13 in the transformers-4 environment (.ci/tf4-venv builds it) and prints
JSON: the transformers version, ``sent_encode``'s token ids of each sentence and per-item P/R/F.

Run by tests/test_bertscore_tf4.py as ``PYTHON _bertscore_tf4.py REQUEST.json``; it imports
nothing of capeval (the reference side must not inherit our environment's transformers).
"""

import json
import sys


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        req = json.load(f)
    from importlib.metadata import version

    import bert_score
    import transformers
    from bert_score.utils import get_tokenizer, sent_encode

    tok = get_tokenizer(req["model"], use_fast=False)
    ids = [list(sent_encode(tok, s)) for s in req["sentences"]]
    p, r, f1 = bert_score.score(req["cands"], req["refs"], model_type=req["model"], num_layers=req["num_layers"],
                                idf=req["idf"], batch_size=3, nthreads=0)
    json.dump({"transformers": transformers.__version__, "bert_score": version("bert-score"),
               "tokenizer": type(tok).__name__, "ids": ids,
               "P": p.tolist(), "R": r.tolist(), "F": f1.tolist()}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
