"""``capeval download NAME [--dir DIR]``: fetch a checkpoint or the CLIP vocabulary, verify it,
write it atomically. ``capeval download --list`` shows the table and what is present.

Verification, one rule for all entries: a published sha256 must match; an entry without one
is accepted only when the file is a readable state dict (not an HTML page, an empty or a
truncated file). The architecture is checked when the checkpoint is loaded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("download", help="download CLIP/PAC-S checkpoints and the CLIP vocabulary",
                       description="Download model files named in capeval's checkpoint table, verifying them.")
    p.add_argument("names", nargs="*", metavar="NAME", help="checkpoint names (see --list)")
    p.add_argument("--dir", help="target folder (default: $CAPEVAL_CHECKPOINTS or <cache>/clip)")
    p.add_argument("--list", action="store_true", help="show the checkpoint table and which files are present")
    p.add_argument("--json", action="store_true", help="with --list: the table as JSON")
    p.add_argument("--force", action="store_true", help="download again even when a verified file is present")
    p.set_defaults(func=run)


def fetch(url: str, target: Path, expected: str | None, timeout: float = 60.0,
          validate: Callable[[Path], None] | None = None) -> str:
    """Stream ``url`` to ``target`` via a temporary file and return its sha256.

    The file is moved into place only when its sha256 equals ``expected`` (when given) and
    ``validate(temporary_path)`` (when given) does not raise; otherwise nothing is written.
    """
    from urllib.request import Request, urlopen

    from capeval.models.clip.checkpoints import sniff
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


def _validator(entry: Any) -> Callable[[Path], None] | None:
    """How to check a file of ``entry`` that has no published sha256: it must be a state dict."""
    if entry.sha256 or entry.kind == "vocab":
        return None
    from capeval.models.clip.checkpoints import read_state_dict

    def validate(path: Path) -> None:
        read_state_dict(path, trusted=False)

    return validate


def download(name: str, directory: str | None = None, force: bool = False) -> tuple[Path, str]:
    from capeval.models.clip import checkpoints as ck
    from capeval.errors import ResourceError

    entry = ck.get_checkpoint(name)
    target = ck.local_path(entry, directory)
    validate = _validator(entry)
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


def format_table(info: dict[str, Any]) -> str:
    """The checkpoint table for a terminal: name, architecture, sha256, status, where."""
    rows = [("NAME", "ARCH", "SHA256", "STATUS", "WHERE")]
    for name, e in info["entries"].items():
        sha = e["sha256"][:12] + "..." if e["sha256"] else "not published"
        if e["present"]:
            where = e["path"]
        elif e["urls"]:
            where = "from " + ", ".join(dict.fromkeys(urlparse(u).netloc for u in e["urls"]))
        else:
            where = "manual download (see note)"
        rows.append((name, e["arch"] or "-", sha, "present" if e["present"] else "missing", where))
    widths = [max(len(r[k]) for r in rows) for k in range(4)]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    notes = [f"  {name}: {e['note']}" for name, e in info["entries"].items() if not e["urls"] and e["note"]]
    lines.append("")
    lines.append(f"folder: {info['dir']} (set CAPEVAL_CHECKPOINTS or --dir to use another)")
    if notes:
        lines.append("manual downloads:")
        lines.extend(notes)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from capeval.models.clip.checkpoints import checkpoint_info
    from capeval.errors import InputError

    if args.list:
        info = checkpoint_info(args.dir)
        print(json.dumps(info, indent=2) if args.json else format_table(info))
        return 0
    if args.json:
        raise InputError("--json goes with --list")
    if not args.names:
        raise InputError("name a checkpoint to download (see `capeval download --list`)")
    for name in args.names:
        path, digest = download(name, args.dir, args.force)
        print(json.dumps({"name": name, "path": str(path), "sha256": digest}))
        sys.stdout.flush()
    return 0
