"""Audio I/O in pure numpy + PyAV: decoding, PCM conversion, resampling and a sample ring buffer.

Imports nothing from the project except :mod:`voxserve.errors` and :mod:`voxserve.types`.
"""

from voxserve.audio.decode import (
    ALLOWED_FORMATS,
    DEFAULT_BLOCK_SAMPLES,
    AudioInfo,
    AudioSource,
    decode_audio,
    decode_channels,
    iter_decode,
    probe,
)
from voxserve.audio.pcm import (
    dbfs,
    float32_to_pcm16,
    g711_alaw_to_float32,
    g711_ulaw_to_float32,
    pcm16_to_float32,
    rms,
)
from voxserve.audio.resample import FrameResampler, StreamResampler, resample
from voxserve.audio.ring_buffer import OverwrittenError, RingBuffer

__all__ = [
    "ALLOWED_FORMATS",
    "DEFAULT_BLOCK_SAMPLES",
    "AudioInfo",
    "AudioSource",
    "FrameResampler",
    "OverwrittenError",
    "RingBuffer",
    "StreamResampler",
    "dbfs",
    "decode_audio",
    "decode_channels",
    "float32_to_pcm16",
    "g711_alaw_to_float32",
    "g711_ulaw_to_float32",
    "iter_decode",
    "pcm16_to_float32",
    "probe",
    "resample",
    "rms",
]
