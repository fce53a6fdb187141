"""Fetch the model files of the checkpoint table (:mod:`capeval.models.clip.checkpoints`),
verify them and write them atomically; ``capeval download`` is a front end to :func:`download`.

Verification, one rule for all entries: a published sha256 must match; an entry without one
is accepted only when the file is a readable state dict (not an HTML page, an empty or a
truncated file). The architecture is checked when the checkpoint is loaded.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable


def fetch(url: str, target: Path, expected: str | None, timeout: float = 60.0,
          validate: Callable[[Path], None] | None = None) -> str:
    """Stream ``url`` to ``target`` via a temporary file and return its sha256.

    The file is moved into place only when its sha256 equals ``expected`` (when given) and
    ``validate(temporary_path)`` (when given) does not raise; otherwise nothing is written.
    """
    from urllib.request import Request, urlopen

    from capeval.errors import ResourceError
    from capeval.models.clip.checkpoints import sniff

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urlopen(Request(url, headers={"User-Agent": "capeval"}), timeout=timeout) as src:
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                digest.update(block)
                out.write(block)
        got = digest.hexdigest()
        if expected and got != expected:
            what = sniff(tmp)
            raise ResourceError(f"{url}: the downloaded file has sha256 {got[:12]}..., expected {expected}"
                                f"{' (it ' + what + ')' if what else ''}; nothing was written")
        if validate is not None:
            try:
                validate(Path(tmp))
            except ResourceError as exc:
                raise ResourceError(str(exc).replace(f"checkpoint {tmp}", f"{url}: the downloaded file")
                                    .replace(tmp, "the downloaded file") + "; nothing was written") from None
        os.replace(tmp, target)
        return got
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def validator(entry: Any) -> Callable[[Path], None] | None:
    """How to check a file of ``entry`` that has no published sha256: it must be a state dict."""
    if entry.sha256 or entry.kind == "vocab":
        return None
    from capeval.models.clip.checkpoints import read_state_dict

    def validate(path: Path) -> None:
        read_state_dict(path, trusted=False)

    return validate


def download(name: str, directory: str | os.PathLike[str] | None = None, force: bool = False) -> tuple[Path, str]:
    """Fetch checkpoint or vocabulary ``name`` of the table into ``directory`` (default
    ``$CAPEVAL_CHECKPOINTS`` or ``<cache>/clip``); returns ``(path, sha256)``.

    A file already present and verified is not fetched again (unless ``force``); a broken
    earlier download is replaced. Raises :class:`~capeval.errors.ResourceError` when no URL
    works or the file fails verification (nothing is written then).
    """
    from capeval.errors import ResourceError
    from capeval.models.clip import checkpoints as ck

    entry = ck.get_checkpoint(name)
    target = ck.local_path(entry, directory)
    validate = validator(entry)
    if target.is_file() and not force:
        got = ck.sha256_file(target)
        if entry.sha256 is not None and got == entry.sha256:
            return target, got
        if entry.sha256 is None:
            try:
                if validate is not None:
                    validate(target)
                return target, got
            except ResourceError as exc:  # a broken earlier download: fetch it again
                print(f"capeval: {exc}; downloading it again", file=sys.stderr)
    if not entry.urls:
        raise ResourceError(f"{name} has no direct download URL: {entry.note}; put {entry.filename} at {target}")
    errors = []
    for url in entry.urls:
        try:
            return target, fetch(url, target, entry.sha256, validate=validate)
        except ResourceError:
            raise
        except Exception as exc:  # network errors: try the next mirror
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
    raise ResourceError(f"could not download {name} ({'; '.join(errors)}); download {entry.filename} "
                        f"by hand and put it at {target}")
