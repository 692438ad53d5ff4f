"""Fuzzing the audio decoder: every input decodes or raises InvalidInput (never another exception, a crash or a
hang), and the output stays bounded by ``max_duration_s`` whatever the header claims."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import SEED, budget
from tests.reliability.fuzz_media import (
    flac_with_streaminfo,
    mp3_header_mutation,
    ogg_page_mutation,
    seeds,
    wav_header,
)
from tests.reliability.report import Tally, record
from voxserve.audio import decode_audio, iter_decode, probe
from voxserve.errors import InvalidInput

MAX_S = 30.0
TIMEOUT_S = 30.0
_pool = ThreadPoolExecutor(1, thread_name_prefix="fuzz-decode")


def fuzz_settings(n: int) -> Callable[..., object]:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


class _Unseekable(io.RawIOBase):
    """A pipe-like reader (the decoder's non-seekable path)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._data.read(size)


def _decode(data: bytes, mode: int) -> str:
    if mode == 0:
        audio = decode_audio(data, max_duration_s=MAX_S)
    elif mode == 1:
        audio = np.concatenate(list(iter_decode(io.BytesIO(data), block_samples=4000, max_duration_s=MAX_S)))
    elif mode == 2:
        audio = decode_audio(_Unseekable(data), max_duration_s=MAX_S)  # type: ignore[arg-type]
    else:
        info = probe(io.BytesIO(data))
        assert info.sample_rate >= 0 and info.channels >= 0
        return "ok"
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert len(audio) <= (MAX_S + 0.2) * 16000, len(audio)  # the limit holds whatever the header says
    assert np.all(np.isfinite(audio)), "non-finite samples"
    return "ok"


def outcome(data: bytes, mode: int = 0) -> str:
    """``ok`` or ``invalid:<code>``; anything else fails the test (other exceptions, or no answer in time)."""

    def run() -> str:
        try:
            return _decode(data, mode)
        except InvalidInput as exc:
            return f"invalid:{exc.code}"

    future = _pool.submit(run)
    try:
        return future.result(timeout=TIMEOUT_S)
    except FutureTimeout:
        pytest.fail(f"decoding hung (> {TIMEOUT_S} s) on {len(data)} bytes: {data[:64]!r}")


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    t = Tally("audio decoding (decode_audio, iter_decode, probe)")
    yield t
    t.write()


SEED_NAMES = sorted(seeds())


@fuzz_settings(budget(400))
@given(name=st.sampled_from(SEED_NAMES), mode=st.integers(0, 3),
       edits=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=8))
def test_header_byte_flips(tally: Tally, name: str, mode: int, edits: list[tuple[int, int]]) -> None:
    data = bytearray(seeds()[name])
    for pos, value in edits:
        data[pos % len(data)] = value
    tally.add(outcome(bytes(data), mode))


@fuzz_settings(budget(400))
@given(name=st.sampled_from(SEED_NAMES), mode=st.integers(0, 3), cut=st.floats(0.0, 1.0),
       garbage=st.binary(max_size=64), where=st.floats(0.0, 1.0), drop=st.integers(0, 512))
def test_truncations_insertions_and_holes(tally: Tally, name: str, mode: int, cut: float, garbage: bytes,
                                          where: float, drop: int) -> None:
    data = seeds()[name]
    at = int(where * len(data))
    damaged = data[:at] + garbage + data[at + drop :]
    tally.add(outcome(damaged[: max(1, int(cut * len(damaged)))] if cut < 0.5 else damaged, mode))


ABSURD_INT = st.one_of(st.sampled_from([0, 1, 2, 3, 7, 8, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1]),
                       st.integers(0, 2**32 - 1))


@fuzz_settings(budget(400))
@given(rate=ABSURD_INT, channels=ABSURD_INT, bits=st.sampled_from([0, 1, 4, 8, 12, 16, 24, 32, 64, 65535]),
       tag=st.sampled_from([0, 1, 2, 3, 6, 7, 0x11, 0x55, 0xFFFE, 0xFFFF]), data_len=ABSURD_INT,
       body=st.binary(min_size=0, max_size=4096), mode=st.integers(0, 3))
def test_wav_with_absurd_rates_channels_and_sizes(tally: Tally, rate: int, channels: int, bits: int, tag: int,
                                                  data_len: int, body: bytes, mode: int) -> None:
    tally.add(outcome(wav_header(rate, channels, bits, tag, data_len) + body, mode))


@fuzz_settings(budget(200))
@given(rate=st.integers(0, 2**20 - 1), channels=st.integers(1, 8), bits=st.integers(1, 32),
       total=st.integers(0, 2**36 - 1), mode=st.integers(0, 3))
def test_flac_streaminfo(tally: Tally, rate: int, channels: int, bits: int, total: int, mode: int) -> None:
    tally.add(outcome(flac_with_streaminfo(rate, channels, bits, total), mode))


@fuzz_settings(budget(200))
@given(value=st.integers(0, 0xFFFF), mode=st.integers(0, 3))
def test_mp3_frame_headers(tally: Tally, value: int, mode: int) -> None:
    tally.add(outcome(mp3_header_mutation(seeds()["mp3"], value), mode))


@fuzz_settings(budget(200))
@given(name=st.sampled_from([n for n in SEED_NAMES if seeds()[n][:4] == b"OggS"]),
       field=st.sampled_from(["granule", "serial", "sequence", "segments"]), value=st.integers(0, 2**64 - 1),
       mode=st.integers(0, 3))
def test_ogg_page_fields(tally: Tally, name: str, field: str, value: int, mode: int) -> None:
    tally.add(outcome(ogg_page_mutation(seeds()[name], field, value), mode))


@fuzz_settings(budget(200))
@given(magic=st.sampled_from([b"RIFF\x00\x00\x00\x00WAVE", b"fLaC", b"OggS", b"ID3\x04\x00", b"\xff\xfb",
                              b"\x1a\x45\xdf\xa3", b"\x00\x00\x00\x18ftypM4A ", b"FORM\x00\x00\x00\x00AIFF",
                              b"#EXTM3U\n", b"ffconcat version 1.0\n", b""]),
       body=st.binary(max_size=2048), mode=st.integers(0, 3))
def test_random_bodies_behind_real_magic(tally: Tally, magic: bytes, body: bytes, mode: int) -> None:
    data = magic + body
    if not data:
        data = b"\x00"
    tally.add(outcome(data, mode))


def test_every_seed_decodes(tally: Tally) -> None:
    """The seeds themselves are valid (otherwise the fuzzing above would only test error paths)."""
    for name, data in seeds().items():
        assert outcome(data) == "ok", name
        tally.add("ok")


def test_atheris(tmp_path: Path) -> None:
    """A bounded coverage-guided run (``atheris_decode.py``), when atheris is installed."""
    pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")
    runs = budget(5000, 100_000)
    script = Path(__file__).with_name("atheris_decode.py")
    proc = subprocess.run([sys.executable, str(script), f"-runs={runs}", "-timeout=30", "-rss_limit_mb=3072",
                           f"-seed={SEED}", "-max_len=8192", str(tmp_path / "corpus")],
                          capture_output=True, text=True, timeout=1800)
    tail = proc.stderr[-3000:]
    assert proc.returncode == 0, tail
    done = [line for line in proc.stderr.splitlines() if line.startswith("Done ")]
    record("atheris_decode", runs=runs, summary=done[-1] if done else tail[-200:])
