"""Numbers as English words: cardinals, ordinals, years, decimals and digit strings."""

from __future__ import annotations

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ("", "thousand", "million", "billion", "trillion", "quadrillion")
_ORDINAL_IRREGULAR = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth",
    "twelve": "twelfth",
}


def _below_thousand(n: int) -> str:
    hundreds, rest = divmod(n, 100)
    words = [f"{_ONES[hundreds]} hundred"] if hundreds else []
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(_TENS[tens] + (f"-{_ONES[ones]}" if ones else ""))
    elif rest or not hundreds:
        words.append(_ONES[rest])
    return " ".join(words)


def cardinal(n: int) -> str:
    """``1234`` -> ``one thousand two hundred thirty-four``; negative numbers start with ``minus``.

    Numbers beyond the quadrillions are read digit by digit.
    """
    if n < 0:
        return "minus " + cardinal(-n)
    if n < 1000:
        return _below_thousand(n)
    if n >= 1000 ** len(_SCALES):
        return digits(str(n))
    groups: list[str] = []
    scale = 0
    while n:
        n, group = divmod(n, 1000)
        if group:
            groups.append(_below_thousand(group) + (f" {_SCALES[scale]}" if scale else ""))
        scale += 1
    return " ".join(reversed(groups))


def cardinal_text(text: str) -> str:
    """A run of digits as a cardinal, of any length: past the quadrillions digit by digit, without converting
    it to an int (Python refuses to convert more than 4300 digits)."""
    significant = text.lstrip("0") or "0"
    return digits(significant) if len(significant) > 3 * len(_SCALES) else cardinal(int(significant))


def ordinal(n: int) -> str:
    """``3`` -> ``third``, ``21`` -> ``twenty-first``, ``100`` -> ``one hundredth``."""
    return _ordinal_words(cardinal(n))


def ordinal_text(text: str) -> str:
    """A run of digits (any length) as an ordinal: ``"21"`` -> ``twenty-first``."""
    return _ordinal_words(cardinal_text(text))


def _ordinal_words(words: str) -> str:
    head, sep, last = max(words.rpartition(" "), words.rpartition("-"), key=lambda p: len(p[0]))
    if last in _ORDINAL_IRREGULAR:
        last = _ORDINAL_IRREGULAR[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def year(n: int) -> str:
    """A year as people say it: 1999 -> nineteen ninety-nine, 1905 -> nineteen oh five, 2000 -> two thousand,
    2008 -> two thousand eight, 2024 -> twenty twenty-four, 1800 -> eighteen hundred."""
    if not 1000 <= n <= 9999:
        return cardinal(n)
    high, low = divmod(n, 100)
    if 2000 <= n <= 2009 or (low == 0 and high % 10 == 0):
        return cardinal(n)
    if low == 0:
        return f"{cardinal(high)} hundred"
    if low < 10:
        return f"{cardinal(high)} oh {_ONES[low]}"
    return f"{cardinal(high)} {cardinal(low)}"


def digits(text: str) -> str:
    """Each digit of ``text`` as a word: ``"0042"`` -> ``zero zero four two``; other characters are skipped."""
    return " ".join(_ONES[int(c)] for c in text if c.isdigit())


def decimal(text: str) -> str:
    """A decimal number written with a point: ``"3.14"`` -> ``three point one four``; ``".5"`` -> ``point five``."""
    whole, _, frac = text.partition(".")
    whole = whole.replace(",", "")
    head = cardinal_text(whole) if whole else ""
    tail = f"point {digits(frac)}" if frac else ""
    return " ".join(w for w in (head, tail) if w)
