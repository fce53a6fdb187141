"""``capeval download NAME [--dir DIR]``: fetch a checkpoint or the CLIP vocabulary, verify its
sha256, write it atomically. ``capeval download --list`` shows the table and what is present."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("download", help="download CLIP/PAC-S checkpoints and the CLIP vocabulary",
                       description="Download model files named in capeval's checkpoint table, verifying sha256.")
    p.add_argument("names", nargs="*", metavar="NAME", help="checkpoint names (see --list)")
    p.add_argument("--dir", help="target folder (default: $CAPEVAL_CHECKPOINTS or <cache>/clip)")
    p.add_argument("--list", action="store_true", help="list the checkpoint table and local status as JSON")
    p.add_argument("--force", action="store_true", help="download again even when a verified file is present")
    p.set_defaults(func=run)


def fetch(url: str, target: Path, expected: str | None, timeout: float = 60.0) -> str:
    """Stream ``url`` to ``target`` via a temporary file; verify ``expected`` sha256; return the digest."""
    from urllib.request import Request, urlopen

    from capeval.errors import ResourceError

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
            raise ResourceError(f"{url}: downloaded file has sha256 {got}, expected {expected}; nothing was written")
        os.replace(tmp, target)
        return got
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def download(name: str, directory: str | None = None, force: bool = False) -> tuple[Path, str]:
    from capeval.clip import checkpoints as ck
    from capeval.errors import ResourceError

    entry = ck.get_checkpoint(name)
    target = ck.local_path(entry, directory)
    if target.is_file() and not force:
        got = ck.sha256_file(target)
        if entry.sha256 is None or got == entry.sha256:
            return target, got
    if not entry.urls:
        raise ResourceError(f"{name} has no direct download URL: {entry.note}; put {entry.filename} at {target}")
    errors = []
    for url in entry.urls:
        try:
            return target, fetch(url, target, entry.sha256)
        except ResourceError:
            raise
        except Exception as exc:  # network errors: try the next mirror
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
    raise ResourceError(f"could not download {name} ({'; '.join(errors)}); download {entry.filename} "
                        f"by hand and put it at {target}")


def run(args: argparse.Namespace) -> int:
    from capeval.clip.checkpoints import checkpoint_info
    from capeval.errors import InputError

    if args.list:
        print(json.dumps(checkpoint_info(), indent=2))
        return 0
    if not args.names:
        raise InputError("name a checkpoint to download (see `capeval download --list`)")
    for name in args.names:
        path, digest = download(name, args.dir, args.force)
        print(json.dumps({"name": name, "path": str(path), "sha256": digest}))
        sys.stdout.flush()
    return 0
