"""What METEOR's compiled kernel may be imported from (:mod:`capeval.metrics.meteor.kernel_build`):
who owns a file or folder, whether a module file is a whole ELF object, and its sha256, read
without following links and within :data:`MAX_MODULE_BYTES` (issue 46 item 4)."""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import struct
from pathlib import Path

#: the largest module file that is hashed (a built one is under 1 MB)
MAX_MODULE_BYTES = 64 << 20


def _owner_ids() -> tuple[int, ...]:
    """Who may own what is imported: this process's user and root."""
    return (os.geteuid(), 0) if hasattr(os, "geteuid") else ()


@functools.lru_cache(maxsize=16)
def _private_group(gid: int) -> bool:
    """Is ``gid`` this user's user-private group (the primary group, named after the user,
    with no other member)? Its write bit lets nobody else in."""
    try:
        import grp
        import pwd

        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError, OSError):
        return False
    return gid == me.pw_gid and group.gr_name == me.pw_name and set(group.gr_mem) <= {me.pw_name}


def not_yours(st: os.stat_result) -> str | None:
    """Why another user could change a file or folder with this stat (``"owned by another
    user (uid N)"``, ``"writable by others (mode 0777)"``), or None."""
    owners = _owner_ids()
    if not owners:  # no POSIX owners (Windows): the sha256 record alone
        return None
    if st.st_uid not in owners:
        return f"owned by another user (uid {st.st_uid})"
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid)):
        who = "others" if st.st_mode & stat.S_IWOTH else "its group"
        return f"writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _open_no_follow(path: Path) -> int | None:
    """A read-only descriptor of ``path`` opened without following a link or blocking on a
    pipe, or None when it cannot be opened (the caller checks what it is with ``fstat``)."""
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None


def _file_digest(path: Path) -> str | None:
    """sha256 (hex) of the regular file ``path`` read through one descriptor (no link
    followed, no blocking on a pipe), or None when it cannot be read or is too large."""
    fd = _open_no_follow(path)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MODULE_BYTES:
            return None
        digest, left = hashlib.sha256(), MAX_MODULE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(1 << 20, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        return digest.hexdigest() if left > 0 else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _cut_elf(path: Path) -> str | None:
    """Why an ELF file (Linux's modules) is not whole (a header table or a loaded segment
    that ends past the end of the file: the loader would map it and die of SIGBUS reading
    it); None for a whole ELF file or another format (which the import then judges)."""
    import struct

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(64)
            if head[:4] != b"\x7fELF" or len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
                return None if head[:4] != b"\x7fELF" else "the ELF header is cut"
            end = "<" if head[5] == 1 else ">"
            if head[4] == 2:  # 64-bit
                if len(head) < 64:
                    return "the ELF header is cut"
                phoff, shoff = struct.unpack_from(end + "QQ", head, 32)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 54)
                entry = end + "IIQQQQ"  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz
            else:
                phoff, shoff = struct.unpack_from(end + "II", head, 28)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", head, 42)
                entry = end + "IIIIII"  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz
            if phoff + phentsize * phnum > size or (shnum and shoff + shentsize * shnum > size):
                return "a header table ends past the end of the file"
            if phentsize < struct.calcsize(entry) or phnum > 4096:
                return "a malformed ELF program header table"
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except (OSError, struct.error):
        return "an unreadable ELF header"
    for k in range(phnum):
        fields = struct.unpack_from(entry, table, k * phentsize)
        offset, filesz = (fields[2], fields[5]) if head[4] == 2 else (fields[1], fields[4])
        if fields[0] == 1 and offset + filesz > size:  # PT_LOAD
            return "a loaded segment ends past the end of the file"
    return None


def module_file_problem(path: Path) -> tuple[str, str | None] | None:
    """Before hashing a built module: ``("missing", None)`` when ``path`` does not exist,
    ``("bad", why)`` when it cannot be stat'ed, is not a regular file (a link counts) or another
    user could change it; None when it may be hashed and checked against its record."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "missing", None
    except OSError as exc:
        return "bad", f"it cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return "bad", "it is not a regular file"
    problem = not_yours(st)
    return ("bad", f"it is {problem}") if problem is not None else None


def recorded_digest(record: Path, module: Path, limit: int = 4096) -> str | None:
    """The sha256 (hex) the record file ``record`` (one line ``<hex>  <file name>``) holds for
    ``module``, read without following a link or blocking on a pipe, at most ``limit`` bytes;
    None when there is no readable record naming that file."""
    fd = _open_no_follow(record)
    if fd is None:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, limit).decode("ascii")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
    parts = text.split()
    if len(parts) != 2 or parts[1] != module.name or len(parts[0]) != 64:
        return None
    hexdigest = parts[0].lower()
    return hexdigest if all(c in "0123456789abcdef" for c in hexdigest) else None


# public names for other packages' modules built ahead of time (capeval.significance.cider_aot)
file_digest = _file_digest
cut_elf = _cut_elf
