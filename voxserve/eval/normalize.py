"""Text normalization applied to references and hypotheses before computing error rates.

Error rates only mean something when both sides are written the same way, so the reference and the hypothesis
pass through the same pure, deterministic normalizer. Every function here is idempotent:
``f(f(x)) == f(x)``.

``normalize_english`` follows the spirit of the Open ASR Leaderboard's English normalizer, applying these rules
in this order:

1. Characters: curly and typographic apostrophes (‘ ’ ‚ ‛ ′ ʼ ´ `) become ``'``; curly double quotes and
   guillemets become ``"``; every Unicode dash and the minus sign become ``-``. The text is decomposed with NFKD
   (full-width forms, ligatures and superscripts become plain letters and digits), diacritics, enclosing
   marks and invisible format characters (soft hyphen, zero-width joiners) are dropped ("café" -> "cafe"), and
   the text is lowercased.
2. Annotations are removed together with their content: anything in square brackets ``[laughter]`` or braces
   ``{noise}``, an angle-bracket tag without spaces ``<VOCNOISE>``, and a parenthesised note of at most three
   words ``(inaudible)``, ``(music playing)``. Longer parentheticals are kept as words, because in read speech
   they are usually spoken.
3. Symbols: thousands separators are removed ("1,000" -> "1000"); a currency symbol next to an amount becomes
   the currency's name after the amount ("$5" -> "5 dollars", "$1" -> "1 dollar", "$5 million" ->
   "5 million dollars", "20€" -> "20 euros"; $ £ € ¥ ¢); "%" becomes "percent" and "&" becomes "and".
4. Dotted acronyms lose their dots ("i.e." -> "ie", "u.s.a." -> "usa", "o.k." -> "ok").
5. Apostrophes are kept only inside a word ("don't", "smith's", "o'clock"); at a word's edge they are quotes
   and removed ("'cause" -> "cause", "dogs'" -> "dogs"); a decade's apostrophe is dropped ("1960's" ->
   "1960s").
6. Punctuation: hyphens, underscores and whitespace separate words ("well-known" and "well known" both give
   "well known"; "1-2-3" gives "1 2 3"). All other punctuation and symbols are removed, but they still end a
   spoken number, so "ten, twenty" stays "10 20". A point between digits stays ("3.14").
7. Fillers and hesitations are removed: uh, um, uhm, er, erm, ah, eh, ehm, hm, hmm, mm, mhm, mm hmm, including
   lengthened spellings ("ummm", "hmmm").
8. Spelled-out letters are joined: two or more consecutive single letters form one word ("m f a" -> "mfa",
   "u s a" -> "usa"), so they match the acronym.
9. Numbers: spelled-out numbers become digits; digits stay digits.

   - Cardinals: "twenty one" -> "21", "one hundred and five" -> "105", "two thousand and twenty" -> "2020",
     "a hundred" -> "100", "ten meters" -> "10 meters".
   - Sequences of digits stay separate: "one two three" and "one, two, three" -> "1 2 3".
   - Years said in pairs: a number from 13 to 20 followed by a number from 10 to 99, or by "oh" and a digit:
     "nineteen sixty one" -> "1961", "fourteen fifty-five" -> "1455", "nineteen oh five" -> "1905",
     "twenty twenty" -> "2020". Other pairs stay apart: from 10, 11 or 12 they are clock times ("eleven
     thirty" -> "11 30", as is "11:30"), above 20 they are lists ("thirty forty" -> "30 40").
   - Ordinals: "first" -> "1st", "twenty second" -> "22nd", "hundredth" -> "100th"; "1st" is unchanged.
     "second" is always read as an ordinal, on both sides alike.
   - Decimals: "three point one four" -> "3.14".
   - Decades: "sixties" -> "60s", "nineteen sixties" -> "1960s".
   - Digits times a scale word: "5 million" -> "5000000", "1.5 thousand" -> "1500".
   - "one" as a pronoun also becomes "1" ("no one" -> "no 1"), on both sides alike.
10. Words: British spellings become American from a table of common words ("colour" -> "color", "centre" ->
    "center", "realise" -> "realize", "travelled" -> "traveled", "defence" -> "defense", "grey" -> "gray",
    with their inflections); abbreviations are expanded ("mr" -> "mister", "mrs" -> "missus", "ms" -> "miss",
    "dr" -> "doctor", "prof" -> "professor", "jr" -> "junior", "sr" -> "senior", "vs" -> "versus");
    variants are unified ("ok" -> "okay", "etc" and "et cetera" -> "etcetera", "per cent" -> "percent",
    "yknow"/"y'know" -> "you know", "alright" -> "all right").
11. Words are joined by single spaces, with no leading or trailing space.

Not handled: money with a fractional unit spelled out ("five dollars fifty" does not equal "$5.50"); digits
read one at a time do not equal the written number ("nine one one" -> "9 1 1", not "911").

``normalize_basic`` is for other languages: Unicode NFKC, case folding, every character that is not a
letter, a mark or a digit becomes a space (apostrophes included), format characters are dropped, whitespace
is collapsed. ``character_tokens`` splits normalized text into characters (combining marks stay with their
base character; whitespace is skipped) to compute a character error rate for languages written without
spaces, such as Japanese or Chinese.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["character_tokens", "normalize_basic", "normalize_english"]

_MAX_FOLD_ROUNDS = 4
_YEAR_HEAD_MIN, _YEAR_HEAD_MAX = 13, 20

# ----------------------------------------------------------------------------------------------- characters

_APOSTROPHES = "\u2018\u2019\u201a\u201b\u2032\u02bc\u00b4`"
_DOUBLE_QUOTES = "\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb"
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63\uff0d"
_QUOTE_TABLE = str.maketrans(
    {**dict.fromkeys(_APOSTROPHES, "'"), **dict.fromkeys(_DOUBLE_QUOTES, '"'), **dict.fromkeys(_DASHES, "-")}
)
_DROPPED_CATEGORIES = frozenset({"Mn", "Me", "Cf"})


def _strip_marks(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if unicodedata.category(char) not in _DROPPED_CATEGORIES)


def _fold_english(text: str) -> str:
    """Typographic quotes and dashes to ASCII, compatibility decomposition, no diacritics, lowercase."""
    text = text.translate(_QUOTE_TABLE)
    if text.isascii():
        return text.lower()
    for _ in range(_MAX_FOLD_ROUNDS):
        folded = _strip_marks(text).lower().translate(_QUOTE_TABLE)
        if folded == text:
            break
        text = folded
    return text


# ----------------------------------------------------------------------------------- annotations, symbols

_BRACKETED_RE = re.compile(r"\[[^\[\]]*\]|\{[^{}]*\}|<[^<>\s]*>")
_SHORT_PARENTHETICAL_RE = re.compile(r"\(\s*[^()\s]+(?:\s+[^()\s]+){0,2}\s*\)")


def _remove_annotations(text: str) -> str:
    for pattern in (_BRACKETED_RE, _SHORT_PARENTHETICAL_RE):
        previous = None
        while previous != text:  # repeat for nested annotations
            previous, text = text, pattern.sub(" ", text)
    return text


_CURRENCIES = {
    "$": ("dollar", "dollars"),
    "£": ("pound", "pounds"),
    "€": ("euro", "euros"),
    "¥": ("yen", "yen"),
    "¢": ("cent", "cents"),
}
_AMOUNT = r"[0-9]+(?:\.[0-9]+)?"
_SCALE_WORD = r"\s+(?:hundred|thousand|million|billion|trillion)(?![^\W_])"
_THOUSANDS_SEPARATOR_RE = re.compile(r"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))")
_CURRENCY_BEFORE_RE = re.compile(rf"([$£€¥¢])\s*({_AMOUNT})((?:{_SCALE_WORD})*)")
_CURRENCY_AFTER_RE = re.compile(rf"({_AMOUNT})\s*([$£€¥¢])")


def _currency_name(symbol: str, amount: str, scale: str) -> str:
    singular, plural = _CURRENCIES[symbol]
    return singular if amount == "1" and not scale else plural


def _currency_before(match: re.Match[str]) -> str:
    symbol, amount, scale = match.groups()
    return f" {amount}{scale} {_currency_name(symbol, amount, scale)} "


def _currency_after(match: re.Match[str]) -> str:
    amount, symbol = match.groups()
    return f" {amount} {_currency_name(symbol, amount, '')} "


def _expand_symbols(text: str) -> str:
    text = _THOUSANDS_SEPARATOR_RE.sub("", text)
    text = _CURRENCY_BEFORE_RE.sub(_currency_before, text)
    text = _CURRENCY_AFTER_RE.sub(_currency_after, text)
    return text.replace("%", " percent ").replace("&", " and ")


_DOTTED_ACRONYM_RE = re.compile(r"(?<![^\W_])[a-z](?:\.[a-z])+\.?(?![^\W_])")
_DECADE_APOSTROPHE_RE = re.compile(r"(?<=[0-9])'(?=s(?![^\W_]))")
_EDGE_APOSTROPHE_RE = re.compile(r"(?<![^\W_])'|'(?![^\W_])")


def _join_dotted_acronyms(text: str) -> str:
    return _DOTTED_ACRONYM_RE.sub(lambda match: match.group().replace(".", ""), text)


def _clean_apostrophes(text: str) -> str:
    return _EDGE_APOSTROPHE_RE.sub(" ", _DECADE_APOSTROPHE_RE.sub("", text))


# --------------------------------------------------------------------------------------------- tokens

# A token is a word (letters and digits, with apostrophes inside and points between digits); hyphens,
# underscores and whitespace separate tokens softly; any other character is a hard boundary (None) that ends
# a spoken number.
_TOKEN_RE = re.compile(
    r"(?P<word>[^\W_]+(?:(?:'|(?<=[0-9])\.(?=[0-9]))[^\W_]+)*)|(?P<soft>[\s'_-]+)|(?P<hard>.)", re.DOTALL
)
_FILLER_RE = re.compile(r"u+h+|u+h*m+|h+m+|m{2,}|m+h+m+|e+r|e+r+m+|e+h+m*|a+h+")

Tokens = list[str | None]


def _tokenize(text: str) -> Tokens:
    tokens: Tokens = []
    for match in _TOKEN_RE.finditer(text):
        if match.lastgroup == "word":
            tokens.append(match.group())
        elif match.lastgroup == "hard" and tokens and tokens[-1] is not None:
            tokens.append(None)
    return tokens


def _drop_fillers(tokens: Tokens) -> Tokens:
    return [token for token in tokens if token is None or not _FILLER_RE.fullmatch(token)]


def _is_single_letter(token: str | None) -> bool:
    return token is not None and len(token) == 1 and "a" <= token <= "z"


def _join_spelled_letters(tokens: Tokens) -> Tokens:
    """Join runs of two or more single letters, across punctuation ("m. f. a." -> "mfa")."""
    out: Tokens = []
    run: list[str] = []
    pending: Tokens = []  # boundaries seen after the run's last letter
    for token in tokens:
        if token is not None and _is_single_letter(token):
            run.append(token)
            pending = []
        elif run and token is None:
            pending.append(token)
        else:
            if run:
                out.append("".join(run))
                out.extend(pending)
                run, pending = [], []
            out.append(token)
    if run:
        out.append("".join(run))
    return out


# -------------------------------------------------------------------------------------------- numbers

_UNITS = {word: value for value, word in enumerate("zero one two three four five six seven eight nine".split())}
_TEENS = {word: value + 10 for value, word in enumerate(
    "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}  # fmt: skip
_TENS = {word: value * 10 + 20 for value, word in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split())}  # fmt: skip
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_IRREGULAR_ORDINALS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth",
    "twelve": "twelfth",
}  # fmt: skip


@dataclass(frozen=True)
class _NumberWord:
    kind: str  # "unit", "teen", "tens", "hundred" or "scale"
    value: int
    suffix: str = ""  # "", "ordinal" or "plural"


def _ordinal_of(cardinal: str) -> str:
    if cardinal in _IRREGULAR_ORDINALS:
        return _IRREGULAR_ORDINALS[cardinal]
    return cardinal[:-1] + "ieth" if cardinal.endswith("y") else cardinal + "th"


def _number_vocabulary() -> dict[str, _NumberWord]:
    kinds = (
        ("unit", _UNITS), ("teen", _TEENS), ("tens", _TENS), ("hundred", {"hundred": 100}), ("scale", _SCALES)
    )  # fmt: skip
    vocabulary: dict[str, _NumberWord] = {}
    for kind, table in kinds:
        for word, value in table.items():
            vocabulary[word] = _NumberWord(kind, value)
            vocabulary[_ordinal_of(word)] = _NumberWord(kind, value, "ordinal")
    for word, value in _TENS.items():
        vocabulary[word[:-1] + "ies"] = _NumberWord("tens", value, "plural")
    return vocabulary


_NUMBER_WORDS = _number_vocabulary()
_DIGITS_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _ordinal_suffix(value: int) -> str:
    if value % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")


def _format_decimal(value: Decimal) -> str:
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _decimal_digit(token: str | None) -> str | None:
    if token == "oh":
        return "0"
    word = _NUMBER_WORDS.get(token or "")
    return str(word.value) if word is not None and word.kind == "unit" and not word.suffix else None


@dataclass
class _NumberBuilder:
    """Accumulates the words of one spoken number; ``feed`` refuses a word that starts a new number."""

    total: int = 0  # completed thousands/millions/... part
    group: int = 0  # the part below the last scale word
    last: str = ""  # kind of the last word consumed ("" while empty, "oh" inside a year)
    smallest_scale: int = 0
    year_head: int | None = None  # "nineteen" of "nineteen sixty one"
    decimals: str = ""
    suffix: str = ""

    @property
    def empty(self) -> bool:
        return self.last == ""

    @property
    def closed(self) -> bool:
        return bool(self.suffix or self.decimals)

    def feed(self, word: _NumberWord) -> bool:
        if self.closed:
            return False
        if word.kind == "unit":
            accepted = self._unit(word.value)
        elif word.kind in ("teen", "tens"):
            accepted = self._two_digits(word.value)
        elif word.kind == "hundred":
            accepted = self._hundred()
        else:
            accepted = self._scale(word.value)
        if accepted:
            self.last, self.suffix = word.kind, word.suffix
        return accepted

    def _unit(self, value: int) -> bool:
        if self.last in ("", "scale", "oh"):
            self.group = value
        elif value and self.last in ("tens", "hundred"):
            self.group += value
        else:
            return False
        return True

    def _two_digits(self, value: int) -> bool:
        if self.last in ("", "scale"):
            self.group = value
        elif self.last == "hundred":
            self.group += value
        elif self.can_start_year():
            self.year_head, self.group = self.group, value
        else:
            return False
        return True

    def _hundred(self) -> bool:
        if self.last == "":
            self.group = 100
        elif self.last in ("unit", "teen", "tens") and self.year_head is None and 1 <= self.group <= 99:
            self.group *= 100
        else:
            return False
        return True

    def _scale(self, value: int) -> bool:
        if self.last == "":
            self.group = 1
        elif self.year_head is not None or self.group == 0:
            return False
        if self.smallest_scale and value >= self.smallest_scale:
            return False
        self.total, self.group, self.smallest_scale = self.total + self.group * value, 0, value
        return True

    def can_start_year(self) -> bool:
        return (
            self.year_head is None
            and self.total == 0
            and not self.closed
            and self.last in ("unit", "teen", "tens")
            and _YEAR_HEAD_MIN <= self.group <= _YEAR_HEAD_MAX
        )

    def can_take_and(self) -> bool:
        return self.last in ("hundred", "scale") and not self.closed

    def can_take_point(self) -> bool:
        return not self.empty and not self.closed and self.year_head is None

    def take_oh(self) -> None:
        self.year_head, self.group, self.last = self.group, 0, "oh"

    def render(self) -> str:
        value = self.total + self.group if self.year_head is None else self.year_head * 100 + self.group
        text = f"{value}.{self.decimals}" if self.decimals else str(value)
        if self.suffix == "ordinal":
            return text + _ordinal_suffix(value)
        return text + "s" if self.suffix == "plural" else text


class _NumberReader:
    """Rewrites a token list, replacing spoken numbers with digits; boundaries (None) end a number."""

    def __init__(self, tokens: Tokens) -> None:
        self._tokens = tokens
        self._pos = 0
        self._out: list[str] = []
        self._number = _NumberBuilder()

    def read(self) -> list[str]:
        while self._pos < len(self._tokens):
            self._pos = self._step(self._tokens[self._pos])
        self._flush()
        return self._out

    def _peek(self) -> str | None:
        index = self._pos + 1
        return self._tokens[index] if index < len(self._tokens) else None

    def _peek_number_word(self) -> _NumberWord | None:
        return _NUMBER_WORDS.get(self._peek() or "")

    def _step(self, token: str | None) -> int:
        if token is None:
            self._flush()
        elif (word := _NUMBER_WORDS.get(token)) is not None:
            self._feed(word)
        elif token == "point" and self._number.can_take_point() and _decimal_digit(self._peek()) is not None:
            return self._read_decimals()
        elif _DIGITS_RE.fullmatch(token):
            return self._read_digits(token)
        elif not self._absorb_connector(token):
            self._flush()
            self._out.append(token)
        return self._pos + 1

    def _feed(self, word: _NumberWord) -> None:
        if not self._number.feed(word):
            self._flush()
            self._number.feed(word)

    def _absorb_connector(self, token: str) -> bool:
        """Consume "and" (hundred and five), "oh" (nineteen oh five) or "a" (a hundred) inside a number."""
        following = self._peek_number_word()
        if following is None:
            return False
        if token == "and":
            return self._number.can_take_and() and following.kind in ("unit", "teen", "tens") and following.value > 0
        if token == "oh" and self._number.can_start_year() and following.kind == "unit" and following.value > 0:
            self._number.take_oh()
            return True
        if token == "a" and following.kind in ("hundred", "scale"):
            self._flush()
            self._number.feed(_NumberWord("unit", 1))
            return True
        return False

    def _read_decimals(self) -> int:
        index = self._pos + 1
        digits = []
        while index < len(self._tokens) and (digit := _decimal_digit(self._tokens[index])) is not None:
            digits.append(digit)
            index += 1
        self._number.decimals = "".join(digits)
        return index

    def _read_digits(self, token: str) -> int:
        """A written number, multiplied by the scale words that follow it ("5 million")."""
        self._flush()
        index, multiplier, previous = self._pos + 1, 1, 0
        while index < len(self._tokens):
            word = _NUMBER_WORDS.get(self._tokens[index] or "")
            if word is None or word.kind not in ("hundred", "scale") or word.suffix or word.value <= previous:
                break
            multiplier, previous, index = multiplier * word.value, word.value, index + 1
        self._out.append(token if multiplier == 1 else _format_decimal(Decimal(token) * multiplier))
        return index

    def _flush(self) -> None:
        if not self._number.empty:
            self._out.append(self._number.render())
        self._number = _NumberBuilder()


# ---------------------------------------------------------------------------------------------- words

_OUR_WORDS = (
    "armour behaviour clamour colour endeavour favour flavour harbour honour humour labour neighbour odour "
    "parlour rumour savour splendour tumour valour vapour vigour"
)
_OUR_SUFFIXES = ("", "s", "ed", "ing", "er", "ers", "ful", "less", "able", "ably", "ite", "ites", "al", "hood", "y")
_RE_WORDS = (
    "calibre centre fibre litre lustre meagre metre sabre sceptre sombre spectre theatre kilometre centimetre "
    "millimetre"
)
_ISE_STEMS = (
    "real organ recogn apolog emphas critic memor summar priorit special util minim maxim categor character "
    "civil final author custom optim visual normal standard material mobil symbol sympath general modern legal "
    "stabil neutral fertil capital harmon public jeopard patron agon scrutin idol global industrial hospital "
    "colon item"
)
_ISE_SUFFIXES = ("ise", "ised", "ises", "ising", "isation", "isations", "iser", "isers")
_SPELLING_PAIRS = (
    "analyse:analyze analysed:analyzed analysing:analyzing paralyse:paralyze paralysed:paralyzed "
    "catalyse:catalyze travelled:traveled travelling:traveling traveller:traveler travellers:travelers "
    "cancelled:canceled cancelling:canceling counselled:counseled counselling:counseling counsellor:counselor "
    "counsellors:counselors labelled:labeled labelling:labeling modelled:modeled modelling:modeling "
    "fuelled:fueled fuelling:fueling levelled:leveled levelling:leveling signalled:signaled signalling:signaling "
    "marvelled:marveled marvellous:marvelous quarrelled:quarreled channelled:channeled tunnelled:tunneled "
    "dialled:dialed dialling:dialing totalled:totaled jewellery:jewelry woollen:woolen fulfil:fulfill "
    "fulfils:fulfills fulfilment:fulfillment enrol:enroll enrols:enrolls enrolment:enrollment "
    "instalment:installment skilful:skillful wilful:willful defence:defense defences:defenses offence:offense "
    "offences:offenses licence:license licences:licenses pretence:pretense practise:practice practised:practiced "
    "practises:practices practising:practicing grey:gray greys:grays programme:program programmes:programs "
    "catalogue:catalog catalogues:catalogs analogue:analog ageing:aging judgement:judgment judgements:judgments "
    "acknowledgement:acknowledgment aluminium:aluminum plough:plow ploughs:plows sceptic:skeptic "
    "sceptical:skeptical scepticism:skepticism manoeuvre:maneuver manoeuvres:maneuvers paediatric:pediatric "
    "encyclopaedia:encyclopedia mould:mold mouldy:moldy moustache:mustache pyjamas:pajamas cheque:check "
    "cheques:checks tyre:tire tyres:tires cosy:cozy kerb:curb aeroplane:airplane aeroplanes:airplanes"
)
_ABBREVIATIONS = {
    "mr": "mister", "mrs": "missus", "ms": "miss", "dr": "doctor", "prof": "professor", "jr": "junior",
    "sr": "senior", "vs": "versus", "etc": "etcetera", "ok": "okay", "yknow": "you know", "y'know": "you know",
    "alright": "all right",
}  # fmt: skip
_PHRASES = {("et", "cetera"): "etcetera", ("per", "cent"): "percent"}


def _word_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for word in _OUR_WORDS.split():
        table.update({word + suffix: word[:-3] + "or" + suffix for suffix in _OUR_SUFFIXES})
    for word in _RE_WORDS.split():
        american = word[:-2] + "er"
        table.update({word: american, word + "s": american + "s", word + "d": american + "ed"})
    for stem in _ISE_STEMS.split():
        table.update({stem + suffix: stem + "iz" + suffix[2:] for suffix in _ISE_SUFFIXES})
    for pair in _SPELLING_PAIRS.split():
        british, american = pair.split(":")
        table[british] = american
    table.update(_ABBREVIATIONS)
    return table


_WORD_TABLE = _word_table()


def _apply_word_table(words: list[str]) -> list[str]:
    merged: list[str] = []
    for word in words:
        if merged and (merged[-1], word) in _PHRASES:
            merged[-1] = _PHRASES[(merged[-1], word)]
        else:
            merged.append(word)
    out: list[str] = []
    for word in merged:
        replacement = _WORD_TABLE.get(word)
        if replacement is None:
            out.append(word)
        else:
            out.extend(replacement.split())
    return out


# ------------------------------------------------------------------------------------------ public API


def normalize_english(text: str) -> str:
    """Normalize English text for WER scoring (see the module docstring for every rule, in order).

    Args:
        text: a reference or hypothesis transcript, in any casing and punctuation.

    Returns:
        Lowercase words separated by single spaces; an empty string when nothing scorable remains.

    Example:
        >>> normalize_english("Mr. Smith's colour, uh, cost $5 in nineteen sixty-one!")
        "mister smith's color cost 5 dollars in 1961"
    """
    text = _fold_english(text)
    text = _remove_annotations(text)
    text = _expand_symbols(text)
    text = _clean_apostrophes(_join_dotted_acronyms(text))
    tokens = _drop_fillers(_join_spelled_letters(_drop_fillers(_tokenize(text))))
    return " ".join(_apply_word_table(_NumberReader(tokens).read()))


class _BasicTable(dict[int, str]):
    """``str.translate`` table, filled lazily: letters, marks and digits stay, format characters go,
    everything else becomes a space."""

    def __missing__(self, code_point: int) -> str:
        char = chr(code_point)
        category = unicodedata.category(char)
        replacement = char if category[0] in "LMN" else "" if category == "Cf" else " "
        self[code_point] = replacement
        return replacement


_BASIC_TABLE = _BasicTable()


def _fold_basic(text: str) -> str:
    if text.isascii():
        return text.lower()
    for _ in range(_MAX_FOLD_ROUNDS):
        folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
        if folded == text:
            break
        text = folded
    return text


def normalize_basic(text: str) -> str:
    """Language-independent normalization: case, punctuation and whitespace only.

    Applies Unicode NFKC and case folding, turns every character that is not a letter, a combining mark or a
    digit into a space (punctuation, symbols and apostrophes alike), drops invisible format characters and
    collapses whitespace. Diacritics and scripts are kept as they are.

    Args:
        text: a transcript in any language.

    Returns:
        Case-folded words separated by single spaces; an empty string when nothing remains.
    """
    return " ".join(_fold_basic(text).translate(_BASIC_TABLE).split())


def character_tokens(text: str) -> list[str]:
    """Split text into characters for a character error rate (CER).

    The text is not normalized here: pass it through a normalizer first. Whitespace is skipped, and a
    combining mark stays with the character before it, so "e" + U+0301 counts as one character.

    Args:
        text: normalized text, typically from ``normalize_basic``.

    Returns:
        One string per character, in order.
    """
    tokens: list[str] = []
    after_space = True
    for char in text:
        if char.isspace():
            after_space = True
            continue
        if tokens and not after_space and unicodedata.category(char).startswith("M"):
            tokens[-1] += char
        else:
            tokens.append(char)
        after_space = False
    return tokens
