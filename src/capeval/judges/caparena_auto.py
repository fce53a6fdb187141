r"""CapArena-Auto (Cheng et al., ACL 2025 Findings; code njucckevin/CapArena): a captioning model's
score from pairwise battles judged by a VLM against three baseline models.

Why here, in the judge layer: CapArena-Auto is a judge run (prompt, answers, cache), not the
meta-evaluation of a metric against human data (that, the human battles, is
:mod:`capeval.bench.caparena`).

What the official code does, followed here (file:function of the repository):

- battles (``caparena_auto_eval.py:calculate_caparena_auto_scores``): for every image of
  ``caparena_auto_600.json`` (``{image: {"captions": {"human": ..., <model>: ...}, "ref_model":
  <baseline>}}``) whose ``ref_model`` is not the tested model, one battle of the tested caption
  against ``captions[ref_model]``, the human caption as the reference. The caption order is
  ``random.randint(0, 1)`` per image, unseeded there; here a ``random.Random(seed)`` drawn in file
  order (``orders="random"``, the default). ``orders="both"`` (an option, not the official) judges
  every battle in both orders and counts each judgment at half weight, so the scale is unchanged.
- the request (``vlm_as_a_judge.py:mllm_judge_pairs``, ``with_ref=True``): a system message
  ``system_prompt_with_ref`` (one text part), then a user message: the image file's bytes as
  ``data:image/png;base64,...`` with ``"detail": "high"``, then :data:`COMPARE`. Decoding:
  ``temperature`` 0.1 (``call_llm`` overrides the payload's 0.5), ``top_p`` 0.9, ``max_tokens``
  1500; no ``seed`` (``call_llm`` sends none; ``seed=N`` sends one, and the cache keys on it);
  the paper's judge is ``gpt-4o-2024-08-06``.
- parsing: ``Reason:\s*(.+?)\s*Judgment:`` (DOTALL) and ``Judgment:\s*(.+)``, both needed,
  the judgment stripped; otherwise asked again, up to 5 tries (each try its own cache entry);
  a battle never parsed has no judgment. Those regexes backtrack quadratically (110 s on a
  160 KB answer without ``Judgment:``), so :func:`parse_judgment` computes what they compute
  with ``str.find``/``rfind`` and one anchored ``\s*`` (linear by design), verdict for verdict.
- score (``caparena_auto_scores.py:calculate_caparena_scores``): per baseline, judgments that are
  not one of "Caption 1 is better", "Caption 2 is better", "Tie" (with or without the full stop)
  are skipped; +1 when the tested caption wins, -1 when it loses, 0 for a tie; each baseline's
  sum halved; ``score_avg`` = the mean of the three (range [-100, 100] with 200 battles per
  baseline); ``length_avg`` = mean ``len(caption.split(' '))`` of the tested captions.
"""

from __future__ import annotations

import base64
import os
import random
import re
import stat
from pathlib import Path
from typing import Any, Mapping

from capeval.errors import InputError, shown
from capeval.judges import options as jopt
from capeval.judges.backends import Request
from capeval.judges.cache import open_cache
from capeval.judges.images import digest, read_bytes
from capeval.judges.openai_compat import OpenAICompat
from capeval.paths import resolve_under
from capeval.ranges import Range, check_option

SOURCE = "njucckevin/CapArena@c251cdd/vlm_as_a_judge.py"
BASELINES = ("GPT-4o-0806", "CogVLM2-llama3-chat-19B", "MiniCPM-V2.6-8B")
VERDICTS = ("Caption 1 is better.", "Caption 1 is better", "Caption 2 is better.", "Caption 2 is better",
            "Tie", "Tie.")
ORDERS = ("random", "both")
#: ``system_prompt_with_ref`` of vlm_as_a_judge.py, byte for byte (the definition of the judge)
SYSTEM_PROMPT = """
You are a highly capable multimodal AI assistant tasked with evaluating image captions.

Given an image, two candidate captions and one reference caption annotated by human expert, you are require to determine which of the two captions is better.

Below are some guidelines for your reference:

1. **Precision**: The caption should accurately correspond to the content of the image, providing precise information about it. Common examples of imprecision include errors in color, quantity, spatial relationships, or the posture of people.

2. **Informativeness**: Salient information in the image should be reflected in the caption. Since it is impossible to include every detail, you will need to subjectively judge which aspects of the image are important. For instance, describing an otter as "a small animal" is precise, but it is less informative than specifying "an otter".

3. **Hallucination**: Captions that include descriptions of objects or elements that are clearly absent from the image should be significantly penalized.

4. **Attention to detail**: Annotators should pay close attention to the details in the image to distinguish the quality of the descriptions.

5. **Assistive description**: Imagine a visually impaired person asking you to describe the image for them. How would you convey the image to them?

6. **Reverse thinking**: What image does the caption lead us to imagine? Does the caption effectively lead you to imagine the intended image?

7. **Ties are acceptable**: If you find it genuinely difficult to determine which caption is better (e.g., both captions are excellent), marking a tie is acceptable.

While the above guidelines provide a framework, they cannot cover all possible cases. Therefore, we encourage you to make **subjective judgments** based on the specific circumstances and your own reasoning about which caption is better.

**Reference caption**: The reference caption is annotated by a human expert. When you're uncertain about which description is better (e.g., when unsure about specific details in the image), you can use the reference caption to assist your judgment. The content in the reference caption can be considered correct; however, it is not perfect, and descriptions not included in the reference caption can still be reasonable.

### Response Format:
Format your response into two lines as shown below:
Reason: <your thoughts and reasoning process for the judgment>
Judgment: <Caption 1 is better>/<Caption 2 is better>/<Tie>
"""
#: ``compare_prompt`` of vlm_as_a_judge.py with ``with_ref=True``
COMPARE = ("Caption 1:\n{caption1}\nCaption 2:\n{caption2}\nCaption Reference:\n{ref}\nDetermine which is better "
           "and answer with the given format. Only mark a tie if it is truly difficult to decide which caption is "
           "better based on their quality, informativeness, and precision.")
#: the two options of this run beyond the judges' shared ones (capeval.ranges holds metrics' only)
RANGES = {"tries": Range(1, 100, integer=True, source="vlm_as_a_judge.py asks up to 5 times"),
          "top_p": Range(0, 1, low_open=True, source="vlm_as_a_judge.py sends top_p 0.9")}
#: a run of whitespace, matched at one position only (never searched: no backtracking). The
#: regex ``\s`` is exactly ``str.isspace`` (every code point), so ``strip()`` agrees with it.
_SPACE = re.compile(r"\s*")
_REASON_TAG, _JUDGMENT_TAG = "Reason:", "Judgment:"


def parse_judgment(response: str) -> str | None:
    r"""The judgment of an answer as ``mllm_judge_pairs`` reads it (None: ask again), in linear time.

    The official code keeps ``Judgment:\s*(.+)`` (``re.search``: the first ``Judgment:``, then
    the rest of the first line that is not blank) stripped, when ``Reason:\s*(.+?)\s*Judgment:``
    (DOTALL) also matched with a group that is not blank. Worked out from the regexes:

    - judgment: ``.`` stops at ``\n`` only; after the first ``Judgment:`` the whitespace is
      skipped (newlines too) and the line that follows is the judgment. When only whitespace
      follows, the regex fails or its group strips to ``""``: no judgment either way.
    - reason: only the first ``Reason:`` can match (a later one starts after its whitespace,
      hence after every ``Judgment:`` the first could not use); its group is not blank exactly
      when some ``Judgment:`` starts at least one character after the whitespace that follows
      ``Reason:`` (the group then starts at that first non-blank character; with ``Judgment:``
      right after the whitespace and none later, the engine gives a blank group, or no match).
    """
    first = response.find(_JUDGMENT_TAG)
    if first < 0:
        return None
    start = _SPACE.match(response, first + len(_JUDGMENT_TAG)).end()
    if start == len(response):
        return None
    end = response.find("\n", start)
    judgment = response[start:end if end >= 0 else len(response)].strip()
    reason = response.find(_REASON_TAG)
    if reason < 0:
        return None
    reason_start = _SPACE.match(response, reason + len(_REASON_TAG)).end()
    if response.rfind(_JUDGMENT_TAG) < reason_start + 1:
        return None
    return judgment


def build_battles(auto600: Mapping[str, Any], results: Mapping[str, Any], test_model: str,
                  orders: str = "random", seed: int = 0) -> list[dict[str, Any]]:
    """The battles of ``test_model`` in the layout of ``caparena_auto_eval.py`` (``img``,
    ``source1/2``, ``caption1/2``, ``ref``, ``ref_model``), one per image (two with ``orders="both"``)."""
    jopt.check_choice("caparena-auto", "orders", orders, ORDERS)
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for img, data in auto600.items():
        where = f"caparena_auto_600 image {shown(img)}"
        if not isinstance(data, Mapping) or not isinstance(data.get("captions"), Mapping):
            raise InputError(f"{where}: expected {{'captions': {{...}}, 'ref_model': ...}}, got "
                             f"{_kind(data) if not isinstance(data, Mapping) else 'captions ' + _kind(data.get('captions'))}")
        ref_model = data.get("ref_model")
        if ref_model == test_model:
            continue
        if ref_model not in BASELINES:
            raise InputError(f"{where}: ref_model {shown(ref_model)} is not one of {', '.join(BASELINES)}")
        caps = data["captions"]
        for key in (ref_model, "human"):
            if not isinstance(caps.get(key), str):
                raise InputError(f"{where}: no {key!r} caption" + (f" (got {_kind(caps[key])})" if key in caps else ""))
            _check_text(caps[key], f"{where}: the {key!r} caption")
        cand = results.get(img)
        if not isinstance(cand, str):
            raise InputError(f"results of {shown(test_model)}: no caption for image {shown(img)}"
                             + (f" (got {_kind(cand)}, expected a string)" if img in results else ""))
        _check_text(cand, f"results of {shown(test_model)}: the caption of image {shown(img)}")
        pairs = [(ref_model, caps[ref_model]), (test_model, cand)]
        flips = [rng.randint(0, 1) == 1] if orders == "random" else [False, True]
        for flip in flips:
            (s1, c1), (s2, c2) = pairs[::-1] if flip else pairs
            out.append({"img": img, "source1": s1, "source2": s2, "caption1": c1, "caption2": c2,
                        "ref": caps["human"], "ref_model": ref_model})
    return out


def scores(battles: list[Mapping[str, Any]], model: str, weight: float = 1.0) -> dict[str, Any]:
    """``calculate_caparena_scores`` for one model: per baseline ``[judged, (wins - losses) / 2]``
    (each judgment counted ``weight`` times), ``score_avg``, ``length_avg``."""
    table = {b: [0, 0.0] for b in BASELINES}
    lengths = []
    for item in battles:
        lengths.append(len(item["caption1" if item["source1"] == model else "caption2"].split(" ")))
        verdict = item.get("judge")
        if verdict not in VERDICTS:  # no judgment, or not one of the six
            continue
        table[item["ref_model"]][0] += 1
        winner = (item["source1"] if verdict.startswith("Caption 1") else
                  item["source2"] if verdict.startswith("Caption 2") else None)
        if winner is not None:
            table[item["ref_model"]][1] += weight if winner == model else -weight
    per = {b: v[1] / 2 for b, v in table.items()}
    return {"score_avg": sum(per.values()) / 3, "scores": per, "judged": {b: v[0] for b, v in table.items()},
            "length_avg": sum(lengths) / len(lengths) if lengths else float("nan")}


def _kind(value: Any) -> str:
    """What a JSON value is, for a message (``a list``, ``null``)."""
    if value is None:
        return "null"
    name = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value))
    return name or type(value).__name__


def _check_text(text: str, where: str) -> None:
    """One line when ``text`` cannot be sent as UTF-8 (a lone surrogate, ``"\\ud800"`` in the JSON)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{where} holds a lone surrogate ({shown(exc.object[exc.start:exc.end])} at character "
                         f"{exc.start}): not valid Unicode, it cannot be sent to the judge") from None


class CapArenaJudge(OpenAICompat):
    """:class:`OpenAICompat` sending the official request: the CapArena system prompt, the
    image file as ``data:image/png`` with ``detail: high``, then the text; ``top_p`` sent."""

    def __init__(self, *args: Any, top_p: float = 0.9, **kw: Any):
        super().__init__(*args, pad_to_square=False, label="caparena-auto", llava_system=False, **kw)
        self.extra_body = {"top_p": top_p}

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "template": f"{SOURCE}:system_prompt_with_ref", "pad_to_square": False}

    def messages(self, req: Request) -> list[dict[str, Any]]:
        # the file's bytes, labelled png whatever they are, as there (a regular file only: a FIFO
        # put in its place would block forever; errors name the image)
        b64 = base64.b64encode(read_bytes(req.image, req.item)).decode("utf-8")
        return [{"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
                {"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}", "detail": "high"}},
                    {"type": "text", "text": req.prompt}]}]


def evaluate(test_model: str, results: str | os.PathLike[str] | Mapping[str, str],
             auto600: str | os.PathLike[str] | Mapping[str, Any], images: str | os.PathLike[str], *,
             model: str | None = None, base_url: str | None = None, api_key: str | None = None,
             temperature: float = 0.1, top_p: float = 0.9, max_new_tokens: int = 1500, seed: int | None = None,
             tries: int = 5, orders: str = "random", order_seed: int = 0, concurrency: int = 4,
             timeout: float = 120.0, max_retries: int = 5, retry_backoff: float = 1.0,
             cache: bool | str | os.PathLike[str] | None = True, refresh: bool = False,
             out: str | os.PathLike[str] | None = None, progress: bool | None = False) -> dict[str, Any]:
    """CapArena-Auto score of ``test_model`` (its ``{image: caption}`` results, as released).

    Every battle (:func:`build_battles`) goes to the OpenAI-compatible server at ``base_url``
    (:class:`CapArenaJudge`); answers are cached (``<capeval cache>/caparena-auto``, resumable)
    and parsed by :func:`parse_judgment` up to ``tries`` times; a cached answer that does not
    parse counts as a try, as a fresh one does (never a crash), and ``refresh=True`` reads
    nothing from the cache: every answer is asked again and its entry replaced. The image names
    (the keys of ``auto600``) are checked as names under ``images`` before any image is opened
    or any request sent (:func:`capeval.paths.resolve_under`). ``out``: the judged battles
    written (atomically) in the layout ``caparena_auto_scores.py`` reads (``<test_model>.json``).
    Returns :func:`scores` plus ``battles``, ``unjudged`` (battles never parsed), ``generated`` and
    ``cached`` (requests sent / answers read from the cache).
    """
    label = "caparena-auto"
    for name, value in (("tries", tries), ("top_p", top_p)):
        if not RANGES[name].accepts(value):
            raise InputError(f"option {label}.{name}={value!r} out of range: {RANGES[name].describe(name)}")
    for name, value in (("seed", order_seed), ("concurrency", concurrency), ("timeout", timeout),
                        ("max_retries", max_retries), ("retry_backoff", retry_backoff),
                        ("temperature", temperature), ("seed", seed), ("max_new_tokens", max_new_tokens)):
        if value is None and name != "seed":
            raise InputError(f"option {label}.{name}: expected a number, got None")
        check_option("visce2", name, value, metric=label)  # the judges' shared backend ranges
    jopt.check_cache(label, cache, refresh)
    backend = CapArenaJudge(model, base_url=base_url, api_key=api_key, concurrency=concurrency, timeout=timeout,
                            max_retries=max_retries, retry_backoff=retry_backoff, temperature=temperature,
                            seed=seed, max_new_tokens=max_new_tokens, top_p=top_p)
    table = _load(auto600, "caparena_auto_600")
    if not table:
        raise InputError("caparena_auto_600: no images (an empty object)")
    # every name is checked as text before anything under images/ is touched
    named = {img: resolve_under(images, img, what="caparena_auto_600.json image") for img in table}
    battles = build_battles(table, _load(results, "results"), test_model, orders, order_seed)
    if not battles:
        raise InputError(f"no battles: every image of caparena_auto_600 has {test_model!r} as its ref_model")
    paths = {b["img"]: _image_file(named[b["img"]], b["img"], images) for b in battles}
    store = open_cache(cache, label, refresh=refresh)
    ident, dec = backend.identity(), backend.decoding()
    prompts = [COMPARE.format(caption1=b["caption1"], caption2=b["caption2"], ref=b["ref"]) for b in battles]
    digests = {img: digest(p, img) for img, p in paths.items()}
    pending, generated, cached = list(range(len(battles))), 0, 0
    for attempt in range(tries):
        wanted = {k: (jopt.request_key(label, digests[battles[k]["img"]], prompts[k], ident, dec, **{"try": attempt}),
                      Request(battles[k]["img"], paths[battles[k]["img"]], prompts[k])) for k in pending}
        records, n_new, n_cached = jopt.answers(backend, store, label, wanted, progress, f"{label} try {attempt + 1}")
        generated, cached, still = generated + n_new, cached + n_cached, []
        for k in pending:
            judgment = parse_judgment(records[k]["answer"])
            if judgment is None:
                still.append(k)
            else:
                battles[k]["judge_reason"], battles[k]["judge"] = records[k]["answer"], judgment
        pending = still
        if not pending:
            break
    if out is not None:
        from capeval.io.atomic import atomic_write_json

        atomic_write_json(out, battles, indent=None)
    result = scores(battles, test_model, weight=0.5 if orders == "both" else 1.0)
    return {**result, "battles": battles, "unjudged": [battles[k]["img"] for k in pending],
            "generated": generated, "cached": cached}


#: the largest image file sent: the request carries it whole, base64-encoded (4/3 of its size)
#: inside the JSON body; CapArena-Auto's 600 images are photos of a few MB
MAX_IMAGE_BYTES = 64 * 2**20


def _image_file(path: os.PathLike[str], img: str, images: str | os.PathLike[str]) -> str:
    """``path`` (an image of the battles) when it is a regular file of at most
    :data:`MAX_IMAGE_BYTES`, else a one-line :class:`InputError` naming the image (nothing read)."""
    try:
        info = os.stat(path)  # the user's links in images/ are followed, as when reading
    except FileNotFoundError:
        raise InputError(f"image {img!r}: not found in {os.fspath(images)}") from None
    except OSError as exc:
        raise InputError(f"image {img!r}: cannot read {os.fspath(path)} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InputError(f"image {img!r}: {os.fspath(path)} is {what}; images are read from regular files only")
    if info.st_size > MAX_IMAGE_BYTES:
        raise InputError(f"image {img!r}: {info.st_size:,} bytes, more than the {MAX_IMAGE_BYTES:,} an image sent "
                         "to the judge may have (the request carries the file whole)")
    return os.fspath(path)


def _load(obj: Any, what: str) -> Mapping[str, Any]:
    """A JSON object from a path or a mapping (one-line errors): read within capeval's JSON
    size limit, nesting bounded, a key that appears twice in one object refused (``json``
    would keep the last silently)."""
    if isinstance(obj, Mapping):
        return obj
    from capeval.io.captions import loads_unique  # the duplicate-refusing, depth-bounded parse
    from capeval.io.reading import read_json_text

    path = Path(os.fspath(obj))
    text = read_json_text(path)
    try:
        data = loads_unique(text, path)
    except ValueError as exc:  # an integer of more than 4,300 digits, ...
        raise InputError(f"{what} {os.fspath(path)!r}: cannot read JSON ({str(exc).splitlines()[0][:200]})") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} {os.fspath(path)!r}: expected a JSON object {{image: ...}}")
    return data
