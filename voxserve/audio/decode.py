"""Decode any common container/codec to mono float32 at a target sample rate (PyAV).

Inputs: WAV, FLAC, MP3, Ogg, M4A/AAC, WebM and the audio track of MP4/MKV/MOV/AVI video, as a path, ``bytes``
or a binary file object. Output: 1-D float32 (whole, or in blocks), channels averaged to mono, resampled.

Every failure is :class:`~voxserve.errors.InvalidInput` with a ``code``; no PyAV/FFmpeg exception escapes:

* ``empty_file``: 0 bytes. ``invalid_audio``: not a recognised audio/video container (text, images, random
  bytes, playlists, anything outside :data:`ALLOWED_FORMATS`) or no decoder for the codec.
  ``no_audio_stream``: a container without an audio track. ``empty_audio``: an audio stream with no samples.
  Also ``invalid_audio``: audio FFmpeg cannot mix down to mono (a channel count it has no layout for).
* ``corrupt_audio``: a recognised container whose header cannot be read, or whose frames claim a sample rate
  or channel count no audio has (:data:`MAX_SAMPLE_RATE`, :data:`MAX_CHANNELS`); a demuxer or decoder error that
  is followed by more audio (damage mid-stream); or audio ending more than :data:`TRUNCATION_TOLERANCE_S`
  before the length its header records exactly (WAV data size, FLAC STREAMINFO, the last Ogg page,
  MP4/M4A/MOV sample tables, Matroska/WebM duration): an interrupted upload, or damage FFmpeg skipped.
* Decoded as their valid prefix (the broken last frame dropped): a file whose final frame is cut short
  (within the tolerance), and cut files whose length is not recorded exactly (MP3 and ADTS AAC, whose
  durations FFmpeg estimates from the bitrate; live-recorded WebM; Ogg from a non-seekable file object).
* ``audio_too_long``: longer than ``max_duration_s`` + :data:`DURATION_SLACK_S` (codec padding). Raised
  before decoding when the header records the length exactly, else as soon as decoding passes the limit.

Guards: FFmpeg may not open anything itself (a playlist or concat list cannot make it read other files or
URLs), only the demuxers in :data:`ALLOWED_FORMATS` run, and FFmpeg I/O is interrupted after :data:`IO_TIMEOUT_S`. Memory is
bounded only by ``max_duration_s``: servers should always pass one. Container timestamps are ignored: the
output starts at the first decoded sample and gaps are not filled.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeAlias, cast

import av
import av.error
import numpy as np
from av.audio.frame import AudioFrame
from av.audio.stream import AudioStream
from av.container import InputContainer

from voxserve.audio.resample import ChannelResampler, FrameResampler
from voxserve.errors import InvalidInput
from voxserve.types import SAMPLE_RATE, Float32Array

__all__ = [
    "ALLOWED_FORMATS", "DEFAULT_BLOCK_SAMPLES", "AudioInfo", "AudioSource", "decode_audio", "decode_channels",
    "iter_decode", "probe",
]  # fmt: skip

ALLOWED_FORMATS: tuple[str, ...] = (
    "wav", "w64", "flac", "mp3", "ogg", "mov", "matroska", "webm", "aac", "loas", "aiff", "caf", "amr",
    "amrnb", "amrwb", "asf", "xwma", "avi", "flv", "mpegts", "mpeg", "au", "wv", "ape", "mpc", "mpc8",
    "ac3", "eac3", "dts", "tta", "dsf", "voc", "gsm",
)  # fmt: skip
"""FFmpeg demuxers that may read untrusted input; anything else is ``invalid_audio``."""

DEFAULT_BLOCK_SAMPLES = 30 * SAMPLE_RATE
"""Block size of :func:`iter_decode`: 30 s at 16 kHz."""

TRUNCATION_TOLERANCE_S = 0.5
"""How far the audio may end before the length in its header and still count as complete."""

DURATION_SLACK_S = 0.1
"""Tolerance over ``max_duration_s`` for encoder padding."""

MIN_SAMPLE_RATE, MAX_SAMPLE_RATE = 1, 1_536_000
"""Sample rates of decoded frames outside this range are ``corrupt_audio`` (damaged headers, not audio)."""

MAX_CHANNELS = 64
"""Frames with more channels are ``corrupt_audio``."""

IO_TIMEOUT_S = 30.0
"""FFmpeg's open and per-packet read calls are interrupted after this many seconds."""

_HEAD_BYTES = 4096
_NOT_SEEKABLE = "; the source is not seekable, and formats that keep their index at the end (MP4/M4A) need to seek"
_TRIM_MAX_S = 0.2  # decoded audio past the header's length, up to this much, is encoder padding
_AV_ERRORS = (av.error.FFmpegError, ValueError)
_WAV_EXACT_TAGS = frozenset({0x0001, 0x0003, 0x0006, 0x0007, 0xFFFE})

AudioSource: TypeAlias = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO
"""What the decoders accept: a path, the file's bytes, or a binary file object."""


@dataclass(frozen=True)
class AudioInfo:
    """What :func:`probe` learns from a container's header.

    Attributes:
        duration_s: length of the audio stream in seconds, ``None`` when the container does not say (MP3
            and ADTS AAC durations may be FFmpeg's estimate from the bitrate).
        sample_rate: the stream's native sample rate in Hz.
        channels: the stream's channel count.
        codec: the FFmpeg codec name (e.g. ``"mp3"``, ``"opus"``, ``"pcm_s16le"``).
        container: the FFmpeg demuxer name (e.g. ``"wav"``, ``"mov,mp4,m4a,3gp,3g2,mj2"``).
    """

    duration_s: float | None
    sample_rate: int
    channels: int
    codec: str
    container: str


@dataclass(frozen=True)
class _Input:
    file: object  # what PyAV reads: a binary file object or one of the wrappers below
    head: bytes  # the first bytes, for format sniffing and the WAV header
    note: str = ""  # appended to read errors


class _PrefixedReader:
    """A non-seekable reader that replays the bytes already read for sniffing, then the rest."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def read(self, size: int = -1) -> bytes:
        if self._head:
            n = len(self._head) if size < 0 else size
            out, self._head = self._head[:n], self._head[n:]
            return out
        return self._rest.read(size)


class _OffsetFile:
    """A seekable view of a file object that starts at ``base`` (PyAV seeks to absolute offsets)."""

    def __init__(self, file: BinaryIO, base: int) -> None:
        self._file = file
        self._base = base

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = self._base + offset if whence == io.SEEK_SET else offset
        return self._file.seek(target, whence) - self._base

    def tell(self) -> int:
        return self._file.tell() - self._base


class _NestedOpenRefused(Exception):
    pass


def _refuse_nested_open(url: str, flags: int, options: dict[str, str]) -> Any:
    raise _NestedOpenRefused(f"refused to open {url!r} from inside an uploaded file")


def _empty_file() -> InvalidInput:
    return InvalidInput("the audio file is empty (0 bytes)", code="empty_file")


@contextmanager
def _open_source(source: AudioSource) -> Iterator[_Input]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not data:
            raise _empty_file()
        yield _Input(io.BytesIO(data), data[:_HEAD_BYTES])
    elif isinstance(source, (str, os.PathLike)):
        with _open_path(os.fspath(source)) as file:
            yield _input_from_file(file)
    elif callable(getattr(source, "read", None)):
        yield _input_from_file(source)
    else:
        raise TypeError(f"source must be a path, bytes or a binary file object, not {type(source).__name__}")


def _open_path(path: str) -> BinaryIO:
    try:
        return open(path, "rb")  # noqa: SIM115 - closed by the caller's with-block
    except FileNotFoundError:
        raise InvalidInput(f"no such audio file: {path}", code="file_not_found") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read audio file {path}: {exc.strerror}", code="file_not_readable") from None


def _input_from_file(file: BinaryIO) -> _Input:
    seekable = getattr(file, "seekable", None)
    if callable(seekable) and seekable():
        base = file.tell()
        head = _read_head(file)
        file.seek(base)
        return _Input(file if base == 0 else _OffsetFile(file, base), head)
    head = _read_head(file)
    return _Input(_PrefixedReader(head, file), head, _NOT_SEEKABLE)


def _read_head(file: BinaryIO) -> bytes:
    head = file.read(_HEAD_BYTES)
    if not isinstance(head, bytes):
        raise TypeError("the file object must be opened in binary mode")
    if not head:
        raise _empty_file()
    return head


_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"fLaC", "FLAC"), (0, b"OggS", "Ogg"), (0, b"ID3", "MP3"), (0, b"\x1a\x45\xdf\xa3", "Matroska/WebM"),
    (4, b"ftyp", "MP4/M4A/MOV"), (4, b"moov", "MP4/M4A/MOV"), (4, b"mdat", "MP4/M4A/MOV"),
    (8, b"WAVE", "WAV"), (8, b"AIFF", "AIFF"), (8, b"AVI ", "AVI"), (0, b"caff", "CAF"), (0, b"#!AMR", "AMR"),
    (0, b"0&\xb2u\x8ef\xcf\x11", "ASF/WMA"),
)  # fmt: skip
"""Magic bytes (offset, bytes, name) that tell a damaged known container from data that is not audio."""


def _sniff(head: bytes) -> str | None:
    """Name the container whose magic bytes ``head`` starts with, if any."""
    for offset, magic, name in _SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return name
    return None


def _unreadable(src: _Input, exc: Exception) -> InvalidInput:
    kind = _sniff(src.head)
    if kind is None:
        return InvalidInput("the data is not in a recognised audio or video format", code="invalid_audio")
    return InvalidInput(
        f"the file looks like {kind} but its header cannot be read; it is truncated or corrupt ({exc}{src.note})",
        code="corrupt_audio",
    )


@contextmanager
def _open_container(src: _Input) -> Iterator[InputContainer]:
    try:
        container = av.open(
            src.file,
            mode="r",
            # Sources are always Python file objects, so no FFmpeg protocol is needed: "none" makes nested
            # opens (concat lists, playlists, MP4 data references) fail instead of reading files or URLs.
            container_options={"format_whitelist": ",".join(ALLOWED_FORMATS), "protocol_whitelist": "none"},
            metadata_errors="ignore",
            io_open=_refuse_nested_open,
            timeout=cast(Any, (IO_TIMEOUT_S, IO_TIMEOUT_S)),
        )
    except (*_AV_ERRORS, _NestedOpenRefused) as exc:
        raise _unreadable(src, exc) from exc
    try:
        yield container
    finally:
        container.close()


def _audio_stream(container: InputContainer) -> AudioStream:
    stream = container.streams.best("audio")
    if not isinstance(stream, AudioStream):
        others = ", ".join(s.type for s in container.streams) or "none"
        raise InvalidInput(f"the file has no audio stream (streams: {others})", code="no_audio_stream")
    if stream.codec_context is None:  # PyAV then knows no codec name either (``stream.codec`` raises)
        raise InvalidInput("no decoder is available for the file's audio codec", code="invalid_audio")
    return stream


def _stream_duration_s(container: InputContainer, stream: AudioStream) -> float | None:
    if stream.duration is not None and stream.time_base is not None and stream.duration > 0:
        return float(stream.duration * stream.time_base)
    if container.duration is not None and container.duration > 0:
        return container.duration / av.time_base
    return None


def _wav_declared_s(head: bytes) -> float | None:
    """Length that a RIFF/WAVE header's data chunk declares (None for placeholders or when unknown)."""
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, byte_rate = 12, 0
    while pos + 8 <= len(head):
        chunk, size = head[pos : pos + 4], int.from_bytes(head[pos + 4 : pos + 8], "little")
        if chunk == b"fmt " and pos + 20 <= len(head):
            tag = int.from_bytes(head[pos + 8 : pos + 10], "little")
            # Only for PCM-like codecs (PCM, float, A-law, mu-law, extensible) is the byte rate exact.
            byte_rate = int.from_bytes(head[pos + 16 : pos + 20], "little") if tag in _WAV_EXACT_TAGS else 0
        elif chunk == b"data":
            placeholder = size == 0 or size >= 0xFFFFF000
            return None if placeholder or byte_rate <= 0 else size / byte_rate
        pos += 8 + size + (size & 1)
    return None


def _declared_s(container: InputContainer, stream: AudioStream, head: bytes) -> float | None:
    """The length recorded in a header we trust to be exact (not estimated from the bitrate)."""
    name = container.format.name
    if name == "wav":
        return _wav_declared_s(head)
    if name in ("flac", "ogg") or name.startswith(("mov,", "matroska")):
        return _stream_duration_s(container, stream)
    return None


def _check_declared_length(declared_s: float | None, max_duration_s: float | None) -> None:
    if declared_s is not None and max_duration_s is not None and declared_s > max_duration_s + DURATION_SLACK_S:
        raise _too_long(max_duration_s, f"its header declares {declared_s:.2f} s")


def _too_long(max_duration_s: float, detail: str) -> InvalidInput:
    return InvalidInput(f"the audio is longer than the {max_duration_s:g} s limit ({detail})", code="audio_too_long")


def _corrupt(message: str) -> InvalidInput:
    return InvalidInput(message, code="corrupt_audio")


def _decode_frames(container: InputContainer, stream: AudioStream, note: str) -> Iterator[AudioFrame]:
    """Demux and decode ``stream``, tolerating a decoder error only on the last packet."""
    packets = container.demux(stream)
    failure: str | None = None
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except _AV_ERRORS as exc:
            raise _corrupt(f"the container is damaged and cannot be read to the end ({exc}{note})") from exc
        if failure is not None and packet.size > 0:
            raise _corrupt(f"the audio stream is damaged in the middle ({failure})")
        try:
            frames = packet.decode()
        except _AV_ERRORS as exc:
            failure = str(exc)
            continue
        yield from (f for f in frames if isinstance(f, AudioFrame))


def _check_frame(frame: AudioFrame) -> None:
    """Refuse frames whose header values no real audio has (FFmpeg would try to build a resampler for them:
    a 136 MHz rate exhausts memory)."""
    if not MIN_SAMPLE_RATE <= frame.sample_rate <= MAX_SAMPLE_RATE:
        raise _corrupt(f"the audio's sample rate ({frame.sample_rate} Hz) is outside "
                       f"{MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz; the header is damaged")
    if not 1 <= frame.layout.nb_channels <= MAX_CHANNELS:
        raise _corrupt(f"the audio has {frame.layout.nb_channels} channels (at most {MAX_CHANNELS} are read)")


def _resample_frames(frames: Iterator[AudioFrame], sample_rate: int, channels: bool) -> Iterator[Float32Array]:
    resampler = ChannelResampler(sample_rate) if channels else FrameResampler(sample_rate)
    try:
        for frame in frames:
            _check_frame(frame)
            yield from resampler.push(frame)
        yield from resampler.flush()
    except _AV_ERRORS as exc:  # e.g. a channel count FFmpeg has no layout (downmix) for
        into = "channels" if channels else "mono"
        raise InvalidInput(f"the audio cannot be converted to {into} at {sample_rate} Hz ({exc})",
                           code="invalid_audio") from exc


class _TailTrimmer:
    """Drops encoder padding: decoded samples past the header's length, when there are only a few."""

    def __init__(self, declared: int | None, max_excess: int) -> None:
        self._declared = declared
        self._max_excess = max_excess
        self._seen = 0
        self._held: list[Float32Array] = []

    def push(self, chunk: Float32Array) -> list[Float32Array]:
        if self._declared is None:
            return [chunk]
        keep = max(0, min(len(chunk), self._declared - self._seen))
        self._seen += len(chunk)
        if keep < len(chunk):
            self._held.append(chunk[keep:])
        if self._seen - self._declared > self._max_excess:  # not padding: the header is wrong
            out, self._held, self._declared = [chunk[:keep], *self._held], [], None
            return [part for part in out if len(part)]
        return [chunk[:keep]] if keep else []


def _checked_chunks(
    chunks: Iterator[Float32Array], sample_rate: int, declared_s: float | None, max_duration_s: float | None
) -> Iterator[Float32Array]:
    """Enforce the duration limit while decoding and the truncation and emptiness rules at the end."""
    limit = None if max_duration_s is None else math.floor((max_duration_s + DURATION_SLACK_S) * sample_rate)
    declared = None if declared_s is None else round(declared_s * sample_rate)
    trimmer = _TailTrimmer(declared, round(_TRIM_MAX_S * sample_rate))
    total = 0
    for chunk in chunks:
        for part in trimmer.push(chunk):
            total += len(part)
            if limit is not None and max_duration_s is not None and total > limit:
                raise _too_long(max_duration_s, f"decoding stopped at {total / sample_rate:.2f} s")
            yield part
    if declared_s is not None and total < (declared_s - TRUNCATION_TOLERANCE_S) * sample_rate:
        raise _corrupt(
            f"the file is truncated: its header declares {declared_s:.2f} s of audio "
            f"but only {total / sample_rate:.2f} s could be decoded"
        )
    if total == 0:
        raise InvalidInput("the audio stream contains no samples", code="empty_audio")


@contextmanager
def _decoded_chunks(
    source: AudioSource, sample_rate: int, max_duration_s: float | None, channels: bool = False
) -> Iterator[Iterator[Float32Array]]:
    with _open_source(source) as src, _open_container(src) as container:
        stream = _audio_stream(container)
        declared_s = _declared_s(container, stream, src.head)
        _check_declared_length(declared_s, max_duration_s)
        frames = _decode_frames(container, stream, src.note)
        resampled = _resample_frames(frames, sample_rate, channels)
        yield _checked_chunks(resampled, sample_rate, declared_s, max_duration_s)


def _validate(sample_rate: int, max_duration_s: float | None, block_samples: int = 1) -> None:
    if not isinstance(sample_rate, int) or sample_rate <= 0:
        raise ValueError(f"sample_rate must be a positive int, got {sample_rate!r}")
    if max_duration_s is not None and not (math.isfinite(max_duration_s) and max_duration_s > 0):
        raise ValueError(f"max_duration_s must be a positive number or None, got {max_duration_s!r}")
    if not isinstance(block_samples, int) or block_samples <= 0:
        raise ValueError(f"block_samples must be a positive int, got {block_samples!r}")


def decode_audio(
    source: AudioSource, *, sample_rate: int = SAMPLE_RATE, max_duration_s: float | None = None
) -> Float32Array:
    """Decode an audio or video file to mono float32 samples.

    Args:
        source: a path, the file's bytes, or a binary file object (read from its current position).
        sample_rate: the output rate in Hz.
        max_duration_s: reject audio longer than this (see the module docstring); ``None`` for no limit.

    Returns:
        A 1-D float32 array at ``sample_rate``, channels averaged to mono.

    Raises:
        InvalidInput: the source is empty, not audio, has no audio stream, is corrupt or truncated, holds
            no samples, or is too long; ``code`` says which.
        ValueError: an argument is out of range.
    """
    _validate(sample_rate, max_duration_s)
    with _decoded_chunks(source, sample_rate, max_duration_s) as chunks:
        parts = list(chunks)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def decode_channels(
    source: AudioSource, *, sample_rate: int = SAMPLE_RATE, max_duration_s: float | None = None
) -> Float32Array:
    """Decode an audio or video file keeping its channels apart (one speaker a channel, as call recordings
    store them), under the same checks as :func:`decode_audio`.

    Returns:
        A (channels, samples) float32 array at ``sample_rate``: one row for a mono file.

    Raises:
        InvalidInput: as :func:`decode_audio`; also ``invalid_audio`` when the channel count changes mid-stream.
        ValueError: an argument is out of range.
    """
    _validate(sample_rate, max_duration_s)
    with _decoded_chunks(source, sample_rate, max_duration_s, channels=True) as chunks:
        parts = list(chunks)
    return np.ascontiguousarray(np.concatenate(parts).T)


def iter_decode(
    source: AudioSource,
    *,
    sample_rate: int = SAMPLE_RATE,
    block_samples: int = DEFAULT_BLOCK_SAMPLES,
    max_duration_s: float | None = None,
) -> Iterator[Float32Array]:
    """Decode a file incrementally, yielding consecutive blocks of mono float32 samples.

    Every block but the last holds exactly ``block_samples`` samples, and the concatenated blocks equal
    :func:`decode_audio`'s result. Only about one block is held in memory at a time. Errors are raised
    from the iteration when they are found, so blocks before a late error (e.g. a duration limit passed
    while decoding a file whose header does not record its length) have already been yielded.

    Args:
        source: a path, the file's bytes, or a binary file object (read from its current position).
        sample_rate: the output rate in Hz.
        block_samples: samples per yielded block.
        max_duration_s: reject audio longer than this; ``None`` for no limit.

    Returns:
        An iterator of 1-D float32 arrays.

    Raises:
        InvalidInput: as :func:`decode_audio`, during iteration.
        ValueError: an argument is out of range (raised immediately).
    """
    _validate(sample_rate, max_duration_s, block_samples)
    return _blocks(source, sample_rate, block_samples, max_duration_s)


def _blocks(
    source: AudioSource, sample_rate: int, block_samples: int, max_duration_s: float | None
) -> Iterator[Float32Array]:
    with _decoded_chunks(source, sample_rate, max_duration_s) as chunks:
        pending: list[Float32Array] = []
        count = 0
        for chunk in chunks:
            pending.append(chunk)
            count += len(chunk)
            if count >= block_samples:
                joined = np.concatenate(pending)
                full = len(joined) - len(joined) % block_samples
                yield from (joined[i : i + block_samples] for i in range(0, full, block_samples))
                pending, count = [joined[full:]], len(joined) - full
        if count:
            yield np.concatenate(pending)


def probe(source: AudioSource) -> AudioInfo:
    """Read a file's audio stream parameters from its header without decoding the stream.

    Args:
        source: a path, the file's bytes, or a binary file object (read from its current position, which
            is restored afterwards when the object is seekable).

    Returns:
        The stream's :class:`AudioInfo`.

    Raises:
        InvalidInput: the source is empty (``empty_file``), not audio (``invalid_audio``), unreadable
            (``corrupt_audio``) or has no audio stream (``no_audio_stream``).
    """
    start = _position(source)
    try:
        with _open_source(source) as src, _open_container(src) as container:
            stream = _audio_stream(container)
            ctx = stream.codec_context
            return AudioInfo(
                duration_s=_stream_duration_s(container, stream),
                sample_rate=int(ctx.sample_rate),
                channels=int(ctx.channels),
                codec=stream.codec.canonical_name,
                container=container.format.name,
            )
    finally:
        if start is not None:
            source.seek(start)  # type: ignore[union-attr]


def _position(source: AudioSource) -> int | None:
    """The read position of a seekable file object (probing restores it, so decoding can follow)."""
    seekable = getattr(source, "seekable", None)
    if callable(seekable) and seekable():
        return int(source.tell())  # type: ignore[union-attr]
    return None
