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
from capeval.models.fetching import CHECKPOINT_MIRROR_ENV as CHECKPOINT_MIRROR_ENV
from capeval.models.fetching import DEADLINE_ENV as DEADLINE_ENV
from capeval.models.fetching import DEADLINE_RANGE as DEADLINE_RANGE
from capeval.models.fetching import DEFAULT_DEADLINE_S as DEFAULT_DEADLINE_S
from capeval.models.fetching import IncompleteDownload as IncompleteDownload
from capeval.models.fetching import _content_length, _data_sniff, _hash_into
from capeval.models.fetching import checkpoint_mirror as checkpoint_mirror
from capeval.models.fetching import download_deadline as download_deadline
from capeval.models.fetching import download_lock as download_lock
from capeval.models.fetching import open_new as open_new
from capeval.models.fetching import refuse_link as refuse_link


#: the most bytes accepted for a file whose size nobody states (no Content-Length, no size in the
#: table): four times the largest file capeval downloads, so an endless body stops here
MAX_UNKNOWN_BYTES = 8 << 30


def fetch(url: str, target: Path, expected: str | None, timeout: float = 60.0,
          validate: Callable[[Path], None] | None = None, progress: bool | None = None, *,
          max_bytes: int | None = None, what: str = "checkpoint", deadline_at: float | None = None) -> str:
    """Stream ``url`` to ``target`` via ``.<name>.part`` beside it and return its sha256.

    The file is moved into place (atomically, ``os.replace``) only when every byte announced
    arrived (``Content-Length``), its sha256 equals ``expected`` (when given) and
    ``validate(partial_path)`` (when given) does not raise; otherwise nothing is placed.
    Bounds: at most ``max_bytes`` (else the ``Content-Length``, else :data:`MAX_UNKNOWN_BYTES`)
    are written, a larger body is stopped and refused; the whole download must end before
    ``deadline_at`` (``time.monotonic()``; default now + :func:`download_deadline`), checked
    whenever bytes arrive, and ``timeout`` bounds each wait for bytes. Neither ``target`` nor
    the ``.part`` file is written through a symbolic link. A download cut short (a short
    body, the deadline, a network error) keeps its ``.part`` when ``expected`` is known: the
    next call asks for the rest (HTTP ``Range``) and the whole file is then checked against
    ``expected``; without ``expected`` nothing could check a resumed file, so it starts over.
    ``what`` (``"checkpoint"``, ``"data file"``) names the file in messages.
    """
    import time

    from capeval.errors import ResourceError

    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.parent / f".{target.name}.part"
    refuse_link(target, f"the {what}")
    refuse_link(part, f"the {what}'s partial download")
    if expected is None and part.is_file():
        part.unlink()  # no digest to check a resumed file against: start over
    if deadline_at is None:
        deadline_at = time.monotonic() + download_deadline()
    digest = hashlib.sha256()
    try:
        _stream(url, part, digest, timeout, progress, max_bytes, deadline_at, target, what)
        got = digest.hexdigest()
        if expected and got != expected:
            if what == "checkpoint":
                from capeval.models.clip.checkpoints import sniff

                found = sniff(part)
            else:
                found = _data_sniff(part)
            raise ResourceError(f"{url}: the downloaded {what} has sha256 {got[:12]}..., expected {expected}"
                                f"{' (it ' + found + ')' if found else ''}; nothing was written")
        if validate is not None:
            try:
                validate(part)
            except ResourceError as exc:
                raise ResourceError(str(exc).replace(f"checkpoint {part}", f"{url}: the downloaded file")
                                    .replace(str(part), "the downloaded file") + "; nothing was written") from None
        refuse_link(target, f"the {what}")  # not replaced by a link meanwhile (os.replace would drop that link)
        os.replace(part, target)
        return got
    except ResourceError:
        if part.is_file() and not part.is_symlink():
            part.unlink(missing_ok=True)  # a complete but wrong file: resuming it would not help
        raise
    except IncompleteDownload as exc:
        kept = expected is not None and part.is_file() and not part.is_symlink() and part.stat().st_size > 0
        if not kept and part.is_file() and not part.is_symlink():
            part.unlink()
        raise IncompleteDownload(f"{exc}; " + (f"the {part.stat().st_size:,} bytes received are kept in {part} and "
                                               "the next download resumes there" if kept else "nothing was written"))
    except BaseException:
        if expected is None and part.is_file() and not part.is_symlink():
            part.unlink(missing_ok=True)  # nothing could check a resumed file
        raise
    # with ``expected``, other errors (network, Ctrl-C) keep the .part file for the next call to resume



def _stream(url: str, part: Path, digest: Any, timeout: float, progress: bool | None, max_bytes: int | None,
            deadline_at: float, target: Path, what: str) -> None:
    """Append the rest of ``url`` to ``part`` (the whole file when the server ignores ``Range``),
    feeding every byte of ``part`` to ``digest``; stop at the size announced or allowed and at
    the deadline."""
    import time
    from urllib.error import HTTPError
    from urllib.request import Request, urlopen

    from capeval.errors import ResourceError
    from capeval.progress import make_progress

    def late() -> IncompleteDownload:
        return IncompleteDownload(f"{target.name}: the download did not finish within {DEADLINE_ENV}="
                                  f"{download_deadline():g} s")

    have = part.lstat().st_size if part.is_file() else 0
    headers = {"User-Agent": "capeval"}
    if have:
        headers["Range"] = f"bytes={have}-"
    left = deadline_at - time.monotonic()
    if left <= 0:
        raise late()
    try:
        src = urlopen(Request(url, headers=headers), timeout=min(timeout, left))
    except HTTPError as exc:
        if exc.code != 416 or not have:  # 416: the part file already holds every byte
            raise
        _hash_into(part, digest)
        return
    with src:
        length = _content_length(src.headers)
        resumed = bool(have) and getattr(src, "status", 200) == 206
        if resumed:
            # the rest must start where the part file ends (a server that names no range is trusted:
            # only a file with a known sha256 is resumed, and the whole file is checked against it)
            named = src.headers.get("Content-Range")
            rng = (named or "").replace("=", " ").split()
            start = rng[1].split("-")[0] if len(rng) == 2 and rng[0] == "bytes" else ""
            if named is not None and start != str(have):
                raise ResourceError(f"{url}: asked for the rest of {target.name} from byte {have:,}, the server sent "
                                    f"range {src.headers.get('Content-Range')!r:.60}; nothing was written")
        else:
            have = 0
        total = have + length if length is not None else None
        cap = max_bytes or MAX_UNKNOWN_BYTES
        if total is not None and total > cap:
            raise ResourceError(f"{url}: the server announces {total:,} bytes for the {what} {target.name}, more than "
                                f"the {cap:,} expected; nothing was written")
        limit = total if total is not None else cap
        if resumed:
            _hash_into(part, digest)
        read = getattr(src, "read1", None) or src.read  # read1: returns as soon as bytes arrive (deadline checks)
        got = have
        with os.fdopen(open_new(part, append=resumed), "ab" if resumed else "wb") as out, \
                make_progress(limit if total is not None else 0, f"{target.name}", progress, unit="bytes") as bar:
            bar.update(have)
            while True:
                if time.monotonic() > deadline_at:
                    raise late()
                block = read(min(1 << 20, limit - got + 1))
                if not block:
                    break
                if got + len(block) > limit:  # never write past the size announced or allowed
                    raise ResourceError(f"{url}: the server sent more than the {limit:,} bytes "
                                        f"{'it announced' if total is not None else 'expected'} for the {what} "
                                        f"{target.name}; stopped there, nothing was written")
                digest.update(block)
                out.write(block)
                got += len(block)
                bar.update(len(block))
        if total is not None and got < total:
            raise IncompleteDownload(f"{target.name}: the server's body was cut short ({got:,} of the {total:,} bytes "
                                     "it announced)")


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

    With :func:`checkpoint_mirror` set, the file comes from the mirror only. A second download
    of the same file (another process) waits for the first (:func:`download_lock`).
    """
    from capeval.models.clip import checkpoints as ck

    entry = ck.get_checkpoint(name)
    target = ck.local_path(entry, directory)
    if entry.kind == "hf-model":
        return download_hub_folder(entry, target, force)
    if not entry.urls and not checkpoint_mirror() and not target.is_file():  # by hand: no folder, no lock
        from capeval.errors import ResourceError

        raise ResourceError(f"{name} has no direct download URL: {entry.note}; put {entry.filename} at {target}")
    with download_lock(target.parent / f".{target.name}.lock", name):  # a second download waits for this one
        return _download_file(entry, target, Path(directory or ck.checkpoint_dir()), force)


def _download_file(entry: Any, target: Path, root: Path, force: bool) -> tuple[Path, str]:
    """:func:`download` of one file of the table into ``target`` (under the checkpoint folder ``root``)."""
    import time
    from urllib.parse import quote

    from capeval.errors import ResourceError
    from capeval.models.clip import checkpoints as ck

    name = entry.name
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
    mirror = checkpoint_mirror()
    # a mirror serves the checkpoint folder's layout: <mirror>/pac-s/clip_ViT-B-32.pth
    urls = (f"{mirror}/{quote(target.relative_to(root).as_posix())}",) if mirror else entry.urls
    if not urls:
        raise ResourceError(f"{name} has no direct download URL: {entry.note}; put {entry.filename} at {target}")
    # without a published digest, a new download must match the one recorded at the first (unless --force)
    expected = entry.sha256 or (None if force else recorded_digest(target))
    deadline_at = time.monotonic() + download_deadline()  # one deadline for the file, all URLs together
    errors = []
    for url in urls:
        try:
            got = fetch(url, target, expected, validate=validate, deadline_at=deadline_at)
            if entry.sha256 is None:
                record_digest(target, got)
            return target, got
        except ResourceError as exc:
            if expected and not entry.sha256 and "sha256" in str(exc):
                raise ResourceError(f"{exc} (the sha256 recorded at its first download; --force starts anew)") from None
            raise
        except IncompleteDownload as exc:
            errors.append(f"{url}: {exc}")
        except Exception as exc:  # network errors: try the next mirror
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
    where = f" from the mirror {mirror}" if mirror else ""
    raise ResourceError(f"could not download {name}{where} ({'; '.join(errors)}); download {entry.filename} "
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
    """Fetch ``filename`` of ``repo`` into ``folder`` (patched in tests), without the hub
    client's own progress bar: it drew one line per file on stderr beside capeval's output
    (under ``--quiet`` too); the folder is reported once, by ``capeval download``'s JSON line.
    ``HF_HUB_DISABLE_PROGRESS_BARS=0`` (bars asked for) is left to show them."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    silence = getattr(constants, "HF_HUB_DISABLE_PROGRESS_BARS", None) is not False and not are_progress_bars_disabled()
    if silence:
        disable_progress_bars()
    try:
        hf_hub_download(repo, filename, local_dir=str(folder))
    finally:
        if silence:  # the process-wide switch as it was (a library user's bars elsewhere)
            enable_progress_bars()


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
