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

Bounds (one rule for every file): at most the size announced (``Content-Length``) or, without
one, the table's size plus a margin is written (an endless body is stopped and refused); a
body cut short is never placed and its digest never recorded (its ``.part`` is kept for a
verified resume when the file's sha256 is known); every file must arrive within
``$CAPEVAL_DOWNLOAD_DEADLINE`` seconds (:func:`capeval.models.download.download_deadline`);
nothing is written through a symbolic link; an archive's members are checked (names, kinds,
count, sizes) before one is unpacked. One download writes into a data root at a time (a
``flock`` on ``<root>/.downloads/lock``): a second waits and says so. An optional file the
source or the mirror does not have is a note in the result, not an error.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

from capeval.bench.sources import METRIC_SOURCES, SOURCES, DataFile, DataSource
from capeval.errors import CapevalError, ResourceError
from capeval.paths import data_home, data_mirror as mirror, resolve_under

#: the most members an archive may list, and the most bytes one unpacked member may hold, checked
#: before anything is unpacked (the largest member capeval reads, COCO's captions_val2014.json, is 33 MB)
MAX_ARCHIVE_MEMBERS = 100_000
MAX_MEMBER_BYTES = 1 << 30
#: the most files a hub listing may name for one benchmark (the releases have a few dozen shards)
MAX_LISTED_FILES = 10_000


class Unavailable(ResourceError):
    """No URL of a data file answered with it (network errors, 404, a body cut short): for an
    optional file a note, not an error."""


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
    return (f"{base}/{quote(bench)}/{quote(f.name)}",) if base else f.urls


_UNITS = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30}


def max_bytes(f: DataFile) -> int | None:
    """The most bytes accepted for ``f`` when its sha256 is known: its size in the table
    (``"1.7 MB"``, read as MiB) plus a quarter and 1 MiB, or None when the table states none
    (then the server's ``Content-Length`` or :data:`capeval.models.download.MAX_UNKNOWN_BYTES`
    bounds it)."""
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?[bB])\b", f.size)
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()] * 1.25) + (1 << 20)


def _fetch_any(urls: tuple[str, ...], target: Path, expected: str | None, progress: bool | None, bench: str = "",
               f: DataFile | None = None) -> str:
    """:func:`capeval.models.download.fetch` from the first URL that answers, within one deadline
    for the file; :class:`Unavailable` when none does."""
    import time

    from capeval.models.download import IncompleteDownload, download_deadline, fetch

    deadline_at = time.monotonic() + download_deadline()
    errors = []
    for url in urls:
        try:
            # the table's size bounds a file whose sha256 is known (its bytes are fixed); a file without one
            # (an archive a mirror may have packed anew, a hub shard) is bounded by what the server announces
            return fetch(url, target, expected, timeout=60.0, progress=progress, what="data file",
                         max_bytes=max_bytes(f) if f is not None and expected else None, deadline_at=deadline_at)
        except ResourceError:
            raise
        except IncompleteDownload as exc:
            errors.append(f"{url}: {exc}")
        except Exception as exc:  # network errors: try the next copy
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
    name = f"{bench} data file {f.name}" if f is not None else str(target)
    raise Unavailable(f"could not download the {name}: " + "; ".join(errors))


def _member_kind(info: Any) -> str:
    """``"file"``, ``"dir"`` or what else an archive member is (a link, a device: refused)."""
    import stat
    import tarfile

    if isinstance(info, tarfile.TarInfo):
        return "file" if info.isfile() else "dir" if info.isdir() else (
            "symbolic link" if info.issym() else "hard link" if info.islnk() else "special file")
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0: an archiver that records no Unix type (a file)
    if kind == stat.S_IFLNK:
        return "symbolic link"
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "special file"
    return "dir" if info.is_dir() else "file"


def _members(bench: str, f: DataFile, infos: Any, root: Path) -> dict[str, Any]:
    """The archive's regular files by base name, after every member is checked: at most
    :data:`MAX_ARCHIVE_MEMBERS` of them, each name relative and inside ``root`` (no ``..``, no
    absolute path, no link on the way), no link or device among those unpacked, each under
    :data:`MAX_MEMBER_BYTES`, and no two wanted members of one name."""
    import tarfile

    wanted = {m for m, _ in f.members}
    found: dict[str, Any] = {}
    for count, info in enumerate(infos, 1):
        if count > MAX_ARCHIVE_MEMBERS:
            raise ResourceError(f"{bench}: {f.name} has more than {MAX_ARCHIVE_MEMBERS:,} members; nothing was written")
        name = info.name if isinstance(info, tarfile.TarInfo) else info.filename
        resolve_under(root, name, what=f"{bench}: {f.name} member", links=False)
        base = Path(name.replace("\\", "/").rstrip("/")).name
        if base not in wanted or "__MACOSX" in name:
            continue
        kind = _member_kind(info)
        if kind == "dir":
            continue
        if kind != "file":
            raise ResourceError(f"{bench}: {f.name} member {name!r:.80} is a {kind}, not a file; nothing was written")
        size = info.size if isinstance(info, tarfile.TarInfo) else info.file_size
        if size > MAX_MEMBER_BYTES:
            raise ResourceError(f"{bench}: {f.name} member {name!r:.80} unpacks to {size:,} bytes, more than "
                                f"{MAX_MEMBER_BYTES:,}; nothing was written")
        if base in found:
            raise ResourceError(f"{bench}: {f.name} has two members named {base!r}; nothing was written")
        found[base] = info
    return found


def _unpack(bench: str, f: DataFile, archive: Path, root: Path, force: bool) -> dict[str, str]:
    """Members of ``archive`` into place, each checked before its atomic rename."""
    import tarfile
    import zipfile
    import zlib

    from capeval.models.digests import record_digest

    wanted = dict(f.members)
    out: dict[str, str] = {}
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                members = _members(bench, f, z.infolist(), root)
                opener = {n: (lambda i=i: z.open(i)) for n, i in members.items()}
                sizes = {n: i.file_size for n, i in members.items()}
                out = _place_members(bench, f, wanted, opener, sizes, root, force)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as t:
                members = _members(bench, f, t, root)  # iterated: a count cap before a full member list
                opener = {n: (lambda m=m: t.extractfile(m)) for n, m in members.items()}
                sizes = {n: m.size for n, m in members.items()}
                out = _place_members(bench, f, wanted, opener, sizes, root, force)
        else:
            raise ResourceError(f"{bench}: {f.name} is neither a zip nor a tar archive; nothing was written")
    except CapevalError:
        raise
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, zlib.error, NotImplementedError, RuntimeError,
            ValueError) as exc:  # what a corrupt or encrypted archive raises while it is read
        raise ResourceError(f"{bench}: {f.name} is not a readable archive ({type(exc).__name__}: "
                            f"{str(exc)[:120]}); nothing more was written") from None
    for rel, digest in out.items():
        if _expected(bench, f, rel) is None:
            record_digest(root / rel, digest)
    return out


def _place_members(bench: str, f: DataFile, wanted: dict[str, str], opener: dict[str, Any], sizes: dict[str, int],
                   root: Path, force: bool) -> dict[str, str]:
    import hashlib

    from capeval.models.download import open_new, refuse_link

    out: dict[str, str] = {}
    for member, rel in wanted.items():
        if member not in opener:
            raise ResourceError(f"{bench}: {f.name} has no member {member}; nothing was written for it")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.parent / f".{target.name}.part"
        refuse_link(target, f"{bench} data file")
        refuse_link(part, f"{bench} data file's partial copy")
        digest = hashlib.sha256()
        limit, n = sizes[member], 0
        try:
            with opener[member]() as src, os.fdopen(open_new(part), "wb") as dst:
                # the size stated in the archive, enforced while unpacking: a member never writes more
                for block in iter(lambda: src.read(1 << 20), b""):
                    n += len(block)
                    if n > limit:
                        raise ResourceError(f"{bench}: {member} of {f.name} unpacks to more than the {limit:,} bytes "
                                            "its archive states; nothing was written")
                    digest.update(block)
                    dst.write(block)
        except BaseException:
            if part.is_file() and not part.is_symlink():
                part.unlink(missing_ok=True)
            raise
        got, want = digest.hexdigest(), _expected(bench, f, rel)
        if want is not None and got != want:
            part.unlink(missing_ok=True)
            raise ResourceError(f"{bench}: {member} of {f.name} has sha256 {got[:12]}..., the release's is "
                                f"{want[:12]}...; nothing was written")
        os.replace(part, target)
        out[rel] = got
    return out


def _hub_files(src: DataSource) -> tuple[DataFile, ...]:
    """Files of a hub dataset at its pinned revision whose path starts with one of the patterns
    (the names as listed: :func:`_check_listing` checks them before anything is created)."""
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
    chosen = [n for n in names if isinstance(n, str) and n.startswith(prefixes)]
    if len(chosen) > MAX_LISTED_FILES:
        raise ResourceError(f"{src.benchmark}: the hub listing of {repo} names {len(chosen):,} data files, more than "
                            f"{MAX_LISTED_FILES:,}; nothing was written")
    return tuple(DataFile(Path(n).name, (f"https://huggingface.co/datasets/{repo}/resolve/{revision}/{quote(n)}",),
                          place=f"{src.benchmark}/{n}") for n in dict.fromkeys(chosen))


def _check_listing(src: DataSource, listed: tuple[DataFile, ...], root: Path) -> None:
    """Every name of a hub listing is a name from outside: resolved under ``<root>/<benchmark>``
    (:func:`capeval.paths.resolve_under`: no ``..``, no absolute path, no control character
    such as NUL, no link out of it), all of them before anything is created; a bad one is a
    one-line error."""
    repo = src.hub[0] if src.hub else src.benchmark
    for f in listed:
        resolve_under(root / src.benchmark, f.place.split("/", 1)[1] if "/" in f.place else f.place,
                      what=f"{src.benchmark}: file name in the hub listing of {repo}", links=False)


def download_benchmark(name: str, root: str | os.PathLike[str] | None = None, force: bool = False,
                       progress: bool | None = None) -> dict[str, Any]:
    """Fetch, check and lay out benchmark ``name``'s files under ``root`` (default :func:`data_home`).

    Returns ``{"benchmark", "root", "files": {relative path: sha256}, "by_hand": [what to get
    and where to put it], "images": note, "notes": [optional files not fetched, and why]}``;
    ``by_hand`` is empty when the benchmark is ready. Raises
    :class:`~capeval.errors.ResourceError` when a needed file cannot be fetched or is wrong
    (nothing wrong is left in place). One download writes into ``root`` at a time: a second
    waits for the first (``<root>/.downloads/lock``), then finds its files in place.
    """
    from capeval.models.download import download_lock

    src = source(name)
    bench = src.benchmark
    base = Path(root).expanduser() if root is not None else data_home()
    listed = _hub_files(src) if src.hub else src.files
    if src.hub:
        _check_listing(src, listed, base)  # before anything is created
    base.mkdir(parents=True, exist_ok=True)
    with download_lock(base / ".downloads" / "lock", f"download {bench}"):
        out = _download_locked(src, listed, base, force, progress)
    return out


def _download_locked(src: DataSource, listed: tuple[DataFile, ...], base: Path, force: bool,
                     progress: bool | None) -> dict[str, Any]:
    bench = src.benchmark
    files: dict[str, str] = {}
    by_hand: list[str] = []
    notes: list[str] = []
    for f in listed:
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
                _fetch_any(urls, archive, f.sha256, progress, bench, f)
                files.update(_unpack(bench, f, archive, base, force))
                archive.unlink(missing_ok=True)
            else:
                target = base / f.place
                files[f.place] = _fetch_any(urls, target, _expected(bench, f, f.place), progress, bench, f)
                if _expected(bench, f, f.place) is None:
                    from capeval.models.digests import record_digest

                    record_digest(target, files[f.place])
        except ResourceError as exc:  # Unavailable (no copy answered) or a wrong file: nothing was placed
            if f.optional:  # not needed by the default protocol: a note, not an abort
                notes.append(f"optional file {f.name} not fetched ({exc})")
                continue
            if f.manual and mirror():  # not in the mirror: the way by hand still works
                by_hand.append(f"{f.manual.format(root=base)} (the mirror: {exc})")
                continue
            raise
    shutil.rmtree(base / ".downloads" / bench, ignore_errors=True)
    images = check_images(src, base) if src.images else ""
    if src.unpack and not by_hand:
        import importlib

        module, _, func = src.unpack.partition(":")
        images = getattr(importlib.import_module(module), func)(base)
    return {"benchmark": bench, "root": str(base), "files": files, "by_hand": by_hand, "images": images,
            "notes": notes}


def check_images(src: DataSource, root: Path) -> str:
    """Where the Flickr8k test images must go, or how many of them are there and verified (MD5)."""
    from capeval.bench.media import checksum_table
    from capeval.hashing import file_digest

    folder = root / "flickr8k" / "Flicker8k_Dataset"
    if not folder.is_dir():
        return src.images.format(root=root, bench=src.benchmark)
    listed = root / "flickr8k" / "Flickr_8k.testImages.txt"
    names = [n.strip() for n in listed.read_text(encoding="utf-8").splitlines() if n.strip()]
    for n in names:  # names from a file: each inside the image folder
        resolve_under(folder, n, what=f"image name in {listed.name}")
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
