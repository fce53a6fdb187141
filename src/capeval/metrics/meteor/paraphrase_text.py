"""Reading ``paraphrase-en.gz`` as METEOR 1.5's ``ParaphraseTransducer`` sees it.

The table is lines in groups of three (probability, phrase, paraphrase). Java reads it
with a replacing UTF-8 decoder and ``BufferedReader.readLine`` (lines end at LF, CR or
CRLF) and splits phrases with ``StringTokenizer`` (delimiters space, tab, LF, CR, FF).
:func:`triple_blocks` streams the file and hands out, block by block, the byte ranges
of the phrase and paraphrase lines in that canonical form (tokens joined by one
space). Decompression runs in a thread (zlib releases the GIL), overlapping the numpy
work of :mod:`.paraphrase_build`.
"""

from __future__ import annotations

import queue
import re
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from capeval.errors import ResourceError

_JAVA_DELIMS_B = re.compile(rb"[ \t\n\r\f]+")  # StringTokenizer defaults
# little-endian byte pairs that make a line non-canonical: "  ", " \n", "\n "
_MESSY_PAIRS = np.array([0x2020, 0x0A20, 0x200A], dtype=np.uint16)


def canonical(line: bytes) -> bytes:
    """Tokens as Java's StringTokenizer splits them, joined by one space."""
    return b" ".join(t for t in _JAVA_DELIMS_B.split(line) if t)


def valid_utf8(a: np.ndarray, off: np.ndarray | None = None) -> bool:
    """Whether the bytes ``a`` (uint8) decode as UTF-8, checking only the non-ASCII ones;
    with ``off``, whether each string ``a[off[i]:off[i + 1]]`` does.

    A multi-byte UTF-8 sequence is made of bytes >= 0x80 only, so a text is valid exactly
    when every maximal run of such bytes is; the runs, joined by an ASCII byte, are
    usually a few kilobytes.
    """
    high = np.flatnonzero(a >= 0x80)
    if high.size == 0:
        return True
    cut = np.diff(high) != 1
    if off is not None:  # a run also ends where a string does
        owner = np.searchsorted(off, high, side="right")
        cut |= owner[1:] != owner[:-1]
    gaps = np.flatnonzero(cut) + 1
    runs = np.insert(a[high], gaps, 10).tobytes()
    try:
        runs.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def java_text(part: bytes) -> bytes:
    """What Java's readers see of ``part`` (whole lines): UTF-8, line breaks as ``\\n``.

    Java decodes with a replacing decoder; when ``part`` is not valid UTF-8, re-encode what
    Java would see. ``part`` always ends at a line break (ASCII), so decoding block by block
    gives the same text as decoding the whole file. BufferedReader.readLine also ends lines
    at CR and CRLF.
    """
    if not part.isascii() and not valid_utf8(np.frombuffer(part, dtype=np.uint8)):
        part = part.decode("utf-8", errors="replace").encode("utf-8")
    if b"\r" in part:
        part = part.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return part


def messy_pairs(a: np.ndarray) -> bool:
    """Whether the bytes ``a`` hold "  ", " \\n" or "\\n " (looked for as 16-bit words)."""
    for shift in (0, 1):  # pairs starting at even, then odd offsets
        n = (len(a) - shift) // 2
        if n > 0:
            pairs = a[shift : shift + 2 * n].view("<u2")
            if any(bool((pairs == p).any()) for p in _MESSY_PAIRS):
                return True
    return False


def is_messy(part: bytes) -> bool:
    """Whether some line of ``part`` (``\\n``-separated) is not canonical (one space between
    tokens, none at the edges, no tab or form feed)."""
    if b"\t" in part or b"\f" in part or part.startswith(b" ") or part.endswith(b" "):
        return True
    return messy_pairs(np.frombuffer(part, dtype=np.uint8))


def _canonical_text(part: bytes) -> bytes:
    """:func:`java_text` of ``part``, every line made canonical."""
    part = java_text(part)
    return b"\n".join(canonical(x) for x in part.split(b"\n")) if is_messy(part) else part


def _joined(pieces: list[bytes | memoryview]) -> np.ndarray:
    """The pieces one after the other, padded (:func:`.string_table.padded`): one copy."""
    n = sum(len(p) for p in pieces)
    out = np.empty(n + 8, dtype=np.uint8)
    at = 0
    for p in pieces:
        out[at : at + len(p)] = np.frombuffer(p, dtype=np.uint8)
        at += len(p)
    out[n:] = 0
    return out


class TripleBlock(NamedTuple):
    """Phrase and paraphrase lines of some whole triples: ``buf[starts[i]:][:lengths[i]]``.

    The first ``len(starts) // 2`` ranges are the phrases, the rest their paraphrases in the
    same order; ``buf`` is padded for :func:`.string_table.range_keys`.
    """

    buf: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray


try:  # ISA-L's inflate (the optional ``isal`` package, in the meteor extra): half zlib's CPU time
    from isal import isal_zlib as _inflate_lib

    _INFLATE_ERRORS: tuple[type[BaseException], ...] = (zlib.error, _inflate_lib.error)
except ImportError:  # pragma: no cover - zlib gives the same bytes
    _inflate_lib = zlib  # type: ignore[assignment]
    _INFLATE_ERRORS = (zlib.error,)


def _decompressed(gz_path: Path, block: int) -> Iterator[bytes]:
    """The decompressed bytes of a (possibly multi-member) gzip file in pieces of ``block``;
    a damaged stream (bad data or CRC-32) is a one-line :class:`~capeval.errors.ResourceError`."""
    try:
        yield from _inflated(gz_path, block)
    except _INFLATE_ERRORS as exc:
        raise ResourceError(f"{gz_path} is damaged ({exc}); reinstall it: pip install --force-reinstall "
                            "pycocoevalcap==1.2") from None


def _inflated(gz_path: Path, block: int) -> Iterator[bytes]:
    inflate = _inflate_lib.decompressobj(wbits=31)
    out: list[bytes] = []
    size = 0
    with open(gz_path, "rb") as f:
        while chunk := f.read(1 << 20):
            while chunk:
                if inflate.eof:  # a further gzip member follows
                    inflate = _inflate_lib.decompressobj(wbits=31)
                piece = inflate.decompress(chunk)
                chunk = inflate.unused_data
                out.append(piece)
                size += len(piece)
            if size >= block:
                data = b"".join(out)
                out, size = [], 0
                if len(data) < 2 * block:
                    yield data
                else:  # pieces of ``block`` (small blocks: tests vary the cuts)
                    cut = len(data) - len(data) % block
                    for i in range(0, cut, block):
                        yield data[i : i + block]
                    out, size = [data[cut:]], len(data) - cut
                del data
    if not inflate.eof:
        raise ResourceError(f"{gz_path} ended before the end of its gzip stream; reinstall it: pip install "
                            "--force-reinstall pycocoevalcap==1.2")
    if size:
        yield b"".join(out)


def _raw_blocks(gz_path: Path, block: int) -> Iterator[bytes]:
    """The decompressed file in blocks of about ``block`` bytes, read ahead by a thread; ends with b""."""
    q: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def reader() -> None:
        try:
            for data in _decompressed(gz_path, block):
                if stop.is_set():
                    return
                q.put(data)
            q.put(b"")
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            q.put(exc)

    t = threading.Thread(target=reader, name="capeval-meteor-gunzip", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if not item:
                return
    finally:
        stop.set()
        while t.is_alive():  # unblock a reader waiting on a full queue
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        t.join()


def triple_blocks(gz_path: Path, block: int, strict: bool = True) -> Iterator[TripleBlock]:
    """The phrase and paraphrase lines of the table, canonical, a block of whole triples at a time.

    Lines are split like ``text.split("\\n")`` on the whole file after :func:`java_text`: the
    piece after the last line break counts as a line, and a trailing incomplete triple is
    dropped (ParaphraseTransducer reads three lines per entry). Only one block of text
    exists at a time. Blocks without CR, tab or form feed are copied once, as they are,
    when ``strict`` is False, or when their text is valid UTF-8 in canonical lines (the
    real table) otherwise; others go through :func:`_canonical_text`. (Without
    ``strict`` the caller checks the strings it keeps: see
    :func:`.paraphrase_build.build_paraphrase`.)
    """
    carry = b""  # raw bytes of an unfinished line
    pending = b""  # canonical text of the lines of an unfinished triple, each ending in "\n"
    for data in _raw_blocks(gz_path, block):
        eof = not data
        plain = not eof and not any(c in x for x in (data, carry) for c in (b"\r", b"\t", b"\f"))
        if plain:
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry += data
                continue
            arr = _joined([pending, carry, memoryview(data)[:cut]])
            carry = data[cut:]
            n = len(arr) - 8
            body = arr[len(pending) : n]
            if strict and ((len(body) and body[0] == 32) or not valid_utf8(body) or messy_pairs(arr[:n])):
                plain = False
                part = body.tobytes()
        else:
            buf = carry + data
            # cut after the last line break whose end is known (a CR could be a CRLF's first half)
            cut = len(buf) if eof else max(buf.rfind(b"\n"), buf.rfind(b"\r", 0, len(buf) - 1)) + 1
            part, carry = buf[:cut], buf[cut:]
            del buf
        del data
        if not plain:
            arr = _joined([pending, _canonical_text(part)])
            del part
            n = len(arr) - 8
        ends = np.flatnonzero(arr[:n] == 10)
        if eof:  # the piece after the last line break is a line too
            ends = np.append(ends, n)
        m = len(ends) // 3 * 3
        if not eof:
            pending = arr[int(ends[m - 1]) + 1 if m else 0 : n].tobytes()
        if m:
            starts = np.empty(m, dtype=np.int64)
            starts[0] = 0
            starts[1:] = ends[: m - 1] + 1
            s = np.concatenate((starts[1::3], starts[2::3]))
            yield TripleBlock(arr, s, np.concatenate((ends[1:m:3], ends[2:m:3])) - s)
        del arr, ends
        if eof:
            return
