"""English text as it should be spoken: numbers, money, times, units, symbols and abbreviations in words.

The phonemizer behind most voices (espeak-ng) reads ``$5.20`` as "dollar five point two zero", ``Dr.`` as the
end of a sentence, ``1800s`` as "one thousand eight hundred z" and ``2024`` as "two thousand twenty-four".
:func:`to_speakable` rewrites such tokens into words first. It is a set of ordered regular-expression rules,
each small and tested on its own; text it does not recognise passes through unchanged.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from voxserve.text.numbers import cardinal, cardinal_text, decimal, digits, ordinal_text, year

# Abbreviations that precede a name or a number: never the end of a sentence.
TITLES: dict[str, str] = {
    "mr": "Mister", "mrs": "Missus", "ms": "Miz", "dr": "Doctor", "prof": "Professor", "st": "Saint",
    "mt": "Mount", "gen": "General", "sen": "Senator", "rep": "Representative", "gov": "Governor",
    "capt": "Captain", "lt": "Lieutenant", "col": "Colonel", "sgt": "Sergeant", "rev": "Reverend",
    "pres": "President", "supt": "Superintendent", "hon": "Honorable", "fig": "figure", "no": "number",
    "vs": "versus", "approx": "approximately", "dept": "department", "est": "established",
}
# Abbreviations that may end a sentence (their period then also ends it when a capital letter follows).
TERMINAL: dict[str, str] = {
    "etc": "et cetera", "inc": "Incorporated", "ltd": "Limited", "co": "Company", "corp": "Corporation",
    "jr": "Junior", "sr": "Senior", "ave": "Avenue", "blvd": "Boulevard", "rd": "Road",
}
MONTHS: dict[str, str] = {
    "jan": "January", "feb": "February", "mar": "March", "apr": "April", "jun": "June", "jul": "July",
    "aug": "August", "sep": "September", "sept": "September", "oct": "October", "nov": "November",
    "dec": "December",
}
_LATIN = {"e.g.": "for example", "i.e.": "that is", "a.m.": "a m", "p.m.": "p m", "cf.": "compare"}

_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "", "")}
_UNITS = {
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"), "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "ft": ("foot", "feet"), "mi": ("mile", "miles"), "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "ms": ("millisecond", "milliseconds"), "s": ("second", "seconds"), "min": ("minute", "minutes"),
    "h": ("hour", "hours"), "hrs": ("hour", "hours"), "l": ("liter", "liters"), "ml": ("milliliter", "milliliters"),
    "gb": ("gigabyte", "gigabytes"), "mb": ("megabyte", "megabytes"), "kb": ("kilobyte", "kilobytes"),
    "tb": ("terabyte", "terabytes"), "ghz": ("gigahertz", "gigahertz"), "mhz": ("megahertz", "megahertz"),
    "khz": ("kilohertz", "kilohertz"), "hz": ("hertz", "hertz"), "°c": ("degree Celsius", "degrees Celsius"),
    "°f": ("degree Fahrenheit", "degrees Fahrenheit"), "°": ("degree", "degrees"),
}
_FRACTIONS = {"1/2": "one half", "1/3": "one third", "2/3": "two thirds", "1/4": "one quarter",
              "3/4": "three quarters", "1/8": "one eighth"}
_SCALE_WORDS = "thousand|million|billion|trillion"
_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


def number_words(text: str) -> str:
    """A written number (``1,234``, ``3.14``, ``007``, ``42``) in words."""
    plain = text.replace(",", "")
    if "." in plain:
        return decimal(plain)
    if len(plain) > 1 and plain.startswith("0") or len(plain) > 15:
        return digits(plain)
    return cardinal(int(plain))


def _is_one(text: str) -> bool:
    return text.replace(",", "") in ("1", "1.0", "1.00")


def _money(m: re.Match[str]) -> str:
    symbol, amount, scale = m.group("sym"), m.group("amt"), m.group("scale")
    one, many, sub_one, sub_many = _CURRENCIES[symbol]
    if scale:
        return f"{number_words(amount)} {scale} {many}"
    whole, _, cents = amount.replace(",", "").partition(".")
    whole = whole.lstrip("0") or "0"  # a string: amounts may have more digits than int() converts
    words = [] if whole == "0" and cents else [f"{cardinal_text(whole)} {one if whole == '1' else many}"]
    if cents and sub_one and int(cents[:2].ljust(2, "0")):
        c = int(cents[:2].ljust(2, "0"))
        words.append(f"{cardinal(c)} {sub_one if c == 1 else sub_many}")
    elif cents and not sub_one:
        words = [f"{decimal(amount.replace(',', ''))} {many}"]
    return " and ".join(words) if words else f"zero {many}"


_NEXT_CHAR = re.compile(r"\s*(\S?)")


def _sentence_period(m: re.Match[str]) -> str:
    """``"."`` when the match swallowed a period that also ends the sentence (end of text or a capital next)."""
    if not m.group(0).endswith("."):
        return ""
    following = _NEXT_CHAR.match(m.string, m.end())  # not the whole rest of the text: once per match
    nxt = following.group(1) if following else ""
    return "." if not nxt or nxt.isupper() else ""


def _time(m: re.Match[str]) -> str:
    hour, minute, meridiem = int(m.group(1)), int(m.group(2)), m.group(3)
    if minute == 0:
        spoken = f"{cardinal(hour)} o'clock" if not meridiem else cardinal(hour)
    elif minute < 10:
        spoken = f"{cardinal(hour)} oh {cardinal(minute)}"
    else:
        spoken = f"{cardinal(hour)} {cardinal(minute)}"
    if meridiem:
        spoken += " " + " ".join(meridiem.lower().replace(".", ""))
    return spoken + _sentence_period(m)


def _decade(m: re.Match[str]) -> str:
    century, decade = m.group(1), m.group(2)
    if century is None:  # '90s
        return _plural_number(cardinal(int(decade)))
    return _plural_number(year(int(century + decade)))


def _plural_number(words: str) -> str:
    if words.endswith("y"):
        return words[:-1] + "ies"
    return words + "s"


def _unit(m: re.Match[str]) -> str:
    amount, unit = m.group(1), m.group(2)
    one, many = _UNITS[unit.lower()]
    return f"{number_words(amount)} {one if _is_one(amount) else many}"


def _abbreviation(m: re.Match[str]) -> str:
    key, space, nxt = m.group(1).lower(), m.group(2), m.group(3)
    if key == "st" and not nxt.isupper():
        return "Street" + space
    if key == "dr" and not nxt.isupper():
        return "Drive" + space
    if key == "no" and not nxt.isdigit():
        return m.group(0)
    return TITLES[key] + ("." if nxt == "" else space)


def _terminal(m: re.Match[str]) -> str:
    expansion, space, nxt = TERMINAL[m.group(1).lower()], m.group(2), m.group(3)
    # Keep the full stop when the abbreviation ends the sentence (end of text or a capital letter next).
    return expansion + ("." if nxt == "" or nxt.isupper() else "") + space


_FUNCTION_WORDS = frozenset(
    "a an and as at but by for from he i in is it now of on or she so than that the then they this to until "
    "was we were when where which while who will with you".split()
)


def _year_or_quantity(m: re.Match[str]) -> str:
    """A bare 4-digit number is a year unless a content word follows it (``1234 people``)."""
    n, following = int(m.group(1)), m.group(2)
    if following and following.islower() and following not in _FUNCTION_WORDS:
        return cardinal(n)
    return year(n)


def _number_or_year(text: str) -> str:
    plain = text.replace(",", "")
    if text.isdigit() and len(text) == 4 and 1100 <= int(text) <= 2099:
        return year(int(text))
    return number_words(plain)


def _rules() -> list[_Rule]:
    month_keys = "|".join(sorted(MONTHS, key=len, reverse=True))
    unit_keys = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
    return [
        (re.compile(r"\b(\d{1,2}):([0-5]\d)(?:\s?([AaPp](?:\.[Mm]\.|[Mm]))(?![A-Za-z]))?"), _time),
        (re.compile(r"\b(\d{1,2})\s?([AaPp])(?:\.[Mm]\.|[Mm])(?![A-Za-z])"),
         lambda m: f"{cardinal(int(m.group(1)))} {m.group(2).lower()} m{_sentence_period(m)}"),
        (re.compile(r"(?i)(?<![\w.])(e\.g\.|i\.e\.|a\.m\.|p\.m\.|cf\.)"),
         lambda m: _LATIN[m.group(1).lower()] + (_sentence_period(m) if m.group(1)[0] in "aApP" else "")),
        (re.compile(rf"(?P<sym>[$€£¥])\s?(?P<amt>{_NUM})(?:\s?(?P<scale>{_SCALE_WORDS})\b)?"), _money),
        (re.compile(rf"(?<!\d)({_NUM})\s?%"), lambda m: f"{number_words(m.group(1))} percent"),
        (re.compile(r"(?<![\d'])(1[1-9]|20)?(\d0)s\b|'(\d0)s\b"),
         lambda m: _decade(m) if m.group(3) is None else _plural_number(cardinal(int(m.group(3))))),
        (re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.I), lambda m: ordinal_text(m.group(1))),
        (re.compile(r"(?<![\d.,])\(?(\d{3})\)?[-. ](\d{3})[-.](\d{4})\b"),
         lambda m: ", ".join(digits(g) for g in m.groups())),
        (re.compile(r"(?<![\d.,-])(\d{3})-(\d{4})\b"), lambda m: ", ".join(digits(g) for g in m.groups())),
        (re.compile(r"(?<![\d/])(1/2|1/3|2/3|1/4|3/4|1/8)(?![\d/])"), lambda m: _FRACTIONS[m.group(1)]),
        (re.compile(rf"(?<![\w.])({_NUM})\s?({unit_keys})(?![\w/])", re.I), _unit),
        (re.compile(rf"(?<![\d.,])({_NUM})\s?[-–]\s?({_NUM})(?!\d)"),
         lambda m: f"{_number_or_year(m.group(1))} to {_number_or_year(m.group(2))}"),
        (re.compile(r"(?<![\d.,])(1[1-9]\d\d|20\d\d)(?!\d|[.,]\d)(?=\s*([A-Za-z]*))"), _year_or_quantity),
        (re.compile(rf"(?<![\w.,])-({_NUM})"), lambda m: f"minus {number_words(m.group(1))}"),
        (re.compile(rf"(?i)\b({month_keys})\.(?=\s+\d)"), lambda m: MONTHS[m.group(1).lower()]),
        (re.compile(rf"(?i)\b({'|'.join(TITLES)})\.(\s*)(?=(.?))"), _abbreviation),
        (re.compile(rf"(?i)\b({'|'.join(TERMINAL)})\.(\s*)(?=(.?))"), _terminal),
        (re.compile(r"#\s?(\d+)"), lambda m: f"number {cardinal_text(m.group(1))}"),
        (re.compile(_NUM), lambda m: f" {number_words(m.group(0))} "),
        # (?<!\s): a match starts where a run of blanks starts, never inside one (that would be quadratic)
        (re.compile(r"(?<!\s)\s*&\s*"), lambda m: " and "),
        (re.compile(r"(?<=\w)@(?=\w)"), lambda m: " at "),
        (re.compile(r"(?<!\s)\s*[+]\s*(?=\w)"), lambda m: " plus "),
        (re.compile(r"(?<!\s)\s*=\s*"), lambda m: " equals "),
        (re.compile(r"(?<!\s)(?:\s*[—–]\s*|\s+-\s+)"), lambda m: ", "),
        (re.compile(r"[*_~^|<>{}\[\]\\]+"), lambda m: " "),
    ]


_RULES = _rules()
_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "…": "...", "\u00a0": " "})


def to_speakable(text: str) -> str:
    """Rewrite ``text`` so that a phonemizer reads it correctly.

    Examples::

        >>> to_speakable("Dr. Smith paid $5.20 on May 3rd, 1999.")
        'Doctor Smith paid five dollars and twenty cents on May third, nineteen ninety-nine.'
        >>> to_speakable("It's 10:30 am and 72°F; about 50% of 1,234 people.")
        "It's ten thirty a m and seventy-two degrees Fahrenheit; about fifty percent of one thousand two hundred thirty-four people."

    Args:
        text: English text (one sentence or clause, or more).

    Returns:
        The text with numbers, money, times, units, symbols and abbreviations in words, whitespace collapsed.
    """
    text = unicodedata.normalize("NFKC", text.translate(_QUOTES))
    for pattern, replace in _RULES:
        text = pattern.sub(replace, text)
    return re.sub(r"\s+", " ", text).strip()


_UNSPEAKABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def without_controls(text: str) -> str:
    """``text`` with control characters and lone surrogates as spaces (phonemizers, espeak-ng's C API among
    them, fail on a NUL byte or a surrogate); the length is unchanged, so offsets into the text still hold."""
    return _UNSPEAKABLE.sub(" ", text)


def has_speech(text: str) -> bool:
    """Whether ``text`` contains anything to say (a letter or a digit)."""
    return any(c.isalnum() for c in text)
