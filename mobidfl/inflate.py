"""The one capped, streaming inflater for every compressed input (maps, traces).

A few kilobytes of gzip or bzip2 can claim gigabytes: inflated whole (``bz2.decompress``,
``gzip.open(...).read()``) such a file fills the memory before anything can refuse it.
Every compressed input MobiDFL reads goes through here instead: the stream is inflated in
one pass, in chunks, and refused as soon as its output would pass ``cap`` bytes, so a bomb
costs at most ``cap`` of memory and the read of its head. A stream cut short, trailing
bytes that are not another member, or bytes that are not the codec at all are refused too
(never a silently shorter input).

Ground floor: imports nothing of ours, so ``maps/`` and ``model/`` both use it.
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

__all__ = [
    "CODECS",
    "MAX_INFLATED_BYTES",
    "InflateCutShort",
    "InflateDamaged",
    "InflateError",
    "InflateTooLarge",
    "codec_of",
    "inflate",
    "inflated_reader",
    "read_inflated",
    "size_text",
]

MAX_INFLATED_BYTES = 1 << 30
"""Largest size a compressed input may inflate to (1 GiB) unless a caller passes ``cap``."""

_CHUNK = 1 << 20


class InflateError(ValueError):
    """A compressed input refused; the message says why in one line."""


class InflateTooLarge(InflateError):
    """The stream inflates to more than the cap: refused before it is inflated further."""


class InflateCutShort(InflateError, EOFError):
    """The compressed stream ends before its end-of-stream marker (a file cut short)."""


class InflateDamaged(InflateError):
    """Bytes that are not the codec's (not compressed at all, damaged, trailing junk)."""


class _Engine(Protocol):
    eof: bool
    needs_input: bool
    unused_data: bytes

    def decompress(self, data: bytes, max_length: int) -> bytes: ...


class _GzipEngine:
    """``zlib.decompressobj`` for one gzip member, with the bz2/lzma decompressor interface."""

    def __init__(self) -> None:
        self._engine = zlib.decompressobj(wbits=31)
        self._tail = b""
        self._full = False

    @property
    def eof(self) -> bool:
        return self._engine.eof

    @property
    def needs_input(self) -> bool:
        return not self._tail and not self._full

    @property
    def unused_data(self) -> bytes:
        return self._engine.unused_data

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._engine.decompress(self._tail + data, max_length)
        self._tail = self._engine.unconsumed_tail
        self._full = len(out) == max_length  # zlib may hold more output: ask again
        return out


CODECS: dict[str, Callable[[], _Engine]] = {
    "gzip": _GzipEngine,
    "bz2": lambda: bz2.BZ2Decompressor(),  # noqa: PLW0108 - the class is looked up per call
    "xz": lambda: lzma.LZMADecompressor(),  # noqa: PLW0108 - the class is looked up per call
}
"""Codec name -> a fresh decompressor of one member/stream."""

_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".xz": "xz"}


def codec_of(path: str | Path) -> str | None:
    """The codec a file name declares by its last suffix (``.gz``, ``.bz2``, ``.xz``), or None."""
    return _SUFFIXES.get(Path(path).suffix.lower())


def _inflated(read: Callable[[int], bytes], codec: str, cap: int) -> Iterator[bytes]:
    """The inflated bytes of every member of the stream ``read`` gives, in chunks.

    It stops with :class:`InflateTooLarge` before the total passes ``cap``.
    """
    make = CODECS[codec]
    total = 0
    data = read(_CHUNK)
    while data:  # one member (gzip) or stream (bz2, xz) per turn
        engine = make()
        while not engine.eof:
            if engine.needs_input:
                if not data:
                    data = read(_CHUNK)
                    if not data:
                        raise InflateCutShort(f"cut short: the {codec} stream ends before "
                                              "its end-of-stream marker")
                chunk, data = _decompress(engine, data, min(_CHUNK, cap - total + 1), codec), b""
            else:
                chunk = _decompress(engine, b"", min(_CHUNK, cap - total + 1), codec)
            total += len(chunk)
            if total > cap:
                raise InflateTooLarge(f"it inflates to more than {size_text(cap)}")
            if chunk:
                yield chunk
        data = engine.unused_data + data
        if codec == "gzip":  # zero padding after a member is allowed (as gzip's own reader)
            while data and not data.strip(b"\0"):
                data = read(_CHUNK)
            data = data.lstrip(b"\0")


def size_text(n: int) -> str:
    """``n`` bytes as people read it: MiB from 1 MiB up, bytes below."""
    return f"{n / 2**20:g} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def _decompress(engine: _Engine, data: bytes, limit: int, codec: str) -> bytes:
    try:
        return engine.decompress(data, limit)
    except (zlib.error, OSError, lzma.LZMAError, EOFError) as exc:
        text = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise InflateDamaged(f"bad {codec} data: {text}") from None


def inflate(raw: bytes, *, cap: int = MAX_INFLATED_BYTES, codec: str = "gzip") -> bytes:
    """``raw`` inflated in one streaming pass, stopped as soon as it would pass ``cap`` bytes.

    Every member is inflated, as ``gzip.decompress`` / ``bz2.decompress`` do.

    Raises
    ------
    InflateTooLarge
        more than ``cap`` bytes.
    InflateCutShort
        the stream is cut short (also an :class:`EOFError`).
    InflateDamaged
        bytes that are not ``codec`` data.
    """
    return b"".join(_inflated(io.BytesIO(raw).read, codec, cap))


class _Reader(io.RawIOBase):
    """A read-only binary stream over the inflated bytes (for streaming parsers)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._buffer = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buffer = memoryview(chunk)
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def inflated_reader(fh: BinaryIO, *, codec: str, cap: int = MAX_INFLATED_BYTES) -> BinaryIO:
    """A buffered binary stream of ``fh``'s inflated bytes, refused past ``cap`` bytes.

    It raises (as :func:`inflate`, from ``read``) as soon as more than ``cap`` bytes come out.
    """
    return io.BufferedReader(_Reader(_inflated(fh.read, codec, cap)), _CHUNK)


def read_inflated(path: str | Path, *, cap: int = MAX_INFLATED_BYTES,
                  codec: str | None = None) -> bytes:
    """The bytes of ``path``, inflated once (capped) when compressed.

    A compression is named by the file's suffix (or ``codec``); a plain file is read as it is.
    """
    codec = codec or codec_of(path)
    with Path(path).open("rb") as fh:
        if codec is None:
            return fh.read()
        return b"".join(_inflated(fh.read, codec, cap))
