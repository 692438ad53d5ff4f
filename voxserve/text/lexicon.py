"""Pronunciation lexicons: words and phrases respelled (or given as phonemes) before the acoustic model.

Matching: case-insensitive, whole words only (``Nguyen`` matches ``NGUYEN`` and ``Nguyen's`` but not
``Nguyenville``), a phrase's words separated by any whitespace, the longest entry first where entries overlap
(``New York City`` before ``New York``). A respelling is spoken as text (and normalised like the rest: numbers
in it become words); a value written ``[[ ... ]]`` is espeak-ng phonemes passed to Piper voices as they are
(``"Nguyen": "[[ wˈɪn ]]"``). Entries of a request override the server's entries for the same key.

File format (``tts.lexicon_file``, ``voxserve speak --lexicon``): a ``.json`` file holds one object
``{"word or phrase": "respelling"}``; any other file is UTF-8 text, one ``word or phrase<TAB>respelling`` per
line, blank lines and lines starting with ``#`` ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from voxserve.errors import InvalidInput

MAX_ENTRIES = 10_000
MAX_KEY_CHARS = 100
MAX_VALUE_CHARS = 300
_PHONEMES = re.compile(r"\[\[[^\[\]]+\]\]")


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Lexicon:
    """Words and phrases with their respellings (keys case-folded, whitespace collapsed).

    Example::

        lex = Lexicon.from_mapping({"Nguyen": "win", "SQL": "sequel"})
        lex.apply("Ms. NGUYEN writes SQL.")  # -> "Ms. win writes sequel."
    """

    entries: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str] | None, param: str = "pronunciations") -> Lexicon:
        """A lexicon from ``{word or phrase: respelling}``.

        Raises:
            InvalidInput: (``param``) not a mapping of strings, an empty or over-long key or value, a value with
                ``[[`` that is not one whole ``[[ phonemes ]]`` block, or more than :data:`MAX_ENTRIES` entries.
        """
        if not mapping:
            return EMPTY_LEXICON
        if not isinstance(mapping, Mapping):
            raise InvalidInput(f"{param} must be an object of word -> respelling", param=param)
        if len(mapping) > MAX_ENTRIES:
            raise InvalidInput(f"{param} has {len(mapping)} entries; at most {MAX_ENTRIES}", param=param)
        entries: dict[str, str] = {}
        for word, spoken in mapping.items():
            if not isinstance(word, str) or not isinstance(spoken, str):
                raise InvalidInput(f"{param} maps strings to strings", param=param)
            key = _key(word)
            if not any(c.isalnum() for c in key) or len(key) > MAX_KEY_CHARS:
                raise InvalidInput(f"{param}: {word!r} must hold a letter or digit and at most {MAX_KEY_CHARS} "
                                   "characters", param=param)
            value = spoken.strip()
            if not value or len(value) > MAX_VALUE_CHARS:
                raise InvalidInput(f"{param}: the respelling of {word!r} must be 1 to {MAX_VALUE_CHARS} characters",
                                   param=param)
            if ("[[" in value or "]]" in value) and not _PHONEMES.fullmatch(value):
                raise InvalidInput(f"{param}: phonemes for {word!r} must be one block '[[ phonemes ]]'", param=param)
            entries[key] = value
        return cls(entries)

    @classmethod
    def load(cls, path: str | Path, param: str = "lexicon_file") -> Lexicon:
        """Read a lexicon file (JSON object, or TSV lines; see the module's documentation).

        Raises:
            InvalidInput: (``param``) the file is missing, not UTF-8, or not in either format.
        """
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read the lexicon {file}: {exc}", param=param) from exc
        if file.suffix.lower() == ".json":
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise InvalidInput(f"the lexicon {file} is not JSON: {exc}", param=param) from exc
            if not isinstance(data, dict):
                raise InvalidInput(f"the lexicon {file} must hold one JSON object of word -> respelling", param=param)
            return cls.from_mapping(data, param)
        mapping: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            word, tab, spoken = line.partition("\t")
            if not tab:
                raise InvalidInput(f"{file}, line {number}: expected 'word<TAB>respelling'", param=param)
            mapping[word] = spoken
        return cls.from_mapping(mapping, param)

    def merged(self, overrides: Lexicon) -> Lexicon:
        """This lexicon with ``overrides``' entries added or replacing its own."""
        if not overrides.entries:
            return self
        if not self.entries:
            return overrides
        return Lexicon({**self.entries, **overrides.entries})

    @cached_property
    def _pattern(self) -> re.Pattern[str] | None:
        if not self.entries:
            return None
        keys = sorted(self.entries, key=len, reverse=True)
        alternatives = "|".join(r"\s+".join(re.escape(w) for w in key.split()) for key in keys)
        return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)

    def apply(self, text: str, normalize: Callable[[str], str] = str) -> str:
        """``text`` with every entry replaced, then passed through ``normalize`` (the text normaliser, say).

        Phoneme blocks go through the normaliser as placeholder words (capitalised like the word they replace,
        so that ``Dr. Nguyen`` still reads "Doctor"), never as phonemes it could rewrite."""
        pattern = self._pattern
        if pattern is None:
            return normalize(text)
        blocks: list[str] = []

        def replace(m: re.Match[str]) -> str:
            spoken = self.entries[_key(m.group(0))]
            if not _PHONEMES.fullmatch(spoken):
                return spoken
            blocks.append(spoken)
            tag = _placeholder(len(blocks) - 1)
            return tag.capitalize() if m.group(0)[:1].isupper() else tag

        spoken = normalize(pattern.sub(replace, text))
        if not blocks:
            return spoken
        return _PLACEHOLDER.sub(lambda m: blocks[_placeholder_index(m.group(1))], spoken)


def _placeholder(index: int) -> str:
    """A word of letters only (the normaliser leaves it alone) that stands for phoneme block ``index``."""
    letters = ""
    while True:
        index, digit = divmod(index, 26)
        letters += chr(ord("a") + digit)
        if not index:
            return f"qxphonemes{letters}q"


def _placeholder_index(letters: str) -> int:
    return sum((ord(c) - ord("a")) * 26**i for i, c in enumerate(letters.lower()))


_PLACEHOLDER = re.compile(r"qxphonemes([a-z]+)q", re.IGNORECASE)


EMPTY_LEXICON = Lexicon()
