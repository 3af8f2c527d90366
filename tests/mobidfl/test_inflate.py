"""The one capped streaming inflater: every codec gives what its own module gives, in one pass,
and refuses a stream cut short, bytes of another kind and a bomb (before inflating it)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma

import numpy as np
import pytest

from mobidfl.inflate import (
    InflateCutShort,
    InflateDamaged,
    InflateTooLarge,
    codec_of,
    inflate,
    inflated_reader,
    read_inflated,
)

PACK = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
UNPACK = {"gzip": gzip.decompress, "bz2": bz2.decompress, "xz": lzma.decompress}


def _data(size: int) -> bytes:
    rng = np.random.default_rng(size)
    half = rng.integers(0, 256, size // 2, dtype=np.uint8).tobytes()  # incompressible
    return half + b"0 1 2 3\n" * ((size - len(half)) // 8)


@pytest.mark.parametrize("codec", sorted(PACK))
@pytest.mark.parametrize("members", [1, 3])
def test_every_codec_inflates_what_its_own_module_does(codec, members):
    # Prepare
    data = _data(1_200_000)  # more than one 1 MiB chunk out
    raw = b"".join(PACK[codec](data[i::members]) for i in range(members))
    # Execute
    whole = inflate(raw, codec=codec)
    streamed = inflated_reader(io.BytesIO(raw), codec=codec)
    pieces = iter(lambda: streamed.read(7919), b"")
    # Assert
    assert whole == UNPACK[codec](raw) == b"".join(pieces)


@pytest.mark.parametrize("codec", sorted(PACK))
@pytest.mark.parametrize("bad, error", [
    ("cut", InflateCutShort), ("plain", InflateDamaged), ("trailing junk", InflateDamaged),
])
def test_a_stream_cut_short_or_not_of_the_codec_is_refused(codec, bad, error):
    # Prepare
    raw = PACK[codec](_data(100_000))
    mutated = {"cut": raw[: len(raw) // 2], "plain": b"StartLat,StartLong\n1,2\n",
               "trailing junk": raw + b"junk after the stream"}[bad]
    # Execute / Assert: both ways of reading refuse it
    with pytest.raises(error):
        inflate(mutated, codec=codec)
    with pytest.raises(error):
        inflated_reader(io.BytesIO(mutated), codec=codec).read()


@pytest.mark.parametrize("codec", sorted(PACK))
def test_a_bomb_is_refused_before_it_is_inflated_past_the_cap(codec, tmp_path, monkeypatch):
    # Prepare: 8 MiB of zeros, cap 1 MiB
    raw = PACK[codec](bytes(8 << 20))
    path = tmp_path / f"bomb.{ {'gzip': 'gz', 'bz2': 'bz2', 'xz': 'xz'}[codec] }"
    path.write_bytes(raw)
    # Execute / Assert
    with pytest.raises(InflateTooLarge, match="more than 1 MiB"):
        read_inflated(path, cap=1 << 20)
    reader = inflated_reader(io.BytesIO(raw), codec=codec, cap=1 << 20)
    got = bytearray()
    with pytest.raises(InflateTooLarge):
        while chunk := reader.read(1 << 16):
            got += chunk
    assert len(got) <= 1 << 20
    assert codec_of(path) == codec and codec_of("map.osm") is None


def test_zero_padding_after_a_gzip_member_is_allowed_as_gzip_allows_it():
    raw = gzip.compress(b"abc") + bytes(3000) + gzip.compress(b"def") + bytes(10)
    assert inflate(raw) == gzip.decompress(raw) == b"abcdef"
