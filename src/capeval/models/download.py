"""Fetch the model files of the checkpoint table (:mod:`capeval.models.clip.checkpoints`),
verify them and write them atomically; ``capeval download`` is a front end to :func:`download`.

Verification, one rule for all entries: a published sha256 must match; an entry without one
is accepted only when the file is a readable state dict (not an HTML page, an empty or a
truncated file), and its sha256 is recorded beside it (``.<file>.sha256``) at that first
download: later checks and downloads must match the record (``--force`` starts a new one).
The architecture is checked when the checkpoint is loaded.

``hf-model`` entries (the FACTUAL parser) are Hugging Face hub repositories: their config,
tokenizer files and one weights file (safetensors preferred) are fetched with
``huggingface_hub`` into a temporary folder, checked by the same rule (readable config, a
tokenizer, weights a readable state dict) and moved into place; the sha256 reported is the
weights file's.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from capeval.models.digests import check_recorded, record_digest, recorded_digest


def fetch(url: str, target: Path, expected: str | None, timeout: float = 60.0,
          validate: Callable[[Path], None] | None = None, progress: bool | None = None) -> str:
    """Stream ``url`` to ``target`` via ``.<name>.part`` beside it and return its sha256.

    The file is moved into place (atomically, ``os.replace``) only when its sha256 equals
    ``expected`` (when given) and ``validate(partial_path)`` (when given) does not raise;
    otherwise nothing is written. An interrupted download leaves the ``.part`` file: the next
    call asks the server for the rest (HTTP ``Range``) and starts over when the server sends
    the whole file instead. A byte count is shown on stderr (:mod:`capeval.progress` rules).
    """
    from capeval.errors import ResourceError
    from capeval.models.clip.checkpoints import sniff

    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.parent / f".{target.name}.part"
    digest = hashlib.sha256()
    try:
        _stream(url, part, digest, timeout, progress)
        got = digest.hexdigest()
        if expected and got != expected:
            what = sniff(part)
            raise ResourceError(f"{url}: the downloaded file has sha256 {got[:12]}..., expected {expected}"
                                f"{' (it ' + what + ')' if what else ''}; nothing was written")
        if validate is not None:
            try:
                validate(part)
            except ResourceError as exc:
                raise ResourceError(str(exc).replace(f"checkpoint {part}", f"{url}: the downloaded file")
                                    .replace(str(part), "the downloaded file") + "; nothing was written") from None
        os.replace(part, target)
        return got
    except ResourceError:
        part.unlink(missing_ok=True)  # a complete but wrong file: resuming it would not help
        raise
    # other errors (network, Ctrl-C) keep the .part file for the next call to resume


def _stream(url: str, part: Path, digest: Any, timeout: float, progress: bool | None) -> None:
    """Append the rest of ``url`` to ``part`` (the whole file when the server ignores ``Range``),
    feeding every byte of ``part`` to ``digest``."""
    from urllib.error import HTTPError
    from urllib.request import Request, urlopen

    from capeval.progress import make_progress

    have = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": "capeval"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        src = urlopen(Request(url, headers=headers), timeout=timeout)
    except HTTPError as exc:
        if exc.code != 416 or not have:  # 416: the part file already holds every byte
            raise
        _hash_into(part, digest)
        return
    with src:
        resumed = have and getattr(src, "status", 200) == 206
        size = int(src.headers.get("Content-Length") or 0)
        if resumed:
            _hash_into(part, digest)
        else:
            have = 0
        with open(part, "ab" if resumed else "wb") as out, \
                make_progress(have + size, f"{part.name[1:-5]}", progress) as bar:
            bar.update(have)
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                digest.update(block)
                out.write(block)
                bar.update(len(block))


def _hash_into(path: Path, digest: Any) -> None:
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)


def validator(entry: Any) -> Callable[[Path], None] | None:
    """How to check a file of ``entry`` that has no published sha256: it must be a state dict."""
    if entry.sha256 or entry.kind in ("vocab", "zip"):  # zip: an archive, read by its metric
        return None
    from capeval.models.clip.checkpoints import read_state_dict

    def validate(path: Path) -> None:
        read_state_dict(path, trusted=False)

    return validate


def download(name: str, directory: str | os.PathLike[str] | None = None, force: bool = False) -> tuple[Path, str]:
    """Fetch checkpoint or vocabulary ``name`` of the checkpoint table (``capeval download --list``).

    A file already present and verified is not fetched again (unless ``force``); a broken
    earlier download is replaced. Without a published sha256, the first download's is
    recorded beside the file and later downloads must match it.

    Args:
        name: a checkpoint name of the table, e.g. ``"openai/ViT-B-32"``.
        directory: the target folder (default ``$CAPEVAL_CHECKPOINTS`` or ``<cache>/clip``).
        force: download again even when a verified file is present (and record a new digest).

    Returns:
        ``(path, sha256)`` of the file in place.

    Raises:
        ResourceError: no URL works, or the file fails verification (nothing is written then).
        UnknownNameError: ``name`` is not in the table.
    """
    from capeval.errors import ResourceError
    from capeval.models.clip import checkpoints as ck

    entry = ck.get_checkpoint(name)
    target = ck.local_path(entry, directory)
    if entry.kind == "hf-model":
        return download_hub_folder(entry, target, force)
    validate = validator(entry)
    if target.is_file() and not force:
        got = ck.sha256_file(target)
        if entry.sha256 is not None and got == entry.sha256:
            return target, got
        if entry.sha256 is None:
            try:
                if validate is not None:
                    validate(target)
                check_recorded(target, got)  # no published digest: the one of the first download
                return target, got
            except ResourceError as exc:  # a broken earlier download: fetch it again
                print(f"capeval: {exc}; downloading it again", file=sys.stderr)
    if not entry.urls:
        raise ResourceError(f"{name} has no direct download URL: {entry.note}; put {entry.filename} at {target}")
    # without a published digest, a new download must match the one recorded at the first (unless --force)
    expected = entry.sha256 or (None if force else recorded_digest(target))
    errors = []
    for url in entry.urls:
        try:
            got = fetch(url, target, expected, validate=validate)
            if entry.sha256 is None:
                record_digest(target, got)
            return target, got
        except ResourceError as exc:
            if expected and not entry.sha256:
                raise ResourceError(f"{exc} (the sha256 recorded at its first download; --force starts anew)") from None
            raise
        except Exception as exc:  # network errors: try the next mirror
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
    raise ResourceError(f"could not download {name} ({'; '.join(errors)}); download {entry.filename} "
                        f"by hand and put it at {target}")


# -- hub folders (kind hf-model) ------------------------------------------------------------

#: weights files of a transformers checkpoint, in order of preference (one is fetched)
HUB_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
#: other files fetched: config and tokenizer (spiece.model, tokenizer.json, ...)
HUB_SUFFIXES = (".json", ".model", ".txt")


def _hub_files(repo: str) -> list[str]:
    """File names of hub repository ``repo`` (one network call; patched in tests)."""
    from huggingface_hub import HfApi

    return list(HfApi().list_repo_files(repo))


def _hub_fetch(repo: str, filename: str, folder: Path) -> None:
    """Fetch ``filename`` of ``repo`` into ``folder`` (patched in tests)."""
    from huggingface_hub import hf_hub_download

    hf_hub_download(repo, filename, local_dir=str(folder))


def hub_selection(files: list[str]) -> list[str]:
    """The files to fetch: top-level config/tokenizer files and the preferred weights file."""
    top = [f for f in files if "/" not in f]
    weights = next((w for w in HUB_WEIGHTS if w in top), None)
    return [f for f in top if f.endswith(HUB_SUFFIXES)] + ([weights] if weights else [])


def check_hub_folder(folder: Path) -> Path:
    """The weights file of a transformers checkpoint folder; ResourceError when the folder is
    not one (no config, no tokenizer, no weights or unreadable weights)."""
    import json

    from capeval.errors import ResourceError
    from capeval.models.clip.checkpoints import read_state_dict

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResourceError(f"{folder}: no readable config.json ({type(exc).__name__})") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ResourceError(f"{folder}/config.json is not a transformers config (no model_type)")
    if not any((folder / t).is_file() for t in ("tokenizer.json", "spiece.model", "tokenizer_config.json")):
        raise ResourceError(f"{folder}: no tokenizer files (tokenizer.json or spiece.model)")
    weights = next((folder / w for w in HUB_WEIGHTS if (folder / w).is_file()), None)
    if weights is None:
        raise ResourceError(f"{folder}: no weights file ({' or '.join(HUB_WEIGHTS)})")
    read_state_dict(weights, trusted=False)
    return weights


def download_hub_folder(entry: Any, target: Path, force: bool = False) -> tuple[Path, str]:
    """Fetch hub repository ``entry.hub`` into folder ``target`` (atomically: a temporary
    folder, checked, then renamed); returns ``(target, sha256 of the weights file)``."""
    import shutil

    from capeval.errors import ResourceError
    from capeval.models.clip.checkpoints import sha256_file

    if target.is_dir() and not force:
        try:
            return target, sha256_file(check_hub_folder(target))
        except ResourceError as exc:  # a broken earlier download: fetch it again
            print(f"capeval: {exc}; downloading it again", file=sys.stderr)
    from capeval._optional import require

    require("huggingface_hub", purpose=f"capeval download {entry.name}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))
    try:
        try:
            names = hub_selection(_hub_files(entry.hub))
            if not names:
                raise ResourceError(f"{entry.hub} on the hub has no config/tokenizer/weights files")
            for name in names:
                _hub_fetch(entry.hub, name, tmp)
        except ResourceError:
            raise
        except Exception as exc:  # network and hub errors come in many types
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ResourceError(f"could not download {entry.name} from https://huggingface.co/{entry.hub} "
                                f"({type(exc).__name__}: {first[:160]}); nothing was written") from None
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's download metadata
        try:
            weights = check_hub_folder(tmp)
        except ResourceError as exc:
            raise ResourceError(str(exc).replace(str(tmp), f"the download of {entry.name}") +
                                "; nothing was written") from None
        digest = sha256_file(weights)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        return target, digest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
