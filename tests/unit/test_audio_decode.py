"""Tests of voxserve.audio.decode on files encoded at run time with PyAV."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pytest

from voxserve.audio import AudioInfo, decode_audio, iter_decode, probe
from voxserve.errors import InvalidInput

TONE_HZ = 440.0
AMP = 0.5
DUR_S = 2.0
OUT_RATE = 16_000
JFK = Path(__file__).resolve().parents[1] / "data" / "fw_jfk.flac"
# 3 ms: "the output length must match duration * rate within a few ms".
LEN_TOL = int(0.003 * OUT_RATE)


# ----------------------------------------------------------------------------------------- signals


def tone(rate: int, dur_s: float = DUR_S, hz: float = TONE_HZ, amp: float = AMP) -> np.ndarray:
    t = np.arange(round(rate * dur_s)) / rate
    return (amp * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def chirp(rate: int, dur_s: float, f0: float = 200.0, f1: float = 3000.0, amp: float = AMP) -> np.ndarray:
    t = np.arange(round(rate * dur_s)) / rate
    k = (f1 - f0) / dur_s
    return (amp * np.sin(2 * np.pi * (f0 * t + 0.5 * k * t * t))).astype(np.float32)


def dominant_hz(x: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spectrum) * rate / len(x))


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x.astype(np.float64)))))


def inner(x: np.ndarray, margin: int = 1600) -> np.ndarray:
    """Drop the edges, where codec priming and filter ramps live."""
    return x[margin:-margin]


# ----------------------------------------------------------------------------------------- encoders


def _video_codec() -> str:
    for name in ("libx264", "mpeg4"):
        if name in av.codecs_available:
            return name
    pytest.skip("the av wheel has no video encoder")


def write_media(
    path: Path,
    fmt: str,
    codec: str | None,
    rate: int,
    channels: list[np.ndarray],
    *,
    video: str | None = None,
    bit_rate: int | None = None,
) -> Path:
    """Encode ``channels`` (equal-length float32 arrays) with PyAV, optionally beside a video track."""
    layout = "mono" if len(channels) == 1 else "stereo"
    with av.open(str(path), "w", format=fmt) as out:
        vstream: av.VideoStream | None = None
        if video is not None:
            vstream = out.add_stream(video, rate=10)  # type: ignore[assignment]
            assert isinstance(vstream, av.VideoStream)
            vstream.width, vstream.height, vstream.pix_fmt = 64, 48, "yuv420p"
        if codec is not None:
            astream = out.add_stream(codec, rate=rate, layout=layout)
            assert isinstance(astream, av.AudioStream)
            if bit_rate:
                astream.bit_rate = bit_rate
            signal = np.stack(channels)
            for i in range(0, signal.shape[1], 1024):
                frame = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(signal[:, i : i + 1024]), format="fltp", layout=layout
                )
                frame.sample_rate, frame.pts = rate, i
                out.mux(astream.encode(frame))
            out.mux(astream.encode(None))
        if vstream is not None:
            for i in range(20):
                image = np.full((48, 64, 3), i * 10, dtype=np.uint8)
                vframe = av.VideoFrame.from_ndarray(image, format="rgb24")
                vframe.pts = i
                out.mux(vstream.encode(vframe))
            out.mux(vstream.encode(None))
    return path


def wav_bytes(declared_data_bytes: int, data: bytes = b"", rate: int = 16_000) -> bytes:
    """A canonical 16-bit mono WAV header that declares ``declared_data_bytes``, followed by ``data``."""
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    riff_size = min(4 + 24 + 8 + declared_data_bytes, 0xFFFFFFFF)
    return (
        b"RIFF" + struct.pack("<I", riff_size) + b"WAVE"
        + b"fmt " + struct.pack("<I", len(fmt)) + fmt
        + b"data" + struct.pack("<I", declared_data_bytes) + data
    )  # fmt: skip


def pcm16(x: np.ndarray) -> bytes:
    return bytes((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes())


@dataclass(frozen=True)
class Case:
    name: str
    fmt: str
    codec: str
    rate: int
    channels: int
    codec_name: str  # what probe() reports
    container: str  # a part of the FFmpeg demuxer name
    video: bool = False


CASES = [
    Case("tone.wav", "wav", "pcm_s16le", 16_000, 1, "pcm_s16le", "wav"),
    Case("tone.flac", "flac", "flac", 44_100, 2, "flac", "flac"),
    Case("tone.mp3", "mp3", "libmp3lame", 44_100, 1, "mp3", "mp3"),
    Case("tone.ogg", "ogg", "libopus", 48_000, 2, "opus", "ogg"),
    Case("tone.m4a", "ipod", "aac", 48_000, 1, "aac", "m4a"),
    Case("tone.webm", "webm", "libopus", 48_000, 1, "opus", "webm"),
    Case("video.mp4", "mp4", "aac", 48_000, 2, "aac", "mp4", video=True),
    Case("video.mkv", "matroska", "libopus", 48_000, 1, "opus", "matroska", video=True),
]


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every test file, encoded once per module."""
    root = tmp_path_factory.mktemp("media")
    files: dict[str, Path] = {}
    for case in CASES:
        signal = [tone(case.rate)] * case.channels
        video = _video_codec() if case.video else None
        files[case.name] = write_media(root / case.name, case.fmt, case.codec, case.rate, signal,
                                       video=video, bit_rate=128_000 if case.codec == "aac" else None)  # fmt: skip
    files["no_audio.mp4"] = write_media(root / "no_audio.mp4", "mp4", None, 48_000, [], video=_video_codec())
    files["long.mp3"] = write_media(root / "long.mp3", "mp3", "libmp3lame", 16_000, [chirp(16_000, 20.0)],
                                    bit_rate=128_000)  # fmt: skip
    files["long.flac"] = write_media(root / "long.flac", "flac", "flac", 16_000, [chirp(16_000, 20.0)])
    files["empty.wav"] = root / "empty.wav"
    files["empty.wav"].write_bytes(b"")
    return files


def raises_code(code: str, fn: Callable[[], object]) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        fn()
    assert info.value.code == code, f"{info.value.code}: {info.value.message}"
    assert info.value.message
    return info.value


# ----------------------------------------------------------------------------------------- formats


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decodes_every_format_to_mono_16k(media: dict[str, Path], case: Case) -> None:
    x = decode_audio(media[case.name])

    assert x.dtype == np.float32 and x.ndim == 1
    assert abs(len(x) - DUR_S * OUT_RATE) <= LEN_TOL
    assert dominant_hz(x, OUT_RATE) == pytest.approx(TONE_HZ, abs=1.0)
    # Stereo copies of one tone average back to it: the level is the tone's, not sqrt(2) times it.
    assert rms(inner(x)) == pytest.approx(AMP / np.sqrt(2), rel=0.08)
    assert x.flags.writeable and x.flags.c_contiguous


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_probe_reads_the_header(media: dict[str, Path], case: Case) -> None:
    info = probe(media[case.name])

    assert isinstance(info, AudioInfo)
    assert info.sample_rate == case.rate
    assert info.channels == case.channels
    assert info.codec == case.codec_name
    assert case.container in info.container
    assert info.duration_s == pytest.approx(DUR_S, abs=0.02)


def test_lossless_decode_is_sample_exact(tmp_path: Path) -> None:
    x = tone(16_000)
    path = write_media(tmp_path / "exact.flac", "flac", "flac", 16_000, [x])

    y = decode_audio(path)

    # 16-bit quantisation is the only difference.
    np.testing.assert_allclose(y, x, atol=1.0 / 32768)


@pytest.mark.parametrize("rate", [8_000, 22_050, 44_100, 48_000])
def test_input_rates_are_resampled_to_the_target(tmp_path: Path, rate: int) -> None:
    path = write_media(tmp_path / f"r{rate}.wav", "wav", "pcm_s16le", rate, [tone(rate, 1.5)])

    x = decode_audio(path)

    assert abs(len(x) - 1.5 * OUT_RATE) <= 2
    assert dominant_hz(x, OUT_RATE) == pytest.approx(TONE_HZ, abs=1.0)
    assert np.max(np.abs(inner(x))) == pytest.approx(AMP, rel=0.01)


@pytest.mark.parametrize("target", [8_000, 24_000, 48_000])
def test_target_rate_is_honoured(media: dict[str, Path], target: int) -> None:
    x = decode_audio(media["tone.flac"], sample_rate=target)

    assert abs(len(x) - DUR_S * target) <= 0.003 * target
    assert dominant_hz(x, target) == pytest.approx(TONE_HZ, abs=1.0)


def test_stereo_is_averaged_to_mono(tmp_path: Path) -> None:
    left = tone(16_000, 1.0, amp=0.4)
    silent = np.zeros_like(left)
    half = decode_audio(write_media(tmp_path / "l.flac", "flac", "flac", 16_000, [left, silent]))
    cancel = decode_audio(write_media(tmp_path / "c.flac", "flac", "flac", 16_000, [left, -left]))
    two = decode_audio(write_media(tmp_path / "two.wav", "wav", "pcm_s16le", 16_000, [left, tone(16_000, 1.0, 1000.0)]))

    assert np.max(np.abs(half)) == pytest.approx(0.2, abs=0.002)
    assert np.max(np.abs(cancel)) < 1e-3
    spectrum = np.abs(np.fft.rfft(two))
    hz = np.fft.rfftfreq(len(two), 1 / 16_000)
    assert spectrum[np.argmin(np.abs(hz - 440))] == pytest.approx(spectrum[np.argmin(np.abs(hz - 1000))], rel=0.35)


def test_aac_padding_is_trimmed_to_the_declared_length(media: dict[str, Path]) -> None:
    # AAC encodes whole 1024-sample frames; the decoder would otherwise return 5 ms of padding.
    assert len(decode_audio(media["tone.m4a"])) == DUR_S * OUT_RATE


def test_real_speech_file() -> None:
    info = probe(JFK)
    x = decode_audio(JFK)

    assert (info.sample_rate, info.channels, info.codec) == (44_100, 2, "flac")
    assert info.duration_s == pytest.approx(11.0, abs=0.01)
    assert abs(len(x) - 11.0 * OUT_RATE) <= LEN_TOL
    assert 0.02 < rms(x) < 0.5
    assert np.max(np.abs(x)) <= 1.0


# ----------------------------------------------------------------------------------------- sources


def test_bytes_and_file_objects_match_the_path(media: dict[str, Path]) -> None:
    path = media["tone.ogg"]
    data = path.read_bytes()
    expected = decode_audio(path)

    with path.open("rb") as f:
        from_file = decode_audio(f)
    assert np.array_equal(decode_audio(data), expected)
    assert np.array_equal(decode_audio(bytearray(data)), expected)
    assert np.array_equal(decode_audio(memoryview(data)), expected)
    assert np.array_equal(decode_audio(io.BytesIO(data)), expected)
    assert np.array_equal(decode_audio(str(path)), expected)
    assert np.array_equal(from_file, expected)


def test_file_object_is_read_from_its_current_position(media: dict[str, Path]) -> None:
    data = media["tone.m4a"].read_bytes()  # MP4 needs seeking: moov is at the end
    f = io.BytesIO(b"multipart preamble" + data)
    f.seek(len(b"multipart preamble"))

    assert np.array_equal(decode_audio(f), decode_audio(data))
    assert not f.closed


class _ReadOnly:
    """A non-seekable stream (a socket, a pipe): only read()."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)


def test_non_seekable_file_object(media: dict[str, Path]) -> None:
    data = media["tone.flac"].read_bytes()

    assert np.array_equal(decode_audio(_ReadOnly(data)), decode_audio(data))  # type: ignore[arg-type]
    raises_code("empty_file", lambda: decode_audio(_ReadOnly(b"")))  # type: ignore[arg-type]
    # The M4A index (moov) is at the end: without seeking it cannot be read, and the message says why.
    m4a = media["tone.m4a"].read_bytes()
    err = raises_code("corrupt_audio", lambda: decode_audio(_ReadOnly(m4a)))  # type: ignore[arg-type]
    assert "not seekable" in err.message


def test_probe_accepts_every_source_kind(media: dict[str, Path]) -> None:
    path = media["tone.flac"]
    expected = probe(path)

    assert probe(path.read_bytes()) == expected
    assert probe(io.BytesIO(path.read_bytes())) == expected


def test_wrong_source_types() -> None:
    with pytest.raises(TypeError):
        decode_audio(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="binary mode"):
        decode_audio(io.StringIO("RIFF...."))  # type: ignore[arg-type]


def test_bad_arguments(media: dict[str, Path]) -> None:
    path = media["tone.wav"]
    with pytest.raises(ValueError):
        decode_audio(path, sample_rate=0)
    with pytest.raises(ValueError):
        decode_audio(path, max_duration_s=-1.0)
    with pytest.raises(ValueError):
        decode_audio(path, max_duration_s=float("nan"))
    with pytest.raises(ValueError):
        iter_decode(path, block_samples=0)  # raised at the call, not at the first next()


# ----------------------------------------------------------------------------------------- iter_decode


@pytest.mark.parametrize("block", [1_000, 16_000, 31_999, 32_000, 1_000_000])
def test_iter_decode_blocks_concatenate_to_decode_audio(media: dict[str, Path], block: int) -> None:
    path = media["video.mp4"]
    blocks = list(iter_decode(path, block_samples=block))

    assert all(len(b) == block for b in blocks[:-1])
    assert 0 < len(blocks[-1]) <= block
    assert all(b.dtype == np.float32 for b in blocks)
    assert np.array_equal(np.concatenate(blocks), decode_audio(path))


def test_iter_decode_streams_a_long_file(media: dict[str, Path]) -> None:
    blocks = iter_decode(media["long.flac"], block_samples=OUT_RATE)
    first = next(blocks)
    rest = list(blocks)

    assert len(first) == OUT_RATE
    assert len(rest) == 19 and sum(len(b) for b in rest) == 19 * OUT_RATE


# ----------------------------------------------------------------------------------------- bad input


def test_empty_file(media: dict[str, Path]) -> None:
    raises_code("empty_file", lambda: decode_audio(media["empty.wav"]))
    raises_code("empty_file", lambda: decode_audio(b""))
    raises_code("empty_file", lambda: decode_audio(io.BytesIO()))
    raises_code("empty_file", lambda: probe(media["empty.wav"]))
    raises_code("empty_file", lambda: list(iter_decode(b"")))


def test_missing_file(tmp_path: Path) -> None:
    raises_code("file_not_found", lambda: decode_audio(tmp_path / "nope.wav"))
    raises_code("file_not_readable", lambda: decode_audio(tmp_path))


def _png() -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format="image2pipe") as container:
        stream = container.add_stream("png")
        stream.width, stream.height, stream.pix_fmt = 8, 8, "rgb24"
        frame = av.VideoFrame.from_ndarray(np.zeros((8, 8, 3), np.uint8), format="rgb24")
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return out.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        np.random.default_rng(7).bytes(20_000),
        b"this is a text file, not audio\n" * 100,
        b"#EXTM3U\n#EXTINF:10,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n",
        b"ffconcat version 1.0\nfile /etc/passwd\n",
        b"\x00" * 4096,
    ],
    ids=["random", "text", "playlist", "concat", "zeros"],
)
def test_non_audio_bytes_are_invalid_audio(data: bytes) -> None:
    err = raises_code("invalid_audio", lambda: decode_audio(data))
    assert "not in a recognised audio" in err.message
    raises_code("invalid_audio", lambda: probe(data))


def test_nested_files_are_never_opened(media: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # Even with the concat demuxer allowed, a list that names a real file must not make FFmpeg read it.
    import voxserve.audio.decode as decode_module

    monkeypatch.setattr(decode_module, "ALLOWED_FORMATS", (*decode_module.ALLOWED_FORMATS, "concat"))
    listing = f"ffconcat version 1.0\nfile {media['tone.wav']}\n".encode()
    monkeypatch.chdir(media["tone.wav"].parent)
    relative = b"ffconcat version 1.0\nfile tone.wav\n"

    raises_code("invalid_audio", lambda: decode_audio(listing))
    raises_code("invalid_audio", lambda: decode_audio(relative))


def test_images_are_invalid_audio() -> None:
    # FFmpeg would open a PNG as a one-frame video; the demuxer allow-list turns it away.
    raises_code("invalid_audio", lambda: decode_audio(_png()))


def test_video_without_audio(media: dict[str, Path]) -> None:
    err = raises_code("no_audio_stream", lambda: decode_audio(media["no_audio.mp4"]))
    assert "video" in err.message
    raises_code("no_audio_stream", lambda: probe(media["no_audio.mp4"]))


def test_truncated_flac_is_corrupt(media: dict[str, Path]) -> None:
    data = media["tone.flac"].read_bytes()

    half = raises_code("corrupt_audio", lambda: decode_audio(data[: len(data) // 2]))
    assert "truncated" in half.message and "2.00 s" in half.message
    stub = raises_code("corrupt_audio", lambda: decode_audio(data[:100]))
    assert "FLAC" in stub.message


def test_truncated_mp3_decodes_its_prefix(media: dict[str, Path]) -> None:
    # MP3 has no exact length in its header (FFmpeg may estimate it from the bitrate), so a cut file is
    # indistinguishable from a shorter one: the valid prefix is returned.
    data = media["tone.mp3"].read_bytes()

    x = decode_audio(data[: len(data) // 2])

    assert len(x) / OUT_RATE == pytest.approx(DUR_S / 2, abs=0.1)
    assert dominant_hz(x, OUT_RATE) == pytest.approx(TONE_HZ, abs=2.0)
    stub = raises_code("corrupt_audio", lambda: decode_audio(data[:100]))
    assert "MP3" in stub.message


@pytest.mark.parametrize("name", ["tone.m4a", "video.mp4", "tone.webm", "video.mkv", "tone.wav"])
def test_truncated_containers_with_a_length_are_corrupt(media: dict[str, Path], name: str) -> None:
    data = media[name].read_bytes()
    raises_code("corrupt_audio", lambda: decode_audio(data[: len(data) // 2]))
    raises_code("corrupt_audio", lambda: decode_audio(data[:100]))


def test_wav_header_claiming_absent_data() -> None:
    one_second = 2 * 16_000
    none = raises_code("corrupt_audio", lambda: decode_audio(wav_bytes(one_second)))
    assert "1.00 s" in none.message and "0.00 s" in none.message
    raises_code("corrupt_audio", lambda: decode_audio(wav_bytes(one_second, pcm16(tone(16_000, 0.25)))))


def test_wav_whose_last_samples_are_cut_decodes_the_prefix() -> None:
    data = pcm16(tone(16_000, 1.0))
    x = decode_audio(wav_bytes(len(data), data[: len(data) - 2 * 160 - 1]))  # 10 ms and half a sample short

    assert len(x) == 16_000 - 160 - 1
    assert np.max(np.abs(x)) == pytest.approx(AMP, abs=1e-3)


def test_placeholder_wav_sizes_are_not_truncation() -> None:
    # Streaming recorders leave the data size at 0 or 0xFFFFFFFF: read to the end of the file.
    data = pcm16(tone(16_000, 0.5))
    assert len(decode_audio(wav_bytes(0xFFFFFFFF, data))) == 8_000
    assert len(decode_audio(wav_bytes(0, data))) == 8_000


def test_zero_length_audio() -> None:
    raises_code("empty_audio", lambda: decode_audio(wav_bytes(0)))


@pytest.mark.parametrize("name", ["tone.mp3", "tone.m4a", "tone.ogg", "tone.webm"])
def test_damage_in_the_middle_is_corrupt(media: dict[str, Path], name: str) -> None:
    data = bytearray(media[name].read_bytes())
    middle = len(data) // 2
    data[middle : middle + 2000] = bytes(2000)

    raises_code("corrupt_audio", lambda: decode_audio(bytes(data)))


def test_concatenated_mp3_files_are_corrupt(tmp_path: Path) -> None:
    # `cat a.mp3 b.mp3` puts an ID3 tag mid-stream, which the decoder rejects: by the rule above (a decoder
    # error followed by more audio) this is corrupt_audio, not a silent skip.
    one = write_media(tmp_path / "1.mp3", "mp3", "libmp3lame", 44_100, [tone(44_100, 1.0)]).read_bytes()
    two = write_media(tmp_path / "2.mp3", "mp3", "libmp3lame", 22_050, [tone(22_050, 1.0)]).read_bytes()

    err = raises_code("corrupt_audio", lambda: decode_audio(one + two))
    assert "middle" in err.message


@pytest.mark.parametrize("name", ["tone.flac", "tone.mp3", "tone.ogg", "tone.m4a", "video.mkv"])
def test_random_damage_never_leaks_ffmpeg_errors(media: dict[str, Path], name: str) -> None:
    original = media[name].read_bytes()
    rng = np.random.default_rng(len(name))
    outcomes = set()
    for _ in range(12):
        data = bytearray(original)
        for pos in rng.integers(0, len(data), size=rng.integers(1, 8)):
            data[pos : pos + 64] = rng.bytes(64)
        cut = int(rng.integers(1, len(data) + 1))
        try:
            x = decode_audio(bytes(data[:cut]), max_duration_s=3.0)
        except InvalidInput as exc:  # anything else fails the test
            outcomes.add(exc.code)
        else:
            assert x.dtype == np.float32 and 0 < len(x) <= 3.1 * OUT_RATE
            outcomes.add("ok")
    assert outcomes <= {"ok", "corrupt_audio", "invalid_audio", "empty_audio", "no_audio_stream"}


# ----------------------------------------------------------------------------------------- duration limit


class _CountingFile(io.BytesIO):
    """Counts the bytes the decoder pulls, to prove it stops early."""

    bytes_read = 0

    def read(self, n: int | None = -1) -> bytes:
        out = super().read(n)
        self.bytes_read += len(out)
        return out


def test_limit_from_the_header_is_checked_before_decoding(media: dict[str, Path]) -> None:
    f = _CountingFile(media["long.flac"].read_bytes())

    err = raises_code("audio_too_long", lambda: decode_audio(f, max_duration_s=5.0))

    assert "20.00 s" in err.message and "5 s" in err.message
    assert f.bytes_read < len(f.getvalue()) / 4


def test_limit_without_a_header_length_stops_decoding_early(media: dict[str, Path]) -> None:
    f = _CountingFile(media["long.mp3"].read_bytes())

    raises_code("audio_too_long", lambda: decode_audio(f, max_duration_s=3.0))

    assert f.bytes_read < len(f.getvalue()) / 3


def test_iter_decode_raises_once_the_limit_is_passed(media: dict[str, Path]) -> None:
    blocks: list[np.ndarray] = []
    with pytest.raises(InvalidInput) as info:
        for block in iter_decode(media["long.mp3"], block_samples=OUT_RATE, max_duration_s=3.0):
            blocks.append(block)

    assert info.value.code == "audio_too_long"
    assert sum(len(b) for b in blocks) <= 3.1 * OUT_RATE


def test_audio_at_the_limit_is_accepted(media: dict[str, Path]) -> None:
    assert len(decode_audio(media["tone.mp3"], max_duration_s=DUR_S)) == pytest.approx(DUR_S * OUT_RATE, abs=LEN_TOL)
    assert len(decode_audio(media["tone.flac"], max_duration_s=DUR_S)) == DUR_S * OUT_RATE
    raises_code("audio_too_long", lambda: decode_audio(media["tone.mp3"], max_duration_s=1.5))
