"""``capeval download <benchmark>``: a benchmark's files from their public source into the data root.

The data root is ``$CAPEVAL_DATA``, else ``<capeval cache>/data`` (:func:`data_home`), the
folder ``bench`` and ``reproduce`` read when no ``--data-root`` is given. Each file of
:data:`capeval.bench.sources.SOURCES` is fetched with :func:`capeval.models.download.fetch`
(the checkpoints' downloader: resumable ``.part`` file, sha256 checked before an atomic
rename, a progress bar), archives are unpacked member by member (each member checked and
renamed into place), and files already in place and verified are not fetched again. A file
without a known digest gets its sha256 recorded beside it on first download and is checked
against that record afterwards. ``CAPEVAL_DATA_MIRROR=URL`` fetches every file from
``URL/<benchmark>/<name>`` instead of its source.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from capeval.bench.sources import METRIC_SOURCES, SOURCES, DataFile, DataSource
from capeval.errors import ResourceError
from capeval.paths import data_home, data_mirror as mirror


def source(name: str) -> DataSource:
    """The release of benchmark ``name`` or of a metric's data (``amber``); a one-line error for an unknown one."""
    from capeval.bench.base import get_benchmark

    if name.strip().lower() in METRIC_SOURCES:
        return METRIC_SOURCES[name.strip().lower()]
    bench = get_benchmark(name).name
    if bench not in SOURCES:
        raise ResourceError(f"{bench}: no download source is registered; put its files under the data root by hand")
    return SOURCES[bench]


def _expected(bench: str, f: DataFile, rel: str) -> str | None:
    """The digest a placed file must have: a loader's (any benchmark reading ``rel``: one record
    for a file that several read), else the release's for a plain file."""
    from capeval.bench.base import benchmarks

    for b in benchmarks().values():
        if b.files.get(rel):
            return b.files[rel]
    return None if f.members else f.sha256


def _verified(bench: str, f: DataFile, root: Path, rel: str) -> str | None:
    """sha256 of ``root/rel`` when it is there and right, None when it is absent; an error when wrong."""
    from capeval.models.digests import check_recorded
    from capeval.hashing import file_digest

    path = root / rel
    if not path.is_file():
        return None
    got = file_digest(path, "sha256", cached=False)
    want = _expected(bench, f, rel)
    if want is not None and got != want:
        raise ResourceError(f"{bench}: {path} has sha256 {got[:12]}..., the release's is {want[:12]}...; "
                            f"delete it (or pass --force) to download it again")
    if want is None:
        check_recorded(path, got)
    return got


def _urls(bench: str, f: DataFile) -> tuple[str, ...]:
    base = mirror()
    return (f"{base}/{bench}/{f.name}",) if base else f.urls


def _fetch_any(urls: tuple[str, ...], target: Path, expected: str | None, progress: bool | None) -> str:
    """:func:`capeval.models.download.fetch` from the first URL that answers."""
    from capeval.models.download import fetch

    errors = []
    for url in urls:
        try:
            return fetch(url, target, expected, timeout=60.0, progress=progress)
        except ResourceError:
            raise
        except Exception as exc:  # network errors: try the next copy
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
    raise ResourceError("could not download " + "; ".join(errors))


def _unpack(bench: str, f: DataFile, archive: Path, root: Path, force: bool) -> dict[str, str]:
    """Members of ``archive`` into place, each checked before its atomic rename."""
    import tarfile
    import zipfile

    from capeval.models.digests import record_digest

    wanted = dict(f.members)
    out: dict[str, str] = {}
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            names = {Path(i.filename).name: i for i in z.infolist()
                     if not i.is_dir() and "__MACOSX" not in i.filename}
            opener = {n: (lambda i=i: z.open(i)) for n, i in names.items()}
            out = _place_members(bench, f, wanted, opener, root, force)
    elif tarfile.is_tarfile(archive):
        with tarfile.open(archive) as t:
            members = {Path(m.name).name: m for m in t.getmembers() if m.isfile()}
            opener = {n: (lambda m=m: t.extractfile(m)) for n, m in members.items()}
            out = _place_members(bench, f, wanted, opener, root, force)
    else:
        raise ResourceError(f"{bench}: {f.name} is neither a zip nor a tar archive; nothing was written")
    for rel, digest in out.items():
        if _expected(bench, f, rel) is None:
            record_digest(root / rel, digest)
    return out


def _place_members(bench: str, f: DataFile, wanted: dict[str, str], opener: dict[str, Any], root: Path,
                   force: bool) -> dict[str, str]:
    import hashlib

    out: dict[str, str] = {}
    for member, rel in wanted.items():
        if member not in opener:
            raise ResourceError(f"{bench}: {f.name} has no member {member}; nothing was written for it")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.parent / f".{target.name}.part"
        digest = hashlib.sha256()
        with opener[member]() as src, open(part, "wb") as dst:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
                dst.write(block)
        got, want = digest.hexdigest(), _expected(bench, f, rel)
        if want is not None and got != want:
            part.unlink(missing_ok=True)
            raise ResourceError(f"{bench}: {member} of {f.name} has sha256 {got[:12]}..., the release's is "
                                f"{want[:12]}...; nothing was written")
        os.replace(part, target)
        out[rel] = got
    return out


def _hub_files(src: DataSource) -> tuple[DataFile, ...]:
    """Files of a hub dataset at its pinned revision whose path starts with one of the patterns."""
    repo, revision, prefixes = src.hub  # type: ignore[misc]
    if mirror():
        raise ResourceError(f"{src.benchmark}: its shard names come from the hub listing at {revision[:12]}; with "
                            f"CAPEVAL_DATA_MIRROR copy the dataset's data/ folder to <data root>/{src.benchmark}/data/")
    from capeval._optional import require

    require("huggingface_hub", purpose=f"capeval download {src.benchmark}")
    from huggingface_hub import HfApi

    try:
        names = HfApi().list_repo_files(repo, repo_type="dataset", revision=revision)
    except Exception as exc:  # network and hub errors come in many types
        raise ResourceError(f"{src.benchmark}: cannot list huggingface.co/datasets/{repo}@{revision[:12]} "
                            f"({type(exc).__name__})") from None
    return tuple(DataFile(Path(n).name, (f"https://huggingface.co/datasets/{repo}/resolve/{revision}/{n}",),
                          place=f"{src.benchmark}/{n}") for n in names if n.startswith(prefixes))


def download_benchmark(name: str, root: str | os.PathLike[str] | None = None, force: bool = False,
                       progress: bool | None = None) -> dict[str, Any]:
    """Fetch, check and lay out benchmark ``name``'s files under ``root`` (default :func:`data_home`).

    Returns ``{"benchmark", "root", "files": {relative path: sha256}, "by_hand": [what to get
    and where to put it], "images": note}``; ``by_hand`` is empty when the benchmark is ready.
    Raises :class:`~capeval.errors.ResourceError` when a file cannot be fetched or is wrong
    (nothing wrong is left in place).
    """
    src = source(name)
    bench = src.benchmark
    base = Path(root).expanduser() if root is not None else data_home()
    base.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    by_hand: list[str] = []
    for f in (_hub_files(src) if src.hub else src.files):
        have = {} if force else {rel: _verified(bench, f, base, rel) for rel in f.places}
        if have and all(have.values()):
            files.update(have)  # type: ignore[arg-type]
            continue
        urls = _urls(bench, f)
        if not urls:
            if not f.optional:
                by_hand.append(f.manual.format(root=base))
            continue
        try:
            if f.members:
                archive = base / ".downloads" / bench / f.name
                _fetch_any(urls, archive, f.sha256, progress)
                files.update(_unpack(bench, f, archive, base, force))
                archive.unlink(missing_ok=True)
            else:
                target = base / f.place
                files[f.place] = _fetch_any(urls, target, _expected(bench, f, f.place), progress)
                if _expected(bench, f, f.place) is None:
                    from capeval.models.digests import record_digest

                    record_digest(target, files[f.place])
        except ResourceError as exc:
            if f.manual and mirror():  # not in the mirror: the way by hand still works (an optional file: not needed)
                if not f.optional:
                    by_hand.append(f"{f.manual.format(root=base)} (the mirror: {exc})")
                continue
            raise
    shutil.rmtree(base / ".downloads" / bench, ignore_errors=True)
    images = check_images(src, base) if src.images else ""
    if src.unpack and not by_hand:
        import importlib

        module, _, func = src.unpack.partition(":")
        images = getattr(importlib.import_module(module), func)(base)
    return {"benchmark": bench, "root": str(base), "files": files, "by_hand": by_hand, "images": images}


def check_images(src: DataSource, root: Path) -> str:
    """Where the Flickr8k test images must go, or how many of them are there and verified (MD5)."""
    from capeval.bench.media import checksum_table
    from capeval.hashing import file_digest

    folder = root / "flickr8k" / "Flicker8k_Dataset"
    if not folder.is_dir():
        return src.images.format(root=root, bench=src.benchmark)
    listed = root / "flickr8k" / "Flickr_8k.testImages.txt"
    names = [n.strip() for n in listed.read_text(encoding="utf-8").splitlines() if n.strip()]
    table = checksum_table(["flickr8k_checksum.txt"])
    missing = [n for n in names if not (folder / n).is_file()]
    differ = [n for n in names if n not in missing and n in table and file_digest(folder / n, "md5") != table[n][0]]
    ok = len(names) - len(missing) - len(differ)
    text = f"images: {ok}/{len(names)} test images in {folder} match the published MD5 list"
    if missing:
        text += f"; {len(missing)} missing (first: {missing[0]})"
    if differ:
        text += f"; {len(differ)} differ (first: {differ[0]})"
    return text + (f"; pass --images {folder.parent}" if ok else "")


def present(name: str, root: str | os.PathLike[str] | None = None) -> bool:
    """Whether every file benchmark ``name``'s default protocol reads is under ``root`` (no hashing)."""
    src = source(name)
    base = Path(root).expanduser() if root is not None else data_home()
    if src.hub:
        return any((base / src.benchmark).glob(src.default_files))  # the default split
    return all((base / rel).is_file() for f in src.files if not f.optional for rel in f.places)
