"""Where each table of the five papers is, and what its columns and rows mean (for published_extract)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TAG = re.compile(r"</?(b|u)>")
_CITE = re.compile(r"^\[\d+(,\s*\d+)*\]$")
_DELTA = re.compile(r"^\((\+|-|±)")
_NUM = re.compile(r"^(-?\d*\.\d+|-?\d+)\.?$")


def tokens(line: str) -> list[str]:
    out = []
    for tok in _TAG.sub("", line).split():
        if _CITE.match(tok) or _DELTA.match(tok) or tok in ("\\pm.00)", "\\pm0)"):
            continue
        out.append(tok)
    return out


def number(tok: str) -> float | None:
    """A printed number: "41.5", ".44" (0.44), "19.9." and ".51.5" (typesetting dots: 19.9, 51.5)."""
    m = _NUM.match(tok) or (_NUM.match(tok[1:]) if tok.startswith(".") else None)
    return float(m.group(1)) if m else None


def label_of(line: str) -> str:
    toks = tokens(line)
    head = []
    for t in toks:
        if t == "-" or number(t) is not None:
            break
        head.append(t)
    return " ".join(head)


def cells_of(line: str) -> list[float | None]:
    toks = tokens(line)
    n = len(label_of(line).split()) if label_of(line) else 0
    out: list[float | None] = []
    for t in toks[n:]:
        if t == "-":
            out.append(None)
        elif number(t) is not None:
            out.append(number(t))
    return out


def block_lines(text: str, start: str, end: str) -> list[str]:
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if start in line)
    j = next(k for k in range(i + 1, len(lines)) if end in lines[k])
    return lines[i:j]


def find_row(lines: list[str], anchor: str, offset: int) -> str:
    return lines[row_index(lines, anchor) + offset]


def row_index(lines: list[str], anchor: str) -> int:
    hits = [k for k, line in enumerate(lines) if label_of(line) == anchor]
    if len(hits) != 1:
        raise ValueError(f"row {anchor!r}: {len(hits)} lines in block starting {lines[0][:60]!r}")
    return hits[0]


def vertical_cells(lines: list[str], anchor: str, n: int) -> list[tuple[int, float]]:
    """``(offset, value)`` of the first ``n`` cells printed one per line below ``anchor``
    (delta lines such as "(+.10)" carry no token and are passed over)."""
    k = row_index(lines, anchor)
    out: list[tuple[int, float]] = []
    for off in range(1, len(lines) - k):
        cells = cells_of(lines[k + off])
        if not tokens(lines[k + off]):
            continue
        if len(cells) != 1 or cells[0] is None or label_of(lines[k + off]):
            raise ValueError(f"row {anchor!r}: line +{off} is not a single cell: {lines[k + off][:60]!r}")
        out.append((off, cells[0]))
        if len(out) == n:
            return out
    raise ValueError(f"row {anchor!r}: {len(out)} of {n} cells found")


@dataclass
class Table:
    paper: str
    table: str
    file: str
    start: str
    end: str
    caption: str
    columns: list
    rows: list = field(default_factory=list)
    scale: float = 1.0
    protocol: str = ""
    # rows printed one cell per line under their label, each cell followed by its delta line
    # ("(+.10)"): (anchor, metric, variant, protocol)
    vertical: list = field(default_factory=list)


NAMES = {
    "BLEU-1": "bleu-1", "BLEU-4": "bleu-4", "ROUGE": "rouge-l", "METEOR": "meteor", "CIDEr": "cider-d",
    "SPICE": "spice", "BERT-S": "bertscore", "BERT-S++": "bertscore++", "BERT-S++†": "bertscore++",
    "BERTScore++": "bertscore++", "LEIC": "leic", "UMIC": "umic", "TIGEr": "tiger", "TIGEr†": "tiger",
    "ViLBERTScore": "vilbertscore", "VilBERTScore": "vilbertscore", "FAIEr": "faier", "MID": "mid",
    "MID†": "mid", "SoftSPICE": "softspice", "InfoMetIC": "infometic", "CLIP-S": "clip-s",
    "RefCLIP-S": "ref-clip-s", "PAC-S": "pac-s", "RefPAC-S": "ref-pac-s", "PAC-S++": "pac-s++",
    "RefPAC-S++": "ref-pac-s++", "HICE-S": "hice-s", "RefHICE-S": "ref-hice-s", "length": "length",
    "EMScore": "emscore", "EMScoreRef": "ref-emscore", "CLAIRClaude": "clair-claude", "CLAIRE": "claire",
    "VisCE2": "visce2", "Vanilla": "visce2-vanilla", "Reference": "visce2-ref", "Description": "visce2-desc",
}


def rows(*labels: str, variant: str = "") -> list:
    return [(lab, 0, NAMES[lab], variant, "") for lab in labels]


F8 = [("flickr8k-expert", "kendall_tau_b"), ("flickr8k-expert", "kendall_tau_c"),
      ("flickr8k-cf", "kendall_tau_b"), ("flickr8k-cf", "kendall_tau_c"),
      ("composite", "kendall_tau_b"), ("composite", "kendall_tau_c")]
PASCAL = [("pascal-50s", f"accuracy_{c}") for c in ("HC", "HI", "HM", "MM", "mean")]
VATEX = [("vatex-eval", f"{s}_refs{n}") for n in (0, 1, 9) for s in ("kendall_tau_b", "spearman")]
DRAWS = "five random draws of 5 references, averaged (paper's own draws)"
J, H, B, V, P = ("pacs-plus-plus-journal.txt", "hice-s.txt", "bridge.txt", "visce2.txt",
                 "pacs-cvpr2023-poster.txt")
STD = ("BLEU-1", "BLEU-4", "ROUGE", "METEOR", "CIDEr")

TABLES = [
    Table("pac-s++", "1", J, "Table 1: Human judgment correlation", "5.2 Evaluating Human Correlation",
          "Human judgment correlation on Flickr8k-Expert, Flickr8k-CF and Composite", F8,
          rows(*STD, "SPICE", "BERT-S", "LEIC", "BERT-S++", "UMIC", "TIGEr", "ViLBERTScore", "MID")
          + rows("CLIP-S", "RefCLIP-S", variant="ViT-B/32")
          + [("PAC-S++", -1, "pac-s++", "ViT-B/32", ""), ("RefPAC-S++", -1, "ref-pac-s++", "ViT-B/32", "")]),
    Table("pac-s++", "2", J, "Table 2: Human judgment correlation scores on VATEX", "Additionally, we present",
          "Human judgment correlation on VATEX-EVAL (0, 1, 9 references)", VATEX,
          rows(*STD, "BERT-S", "BERT-S++", "EMScore")
          + [("PAC-S++ /", 0, "pac-s++-video", "no ref: PAC-S++; 1/9 refs: RefPAC-S++", "")]),
    Table("pac-s++", "3", J, "Table 3: Accuracy results on the Pascal-50S", "5.3 Caption Pairwise Ranking",
          "Pascal-50S accuracy", PASCAL,
          rows("length", *STD, "BERT-S", "BERT-S++", "TIGEr", "ViLBERTScore", "FAIEr", "MID", "CLIP-S",
               "RefCLIP-S")
          + [("PAC-S++", -1, "pac-s++", "", ""), ("RefPAC-S++", -1, "ref-pac-s++", "", "")],
          protocol=DRAWS),
    Table("pac-s++", "4", J, "Table 4: Accuracy results on the FOIL", "5.4 Sensitivity",
          "FOIL and ActivityNet-FOIL accuracy",
          [("foil", "accuracy_1ref"), ("foil", "accuracy_4ref"), ("activitynet-foil", "accuracy_refs")],
          rows(*STD, "MID")
          + [("CLIP-S", 0, "clip-s", "", ""), ("EMScore", 0, "emscore", "", ""),
             ("PAC-S++", -1, "pac-s++", "", ""), ("RefCLIP-S", 0, "ref-clip-s", "", ""),
             ("EMScoreRef", 0, "ref-emscore", "", ""), ("RefPAC-S++", -1, "ref-pac-s++", "", "")]),
    Table("pac-s++", "5", J, "Table 5: Comparison with other recent", "Learnable Unsupervised",
          "Comparison with other recent metrics (the text keeps only the standard rows)",
          [None, ("flickr8k-expert", "kendall_tau_c"), ("flickr8k-cf", "kendall_tau_b"), ("composite", "kendall_tau_c"),
           ("pascal-50s", "accuracy_mean")],
          rows("BLEU-4", "METEOR", "CIDEr")),
    Table("pac-s++", "8", J, "Table 8: Human correlation and accuracy results when varying", "Synthetic Data Generator",
          "Varying visual and textual backbones",
          F8 + [("pascal-50s", "accuracy_mean"), ("foil", "accuracy_4ref")],
          [(a, o, m, bb, "") for bb, last in (("CLIP ViT-L/14", "CLIP ViT-L/14 RefPAC-S++"),
                                               ("SigLIP ViT-L/14", "SigLIP ViT-L/14 RefPAC-S++"),
                                               ("SigLIP2 ViT-L/14", "SigLIP2 ViT-L/14 RefPAC-S++"))
           for a, o, m in ((last, -5, "clip-s"), (last, -4, "pac-s"), (last, -3, "pac-s++"),
                           (last, -2, "ref-clip-s"), (last, -1, "ref-pac-s"), (last, 0, "ref-pac-s++"))]),
    Table("hice-s", "1", H, "Flickr8k-Expert [13]\t\tFlickr8k-CF", "Table 1: Human judgment",
          "Human judgment correlation on Flickr8k-Expert, Flickr8k-CF and Composite", F8,
          rows(*STD, "SPICE", "BERT-S", "LEIC", "BERT-S++", "UMIC", "TIGEr", "ViLBERTScore", "SoftSPICE",
               "MID", "InfoMetIC", "CLIP-S", "PAC-S", "HICE-S", "RefCLIP-S", "RefPAC-S", "RefHICE-S")),
    Table("hice-s", "2", H, "\tHC\tHI\tHM\tMM\tMean", "Table 2: Accuracy results",
          "Pascal-50S accuracy", PASCAL,
          rows("length", *STD, "BERT-S", "BERT-S++", "TIGEr", "VilBERTScore", "FAIEr", "MID", "InfoMetIC",
               "CLIP-S", "PAC-S", "HICE-S", "RefCLIP-S", "RefPAC-S", "RefHICE-S"), protocol=DRAWS),
    Table("hice-s", "3", H, "\tFOIL [38]", "Table 3: The accuracy results", "FOIL accuracy",
          [("foil", "accuracy_1ref"), ("foil", "accuracy_4ref")],
          rows(*STD, "MID", "CLIP-S", "PAC-S", "HICE-S", "RefCLIP-S", "RefPAC-S", "RefHICE-S")),
]

F8S = [("flickr8k-expert", "kendall_tau_b"), ("flickr8k-expert", "kendall_tau_c"), ("flickr8k-expert", "spearman"),
       ("flickr8k-cf", "kendall_tau_b"), ("flickr8k-cf", "kendall_tau_c"), ("flickr8k-cf", "spearman"),
       ("composite", "kendall_tau_b"), ("composite", "kendall_tau_c"), ("composite", "spearman")]


def bb_rows(*labels: str) -> list:
    out = []
    for lab in labels:
        name, _, bb = lab.partition(" (")
        out.append((lab, 0, NAMES.get(name, name.lower()), bb.rstrip(")"), ""))
    return out


NEB = ("CLIP-S (ViT-B/32)", "PAC-S (ViT-B/32)", "BRIDGE (ViT-B/32)", "CLIP-S (ViT-L/14)", "PAC-S (ViT-L/14)",
       "BRIDGE (ViT-L/14)")
TABLES += [
    Table("bridge", "3", B, "**Table 3:** Correlation scores", "backbone on the Flickr8k-Expert dataset",
          "Correlation on Flickr8k-Expert, Flickr8k-CF and Composite", F8S,
          rows("BLEU-4", "METEOR", "CIDEr", "SPICE", "BERT-S", "BERT-S++", "TIGEr", "ViLBERTScore", "MID",
               "RefCLIP-S", "RefPAC-S", "UMIC") + bb_rows(*NEB)),
    Table("bridge", "4", B, "**Table 4:** Accuracy results on Pascal-50S", "**Fig. 4:**", "Pascal-50S accuracy",
          PASCAL, rows("BLEU-4", "METEOR", "CIDEr", "BERT-S++†", "TIGEr†", "MID†", "RefCLIP-S", "RefPAC-S")
          + bb_rows(*NEB), protocol=DRAWS),
    Table("bridge", "5", B, "**Table 5:** Accuracy results on the FOIL", "both ViT-B/32 and ViT-L/14, BRIDGE",
          "FOIL accuracy", [("foil", "accuracy_4ref")],
          rows("BLEU-4", "METEOR", "CIDEr", "MID", "RefCLIP-S", "RefPAC-S") + bb_rows(*NEB),
          protocol="references per candidate not stated (capeval compares with the 4-reference setting)"),
    Table("bridge", "7", B, "**Table 7:** Human correlation and accuracy scores", "aligned in the image space",
          "Changing the underlying backbone",
          [("flickr8k-expert", "kendall_tau_b"), ("flickr8k-cf", "kendall_tau_b"), ("pascal-50s", "accuracy_mean"),
           ("foil", "accuracy_4ref")],
          [("CLIP-S", 0, "clip-s", "CLIP ViT-B/32", ""), ("CLIP-S", 1, "bridge", "CLIP ViT-B/32", ""),
           ("PAC-S", 0, "pac-s", "PAC ViT-B/32", ""), ("PAC-S", 1, "bridge", "PAC ViT-B/32", "")]),
    Table("bridge", "8", B, "**Table 8:** Additional ablation", "**Fig. 5:**", "Ablations on architectural design",
          [("flickr8k-expert", "kendall_tau_b"), ("flickr8k-cf", "kendall_tau_b"), ("pascal-50s", "accuracy_mean")],
          [("w/ standard contrastive losses", 0, "bridge", "w/ standard contrastive losses", ""),
           ("w/ entire mapping module output", 0, "bridge", "w/ entire mapping module output", ""),
           ("w/ global features", 0, "bridge", "w/ global features", ""),
           ("BRIDGE", 0, "bridge", "ViT-B/32", "")]),
    Table("visce2", "1", V, "Table 1: The effect of textual resources", "Table 2: Correlation (Pearson",
          "Textual resources given to the VLM",
          [("thumb", "pearson_P_no_human", 100), ("thumb", "pearson_R_no_human", 100),
           ("thumb", "pearson_total_no_human", 100), ("thumb", "pearson_P", 100), ("thumb", "pearson_R", 100),
           ("thumb", "pearson_total", 100), ("flickr8k-expert", "kendall_tau"), ("composite", "kendall_tau"), ("pascal-50s", "accuracy_mean")],
          rows("Vanilla", "Reference", "Description"),
          vertical=[("VisCE2 (Ours)", "visce2", "", "")]),
    Table("visce2", "2", V, "Table 2: Correlation (Pearson", "4.4 Correlation with Human Judgment",
          "Pearson correlation on THumB 1.0",
          [("thumb", "pearson_P_no_human"), ("thumb", "pearson_R_no_human"), ("thumb", "pearson_total_no_human"),
           ("thumb", "pearson_P"), ("thumb", "pearson_R"), ("thumb", "pearson_total")],
          rows("BLEU-4", "ROUGE", "CIDEr", "SPICE", "RefCLIP-S", "InfoMetIC", "CLIP-S", "VisCE2"), scale=100.0),
    Table("visce2", "3", V, "Table 3: Correlation between human judgement", "Table 4: Comparison VLM",
          "Kendall tau on Flickr8k-Expert and Composite",
          [("flickr8k-expert", "kendall_tau"), ("composite", "kendall_tau")],
          rows("BLEU-4", "ROUGE", "METEOR", "CIDEr", "SPICE", "BERTScore++", "RefCLIP-S", "RefPAC-S",
               "CLAIRClaude", "CLAIRE", "InfoMetIC", "CLIP-S", "PAC-S", "VisCE2"),
          protocol="Kendall tau variant not stated"),
    Table("visce2", "4", V, "Table 4: Comparison VLM", "Image Candidate Caption Human",
          "VLM-based caption evaluation with two VLMs (THumB 1.0 Pearson)",
          [("thumb", "pearson_P_no_human"), ("thumb", "pearson_R_no_human"), ("thumb", "pearson_total_no_human"),
           ("thumb", "pearson_P"), ("thumb", "pearson_R"), ("thumb", "pearson_total")],
          [("LLaVA-v1.5 Vanilla", 0, "visce2-vanilla", "LLaVA-v1.5", ""),
           ("GPT-4V Vanilla", 0, "visce2-vanilla", "GPT-4V", "")], scale=100.0,
          vertical=[("LLaVA-v1.5 VisCE2", "visce2", "LLaVA-v1.5", ""), ("GPT-4V VisCE2", "visce2", "GPT-4V", "")]),
    Table("visce2", "6", V, "Table 6: Accuracy on the Pascal-50S", "Appendix B", "Pascal-50S accuracy", PASCAL,
          rows("BLEU-4", "ROUGE", "METEOR", "CIDEr", "SPICE", "BERTScore++", "RefCLIP-S", "RefPAC-S",
               "CLAIRClaude", "CLAIRE", "InfoMetIC", "CLIP-S", "PAC-S", "VisCE2")),
    Table("pac-s", "poster-1", P, "\tFlickr8k-Expert\t\tFlickr8k-CF", "\tComposite", "Flickr8k correlation",
          F8[:4], rows(*STD, "SPICE", "BERT-S", "LEIC", "BERT-S++", "UMIC", "TIGEr", "ViLBERTScore", "MID",
                       "CLIP-S", "PAC-S", "RefCLIP-S", "RefPAC-S")),
]

TABLES += [
    Table("pac-s", "poster-2", P, "\tComposite", "\tPascal-50S", "Composite correlation", F8[4:],
          rows(*STD, "SPICE", "BERT-S", "BERT-S++", "TIGEr", "ViLBERTScore", "FAIEr", "CLIP-S", "PAC-S",
               "RefCLIP-S", "RefPAC-S")),
    Table("pac-s", "poster-3", P, "\tPascal-50S", "1. Micah Hodosh", "Pascal-50S accuracy", PASCAL,
          rows("length", *STD, "BERT-S", "BERT-S++", "TIGEr", "ViLBERTScore", "FAIEr", "MID", "CLIP-S", "PAC-S",
               "RefCLIP-S", "RefPAC-S"), protocol=DRAWS),
    Table("pac-s", "poster-4", P, "\tNo Ref\t\t1 Ref", "Human judgment correlation scores on the VATEX", "VATEX-EVAL correlation", VATEX,
          rows(*STD, "BERT-S", "BERT-S++", "EMScore")
          + [("PAC-S / RefPAC-S", 0, "pac-s-video", "no ref: PAC-S; 1/9 refs: RefPAC-S", "")]),
    Table("pac-s", "poster-5", P, "\t\tFlickr8k-Expert\t\tFlickr8k-CF\t\tVATEX-EVAL", "## Image",
          "Cross-modal backbones",
          F8[:4] + [("vatex-eval", "kendall_tau_b_refs0"), ("vatex-eval", "spearman_refs0"),
                    ("pascal-50s", "accuracy_mean"), ("foil", "accuracy_4ref"), ("activitynet-foil", "accuracy_norefs")],
          [(f"{bb} CLIP-S", o, m, bb, "") for bb in ("CLIP ViT-B/16", "CLIP ViT-L/14", "OpenCLIP ViT-B/32",
                                                     "OpenCLIP ViT-L/14")
           for o, m in ((0, "clip-s"), (1, "emscore"), (2, "pac-s"))]),
]
TABLES.append(
    Table("pac-s", "poster-6", P, "\tFOIL\t\tActivityNet-FOIL", "We extend our analysis", "FOIL and ActivityNet-FOIL",
          [("foil", "accuracy_1ref"), ("foil", "accuracy_4ref"), ("activitynet-foil", "accuracy_refs")],
          rows(*STD, "MID", "CLIP-S", "EMScore", "PAC-S", "RefCLIP-S", "EMScoreRef", "RefPAC-S")))

VIDEO = {"pac-s": "pac-s-video", "ref-pac-s": "ref-pac-s-video", "pac-s++": "pac-s++-video",
         "ref-pac-s++": "ref-pac-s++-video", "clip-s": "clip-s-video"}
REF_OF = {"pac-s-video": "ref-pac-s-video", "pac-s++-video": "ref-pac-s++-video"}
REF_FREE = {"clip-s-video", "emscore", "pac-s-video", "pac-s++-video"}


def video_names(bench: str, metric: str, stat: str) -> tuple[str, str]:
    """The video benchmarks' metric and setting: PAC-S on videos is capeval's pac-s-video; a
    "PAC-S / RefPAC-S" row is the reference-free metric without references and the
    reference-based one with them; reference-free rows of an ActivityNet-FOIL column are its
    no-reference setting."""
    if bench not in ("vatex-eval", "activitynet-foil"):
        return metric, stat
    metric = VIDEO.get(metric, metric)
    if bench == "vatex-eval" and not stat.endswith("_refs0"):
        metric = REF_OF.get(metric, metric)
    if bench == "activitynet-foil" and metric in REF_FREE:
        stat = "accuracy_norefs"
    return metric, stat


# tables whose rows vary the metric (backbones, ablations): not the metric's headline number
ABLATIONS = {("pac-s++", "8"), ("pac-s", "poster-5"), ("bridge", "7"), ("bridge", "8"), ("visce2", "4")}


def is_main(paper: str, table: str, variant: str) -> bool:
    return (paper, table) not in ABLATIONS and variant not in ("ViT-L/14",)
