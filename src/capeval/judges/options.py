"""The judges' common options (their valid ranges, the backend they build) and the judges' one
generation path: :func:`request_key` (the cache key of a request) and :func:`answers` (cache
lookups, the backend for the misses, each answer stored as it arrives).

Every judge takes ``backend`` (``"transformers"``, ``"openai"`` or a backend object),
``model``, ``base_url``, ``api_key``, ``concurrency``, ``timeout``, ``max_retries``,
``retry_backoff``, ``max_response_mb``, ``temperature``, ``seed``, ``max_new_tokens``, ``top_logprobs``, ``device``,
``dtype``, ``quantization``, ``revision``, ``batch_size``, ``cache``. Their ranges are declared in
:mod:`capeval.ranges` (groups ``visce2``, ``clair``, ``fleur``, ``expert``) and checked here
too, for scorers built directly, before any model is loaded or request sent.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Hashable, Mapping

from capeval.errors import InputError
from capeval.judges.backends import clean_text
from capeval.judges.cache import cache_key, text_sha

BACKENDS = ("transformers", "openai")


def check_range(label: str, name: str, value: Any) -> None:
    """One-line :class:`InputError` when ``value`` is outside the range :mod:`capeval.ranges`
    declares for option ``name`` of the judge ``label`` (None: not given)."""
    from capeval.ranges import check_option

    if value is None and name != "seed":
        raise InputError(f"option {label}.{name}: expected a number, got None")
    check_option(label, name, value)


def make_backend(label: str, backend: Any, *, model: str | None, default_model: str | None,
                 text_only: bool = False, device: str = "cpu", dtype: str = "auto", quantization: str | None = None,
                 revision: str | None = None, batch_size: int = 8, base_url: str | None = None,
                 api_key: str | None = None, concurrency: int = 4, timeout: float = 120.0, max_retries: int = 5,
                 retry_backoff: float = 1.0, temperature: float = 0.0, seed: int | None = 0,
                 max_new_tokens: int = 512, top_logprobs: int = 20, pad_to_square: bool = True,
                 native_vocab: bool = False, max_response_mb: float = 16.0) -> Any:
    """The backend object for ``backend`` (a name or an object with ``generate``/``identity``/
    ``decoding``/``signature``). ``text_only``: the judge sends no image (CLAIR), its local
    backend is a chat LLM (:mod:`.transformers_text`), not LLaVA. ``native_vocab`` (FLEUR,
    EXPERT): the local LLaVA's output rows past the tokenizer's base vocabulary are suppressed."""
    for name, value in (("concurrency", concurrency), ("timeout", timeout), ("max_retries", max_retries),
                        ("retry_backoff", retry_backoff), ("temperature", temperature), ("seed", seed),
                        ("max_new_tokens", max_new_tokens), ("top_logprobs", top_logprobs),
                        ("batch_size", batch_size), ("max_response_mb", max_response_mb)):
        check_range(label, name, value)  # before any model is loaded or request sent
    if not isinstance(backend, str):
        if not all(hasattr(backend, a) for a in ("generate", "identity", "decoding", "signature")):
            raise InputError(f"{label} option backend: {type(backend).__name__} is not a backend "
                             "(needs generate, identity, decoding, signature)")
        return backend
    name = backend.strip().lower()
    if name not in BACKENDS:
        raise InputError(f"{label} option backend: expected {' or '.join(BACKENDS)} or a backend object, got {backend!r}")
    given = {"base_url": base_url, "api_key": api_key, "quantization": quantization, "revision": revision}
    wrong = [k for k in (("quantization", "revision") if name == "openai" else ("base_url", "api_key"))
             if given[k] is not None]
    if wrong:
        raise InputError(f"{label} option {wrong[0]} does not apply to backend={name!r}")
    if name == "transformers" and text_only:
        from capeval.judges.transformers_text import TransformersText

        if quantization is not None:
            raise InputError(f"{label} option quantization does not apply to the text-only transformers backend")
        return TransformersText(model or default_model, device=device, dtype=dtype, revision=revision,
                                batch_size=batch_size, temperature=temperature, seed=seed,
                                max_new_tokens=max_new_tokens, label=label)
    if name == "transformers":
        from capeval.judges.transformers_llava import TransformersLlava

        return TransformersLlava(model or default_model, device=device, dtype=dtype, quantization=quantization,
                                 revision=revision, batch_size=batch_size, temperature=temperature, seed=seed,
                                 max_new_tokens=max_new_tokens, pad_to_square=pad_to_square, label=label,
                                 native_vocab=native_vocab)
    from capeval.judges.openai_compat import OpenAICompat

    return OpenAICompat(model, base_url=base_url, api_key=api_key, concurrency=concurrency, timeout=timeout,
                        max_retries=max_retries, retry_backoff=retry_backoff, temperature=temperature, seed=seed,
                        max_new_tokens=max_new_tokens, top_logprobs=top_logprobs, pad_to_square=pad_to_square,
                        label=label, max_response_mb=max_response_mb, llava_system=not text_only)


def check_choice(label: str, name: str, value: Any, choices: tuple[Any, ...]) -> None:
    """One-line :class:`InputError` when ``value`` is not one of ``choices``."""
    if value not in choices:
        raise InputError(f"{label} option {name}: expected one of {', '.join(map(str, choices))}, got {value!r}")


def check_cache(label: str, cache: Any, refresh: Any = False) -> None:
    """One-line :class:`InputError` for a ``cache`` that is not true/false/None/a folder, a
    ``refresh`` that is not true/false, or ``refresh=true`` without a cache (nothing would be
    read from one anyway: an option that does nothing is refused, not ignored)."""
    if not isinstance(cache, (bool, str, os.PathLike)) and cache is not None:
        raise InputError(f"{label} option cache: expected true/false or a folder, got {cache!r}")
    if not isinstance(refresh, bool):
        raise InputError(f"{label} option refresh: expected true or false, got {refresh!r}")
    if refresh and (cache is None or cache is False):
        raise InputError(f"{label} option refresh=true asks again what the cache holds, but cache=false: "
                         "every answer is asked anyway; drop one of the two")


def run_cached(backend: Any, cache: Any, kind: str, todo: list[tuple[str, Any]], out: dict[str, dict[str, Any]],
               progress: bool | None, desc: str, check: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Generate ``todo`` (``[(cache key, Request)]``); each answer goes to the cache at once (an
    interrupted run resumes from it) and to ``out[key]`` as ``{"answer", "logprobs"}``.
    ``check(record)`` runs on each answer once stored; what it raises stops the run (the
    requests not yet sent are dropped)."""
    from capeval.progress import make_progress

    if not todo:
        return

    def on_answer(index: int, answer: Any) -> None:
        key, req = todo[index]
        # lone surrogates (any backend) would make the cache and result files unwritable
        record: dict[str, Any] = {"answer": clean_text(answer.text), "item": req.item}
        if req.logprobs:
            record["logprobs_requested"] = True
            record["logprobs"] = clean_text(answer.logprobs)
        cache.put(kind, key, record)
        out[key] = record
        if check is not None:
            check(record)

    with make_progress(len(todo), desc, progress) as bar:
        backend.generate([req for _, req in todo], on_answer, bar)


def request_key(kind: str, image: str | None, prompt: str, ident: Any, dec: Any, **more: Any) -> str:
    """The cache key of one generation: ``kind``, the image's content hash (None: no image), the
    sha256 of the exact prompt, the backend's identity and decoding, and ``more`` (e.g. CLAIR's try)."""
    return cache_key(kind, {"image": image, "prompt": text_sha(prompt), "model": ident, "decoding": dec, **more})


def answers(backend: Any, cache: Any, kind: str, wanted: Mapping[Hashable, tuple[str, Any]],
            progress: bool | None, desc: str,
            check: Callable[[dict[str, Any]], None] | None = None) -> tuple[dict[Hashable, dict[str, Any]], int, int]:
    """The one generation path of the judges: ``wanted`` maps a slot (an item, an image digest)
    to ``(cache key, Request)``. Each distinct key is looked up once (a hit needs log-probs when
    its request asks for them); the misses are generated through the backend (its batching,
    concurrency and retries), each answer stored as it arrives (:func:`run_cached`).

    ``check(record)`` (optional) runs on every record, cached or new, and may raise to stop the
    run (FLEUR/EXPERT: an answer without the log-probabilities they asked for).

    Returns ``({slot: record}, generated, cached)``, the counts over distinct keys.
    """
    records: dict[str, dict[str, Any]] = {}
    todo: dict[str, Any] = {}
    for key, req in wanted.values():
        if key in records or key in todo:
            continue
        hit = lookup(cache, kind, key, bool(req.logprobs))
        if hit is not None:
            if check is not None:
                check(hit)
            records[key] = hit
        else:
            todo[key] = req
    cached = len(records)
    if todo:  # a cache that cannot store the answers is refused before any paid request
        cache.check_writable(kind, list(todo))
    run_cached(backend, cache, kind, list(todo.items()), records, progress, desc, check)
    return {slot: records[key] for slot, (key, _) in wanted.items()}, len(todo), cached


def lookup(cache: Any, kind: str, key: str, want_logprobs: bool) -> dict[str, Any] | None:
    """A cached record usable here (with log-probs when they are needed), else None.

    The record goes through :func:`clean_text` as a fresh answer does (an entry written by hand or
    by an older capeval may hold lone surrogates); one nested too deeply for that is a miss."""
    hit = cache.get(kind, key)
    if hit is None or (want_logprobs and not hit.get("logprobs_requested")):
        return None
    try:
        return clean_text(hit)
    except RecursionError:
        return None


def text_inputs(label: str, candidates: Any, references: Any, skip_bad_items: bool,
                more_bad: Callable[[list[str]], Mapping[str, str]] | None = None
                ) -> tuple[dict[str, str], dict[str, list[str]], list[str], list[str]]:
    """The text judges' inputs (CLAIR, ALOHa): ``(candidates, references, ids, usable ids)``;
    an empty caption (or what ``more_bad(ids)`` names) is a bad item: a one-line error unless
    ``skip_bad_items``."""
    from capeval.io.inputs import check_same_ids, normalize_candidates, normalize_references, raise_bad_items

    if references is None:
        raise InputError(f"{label} needs references")
    cands = normalize_candidates(candidates, allow_empty=True)
    refs = normalize_references(references)
    check_same_ids(cands, refs)
    ids = list(cands)
    bad = {i: f"item {i!r}: caption is empty" for i in ids if not cands[i].strip()}
    if more_bad is not None:
        bad = {**dict(more_bad(ids)), **bad}
    raise_bad_items(ids, bad, skip_bad_items)
    good = [i for i in ids if i not in bad]
    if not good:
        raise InputError("no usable items: every item was skipped")
    return cands, refs, ids, good


def nrefs(refs: Mapping[str, list[str]] | None) -> str | None:
    """The signature's ``nrefs``: ``"5"``, or ``"1-5"`` when items differ (None without references)."""
    if not refs:
        return None
    n = [len(r) for r in refs.values()]
    return str(min(n)) if min(n) == max(n) else f"{min(n)}-{max(n)}"

