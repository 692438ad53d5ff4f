"""Piper (VITS) voices split in two: a per-stream acoustic model and a HiFi-GAN decoder batched across streams.

A Piper voice is one ONNX graph: text encoder, duration predictor and flow produce latent frames
(192 x frames, 256 samples each at 22.05 kHz), which the HiFi-GAN decoder turns into audio. The graph is cut
once with ``onnx.utils.extract_model`` at the decoder's input (the tensor feeding ``dec.conv_pre``) and at the
flow's input (the prior sample ``z_p`` and the frame mask); the parts are cached under
``cache_dir()/piper-split/<sha256 of the voice>/``, the decoder with its 1-D convolutions run as 2-D ones
(:mod:`voxserve.backends.tts.conv2d`: the same samples, 8-15 % faster on CPU). The front part also outputs the
duration predictor's frames per phoneme id (its ``Ceil``, VITS's ``w_ceil``), from which each block's words get
their frames (:mod:`voxserve.backends.tts.piper_words`).

The flow is convolutional along time (four coupling layers of four kernel-5 convolutions: 32 frames of
receptive field on each side), so it can run on part of a sentence: a stream's first sentence gives its first
frames as a block of their own (the flow on them and :data:`FLOW_CONTEXT_FRAMES` after them), and its first
audio starts while the flow has the rest still to do. The text encoder and the duration predictor see the
whole sentence, as in Piper.

Loudness: Piper scales every sentence to full scale after synthesis, which a streaming decoder cannot do
(it does not know a sentence's peak before the end). Each voice instead gets one fixed gain, measured at
load on calibration sentences, so all sentences keep the voice's natural relative loudness.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voxserve.backends.asr.embedded import cache_dir
from voxserve.backends.base import DecoderInfo, FrameBlock, FrameWord, SpeechOptions, VoiceInfo
from voxserve.backends.checks import check_frames
from voxserve.backends.tts.conv2d import rewrite_file
from voxserve.backends.tts.piper_words import id_positions, text_words, word_spans
from voxserve.errors import BackendError, ModelUnavailable, Unsupported
from voxserve.types import Float32Array

log = logging.getLogger(__name__)

HOP = 256
LATENT_CHANNELS = 192
_CALIBRATION = ("Glue the sheet to the dark blue background.", "Rice is often served in round bowls.")
_TARGET_PEAK = 0.9
_split_lock = threading.Lock()

FLOW_CONTEXT_FRAMES = 32
"""Frames of ``z_p`` on each side of a part of a sentence that make the flow's output on that part equal to
its output on the whole sentence: its receptive field (measured on the default voice: 24 frames give 1.1e-5
apart, 16 give 3e-2)."""


@dataclass(frozen=True)
class VoiceParts:
    """The cached parts of a split Piper voice.

    Attributes:
        frontend: phoneme ids -> ``z_p`` (or, without ``flow``, the decoder's latents) and frames per id.
        flow: (``z_p``, frame mask) -> the decoder's latents; None when the graph's flow could not be cut out.
        decoder: latents -> samples.
    """

    frontend: Path
    flow: Path | None
    decoder: Path


@dataclass(frozen=True)
class PiperLoadConfig:
    """Where a Piper voice is and how to run it.

    Attributes:
        model_path: the voice's ``.onnx`` file.
        config_path: its ``.onnx.json`` (default: the model path plus ``.json``).
        name: the name requests use.
        threads: ONNX Runtime threads per call (1 is best when many streams share the cores).
        stack_batches: decode a batch as one stacked tensor (GPU) instead of item by item (CPU, where a
            stacked batch measured 6-23 % slower per item than single windows).
        device: ``cpu`` or ``cuda``.
        noise_scale: override of the voice's latent sampling noise (0 makes synthesis deterministic).
        noise_w: override of the voice's duration noise (0 makes synthesis deterministic).
    """

    model_path: str
    config_path: str | None = None
    name: str = ""
    threads: int = 1
    stack_batches: bool = False
    device: str = "cpu"
    noise_scale: float | None = None
    noise_w: float | None = None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def split_voice(model_path: Path) -> VoiceParts:
    """The cached parts of a Piper voice, cutting the graph on first use.

    Raises:
        ModelUnavailable: the ``onnx`` package is missing or the graph has no HiFi-GAN decoder input.
    """
    out = cache_dir() / "piper-split" / _sha256(model_path)[:32]
    three = VoiceParts(out / "frontend-zp.onnx", out / "flow.onnx", out / "decoder-2d.onnx")
    two = VoiceParts(out / "frontend-latents.onnx", None, three.decoder)  # a graph whose flow was not found
    with _split_lock:
        for parts in (three, two):
            if all(p.is_file() for p in (parts.frontend, parts.flow, parts.decoder) if p is not None):
                return parts
        try:
            import onnx
            from onnx.utils import extract_model
        except ImportError as exc:
            raise ModelUnavailable("splitting a Piper voice needs the onnx package: pip install 'voxserve[tts]'") from exc
        graph = onnx.load(str(model_path), load_external_data=False).graph
        split = _decoder_input(graph)
        inputs = [i.name for i in graph.input if i.name != split]
        durations = [str(n.output[0]) for n in graph.node if n.op_type == "Ceil"][:1]
        flow_inputs = _flow_inputs(graph, split)
        if flow_inputs is None:
            log.info("no flow found in %s: its front part runs whole", model_path)
        result = three if flow_inputs is not None else two
        pieces: list[tuple[Path, list[str], list[str]]] = [(result.decoder, [split], [o.name for o in graph.output])]
        if flow_inputs is not None and result.flow is not None:
            pieces += [(result.frontend, inputs, [flow_inputs[0], *durations]), (result.flow, list(flow_inputs), [split])]
        else:
            pieces.append((result.frontend, inputs, [split, *durations]))
        out.mkdir(parents=True, exist_ok=True)
        for target, ins, outs in pieces:
            if target.is_file():
                continue  # the decoder of an earlier two-part split
            fd, tmp = tempfile.mkstemp(dir=out, suffix=".onnx.part")
            os.close(fd)
            try:
                extract_model(str(model_path), tmp, ins, outs)
                if target == result.decoder and not rewrite_file(Path(tmp)):
                    log.info("the decoder of %s keeps its 1-D convolutions", model_path)
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        (out / "frontend-durations.onnx").unlink(missing_ok=True)  # the front part as cut before the flow was
        log.info("split Piper voice %s at %s into %s", model_path, split, out)
    return result


def _decoder_input(graph: Any) -> str:
    """The tensor that feeds the HiFi-GAN decoder's first convolution (``dec.conv_pre``)."""
    for node in graph.node:
        if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] == "dec.conv_pre.weight":
            return str(node.input[0])
    raise ModelUnavailable("this ONNX file is not a Piper (VITS) voice: no dec.conv_pre convolution found")


def _flow_inputs(graph: Any, decoder_input: str) -> tuple[str, str] | None:
    """``(z_p, frame mask)``, the tensors the flow reads, or None for a graph not shaped like Piper's export:
    the decoder's input must be the flow's output times the frame mask, and the flow (the nodes named
    ``/flow/...``, in graph order) must start from one tensor made outside it."""
    producer = {o: n for n in graph.node for o in n.output}
    masked = producer.get(decoder_input)
    if masked is None or masked.op_type != "Mul" or len(masked.input) != 2:
        return None
    made_in_flow = {o for n in graph.node if n.name.startswith("/flow/") for o in n.output}
    flow_out = [i for i in masked.input if i in made_in_flow]
    mask = [i for i in masked.input if i not in made_in_flow]
    first = next((n for n in graph.node if n.name.startswith("/flow/")), None)
    if len(flow_out) != 1 or len(mask) != 1 or first is None:
        return None
    start = [i for i in first.input if i in producer and i not in made_in_flow and i != mask[0]
             and producer[i].op_type != "Constant"]
    return (start[0], mask[0]) if len(start) == 1 else None


def _session(path: Path, threads: int, device: str) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    try:
        return ort.InferenceSession(str(path), options, providers=providers)
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own exception types
        raise ModelUnavailable(f"cannot load {path}: {exc}") from exc


class PiperDecoder:
    """The HiFi-GAN half of a Piper voice (implements :class:`~voxserve.backends.base.AudioDecoder`)."""

    def __init__(self, path: Path, name: str, sample_rate: int, config: PiperLoadConfig) -> None:
        self._session = _session(path, config.threads, config.device)
        self._input = self._session.get_inputs()[0].name
        shape = self._session.get_inputs()[0].shape
        self.channels = int(shape[1]) if len(shape) == 3 and isinstance(shape[1], int) else LATENT_CHANNELS
        self._stack = config.stack_batches
        self.gain = 1.0
        self._info = DecoderInfo(
            name=f"piper-decoder:{name}", sample_rate=sample_rate, samples_per_frame=HOP,
            context_frames=10, first_frames=16, window_frames=128, stacks_batches=self._stack,
        )

    @property
    def info(self) -> DecoderInfo:
        """Facts about the decoder: 10 context frames give the whole decode's samples within float tolerance
        (measured on the default voice: at most 2.3e-6 apart; 8 frames: 3.7e-3, 61 dB SNR)."""
        return self._info

    def decode_batch(self, windows: Sequence[npt.NDArray[Any]]) -> list[Float32Array]:
        """Decode latent windows of shape (channels, frames) (192 channels in Piper's voices) to
        ``frames * 256`` samples each (none for no frames).

        Raises:
            InvalidInput: a window is not (channels, frames) finite floats (ONNX Runtime would raise its own error
                for a wrong shape or no frames, and turn NaN latents into NaN audio).
        """
        for i, w in enumerate(windows):
            check_frames(w, self.channels, f"decoder window {i}")
        results: list[Float32Array | None] = [None] * len(windows)
        by_length: dict[int, list[int]] = {}
        for i, w in enumerate(windows):
            if not w.shape[-1]:
                results[i] = np.zeros(0, np.float32)
            elif not self._stack:
                results[i] = self._run(w[np.newaxis])[0]
            else:
                by_length.setdefault(w.shape[-1], []).append(i)
        for indices in by_length.values():
            decoded = self._run(np.stack([windows[i] for i in indices]))
            for i, audio in zip(indices, decoded, strict=True):
                results[i] = audio
        return [r for r in results if r is not None]

    def _run(self, batch: npt.NDArray[Any]) -> list[Float32Array]:
        out = self._session.run(None, {self._input: np.ascontiguousarray(batch, dtype=np.float32)})[0]
        audio = np.clip(out.reshape(batch.shape[0], -1) * self.gain, -1.0, 1.0).astype(np.float32)
        return list(audio)


class PiperAcoustic:
    """Phonemes -> latent frames for one Piper voice (implements :class:`~voxserve.backends.base.AcousticModel`)."""

    def __init__(self, path: Path, voice_config: dict[str, Any], info: VoiceInfo, config: PiperLoadConfig,
                 flow: Path | None = None) -> None:
        from piper import PiperVoice
        from piper.config import PiperConfig

        self._config = PiperConfig.from_dict(voice_config)
        if config.noise_scale is not None:
            self._config.noise_scale = config.noise_scale
        if config.noise_w is not None:
            self._config.noise_w_scale = config.noise_w
        if self._config.num_speakers > 1:
            raise Unsupported(f"voice {info.name!r} has {self._config.num_speakers} speakers; only single-speaker "
                              "Piper voices stream through the split decoder")
        # Only the phonemizer of PiperVoice is used: it needs the config, not a session of the whole graph.
        self._phonemizer = PiperVoice(session=None, config=self._config)
        self._session = _session(path, config.threads, config.device)
        self._timed = len(self._session.get_outputs()) > 1  # the front part outputs durations too
        self._flow = _session(flow, config.threads, config.device) if flow is not None else None
        self._flow_inputs = tuple(i.name for i in self._flow.get_inputs()) if self._flow is not None else ()
        self._voice = info

    @property
    def voice(self) -> VoiceInfo:
        """The voice."""
        return self._voice

    def check_options(self, options: SpeechOptions) -> None:
        """Piper honours speed; seeds are not supported by its ONNX sampler."""
        options.validate()

    def frames(self, text: str, options: SpeechOptions, first_frames: int = 0) -> Iterator[FrameBlock]:
        """One block of (192, frames) latents per sentence that the phonemizer finds in ``text``, with the frames
        of its words; with ``first_frames``, the first sentence's first frames come as a block of their own
        (the next ``next()`` gives the rest), ready before the flow has run on the whole sentence."""
        sentences = [p for p in self._phonemizer.phonemize(text) if p]
        id_map = self._config.phoneme_id_map
        positions = [id_positions(p, id_map) for p in sentences]
        spans = word_spans(text_words(text), sentences, positions, self._phonemizer.phonemize) if self._timed else None
        for i, phonemes in enumerate(sentences):
            latents, durations = self._run(self._phonemizer.phonemes_to_ids(phonemes), options)
            words: tuple[FrameWord, ...] = ()
            if spans is not None and durations is not None:
                ends = np.cumsum(durations)
                starts = ends - durations
                words = tuple(FrameWord(w, int(starts[a]), int(ends[b - 1])) for w, a, b in spans[i])
            if self._flow is None:
                yield FrameBlock(latents, True, words)
                continue
            total = latents.shape[-1]
            head = first_frames if i == 0 and 0 < first_frames and first_frames + FLOW_CONTEXT_FRAMES < total else 0
            if head:
                yield FrameBlock(self._run_flow(latents, 0, head), False, words)
            yield FrameBlock(self._run_flow(latents, head, total), True, words)

    def _run_flow(self, z_p: npt.NDArray[np.float32], start: int, end: int) -> npt.NDArray[np.float32]:
        """The flow's output on frames ``start:end`` of a sentence's ``z_p`` (192, frames), computed on those frames
        and up to :data:`FLOW_CONTEXT_FRAMES` on each side: the same as on the whole sentence."""
        assert self._flow is not None
        lo, hi = max(0, start - FLOW_CONTEXT_FRAMES), min(z_p.shape[-1], end + FLOW_CONTEXT_FRAMES)
        z, mask = self._flow_inputs
        try:
            out = self._flow.run(None, {z: np.ascontiguousarray(z_p[np.newaxis, :, lo:hi]),
                                        mask: np.ones((1, 1, hi - lo), dtype=np.float32)})[0]
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"Piper flow failed: {exc}") from exc
        return np.asarray(out[0, :, start - lo : end - lo], dtype=np.float32)

    def _run(self, phoneme_ids: list[int], options: SpeechOptions) -> tuple[npt.NDArray[np.float32],
                                                                              npt.NDArray[np.int64] | None]:
        """Run the front part of the graph on one sentence's phoneme ids: ``z_p`` (the decoder's latents when
        the graph was not cut before its flow) and (when the graph gives them) frames per phoneme id."""
        c = self._config
        scales = np.array([c.noise_scale, c.length_scale / options.speed, c.noise_w_scale], dtype=np.float32)
        ids = np.array([phoneme_ids], dtype=np.int64)
        try:
            out = self._session.run(None, {"input": ids, "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
                                           "scales": scales})
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"Piper acoustic model failed: {exc}") from exc
        durations = np.asarray(out[1], dtype=np.int64).reshape(-1) if len(out) > 1 else None
        return np.asarray(out[0][0], dtype=np.float32), durations


def read_voice_config(model_path: Path, config_path: Path | None = None) -> dict[str, Any]:
    """The ``.onnx.json`` of a Piper voice."""
    path = config_path or Path(f"{model_path}.json")
    if not path.is_file():
        raise ModelUnavailable(f"Piper voice {model_path} has no config file {path}")
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelUnavailable(f"{path} is not valid JSON: {exc}") from exc
    return data


def voice_info(name: str, model_path: Path, data: dict[str, Any]) -> VoiceInfo:
    """Describe a Piper voice from its config."""
    language = str(data.get("language", {}).get("code", data.get("espeak", {}).get("voice", ""))).replace("_", "-")
    quality = data.get("audio", {}).get("quality", "")
    dataset = data.get("dataset", model_path.stem)
    return VoiceInfo(
        name=name, language=language, sample_rate=int(data["audio"]["sample_rate"]), backend="piper",
        description=f"Piper {dataset} ({quality})".replace(" ()", ""), path=str(model_path),
    )


def load_piper(config: PiperLoadConfig) -> tuple[PiperAcoustic, PiperDecoder]:
    """Load a Piper voice as an acoustic model and a decoder (splitting the graph on first use)."""
    model_path = Path(config.model_path).expanduser()
    if not model_path.is_file():
        raise ModelUnavailable(f"Piper voice file {model_path} does not exist")
    data = read_voice_config(model_path, Path(config.config_path) if config.config_path else None)
    info = voice_info(config.name or model_path.stem, model_path, data)
    parts = split_voice(model_path)
    acoustic = PiperAcoustic(parts.frontend, data, info, config, parts.flow)
    decoder = PiperDecoder(parts.decoder, info.name, info.sample_rate, config)
    decoder.gain = calibrate_gain(acoustic, decoder)
    return acoustic, decoder


def calibrate_gain(acoustic: PiperAcoustic, decoder: PiperDecoder) -> float:
    """A fixed gain that brings calibration sentences to a peak of 0.9 (between 1 and 4)."""
    peak = 0.0
    for sentence in _CALIBRATION:
        for block in acoustic.frames(sentence, SpeechOptions()):
            audio = decoder.decode_batch([block.frames])[0]
            peak = max(peak, float(np.max(np.abs(audio))))
    if peak <= 0:
        raise ModelUnavailable("the voice produced silence on the calibration sentences")
    return float(np.clip(_TARGET_PEAK / peak, 1.0, 4.0))
