"""A subset of SSML 1.1 read into a typed sequence of spoken pieces and pauses (pure; no model involved).

Input is parsed with a real XML parser that refuses DTDs, entity declarations and external references
(``defusedxml``: no entity bombs, no file or network reads); elements may nest at most :data:`MAX_DEPTH` deep.
Supported (anything else: see "Unknown elements")::

    <speak>                      the root (required; its namespace and attributes are ignored)
    <break time="500ms"/>        silence of exactly that length (``ms`` or ``s``, at most 10 s); or
    <break strength="strong"/>   none 0, x-weak 0.1 s, weak 0.25 s, medium 0.5 s (a bare <break/>), strong 0.75 s,
                                 x-strong 1.2 s
    <p>, <s>                     a paragraph ends with a 0.75 s pause; a sentence is cut where it ends (no pause
                                 beyond the voice's own); adjacent pauses merge into the longest of them
    <say-as interpret-as="...">  characters / spell-out, cardinal, ordinal, digits, date (``format`` mdy, dmy,
                                 ymd, md, dm, ym, my, y, m, d; default mdy, or ymd when the first field has 4
                                 digits), time, telephone; another interpret-as keeps the text as written
    <sub alias="...">            the alias is spoken instead of the content
    <prosody rate volume pitch>  rate: x-slow 0.5, slow 0.75, medium 1, fast 1.25, x-fast 1.5, ``N%`` of normal,
                                 ``+N%``/``-N%``, or a multiplier; nested rates multiply. volume: silent, x-soft
                                 -12 dB, soft -6 dB, medium 0, loud +4 dB, x-loud +8 dB, or ``+N dB``/``-N dB``
                                 (-40 to +12), scaling the samples; pitch (and contour, range) are accepted and
                                 ignored: Piper voices have no pitch control

Unknown elements (``emphasis``, ``mark``, ``voice``, ``phoneme``, ...) are ignored and their text is spoken.
Text between elements keeps its words; runs of whitespace become one space.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from voxserve.errors import InvalidInput
from voxserve.text.numbers import digits, ordinal_text, year
from voxserve.text.speakable import number_words, to_speakable

MAX_DEPTH = 32
MAX_BREAK_S = 10.0
BREAK_STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.2}
PARAGRAPH_PAUSE_S = 0.75
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
VOLUMES_DB = {"x-soft": -12.0, "soft": -6.0, "medium": 0.0, "default": 0.0, "loud": 4.0, "x-loud": 8.0}
_MONTH_NAMES = ("January February March April May June July August September October November "
                "December").split()
_SSML_START = re.compile(r"\s*(?:<\?xml[\s?]|<!DOCTYPE[\s>]|<speak[\s>/])")
_STARTS = ("<?xml", "<!DOCTYPE", "<speak")


@dataclass(frozen=True)
class Speech:
    """Text to speak with one style.

    Attributes:
        text: the words (say-as and sub already resolved), whitespace collapsed.
        rate: speaking rate relative to the request's speed (1 = unchanged).
        gain: linear factor on the samples (1 = unchanged, 0 = silent).
    """

    text: str
    rate: float = 1.0
    gain: float = 1.0


@dataclass(frozen=True)
class Pause:
    """Silence of ``seconds`` between the speech around it (0: only a cut between two units of speech)."""

    seconds: float


SsmlPiece = Speech | Pause


def is_ssml(text: str) -> bool:
    """Whether ``text`` is an SSML document: it starts (after whitespace) with a ``<speak>`` element, or with
    an XML declaration or a DTD (which make it XML, never text to read aloud)."""
    return _SSML_START.match(text) is not None


def ssml_start(text: str) -> bool | None:
    """For text that arrives in pieces: True when it starts an SSML document, False when it cannot, None
    while too little has come to tell (only whitespace, ``<spe``, ``<?x``)."""
    if is_ssml(text):
        return True
    head = text.lstrip()
    return None if any(start.startswith(head) for start in _STARTS) else False


def as_document(text: str) -> str:
    """``text`` as an SSML document: itself when it is one, else wrapped in ``<speak>...</speak>``."""
    return text if is_ssml(text) else f"<speak>{text}</speak>"


def parse_ssml(document: str, max_depth: int = MAX_DEPTH) -> list[SsmlPiece]:
    """The spoken pieces and pauses of an SSML document, in order.

    Raises:
        InvalidInput: (``param="input"``) not well-formed XML (the message says the line and column), a DTD or
            entity declaration, nesting deeper than ``max_depth``, no ``<speak>`` root, a bad attribute value, or
            nothing to say (no text and no pause).
    """
    root = _parse_xml(document)
    _check_depth(root, max_depth)
    if _local(root.tag) != "speak":
        raise _invalid(f"the root element must be <speak>, not <{_local(root.tag)}>")
    builder = _Builder()
    _walk_children(root, _Style(1.0, 1.0), builder)
    pieces = builder.finish()
    if not pieces:
        raise InvalidInput("SSML: the document has nothing to say", param="input", code="empty_input")
    return pieces


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(f"SSML: {message}", param="input", code="invalid_ssml")


def _parse_xml(document: str) -> Any:
    try:
        from defusedxml import DefusedXmlException
        from defusedxml.ElementTree import ParseError, fromstring
    except ImportError as exc:  # the parser ships with the [tts] extra
        raise InvalidInput("SSML input needs defusedxml: pip install 'voxserve[tts]'", param="input") from exc
    try:
        return fromstring(document, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except ParseError as exc:
        raise _invalid(f"not well-formed XML: {exc}") from None
    except DefusedXmlException as exc:
        raise _invalid(f"DTDs, entity declarations and external references are not allowed ({type(exc).__name__})") \
            from None


def _check_depth(root: Any, max_depth: int) -> None:
    stack = [(root, 1)]
    while stack:
        element, depth = stack.pop()
        if depth > max_depth:
            raise _invalid(f"elements nest deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in element)


def _local(tag: Any) -> str:
    """An element's name without its namespace (``{http://www.w3.org/2001/10/synthesis}speak`` -> ``speak``)."""
    return str(tag).rpartition("}")[2]


@dataclass(frozen=True)
class _Style:
    rate: float
    gain: float


class _Builder:
    """Collects text of one style into a piece until the style changes or a pause comes."""

    def __init__(self) -> None:
        self.pieces: list[SsmlPiece] = []
        self._parts: list[str] = []
        self._style = _Style(1.0, 1.0)

    def text(self, text: str | None, style: _Style) -> None:
        if not text:
            return
        if style != self._style and "".join(self._parts).strip():
            self._close()
        if style != self._style or not self._parts:
            self._style = style
        self._parts.append(text)

    def pause(self, seconds: float) -> None:
        self._close()
        last = self.pieces[-1] if self.pieces else None
        if isinstance(last, Pause):
            self.pieces[-1] = Pause(max(last.seconds, seconds))
        else:
            self.pieces.append(Pause(seconds))

    def finish(self) -> list[SsmlPiece]:
        """The pieces, without cuts (zero pauses) at either end."""
        self._close()
        pieces = self.pieces
        while pieces and isinstance(pieces[0], Pause) and pieces[0].seconds == 0:
            pieces = pieces[1:]
        while pieces and isinstance(pieces[-1], Pause) and pieces[-1].seconds == 0:
            pieces = pieces[:-1]
        return pieces

    def _close(self) -> None:
        text = re.sub(r" ([,.;:!?])", r"\1", " ".join("".join(self._parts).split()))
        self._parts = []
        if text:
            self.pieces.append(Speech(text, self._style.rate, self._style.gain))


def _walk_children(element: Any, style: _Style, out: _Builder) -> None:
    out.text(element.text, style)
    for child in element:
        _walk(child, style, out)
        out.text(child.tail, style)


def _walk(element: Any, style: _Style, out: _Builder) -> None:
    tag = _local(element.tag)
    if tag == "break":
        out.pause(_break_seconds(element.attrib))
    elif tag == "say-as":
        out.text(" " + say_as(" ".join(element.itertext()), element.get("interpret-as", ""),
                              element.get("format", "")) + " ", style)
    elif tag == "sub":
        alias = element.get("alias")
        if alias is None:
            raise _invalid("<sub> needs an alias attribute")
        out.text(f" {alias} ", style)
    elif tag == "prosody":
        _walk_children(element, _prosody(element.attrib, style), out)
    elif tag in ("p", "s"):
        out.pause(0.0)
        _walk_children(element, style, out)
        out.pause(PARAGRAPH_PAUSE_S if tag == "p" else 0.0)
    else:  # unknown elements: ignored, their text spoken
        _walk_children(element, style, out)


def _break_seconds(attrib: dict[str, str]) -> float:
    time = attrib.get("time")
    if time is None:
        strength = attrib.get("strength", "medium")
        if strength not in BREAK_STRENGTHS:
            raise _invalid(f"break strength must be one of {', '.join(BREAK_STRENGTHS)}, not {strength!r}")
        return BREAK_STRENGTHS[strength]
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)\s*", time)
    if m is None:
        raise _invalid(f"break time must be like '500ms' or '1.5s', not {time!r}")
    seconds = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    if seconds > MAX_BREAK_S:
        raise _invalid(f"break time must be at most {MAX_BREAK_S:g}s, not {time!r}")
    return seconds


def _prosody(attrib: dict[str, str], style: _Style) -> _Style:
    rate, gain = style.rate, style.gain
    if "rate" in attrib:
        rate *= _rate(attrib["rate"])
    if "volume" in attrib:
        gain *= _gain(attrib["volume"])
    return _Style(rate, gain)


def _rate(value: str) -> float:
    v = value.strip()
    if v in RATES:
        return RATES[v]
    factor = math.nan
    if m := re.fullmatch(r"([+-])(\d+(?:\.\d*)?)%", v):  # relative: +10% is 1.1
        factor = 1.0 + float(m.group(1) + m.group(2)) / 100.0
    elif m := re.fullmatch(r"(\d+(?:\.\d*)?)(%?)", v):  # 80% of normal, or a multiplier
        factor = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if 0 < factor <= 10:
        return factor
    raise _invalid(f"prosody rate must be x-slow ... x-fast, a percentage ('80%', '+10%') or a multiplier, not {value!r}")


def _gain(value: str) -> float:
    v = value.strip()
    if v == "silent":
        return 0.0
    if v in VOLUMES_DB:
        return float(10 ** (VOLUMES_DB[v] / 20))
    m = re.fullmatch(r"([+-]?\d+(?:\.\d*)?)\s*dB", v)
    if m is not None and -40.0 <= float(m.group(1)) <= 12.0:
        return float(10 ** (float(m.group(1)) / 20))
    raise _invalid(f"prosody volume must be silent, x-soft ... x-loud or '+N dB'/'-N dB' (-40 to +12), not {value!r}")


def say_as(text: str, interpret_as: str, fmt: str = "") -> str:
    """The spoken words of a ``<say-as>`` element's text (an unknown ``interpret_as`` keeps the text)."""
    reader = _SAY_AS.get(interpret_as.strip().lower())
    return reader(text.strip(), fmt.strip().lower()) if reader is not None else text


def _characters(text: str, _fmt: str) -> str:
    """Letter by letter (a letter as its capital, which voices read by name), digits as words."""
    return " ".join(digits(c) if c.isdecimal() else c.upper() for c in text if c.isalnum())


def _cardinal(text: str, _fmt: str) -> str:
    return re.sub(r"(-?)(\d[\d,]*(?:\.\d+)?)", lambda m: ("minus " if m.group(1) else "") + number_words(m.group(2)),
                  text)


def _ordinal(text: str, _fmt: str) -> str:
    return re.sub(r"(\d+)(?:st|nd|rd|th)?\.?", lambda m: ordinal_text(m.group(1)), text)


def _digits(text: str, _fmt: str) -> str:
    return re.sub(r"\d+", lambda m: f" {digits(m.group(0))} ", text).strip()


def _telephone(text: str, _fmt: str) -> str:
    groups = re.findall(r"\+|\d+", text)
    return ", ".join("plus" if g == "+" else digits(g) for g in groups) if groups else text


def _time(text: str, _fmt: str) -> str:
    return to_speakable(text)


def _date(text: str, fmt: str) -> str:
    fields = [f for f in re.split(r"[\s/.,-]+", text) if f]
    order = fmt or ("ymd" if fields and len(fields[0]) == 4 and fields[0].isdecimal() else "mdy")
    if not re.fullmatch(r"[ymd]{1,3}", order) or len(set(order)) != len(order) or len(fields) != len(order):
        raise _invalid(f"say-as date {text!r} does not match the format {order!r}")
    parts = dict(zip(order, fields, strict=True))
    month, day, yr = parts.get("m"), parts.get("d"), parts.get("y")
    words = []
    if month is not None:
        words.append(_month(month, text))
    if day is not None:
        if not (day.isdecimal() and len(day) <= 2 and 1 <= int(day) <= 31):
            raise _invalid(f"say-as date {text!r}: {day!r} is not a day of the month")
        words.append(ordinal_text(day) if month is not None else f"the {ordinal_text(day)}")
    spoken = " ".join(words)
    if yr is not None:
        if not (yr.isdecimal() and len(yr) <= 4):
            raise _invalid(f"say-as date {text!r}: {yr!r} is not a year")
        spoken = f"{spoken}, {year(int(yr))}" if day is not None else f"{spoken} {year(int(yr))}".strip()
    return spoken


def _month(field: str, text: str) -> str:
    if field.isdecimal() and len(field) <= 2 and 1 <= int(field) <= 12:
        return _MONTH_NAMES[int(field) - 1]
    names = [m for m in _MONTH_NAMES if m.lower().startswith(field.lower()) and len(field) >= 3]
    if not names:
        raise _invalid(f"say-as date {text!r}: {field!r} is not a month")
    return names[0]


_SAY_AS: dict[str, Callable[[str, str], str]] = {
    "characters": _characters, "spell-out": _characters, "verbatim": _characters, "cardinal": _cardinal,
    "number": _cardinal, "ordinal": _ordinal, "digits": _digits, "telephone": _telephone, "time": _time,
    "date": _date,
}
