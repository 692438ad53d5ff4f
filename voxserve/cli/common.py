"""Flag groups and settings shared by the commands: the engine flags and the settings built from them, the Ray
flags of ``serve``/``transcribe``, the speaker-count flags of ``diarize``/``transcribe --diarize``, and the audio
format of an output file's name (``speak``, ``agent``), and the vocabulary and language flags of file commands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxserve.config import Settings, load_settings
from voxserve.errors import InvalidInput
from voxserve.languages import language_code
from voxserve.service import Voxserve
from voxserve.text.keyterms import parse_keyterms

if TYPE_CHECKING:
    from voxserve.pipelines.diarization import DiarizeOptions

_EXTENSIONS = {"wav": "wav", "mp3": "mp3", "flac": "flac", "opus": "opus", "ogg": "opus", "pcm": "pcm", "raw": "pcm"}


def add_engine_args(p: argparse.ArgumentParser) -> None:
    """The model, batching, device, guard and speech-detection flags that :func:`engine_settings` reads."""
    p.add_argument("--model", help="model name (whisper-base, whisper-tiny.en) or a CTranslate2 Whisper directory")
    p.add_argument("--config", help="settings file (TOML or JSON)")
    p.add_argument("--batch-size", type=int, help="chunks per decoder batch")
    p.add_argument("--workers", type=int, help="concurrent model batches (default: one per core)")
    p.add_argument("--threads", type=int, help="threads per worker")
    p.add_argument("--beam-size", type=int, help="beam width (1 = greedy)")
    p.add_argument("--device", help="cpu, cuda or auto")
    p.add_argument("--compute-type", help="CTranslate2 compute type (default: int8 on CPU)")
    p.add_argument("--no-guard", action="store_true", help="disable the hallucination guard (faster, riskier)")
    p.add_argument("--vad-threshold", type=float, help="speech probability of the VAD (default 0.3 for files)")
    p.add_argument("--min-silence-ms", type=int, help="a pause this long separates speech regions (default 300)")
    p.add_argument("--speech-pad-ms", type=int, help="audio kept around each speech region (default 200)")


def engine_settings(args: argparse.Namespace, **sections: dict[str, Any]) -> Settings:
    """Settings from ``--config`` and the environment, overridden by the flags of :func:`add_engine_args` (and of
    :func:`add_ray_args` where the command has them); ``sections`` override further sections (e.g. ``server``)."""
    asr = {
        "model": args.model, "max_batch_size": args.batch_size, "workers": args.workers,
        "threads_per_worker": args.threads, "beam_size": args.beam_size, "device": args.device,
        "compute_type": args.compute_type,
    }
    guard = {"enabled": False} if args.no_guard else {}
    chunking = {"vad_threshold": args.vad_threshold, "min_silence_ms": args.min_silence_ms,
                "speech_pad_ms": args.speech_pad_ms}
    return load_settings(args.config, asr=asr, guard=guard, chunking=chunking, ray=ray_overrides(args), **sections)


def add_ray_args(p: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]`` and ``--replicas N`` (the ``[ray]`` extra)."""
    p.add_argument(
        "--ray", nargs="?", const="", default=None, metavar="ADDRESS",
        help="run speech recognition on Ray replicas: no ADDRESS starts a private local Ray instance (or uses "
        "ray.address from the settings); 'auto' joins the cluster started here with `ray start`; HOST:PORT or "
        "ray://HOST:10001 joins that one",
    )
    p.add_argument("--replicas", type=int, help="model replicas on Ray (default 2; implies --ray)")


def ray_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ray`` settings section the options ask for (empty: leave the settings as they are); a command
    without the Ray flags asks for nothing."""
    address, replicas = getattr(args, "ray", None), getattr(args, "replicas", None)
    if address is None and replicas is None:
        return {}
    out: dict[str, Any] = {"enabled": True}
    if address:
        out["address"] = address
    if replicas is not None:
        if replicas < 1:
            raise InvalidInput("--replicas must be at least 1")
        out["replicas"] = replicas
    return out


def add_speaker_args(p: argparse.ArgumentParser) -> None:
    """The speaker-count and embedder flags that :func:`speaker_counts` reads."""
    p.add_argument("--num-speakers", type=int, help="exact number of speakers (default: estimated)")
    p.add_argument("--min-speakers", type=int, help="at least this many speakers")
    p.add_argument("--max-speakers", type=int, help="at most this many speakers")
    p.add_argument("--embedder", help="speaker embedder: resemblyzer (default) or campplus")
    p.add_argument("--speaker", action="append", default=[], metavar="NAME=CLIP",
                   help="a known speaker and a clip of their voice (1-30 s): a speaker who sounds like it "
                   "is labelled NAME (repeatable)")


def speaker_counts(vox: Voxserve, args: argparse.Namespace) -> DiarizeOptions:
    """The diarization options of the flags of :func:`add_speaker_args` (``--speaker`` clips enrolled)."""
    known = []
    for spec in args.speaker:
        name, sep, clip = spec.partition("=")
        if not sep or not name.strip() or not clip:
            raise InvalidInput(f"--speaker takes NAME=CLIP, not {spec!r}", param="speaker")
        known.append(vox.known_speaker(name.strip(), clip, embedder=args.embedder))
    return vox.diarize_options(num_speakers=args.num_speakers, min_speakers=args.min_speakers,
                               max_speakers=args.max_speakers, known_speakers=known)


def output_format(output: str | None, fmt: str | None) -> str:
    """The audio format: ``fmt`` (``--format``), else the output file's extension, else wav.

    Raises:
        InvalidInput: the extension is not a known audio format.
    """
    if fmt:
        return fmt
    if not output or output == "-":
        return "wav"
    suffix = Path(output).suffix.lower().lstrip(".")
    if suffix not in _EXTENSIONS:
        raise InvalidInput(f"cannot tell the audio format of {output!r}: use one of .wav .mp3 .flac .opus .ogg .pcm "
                           "or pass --format", param="output")
    return _EXTENSIONS[suffix]


def add_vocabulary_args(p: argparse.ArgumentParser) -> None:
    """``--keyterm TERM`` (repeatable), ``--keyterms-file F`` and ``--allowed-languages`` of file commands."""
    p.add_argument("--keyterm", action="append", default=[], metavar="TERM",
                   help="a word or name to favour (repeatable; after the settings' asr.keyterms)")
    p.add_argument("--keyterms-file", metavar="FILE", help="key terms, one per line (# starts a comment)")
    p.add_argument("--allowed-languages", metavar="CODES",
                   help="detect only among these languages, e.g. en,de,es (with --language omitted or auto-per-segment)")


def keyterms_from_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The key terms of ``--keyterm`` and ``--keyterms-file`` (the file's first).

    Raises:
        InvalidInput: the file cannot be read, or a term is malformed.
    """
    lines: list[str] = []
    if args.keyterms_file:
        try:
            text = Path(args.keyterms_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read --keyterms-file: {exc}", param="keyterms_file") from None
        lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    return parse_keyterms([line for line in (*lines, *args.keyterm) if line], param="keyterm")


def allowed_languages_from_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The codes of ``--allowed-languages`` (names accepted too).

    Raises:
        InvalidInput: an unknown language.
    """
    codes = []
    for name in (args.allowed_languages or "").split(","):
        if name.strip():
            code = language_code(name)
            if code is None:
                raise InvalidInput(f"unknown language {name.strip()!r} in --allowed-languages", param="allowed_languages")
            codes.append(code)
    return tuple(dict.fromkeys(codes))
