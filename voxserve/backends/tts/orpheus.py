"""Orpheus-style LLM-TTS: a Llama-architecture causal LM (transformers) that speaks in SNAC codec tokens.

Stage 1 of synthesis for GPU deployments. Per stream, the model generates audio tokens for a prompt
``"<voice>: <text>"``; sampling is constrained to the audio tokens valid at each position (and end of speech
at frame boundaries), so every generated frame is decodable. Frames leave one at a time; the SNAC decoder
(:mod:`voxserve.backends.tts.snac_decoder`) decodes windows of them batched across streams.

No Orpheus weights exist in this environment: a real model loads from a local directory
(:class:`~voxserve.backends.tts.catalog.OrpheusSettings`); tests run the same code on tiny random-weight
configurations, whose output is noise. Generation here is one stream per model call (no in-flight batching of
token generation across streams; vLLM would add that).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxserve.backends.base import FrameBlock, SpeechOptions, VoiceInfo
from voxserve.backends.tts.orpheus_codes import CODES_PER_FRAME, OrpheusTokens
from voxserve.errors import BackendError, ModelUnavailable, Unsupported

TextEncoder = Callable[[str], list[int]]


@dataclass(frozen=True)
class OrpheusSampling:
    """Token sampling (Orpheus' recommended values) and the length cap per text segment.

    Attributes:
        temperature: softmax temperature (0 = greedy).
        top_p: nucleus sampling mass.
        repetition_penalty: CTRL-style penalty on tokens already generated (Orpheus needs >= 1.1).
        max_frames: most frames generated for one segment (frames of 85.3 ms at 24 kHz).
    """

    temperature: float = 0.6
    top_p: float = 0.8
    repetition_penalty: float = 1.1
    max_frames: int = 360


DEFAULT_SAMPLING = OrpheusSampling()
ORPHEUS_TOKENS = OrpheusTokens()


class OrpheusLm:
    """The shared token model: one per process, used by every Orpheus voice (calls are serialised)."""

    def __init__(
        self,
        model: Any,
        encode: TextEncoder,
        tokens: OrpheusTokens = ORPHEUS_TOKENS,
        sampling: OrpheusSampling = DEFAULT_SAMPLING,
        device: str = "cpu",
    ) -> None:
        import torch

        self._torch = torch
        self.model = model.to(device).eval()
        self.encode = encode
        self.tokens = tokens
        self.sampling = sampling
        self.device = device
        self._lock = threading.Lock()
        # transformers 5 renamed past_key_values to cache; accept either.
        import inspect

        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        vocab = int(model.config.vocab_size)
        if vocab < tokens.vocab_end:
            raise ModelUnavailable(f"the model's vocabulary ({vocab}) ends before the audio tokens ({tokens.vocab_end})")

    def generate(self, prompt: str, seed: int | None = None) -> Iterator[FrameBlock]:
        """Frames for one prompt, one block per frame; the last block (possibly empty) ends the unit."""
        torch = self._torch
        t = self.tokens
        ids = torch.tensor([t.prompt(self.encode(prompt))], dtype=torch.long, device=self.device)
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**31 - 1, ()).item()))
        generated: list[int] = []
        frame: list[int] = []
        past = None
        for position in range(self.sampling.max_frames * CODES_PER_FRAME):
            with self._lock, torch.inference_mode():
                out = self.model(input_ids=ids, use_cache=True, **{self._cache_arg: past})
            past = out[self._cache_arg]
            token = self._sample(out.logits[0, -1].float(), position, generated, generator)
            if token == t.end_of_speech:
                break
            generated.append(token)
            frame.append(t.code(token, position))
            if len(frame) == CODES_PER_FRAME:
                yield FrameBlock(np.asarray(frame, dtype=np.int64).reshape(CODES_PER_FRAME, 1), False)
                frame = []
            ids = torch.tensor([[token]], dtype=torch.long, device=self.device)
        yield FrameBlock(np.zeros((CODES_PER_FRAME, 0), dtype=np.int64), True)

    def _sample(self, logits: Any, position: int, generated: list[int], generator: Any) -> int:
        """Sample the next token among the audio tokens of this position (and end of speech at a frame start)."""
        torch = self._torch
        s, t = self.sampling, self.tokens
        lo, hi = t.audio_range(position)
        allowed = torch.full_like(logits, float("-inf"))
        allowed[lo:hi] = logits[lo:hi]
        if position % CODES_PER_FRAME == 0:
            allowed[t.end_of_speech] = logits[t.end_of_speech]
        if s.repetition_penalty != 1.0 and generated:
            previous = torch.tensor(sorted(set(generated)), device=logits.device)
            values = allowed[previous]
            allowed[previous] = torch.where(values > 0, values / s.repetition_penalty, values * s.repetition_penalty)
        if s.temperature <= 0:
            return int(torch.argmax(allowed).item())
        probs = torch.softmax(allowed / s.temperature, dim=-1)
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < s.top_p
        keep[0] = True
        kept = torch.where(keep, sorted_probs, torch.zeros_like(sorted_probs))
        choice = torch.multinomial(kept / kept.sum(), 1, generator=generator)
        return int(order[choice].item())


class OrpheusAcoustic:
    """One Orpheus voice: the shared token model with a speaker name (implements ``AcousticModel``)."""

    def __init__(self, lm: OrpheusLm, voice: VoiceInfo, speaker: str | None = None) -> None:
        self.lm = lm
        self._voice = voice
        self.speaker = speaker if speaker is not None else voice.name

    @property
    def voice(self) -> VoiceInfo:
        """The voice."""
        return self._voice

    def check_options(self, options: SpeechOptions) -> None:
        """Orpheus speaks at its own rate: only speed 1.0 is accepted."""
        options.validate()
        if options.speed != 1.0:
            raise Unsupported("Orpheus voices do not support speed other than 1.0", param="speed")

    def frames(self, text: str, options: SpeechOptions, first_frames: int = 0) -> Iterator[FrameBlock]:
        """Frames of ``text`` spoken by this voice, one block per 85 ms frame (so ``first_frames`` changes
        nothing)."""
        self.check_options(options)
        prompt = f"{self.speaker}: {text}" if self.speaker else text
        try:
            yield from self.lm.generate(prompt, options.seed)
        except (ValueError, RuntimeError) as exc:
            raise BackendError(f"Orpheus generation failed: {exc}") from exc


def load_orpheus_lm(model_path: str, device: str, sampling: OrpheusSampling = DEFAULT_SAMPLING) -> OrpheusLm:
    """An Orpheus token model and its tokenizer from a local transformers directory (never downloads)."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelUnavailable("LLM-TTS needs: pip install 'voxserve[tts-llm]'") from exc
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"cannot load an Orpheus model from {model_path}: {exc}") from exc

    def encode(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=True).input_ids)

    return OrpheusLm(model, encode, OrpheusTokens(), sampling, device)


class _Shared:
    """Loads the token model and the codec once for all voices of one Orpheus deployment."""

    def __init__(self, load: Callable[[], tuple[OrpheusLm, Any]]) -> None:
        self._load = load
        self._value: tuple[OrpheusLm, Any] | None = None
        self._lock = threading.Lock()

    def get(self) -> tuple[OrpheusLm, Any]:
        with self._lock:
            if self._value is None:
                self._value = self._load()
            return self._value


def orpheus_voice_entries(
    load: Callable[[], tuple[OrpheusLm, Any]], voices: tuple[str, ...], sample_rate: int = 24_000, language: str = "en"
) -> list[Any]:
    """Catalog entries for the speakers of one Orpheus model; ``load`` returns (token model, SNAC decoder)."""
    from voxserve.backends.base import VoiceEntry

    shared = _Shared(load)
    entries = []
    for speaker in voices:
        info = VoiceInfo(name=speaker, language=language, sample_rate=sample_rate, backend="orpheus",
                         description=f"Orpheus-style LLM-TTS speaker {speaker!r} (SNAC 24 kHz)")

        def loader(info: VoiceInfo = info) -> tuple[OrpheusAcoustic, Any]:
            lm, decoder = shared.get()
            return OrpheusAcoustic(lm, info), decoder

        entries.append(VoiceEntry(info, loader))
    return entries


def orpheus_entries(settings: Any) -> list[Any]:
    """Catalog entries for an Orpheus deployment with local weights (``OrpheusSettings``)."""
    from voxserve.backends.tts.snac_decoder import SnacDecoder, load_snac, resolve_device

    def load() -> tuple[OrpheusLm, Any]:
        device = resolve_device(settings.device)
        lm = load_orpheus_lm(settings.model_path, device)
        return lm, SnacDecoder(load_snac(settings.snac_path), name=f"snac:{settings.snac_path}", device=device)

    return orpheus_voice_entries(load, tuple(settings.voices))
