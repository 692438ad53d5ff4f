"""OpenAI's ``known_speaker_names[]`` and ``known_speaker_references[]`` (audio as data URLs): parsed from a
form, then turned into enrolled voices for a diarization (a name without references is looked up in the
server's voice library, :mod:`voxserve.server.voice_library`).
"""

from __future__ import annotations

import base64
import binascii
import re

from voxserve.errors import InvalidInput
from voxserve.pipelines.known_speakers import MAX_KNOWN_SPEAKERS, KnownSpeaker
from voxserve.server.context import ServerContext
from voxserve.server.errors import HttpError
from voxserve.server.voice_library import VoiceLibrary

NAMES = "known_speaker_names"
REFERENCES = "known_speaker_references"
MAX_REFERENCE_BYTES = 10_000_000
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[\w.+-]+)*;base64,(?P<data>.*)", re.DOTALL)


def _invalid(param: str, message: str) -> HttpError:
    return HttpError(422, message, code="invalid_value", param=param)


def check_known_fields(names: list[str], references: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Validate the two lists' shape: names (1-100 characters, distinct, at most ``MAX_KNOWN_SPEAKERS``) and
    either no references (every name from the voice library) or one data URL per name."""
    names = [n.strip() for n in names]
    if references and not names:
        raise _invalid(REFERENCES, f"{REFERENCES} needs {NAMES}, one name per reference")
    if references and len(references) != len(names):
        raise _invalid(REFERENCES, f"{len(names)} {NAMES} but {len(references)} {REFERENCES}: give one reference "
                       "per name, or none to use enrolled voices")
    if len(names) > MAX_KNOWN_SPEAKERS:
        raise _invalid(NAMES, f"at most {MAX_KNOWN_SPEAKERS} known speakers")
    if any(not n or len(n) > 100 for n in names):
        raise _invalid(NAMES, "known speaker names must be 1-100 characters")
    if len(set(names)) != len(names):
        raise _invalid(NAMES, "known speaker names must differ")
    for r in references:
        data_url_bytes(r)
    return tuple(names), tuple(references)


def data_url_bytes(url: str, param: str = REFERENCES) -> bytes:
    """The bytes of a base64 ``data:`` URL (``data:audio/wav;base64,...``).

    Raises:
        HttpError: 422 for anything else, or more than ``MAX_REFERENCE_BYTES``.
    """
    m = _DATA_URL.fullmatch(url.strip())
    if m is None:
        raise _invalid(param, "a reference must be a base64 data URL such as data:audio/wav;base64,...")
    if m["type"] and not m["type"].startswith(("audio/", "video/", "application/octet-stream")):
        raise _invalid(param, f"a reference must be audio, not {m['type']}")
    if len(m["data"]) > MAX_REFERENCE_BYTES * 4 // 3 + 4:
        raise _invalid(param, f"a reference may hold at most {MAX_REFERENCE_BYTES // 1_000_000} MB")
    try:
        return base64.b64decode(re.sub(r"\s", "", m["data"]), validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(param, "a reference's base64 data is malformed") from None


def voice_library(ctx: ServerContext) -> VoiceLibrary:
    """The server's voice library (in its data folder)."""
    return VoiceLibrary(ctx.data_dir / "voices.sqlite3")


async def enroll(ctx: ServerContext, name: str, audio: bytes, param: str = REFERENCES) -> KnownSpeaker:
    """A voice from reference audio with the server's embedder; 422 (``param``) for bad audio."""
    try:
        return await ctx.vox.aknown_speaker(name, audio)
    except InvalidInput as exc:
        raise _invalid(param, exc.message) from None


async def known_speakers(ctx: ServerContext, names: tuple[str, ...], references: tuple[str, ...]
                         ) -> tuple[KnownSpeaker, ...]:
    """The voices a request names: enrolled from its references, or from the voice library."""
    if references:
        return tuple([await enroll(ctx, n, data_url_bytes(r)) for n, r in zip(names, references, strict=True)])
    library = voice_library(ctx)
    embedder = ctx.settings.diarization.naming_embedder
    out = []
    for n in names:
        voice = library.get(n, embedder)
        if voice is None:
            raise _invalid(NAMES, f"{n!r} is not enrolled (POST /v1/voices/enrolled) and has no reference")
        out.append(voice)
    return tuple(out)
