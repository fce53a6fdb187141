"""HICE-S explanations: which phrases are wrong, which regions nobody mentioned (paper Fig. 6).

Every number here is on the score's scale ``w * max(cos, 0)`` (w = 2.5 by default), the
scale on which the paper reports HICE-S (its Fig. 4 lists HICE-S, precision and recall
around 0.5 next to CLIP-S 0.6 with w = 2.5) and on which its 0.5 threshold separates
correct from incorrect phrases: on raw cosines (rarely above 0.35) every phrase would be
"incorrect", on ``(cos + 1) / 2`` none would. So a phrase is *incorrect* when its precision
score is below ``incorrect_below`` (0.5, raw cosine 0.2 at w = 2.5) and a region is
*unmentioned* when its recall score is below ``unmentioned_below`` (0.5).

JSON schema (``capeval-hice-explanation/1``), one object per item, ``<id>.json``::

    schema        "capeval-hice-explanation/1"
    id            item id (str);  caption (str);  image (str: path, or "<memory>")
    image_size    [width, height] of the original image
    references    [str] or null
    scale         {"w": float, "formula": "w*max(cos,0)"}
    thresholds    {"incorrect_below": float, "unmentioned_below": float}
    scores        {"hice-s", "ref-hice-s" (null without references), "g_itc", "l_itc",
                   "precision", "recall", "g_ttc", "l_ttc", "ttc_precision", "ttc_recall"
                   (the last four null without references)}: floats
    phrases       [{"index": int, "text": str, "precision": float, "best_region": int,
                    "correct": bool}]   (precision = max over regions, Eq. 4's terms)
    phrase_fallback  bool: no phrase was parsed, the whole caption is the one phrase
    regions       [{"index": int, "bbox": [x0, y0, x1, y1] (pixels, exclusive ends),
                    "area": int, "quality": float (the segmenter's score), "recall": float,
                    "best_phrase": int, "mentioned": bool}]   (recall = max over phrases, Eq. 5)
    region_fallback  bool: the segmenter found no region, the full image is the one region
    incorrect     [phrase texts with correct == false];  unmentioned: [region indices]
    signature     the hice-s signature string

``<id>.png``: the image (longer side scaled to ``max_side``, never enlarged) with each region
filled in its recall colour (red 0 -> yellow at the threshold -> green at twice the
threshold and above), outlined, and labelled ``#n phrase`` with its best phrase (or
``#n unmentioned``); a ``panel_width`` side panel lists the scores and the phrases, green
when correct and red when incorrect. Canvas: ``(image width + panel_width,
max(image height, panel height))``. File names (:func:`capeval.paths.safe_file_stem`): the
id itself when it is made of ``[A-Za-z0-9._-]``, does not start with a dot and has at most
:data:`MAX_STEM` characters; else the id with other characters replaced by ``_``, cut to fit,
plus ``-`` and 8 hex digits of its sha256 (so ids never collide, escape the folder or make a
name longer than a folder takes). Both files are written atomically, or neither, and never
through a symbolic link in the folder.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from capeval.io.atomic import atomic_write_many
from capeval.paths import MAX_NAME_BYTES, resolve_under, safe_file_stem

#: the longest file-name stem: ``<stem>.json`` stays within the 255 bytes a folder takes
MAX_STEM = MAX_NAME_BYTES - len(".json")

SCHEMA_VERSION = "capeval-hice-explanation/1"
_SCORE_KEYS = ("hice-s", "ref-hice-s", "g_itc", "l_itc", "precision", "recall", "g_ttc", "l_ttc",
               "ttc_precision", "ttc_recall")
_TOP = {"schema": str, "id": str, "caption": str, "image": str, "image_size": list, "references": (list, type(None)),
        "scale": dict, "thresholds": dict, "scores": dict, "phrases": list, "phrase_fallback": bool,
        "regions": list, "region_fallback": bool, "incorrect": list, "unmentioned": list, "signature": str}
_PHRASE = {"index": int, "text": str, "precision": float, "best_region": int, "correct": bool}
_REGION = {"index": int, "bbox": list, "area": int, "quality": float, "recall": float, "best_phrase": int,
           "mentioned": bool}


def check_explanation(obj: Any) -> None:
    """Raise ``ValueError`` naming the first field of ``obj`` that breaks the schema above."""
    def need(d: Any, spec: dict[str, Any], where: str) -> None:
        if not isinstance(d, dict):
            raise ValueError(f"{where}: expected an object")
        missing = sorted(set(spec) - set(d))
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        for key, kind in spec.items():
            value = d[key]
            ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
            if kind is float:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok:
                raise ValueError(f"{where}.{key}: {type(value).__name__} is not {getattr(kind, '__name__', kind)}")

    need(obj, _TOP, "explanation")
    if obj["schema"] != SCHEMA_VERSION:
        raise ValueError(f"explanation.schema: {obj['schema']!r} != {SCHEMA_VERSION!r}")
    for key in _SCORE_KEYS:
        if key not in obj["scores"] or not (obj["scores"][key] is None or isinstance(obj["scores"][key], (int, float))):
            raise ValueError(f"explanation.scores.{key}: missing or not a number/null")
    n_regions, n_phrases = len(obj["regions"]), len(obj["phrases"])
    for k, p in enumerate(obj["phrases"]):
        need(p, _PHRASE, f"phrases[{k}]")
        if not 0 <= p["best_region"] < n_regions:
            raise ValueError(f"phrases[{k}].best_region {p['best_region']} out of range")
    for k, r in enumerate(obj["regions"]):
        need(r, _REGION, f"regions[{k}]")
        if len(r["bbox"]) != 4 or not 0 <= r["best_phrase"] < n_phrases:
            raise ValueError(f"regions[{k}]: bbox must have 4 numbers and best_phrase must index a phrase")


def safe_name(item_id: str) -> str:
    """A file-name stem for ``item_id`` (see the module docstring): the names of earlier
    versions for every id that fitted in a file name then."""
    return safe_file_stem(item_id, max_bytes=MAX_STEM)


def recall_colour(value: float, threshold: float) -> tuple[int, int, int]:
    """Red (0) -> yellow (``threshold``) -> green (``2 * threshold`` and above)."""
    x = float(np.clip(value / (2 * threshold), 0.0, 1.0)) if threshold > 0 else 1.0
    if x < 0.5:
        return (220, int(40 + 370 * x), 40)
    return (int(220 - 380 * (x - 0.5)), 215, 40)


def _font(size: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError, ImportError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def _wrap(text: str, font: Any, width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        trial = f"{line} {word}".strip()
        if line and font.getlength(trial) > width:
            lines.append(line)
            line = word
        else:
            line = trial
    return lines + ([line] if line else [])


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def render(image: Any, masks: Sequence[np.ndarray], explanation: dict[str, Any], max_side: int = 768,
           panel_width: int = 360) -> Any:
    """The explanation picture (PIL RGB image) of one item; see the module docstring."""
    from PIL import Image, ImageDraw

    rgb = image.convert("RGB")
    w, h = rgb.size
    scale = min(1.0, max_side / max(w, h))
    dw, dh = max(1, round(w * scale)), max(1, round(h * scale))
    base = rgb.resize((dw, dh), Image.BILINEAR) if (dw, dh) != (w, h) else rgb.copy()
    overlay = Image.new("RGBA", (dw, dh), (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    font = _font(12)
    t_reg = explanation["thresholds"]["unmentioned_below"]
    regions = explanation["regions"]
    phrases = explanation["phrases"]
    order = sorted(range(len(regions)), key=lambda n: -regions[n]["area"])  # small regions drawn last, on top
    for n in order:
        r = regions[n]
        colour = recall_colour(r["recall"], t_reg)
        m = Image.fromarray(np.asarray(masks[n], dtype=np.uint8) * 255, "L")
        if m.size != (dw, dh):
            m = m.resize((dw, dh), Image.NEAREST)
        overlay.paste((*colour, 110), (0, 0), m)
        x0, y0, x1, y1 = (round(v * scale) for v in r["bbox"])
        draw.rectangle((x0, y0, max(x0, x1 - 1), max(y0, y1 - 1)), outline=(*colour, 255), width=2)
    for n in order:  # labels after every fill, so no fill hides a label
        r = regions[n]
        text = f"#{n} " + (phrases[r["best_phrase"]]["text"] if r["mentioned"] else "unmentioned") + f" {r['recall']:.3f}"
        x0, y0 = (round(v * scale) for v in r["bbox"][:2])
        box = draw.textbbox((x0 + 3, y0 + 2), text, font=font)
        draw.rectangle(box, fill=(0, 0, 0, 170))
        draw.text((x0 + 3, y0 + 2), text, font=font, fill=(255, 255, 255, 255))
    picture = Image.alpha_composite(base.convert("RGBA"), overlay).convert("RGB")

    big, line_h = _font(14), 18
    rows: list[tuple[str, tuple[int, int, int], Any]] = []
    s = explanation["scores"]
    rows.append((f"HICE-S {_fmt(s['hice-s'])}" + (f"   RefHICE-S {_fmt(s['ref-hice-s'])}" if s["ref-hice-s"] is not None else ""),
                 (0, 0, 0), big))
    rows.append((f"gITC {_fmt(s['g_itc'])}  lITC {_fmt(s['l_itc'])}  P {_fmt(s['precision'])}  R {_fmt(s['recall'])}",
                 (60, 60, 60), font))
    rows += [(line, (40, 40, 40), font) for line in _wrap(explanation["caption"], font, panel_width - 16)]
    t_phr = explanation["thresholds"]["incorrect_below"]
    rows.append((f"phrases (precision; < {t_phr:g} incorrect):", (0, 0, 0), font))
    for p in phrases:
        colour = (20, 140, 40) if p["correct"] else (200, 30, 30)
        mark = "ok " if p["correct"] else "X  "
        text = f"{mark}{p['text']}  {p['precision']:.3f} (#{p['best_region']})"
        rows += [(line, colour, font) for line in _wrap(text, font, panel_width - 16)]
    n_un = len(explanation["unmentioned"])
    rows.append((f"regions: {len(regions)}, unmentioned (< {t_reg:g}): {n_un}", (0, 0, 0), font))
    panel_h = 10 + line_h * len(rows) + 30
    canvas = Image.new("RGB", (dw + panel_width, max(dh, panel_h)), (255, 255, 255))
    canvas.paste(picture, (0, 0))
    pd = ImageDraw.Draw(canvas)
    y = 8
    for text, colour, f in rows:
        pd.text((dw + 8, y), text, font=f, fill=colour)
        y += line_h
    span = panel_width - 16
    for k in range(span):  # the recall colour scale, 0 .. 2 * threshold
        pd.line((dw + 8 + k, y + 4, dw + 8 + k, y + 14), fill=recall_colour(2 * t_reg * k / (span - 1), t_reg))
    for k, v in ((0, 0.0), (span // 2, t_reg), (span - 1, 2 * t_reg)):
        label = f"{v:g}" + ("+" if k == span - 1 else "")
        x = dw + 8 + k - (font.getlength(label) if k == span - 1 else font.getlength(label) / 2 if k else 0)
        pd.text((x, y + 15), label, font=font, fill=(60, 60, 60))
    return canvas


def write(out_dir: str | os.PathLike[str], explanation: dict[str, Any], image: Any, masks: Sequence[np.ndarray],
          max_side: int = 768, panel_width: int = 360) -> tuple[Path, Path]:
    """Write ``<id>.json`` and ``<id>.png`` into ``out_dir``, both or neither; returns their paths."""
    import json

    check_explanation(explanation)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    item = explanation["id"]
    stem = safe_name(item)
    # the stem is already safe; resolve_under also refuses a link planted in the folder under
    # its name (an atomic write would replace the link's target outside the folder)
    json_path, png_path = (resolve_under(folder, stem + ext, what="--explain file", item=item, links=False)
                           for ext in (".json", ".png"))
    buf = io.BytesIO()
    render(image, masks, explanation, max_side, panel_width).save(buf, format="PNG")
    try:
        data = (json.dumps(explanation, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (in the id, say): escaped, so the file stays UTF-8
        data = (json.dumps(explanation, indent=2) + "\n").encode("ascii")
    files = [(json_path, data), (png_path, buf.getvalue())]
    atomic_write_many(files)
    return files[0][0], files[1][0]
