"""Mismatch checks between a claim and its best evidence: what makes a claim contradicted.

Lexical overlap cannot tell "aspirin lowers fever" from "aspirin does not lower
fever": the words are the same. These checks look at exactly what overlap
ignores, on evidence that is otherwise well aligned with the claim:

- negation: a statement negated on one side and asserted on the other (also antonym pairs);
- number: the same quantity with a different value ("6 grams" vs "4 grams");
- unit: the same value in a different unit ("6 grams" vs "6 milligrams");
- date: a year or month the evidence gives differently;
- quantifier: "all" vs "some", "most" vs "few", "always" vs "sometimes", "only" vs "one of";
- named_entity: a name in the claim that the evidence replaces with another;
- role: the same two names and relation with the roles reversed ("A acquired B" vs "B acquired A").

English only; on other languages the checks find nothing and the verdict rests on matching.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache

from bosun.core.audit.claims import content_tokens
from bosun.core.text import STOPWORDS, stem

ALIGNMENT_MIN = 0.6  # share of the claim's other content the evidence must cover


@dataclass(frozen=True)
class Mismatch:
    """One reason the evidence contradicts the claim."""

    kind: str  # negation | number | unit | date | quantifier | named_entity | role
    claim: str
    evidence: str
    note: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "claim": self.claim, "evidence": self.evidence, "note": self.note}


# -- numbers and units ---------------------------------------------------------------------

_UNITS: dict[str, tuple[str, str]] = {}
for _dim, _groups in {
    "mass": {"mg": "mg milligram milligrams", "g": "g gram grams gr", "kg": "kg kilogram kilograms kilo kilos",
             "mcg": "mcg µg ug microgram micrograms", "lb": "lb lbs pound pounds", "oz": "oz ounce ounces",
             "t": "ton tons tonne tonnes"},
    "length": {"mm": "mm millimeter millimeters millimetre millimetres", "cm": "cm centimeter centimeters centimetre centimetres",
               "m": "meter meters metre metres", "km": "km kilometer kilometers kilometre kilometres",
               "mi": "mile miles", "ft": "ft feet foot", "inch": "inch inches", "yd": "yard yards"},
    "volume": {"ml": "ml milliliter milliliters millilitre millilitres", "l": "liter liters litre litres",
               "gal": "gallon gallons", "cup": "cup cups"},
    "time": {"s": "second seconds sec secs", "min": "minute minutes mins", "h": "hour hours hr hrs",
             "day": "day days", "week": "week weeks", "month": "month months", "year": "year years yr yrs",
             "decade": "decade decades", "century": "century centuries"},
    "temperature": {"c": "°c celsius", "f": "°f fahrenheit"},
    "ratio": {"%": "% percent per-cent percentage", "pp": "point points", "bp": "bp bps basis"},
    "currency": {"usd": "$ usd dollar dollars", "eur": "€ eur euro euros", "gbp": "£ gbp", "yen": "¥ yen"},
    "energy": {"kcal": "kcal calorie calories cal", "kj": "kj kilojoule kilojoules", "j": "joule joules"},
    "power": {"w": "w watt watts", "kw": "kw kilowatt kilowatts", "mw": "mw megawatt megawatts", "gw": "gw gigawatt gigawatts"},
    "speed": {"mph": "mph", "kmh": "kph km/h"},
    "data": {"kb": "kb kilobyte kilobytes", "mb": "mb megabyte megabytes", "gb": "gb gigabyte gigabytes",
             "tb": "tb terabyte terabytes"},
}.items():
    for _canon, _unit_names in _groups.items():
        for _name in _unit_names.split():
            _UNITS[_name] = (_dim, _canon)

# size of each canonical unit in its dimension's base unit: "2 metres" and "20 centimetres" are compared
# as 2 and 0.2 (temperature and currency are not converted)
_FACTOR = {
    "mg": 1e-3, "g": 1.0, "kg": 1e3, "mcg": 1e-6, "lb": 453.592, "oz": 28.3495, "t": 1e6,
    "mm": 1e-3, "cm": 1e-2, "m": 1.0, "km": 1e3, "mi": 1609.34, "ft": 0.3048, "inch": 0.0254, "yd": 0.9144,
    "ml": 1e-3, "l": 1.0, "gal": 3.78541, "cup": 0.236588,
    "s": 1.0, "min": 60.0, "h": 3600.0, "day": 86400.0, "week": 604800.0, "month": 2.6298e6, "year": 3.15576e7,
    "decade": 3.15576e8, "century": 3.15576e9, "kcal": 4184.0, "kj": 1e3, "j": 1.0,
    "w": 1.0, "kw": 1e3, "mw": 1e6, "gw": 1e9, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
    "pp": 1.0, "bp": 0.01,  # a basis point is a hundredth of a percentage point
}
COARSE_TOLERANCE = 0.2  # a fraction in words and a percentage agree this close ("nearly a quarter" for 22%)
CONVERTED_TOLERANCE = 0.1  # converted values this close agree (conversions are rounded: "5 miles" ~ "8 km")
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9, "b": 1e9,
          "trillion": 1e12, "tn": 1e12, "hundred": 1e2, "dozen": 12.0}
_WORDNUM = {w: float(i) for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"])}
_WORDNUM.update({"thirty": 30.0, "forty": 40.0, "fifty": 50.0, "sixty": 60.0, "seventy": 70.0, "eighty": 80.0,
                 "ninety": 90.0, "half": 0.5, "twice": 2.0, "double": 2.0, "triple": 3.0})
_NUM = re.compile(
    r"(?P<cur>[$€£¥])?\s?(?P<num>(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+(?:\.\d+)?)"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|bn|mn|tn|k|m|b)\b)?"
    r"(?P<pct>\s?%|\s?(?:percent|per cent)\b)?"
    r"(?:[\s-]?(?P<unit>°[cf]|[a-zµ°/]+))?",
    re.IGNORECASE,
)
_WORDNUM_RE = re.compile(r"\b(" + "|".join(sorted(_WORDNUM, key=len, reverse=True)) + r")\b(?:[\s-]+([a-z]+))?", re.IGNORECASE)
_LOWER_BOUND = re.compile(r"(?:more than|over|at least|exceeding|exceeds|above|upwards of|greater than|>)\s*$", re.I)
_UPPER_BOUND = re.compile(r"(?:less than|under|at most|fewer than|below|up to|no more than|<)\s*$", re.I)
_APPROX = re.compile(r"(?:about|around|approximately|roughly|nearly|almost|some|an estimated|estimated|~|circa|ca\.|close to"
                     r"|just (?:over|under))\s*$", re.I)
# a fraction in words: "a quarter", "two thirds", "close to half"; "of a percentage point" makes it an amount of
# points, "of <something>" a share of it (a percentage)
_FRACTION = {"half": 0.5, "halves": 0.5, "third": 1 / 3, "thirds": 1 / 3, "quarter": 0.25, "quarters": 0.25,
             "fifth": 0.2, "fifths": 0.2, "tenth": 0.1, "tenths": 0.1}
_FRACTION_RE = re.compile(
    r"\b(?:(a|an|one|two|three|four|nine)[\s-]+)?(half|halves|thirds?|quarters?|fifths?|tenths?)\b"
    r"(?:\s+(?:of\s+)?(a|an)\s+(percentage\s+point|percent\s+point|point)\b|\s+of\s+(?!a\b|an\b)(\w+))?", re.I)
_AND_A_HALF = re.compile(r"\b(\d+|" + "|".join(["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"])
                         + r")\s+and\s+a\s+half\b(?:[\s-]+([a-z]+))?", re.I)
_MONTH_NAMES = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"]
_MONTH_RE = re.compile(r"\b(" + "|".join([*_MONTH_NAMES, "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sept", "sep", "oct", "nov", "dec"]) + r")\b\.?", re.I)


@dataclass(frozen=True)
class Quantity:
    value: float
    decimals: int
    dim: str | None
    unit: str | None  # canonical unit, or the counted noun's stem ("patients" -> "patient")
    raw: str
    bound: str  # "=" | ">" | "<" | "~"
    year: bool
    slot: str | None = None  # the content word just before a unit-less number ("score of 2" -> "score")
    coarse: bool = False  # a fraction in words ("a quarter"): a writer rounds 22% to it, so it agrees within 20%


def quantities(text: str) -> list[Quantity]:
    """Numbers with their unit (or counted noun), bound words and whether they look like a year."""
    return list(_quantities(text))


@lru_cache(maxsize=16_384)
def _quantities(text: str) -> tuple[Quantity, ...]:
    out: list[Quantity] = []
    for m in _NUM.finditer(text):
        raw_num = m.group("num")
        num_text = raw_num.replace(",", "")
        try:
            value = float(num_text)
        except ValueError:
            continue
        decimals = len(num_text.split(".")[1]) if "." in num_text else 0
        scale = (m.group("scale") or "").lower()
        unit_word = (m.group("unit") or "").lower().strip("-/")
        bare_metres = False
        if scale in ("m", "b", "k") and not m.group("cur"):
            # a bare letter scales money only ("$5m"); "300 m" is metres, "5 k" stays a number
            if scale == "m":
                unit_word, bare_metres = "meter", True
            scale = ""
        if scale:
            value *= _SCALE.get(scale, 1.0)
        dim: str | None = None
        unit: str | None = None
        if m.group("pct"):
            dim, unit = "ratio", "%"
        elif m.group("cur"):
            dim, unit = _UNITS[m.group("cur")]
        elif unit_word in _UNITS:
            dim, unit = _UNITS[unit_word]
        elif unit_word and unit_word not in STOPWORDS and unit_word.isalpha():
            unit = stem(unit_word)
        raw = text[m.start() : m.end("scale")].strip() if bare_metres else m.group(0).strip()
        if unit is None and unit_word:
            raw = raw[: len(raw) - len(unit_word)].strip()
        prefix = text[max(0, m.start() - 24) : m.start()]
        bound = ">" if _LOWER_BOUND.search(prefix) else "<" if _UPPER_BOUND.search(prefix) else "~" if _APPROX.search(prefix) else "="
        year = (
            decimals == 0 and not scale and dim is None and "," not in raw_num and 1000 <= value <= 2100
            and len(num_text) == 4
        )
        before = content_tokens(text[max(0, m.start() - 30) : m.start()])
        out.append(Quantity(value, decimals, dim, unit, raw, bound, year, before[-1] if before else None))
    taken: list[tuple[int, int]] = []  # spans read as one amount ("two and a half", "a quarter of a point")

    def bound_of(start: int) -> str:
        prefix = text[max(0, start - 24) : start]
        return ">" if _LOWER_BOUND.search(prefix) else "<" if _UPPER_BOUND.search(prefix) else "~" if _APPROX.search(prefix) else "="

    for m in _AND_A_HALF.finditer(text):
        head = m.group(1).lower()
        value = float(head) if head.isdigit() else _WORDNUM[head]
        dim, unit = _unit_of((m.group(2) or "").lower())
        taken.append(m.span())
        out.append(Quantity(value + 0.5, 1, dim, unit, m.group(0), bound_of(m.start()), False))
    for m in _FRACTION_RE.finditer(text):
        count, frac = (m.group(1) or "").lower(), m.group(2).lower()
        if not count and frac != "half":
            continue  # "quarter" alone ("the third quarter", "the fifth planet") is no fraction
        if any(a <= m.start() < b for a, b in taken) or _not_a_share(text, m):
            continue
        value = _fraction_value(m)
        if m.group(4):  # "a quarter of a percentage point": an amount of points
            dim, unit, amount = "ratio", "pp", value
        elif m.group(5):  # "a fifth of the respondents", "half of India's workers": a share
            dim, unit, amount = "ratio", "%", value * 100
        else:
            continue  # "half the size", "two thirds" alone: not compared
        taken.append(m.span())
        bound = bound_of(m.start())
        out.append(Quantity(amount, 1, dim, unit, m.group(0), bound if bound != "=" else "~", False, coarse=True))
    for m in _WORDNUM_RE.finditer(text):
        if any(a <= m.start() < b for a, b in taken):
            continue
        word = m.group(1).lower()
        follower = (m.group(2) or "").lower()
        if word in ("one", "half") and follower in ("of", "the", "a", "") :
            continue  # "one of", "one" as a pronoun: not a count
        dim, unit = _unit_of(follower)
        out.append(Quantity(_WORDNUM[word], 0, dim, unit, m.group(0), bound_of(m.start()), False))
    return tuple(out)


_HALF_POSITION = re.compile(r"\b(?:first|second|latter|former|last|early|late|other|top|bottom|back|front|upper|"
                            r"lower|northern|southern|eastern|western|opening|closing)\s*$", re.I)
_PERIOD = re.compile(r"\s*(?:the\s+|this\s+|that\s+|its\s+|their\s+)?(?:\d{4}\s+)?(?:year|century|decade|season|month|"
                     r"week|day|game|match|term|period|race|quarter|half|time|way|distance)s?\b", re.I)


def _fraction_value(m: re.Match[str]) -> float:
    """The value of a ``_FRACTION_RE`` match: "a quarter" 0.25, "two thirds" 0.667."""
    count = (m.group(1) or "a").lower()
    return (1.0 if count in ("a", "an", "one") else _WORDNUM[count]) * _FRACTION[m.group(2).lower()]


def _not_a_share(text: str, m: re.Match[str]) -> bool:
    """ "the second half of the year", "a quarter of the way", "two quarters of growth": a part of a period or a
    position, not a share of an amount."""
    if _HALF_POSITION.search(text[max(0, m.start() - 12) : m.start()]):
        return True
    if m.group(2).lower() == "quarters" and (m.group(1) or "").lower() != "three":
        return True
    after_of = text[m.end(2):]
    after_of = after_of[after_of.lower().find(" of ") + 4 :] if " of " in after_of[:6].lower() else ""
    return bool(after_of) and _PERIOD.match(after_of) is not None


def _unit_of(follower: str) -> tuple[str | None, str | None]:
    """The dimension and canonical unit of the word after a number in words, or its stem as a counted noun."""
    if follower in _UNITS:
        return _UNITS[follower]
    if follower and follower not in STOPWORDS:
        return None, stem(follower)
    return None, None


def _same_value(claim: Quantity, ev: Quantity) -> bool:
    c, e = claim.value, ev.value
    if c == e:
        return True
    # "120" is consistent with "more than 100"; "more than 18 months" is not with "more than 12 months" (a bound
    # in the claim needs one at least as strong in the evidence, below)
    if claim.bound in "=~" and ((ev.bound == ">" and c >= e) or (ev.bound == "<" and c <= e)):
        return True
    if claim.bound == ">":
        return e >= c
    if claim.bound == "<":
        return e <= c
    if claim.coarse or ev.coarse:
        return abs(c - e) <= COARSE_TOLERANCE * max(abs(c), abs(e))
    if claim.bound == "~" or ev.bound == "~":
        return abs(c - e) <= 0.1 * max(abs(c), abs(e))
    if round(e, claim.decimals) == c:  # "30%" for "29.6%"
        return True
    return abs(c - e) <= 0.005 * max(abs(c), abs(e))


def _convertible(a: Quantity, b: Quantity) -> bool:
    """Two quantities of one dimension in different units that can be converted ("2 m", "20 cm")."""
    return (a.dim is not None and a.dim == b.dim and a.unit != b.unit
            and a.unit in _FACTOR and b.unit in _FACTOR)


def _converted_agree(claim: Quantity, ev: Quantity) -> bool:
    """The same amount in other units ("2 metres" and "200 centimetres"), bounds respected."""
    if not _convertible(claim, ev) or claim.unit is None or ev.unit is None:
        return False
    c, e = claim.value * _FACTOR[claim.unit], ev.value * _FACTOR[ev.unit]
    if abs(c - e) <= CONVERTED_TOLERANCE * max(abs(c), abs(e)):
        return True
    exact = "=~"  # a bound on one side only: "more than 3 km" holds for "5,000 metres"; "up to 64 GB" and
    # "up to 64 MB" are two different limits
    if claim.bound in exact and ((ev.bound == ">" and c >= e) or (ev.bound == "<" and c <= e)):
        return True
    return ev.bound in exact and ((claim.bound == ">" and e >= c) or (claim.bound == "<" and e <= c))


@lru_cache(maxsize=16_384)
def agreeing_numbers(claim: str, evidence: str) -> frozenset[str]:
    """The claim's number tokens whose amount the evidence states in another form: rounded ("1.6 km" for
    "1,642 m", "14.1 million" for "14,094,034"), bounded ("over 1.6 km") or in other units ("4,100 miles"
    for "6,650 km"). A paraphrase restates numbers; exact token matching calls them missing."""
    e_q = [q for q in quantities(evidence) if not q.year]
    out: set[str] = set()
    for cq in quantities(claim):
        if cq.year or not any(
            (_same_value(cq, eq) and (cq.unit is None or eq.unit is None or cq.unit == eq.unit)) or _converted_agree(cq, eq)
            for eq in e_q
        ):
            continue
        out.update(t for t in content_tokens(cq.raw) if t[:1].isdigit())
    return frozenset(out)


@lru_cache(maxsize=16_384)
def restated_units(claim: str, evidence: str) -> frozenset[str]:
    """The claim's unit words ("degrees Celsius", "kilometres") that the evidence writes as another name or symbol of
    the same unit ("4 °C", "12 km"): a capitalised unit name is a specific word the evidence seems to lack."""
    units = {q.unit for q in quantities(evidence) if q.dim is not None}
    out = set()
    for w in re.findall(r"[A-Za-z°µ/]+", claim):
        hit = _UNITS.get(w.lower())
        if hit is not None and hit[1] in units:
            out.update(content_tokens(w))
    return frozenset(out)


def _number_checks(claim: str, evidence: str, context: str) -> list[Mismatch]:
    out: list[Mismatch] = []
    c_q = [q for q in quantities(claim) if not q.year]
    if not c_q:
        return out
    e_q = [q for q in quantities(evidence) if not q.year]
    x_q = [q for q in quantities(context) if not q.year]
    for cq in c_q:
        if any(_same_value(cq, eq) and (cq.unit is None or eq.unit is None or cq.unit == eq.unit) for eq in x_q):
            continue
        if any(_converted_agree(cq, eq) for eq in x_q):
            continue
        same_value_other_unit = [
            eq for eq in e_q if _same_value(cq, eq) and cq.unit and eq.unit and cq.unit != eq.unit
            and (cq.dim is not None and cq.dim == eq.dim)
        ]
        if same_value_other_unit:
            eq = same_value_other_unit[0]
            out.append(Mismatch("unit", cq.raw, eq.raw, f"same value, different unit ({cq.unit} vs {eq.unit})"))
            continue
        converted = [eq for eq in e_q if _convertible(cq, eq)]
        if converted:
            eq = converted[0]
            out.append(Mismatch("number", cq.raw, eq.raw, f"the evidence gives {eq.raw!r} where the claim says {cq.raw!r}"))
            continue
        comparable = [eq for eq in e_q if cq.unit is not None and eq.unit == cq.unit]
        if not comparable and cq.unit is None and cq.slot:
            comparable = [eq for eq in e_q if eq.unit is None and eq.slot == cq.slot]
        if comparable:
            eq = comparable[0]
            out.append(Mismatch("number", cq.raw, eq.raw, f"the evidence gives {eq.raw!r} where the claim says {cq.raw!r}"))
    return out


# an ordinal before its noun: "the fourth quarter", "2nd place", "third-largest" (a fraction, "a third of", is not one)
_ORDINAL_WORDS = {w: i + 1 for i, w in enumerate(["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                                                   "ninth", "tenth", "eleventh", "twelfth"])}
_ORDINAL_RE = re.compile(r"\b(?:(" + "|".join(_ORDINAL_WORDS) + r")|(\d{1,3})(?:st|nd|rd|th))[\s-]+([a-z]{3,})\b", re.I)


@lru_cache(maxsize=16_384)
def _ordinals(text: str) -> dict[str, frozenset[int]]:
    """The ordinals of the text by the stem of the noun they count ("third quarter" -> {"quarter": {3}})."""
    out: dict[str, set[int]] = {}
    for m in _ORDINAL_RE.finditer(text):
        value = _ORDINAL_WORDS[m.group(1).lower()] if m.group(1) else int(m.group(2))
        out.setdefault(stem(m.group(3).lower()), set()).add(value)
    return {k: frozenset(v) for k, v in out.items()}


def _ordinal_checks(claim: str, evidence: str, context: str) -> list[Mismatch]:
    """"Revenue rose in the fourth quarter" against "... in the third quarter": an ordinal is a number of
    its own noun. A mismatch only when the evidence counts the same noun with another ordinal and nothing
    in the context has the claim's."""
    e_ord, x_ord = _ordinals(evidence), _ordinals(context)
    for noun, values in _ordinals(claim).items():
        for value in values:
            others = e_ord.get(noun, frozenset()) - values
            if others and value not in x_ord.get(noun, frozenset()):
                return [Mismatch("number", f"{value} ({noun})", f"{min(others)} ({noun})",
                                 f"the evidence counts the {noun} as number {min(others)}, the claim as {value}")]
    return []


# -- dates ---------------------------------------------------------------------------------

@lru_cache(maxsize=16_384)
def _years(text: str) -> frozenset[int]:
    out = {int(q.value) for q in _quantities(text) if q.year}
    out |= {int(m.group(1)) for m in re.finditer(r"\b(1\d{3}|20\d{2})s\b", text)}
    return frozenset(out)


@lru_cache(maxsize=16_384)
def _months(text: str) -> frozenset[int]:
    found: set[int] = set()
    for m in _MONTH_RE.finditer(text):
        word = m.group(1).lower()
        if word == "may":  # the month only next to a number or with a capital not starting a sentence
            after = text[m.end() : m.end() + 6]
            before = text[max(0, m.start() - 5) : m.start()]
            if not (re.match(r"\s*\d", after) or re.search(r"\d\s*$", before)):
                continue
        if (word == "mar" or word == "dec") and not m.group(0)[0].isupper():
            continue
        for i, name in enumerate(_MONTH_NAMES):
            if name.startswith(word[:3]):
                found.add(i + 1)
                break
    return frozenset(found)


_WEEKDAY_RE = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.I)


@lru_cache(maxsize=16_384)
def _weekdays(text: str) -> frozenset[str]:
    return frozenset(m.group(1).lower() for m in _WEEKDAY_RE.finditer(text))


_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTH_NAMES) + r")\.?\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?(1\d{3}|20\d{2})\b", re.I)


@lru_cache(maxsize=16_384)
def _month_years(text: str) -> frozenset[tuple[int, int]]:
    """(month, year) of every "June 2007" / "June 29, 2007" in the text."""
    return frozenset((_MONTH_NAMES.index(m.group(1).lower()) + 1, int(m.group(2))) for m in _MONTH_YEAR.finditer(text))


def _month_year_check(claim: str, evidence: str, context: str) -> Mismatch | None:
    """ "went on sale in June 2008" against "went on sale in June 2007": the same month in another year
    (or the same year in another month), where the year alone is no mismatch because the evidence
    mentions 2007 elsewhere."""
    known = _month_years(context)
    ev = _month_years(evidence)
    for month, year in sorted(_month_years(claim) - known):
        for e_month, e_year in sorted(ev):
            if (e_month == month) != (e_year == year) and (e_month, e_year) not in _month_years(claim):
                return Mismatch("date", f"{_MONTH_NAMES[month - 1]} {year}", f"{_MONTH_NAMES[e_month - 1]} {e_year}",
                                "the evidence dates this differently")
    return None


def _date_checks(claim: str, evidence: str, context: str) -> list[Mismatch]:
    out: list[Mismatch] = []
    c_years, e_years, x_years = _years(claim), _years(evidence), _years(context)
    missing = sorted(y for y in c_years if y not in x_years)
    if missing and e_years - c_years:
        out.append(Mismatch("date", str(missing[0]), ", ".join(str(y) for y in sorted(e_years - c_years)),
                            "the evidence dates this differently"))
    if not out:
        pair = _month_year_check(claim, evidence, context)
        if pair:
            out.append(pair)
    c_d, e_d, x_d = _weekdays(claim), _weekdays(evidence), _weekdays(context)
    if c_d and not (c_d & x_d) and e_d and not out:
        out.append(Mismatch("date", sorted(c_d)[0], sorted(e_d)[0], "the evidence gives a different day"))
    c_m, e_m, x_m = _months(claim), _months(evidence), _months(context)
    if c_m and not (c_m & x_m) and e_m and not out:
        out.append(Mismatch("date", _MONTH_NAMES[min(c_m) - 1], _MONTH_NAMES[min(e_m) - 1],
                            "the evidence gives a different month"))
    return out


# -- negation and antonyms -----------------------------------------------------------------

_NEG = re.compile(
    r"\b(?:not|no longer|no|never|none|nobody|nothing|neither|nor|cannot|without|lacks?|lacking|lacked|"
    r"fail(?:s|ed)? to|unable to|absence of|free of)\b|n't\b",
    re.IGNORECASE,
)
_SCOPE = 5  # content words after a negation cue that it governs

_ANTONYMS = [
    ("increase", "decrease"), ("increase", "reduce"), ("rise", "fall"), ("rise", "decline"), ("raise", "lower"),
    ("higher", "lower"), ("more", "less"), ("more", "fewer"), ("larger", "smaller"), ("bigger", "smaller"),
    ("greater", "lesser"), ("before", "after"), ("earlier", "later"), ("true", "false"), ("positive", "negative"),
    ("safe", "unsafe"), ("safe", "dangerous"), ("effective", "ineffective"), ("legal", "illegal"),
    ("allowed", "prohibited"), ("allowed", "banned"), ("permitted", "prohibited"), ("win", "lose"), ("won", "lost"),
    ("north", "south"), ("east", "west"), ("maximum", "minimum"), ("above", "below"), ("majority", "minority"),
    ("first", "last"), ("gain", "loss"), ("open", "closed"), ("alive", "dead"), ("accept", "reject"),
    ("approved", "rejected"), ("success", "failure"), ("succeeded", "failed"), ("strong", "weak"),
    ("strengthen", "weaken"), ("high", "low"), ("cheap", "expensive"), ("fast", "slow"), ("faster", "slower"),
    ("increased", "decreased"), ("increases", "decreases"), ("rises", "falls"), ("lowers", "raises"),
    ("improve", "worsen"), ("benefit", "harm"), ("beneficial", "harmful"), ("common", "rare"), ("inside", "outside"),
    ("include", "exclude"), ("acidic", "alkaline"), ("hot", "cold"), ("warmer", "cooler"), ("oldest", "youngest"),
    ("older", "younger"), ("largest", "smallest"), ("highest", "lowest"), ("best", "worst"), ("male", "female"),
    ("inhibit", "stimulate"), ("inhibit", "activate"), ("agonist", "antagonist"), ("private", "public"),
    # events and states of laws, organisations, deals and people (the "enacted" vs "repealed")
    ("enact", "repeal"), ("enacted", "repealed"), ("sign", "repeal"), ("signed", "repealed"), ("sign", "veto"),
    ("signed", "vetoed"), ("establish", "abolish"), ("established", "abolished"), ("established", "repealed"),
    ("ratified", "repealed"), ("introduced", "abolished"), ("upheld", "overturned"), ("uphold", "overturn"),
    ("upheld", "struck"), ("approved", "vetoed"), ("passed", "vetoed"), ("imposed", "lifted"), ("impose", "lift"),
    ("opened", "closed"), ("reopened", "closed"), ("reopened", "shut"), ("launched", "cancelled"),
    ("launched", "discontinued"), ("hired", "fired"), ("appointed", "dismissed"), ("joined", "left"),
    ("bought", "sold"), ("buy", "sell"), ("acquired", "sold"), ("acquire", "sell"), ("acquired", "divested"),
    ("import", "export"), ("imports", "exports"), ("convicted", "acquitted"), ("guilty", "innocent"),
    ("arrested", "released"), ("started", "ended"), ("began", "ended"), ("entered", "exited"), ("added", "removed"),
    ("supported", "opposed"), ("support", "oppose"), ("confirmed", "denied"), ("accepted", "declined"),
    ("promoted", "demoted"), ("upgraded", "downgraded"), ("surplus", "deficit"), ("profit", "loss"),
    ("legalized", "criminalized"), ("legalised", "criminalised"), ("born", "died"), ("passed", "failed"),
    ("active", "dormant"), ("active", "extinct"), ("extinct", "extant"), ("built", "demolished"),
    ("constructed", "demolished"), ("ratified", "rejected"), ("heavier", "lighter"), ("longer", "shorter"),
    ("longest", "shortest"), ("wider", "narrower"), ("deeper", "shallower"), ("hotter", "colder"),
    ("hottest", "coldest"), ("nearest", "farthest"), ("closest", "farthest"), ("northern", "southern"),
    ("eastern", "western"), ("upstream", "downstream"), ("present", "absent"), ("wet", "dry"),
    ("overestimate", "underestimate"), ("online", "offline"), ("encrypted", "unencrypted"), ("enabled", "disabled"),
    ("grant", "deny"), ("granted", "denied"), ("passed", "rejected"), ("approved", "denied"),
    ("enable", "disable"), ("deprecated", "recommended"), ("synchronous", "asynchronous"), ("mutable", "immutable"),
]
_POLARITY = [
    ("increase increases increased increasing raise raises raised rise rises rose risen boost boosts boosted "
     "elevate elevates elevated higher grow grows grew growth improve improves improved enhance enhances "
     "enhanced accelerate accelerates accelerated strengthen strengthens strengthened expand expands expanded "
     "up climb climbs climbed surge surges surged gain gains gained jump jumps jumped rally rallies rallied "
     "soar soars soared spike spikes spiked advance advances advanced",
     "decrease decreases decreased decreasing reduce reduces reduced reduction lower lowers lowered fall falls "
     "fell fallen decline declines declined drop drops dropped shrink shrinks shrank worsen worsens worsened "
     "diminish diminishes diminished slow slows slowed weaken weakens weakened lessen lessens lessened "
     "down plunge plunges plunged slide slides slid sliding slip slips slipped dip dips dipped sink sinks sank "
     "tumble tumbles tumbled slump slumps slumped retreat retreats retreated"),
    ("allow allows allowed permit permits permitted legal legalise legalises legalised legalize legalizes "
     "legalized", "forbid forbids forbade ban bans banned prohibit prohibits prohibited illegal outlaw outlaws "
     "outlawed criminalise criminalised criminalize criminalized"),
    ("cause causes caused trigger triggers triggered", "prevent prevents prevented"),
    # "defeated" is the winner's verb ("A defeated B" = A won), so it is not on the losing side
    ("win wins won victory", "lose loses lost"),
    # undoing a removal against the removal itself: a law, a feature or a rule brought back vs taken away
    ("restore restores restored reinstate reinstates reinstated reintroduce reintroduces reintroduced revive "
     "revives revived", "remove removes removed repeal repeals repealed abolish abolishes abolished eliminate "
     "eliminates eliminated scrap scraps scrapped rescind rescinds rescinded"),
]
_ANTI: dict[str, set[str]] = {}
for _a, _b in _ANTONYMS:
    _ANTI.setdefault(stem(_a), set()).add(stem(_b))
    _ANTI.setdefault(stem(_b), set()).add(stem(_a))
_CHANGE: set[str] = set()
for _up, _down in _POLARITY[:1]:
    _CHANGE |= {stem(w) for w in (_up + " " + _down).split()}
# _SIDE: the words on the same side of a polarity pair: "prices climbed" against "prices rose in March after
# falling in February" is confirmed by "rose"; the opposite word there is about another moment
_SIDE: dict[str, frozenset[str]] = {}
for _up, _down in _POLARITY:
    _ups, _downs = frozenset(stem(w) for w in _up.split()), frozenset(stem(w) for w in _down.split())
    for _this, _that in ((_ups, _downs), (_downs, _ups)):
        for _w in _this:
            _ANTI.setdefault(_w, set()).update(_that)
            _SIDE[_w] = _SIDE.get(_w, frozenset()) | _this


_CLAUSE_END = re.compile(r"[,;:?!.()]|\b(?:but|although|though|whereas|while|however)\b", re.I)


# "no country has won more often than Brazil", "nothing is larger than ...": a negated comparison is a
# superlative of the other party, not a denial of the predicate
_NO_ONE = re.compile(r"\b(?:no|none|nobody|nothing|never)\b", re.I)
_COMPARED = re.compile(r"\b(?:more|less|fewer|better|worse|\w{3,}er)\b.*?\bthan\b", re.I)


@lru_cache(maxsize=16_384)
def _scopes(text: str) -> tuple[tuple[str, ...], ...]:
    """For each negation cue, the content words it governs: up to 3, within its clause."""
    out: list[tuple[str, ...]] = []
    for m in _NEG.finditer(text):
        rest = text[m.end() : m.end() + 120]
        stop = _CLAUSE_END.search(rest)
        if _NO_ONE.fullmatch(m.group(0)) and _COMPARED.search(rest[: stop.start()] if stop else rest):
            continue
        out.append(tuple(content_tokens(rest[: stop.start()] if stop else rest)[:3]))
    return tuple(out)


def _together(terms: list[str], seq: list[str], width: int = 4) -> bool:
    """Do all ``terms`` occur within ``width`` words of one another somewhere in ``seq``?
    (the same phrase on the other side, not scattered words)"""
    need = set(terms)
    return any(tok in need and need <= set(seq[i:i + width + 1]) for i, tok in enumerate(seq))


_EFFECT = frozenset(stem(w) for w in ["effect", "effects", "impact", "impacts", "affect", "affects", "influence", "change", "changes", "alter"])


def _flip(
    scopes: tuple[tuple[str, ...], ...], other: set[str], other_negated: set[str], other_seq: list[str], short: bool
) -> list[str] | None:
    """A negated phrase on one side whose words the other side asserts without negation.

    "has no effect on fever" against "lowers fever": a negated effect word counts as asserted
    when the other side states a change (an increase/decrease word) on the same object.
    """
    changes = {t for t in other if t in _CHANGE}
    for scope in scopes:
        asserted = [t for t in scope if t in other and t not in other_negated]
        if (len(asserted) >= 2 and _together(asserted, other_seq)) or (len(scope) == 1 and asserted and short):
            return asserted
        # the negated verb and its first word together on the other side ("failed to land on comet 67P" against
        # "the first soft landing on a comet"), when a third word of the scope is elsewhere in it
        if len(asserted) >= 3 and asserted[:2] == list(scope[:2]) and _together(asserted[:2], other_seq):
            return asserted[:2]
        if asserted and changes and any(t in _EFFECT for t in scope) and not (set(asserted) & _EFFECT):
            return [*sorted(changes)[:1], *asserted]
    return None


def _cue_snippet(text: str) -> str:
    m = _NEG.search(text)
    if m is None:
        return "(asserted)"
    start = text.rfind(" ", 0, max(0, m.start() - 1)) + 1
    tail = text[m.end() :].split()[:3]
    return (text[start : m.end()] + " " + " ".join(tail)).strip()


_FUNCTION_OPPOSITES = {"before": "after", "after": "before", "above": "below", "below": "above",
                       "over": "under", "under": "over", "inside": "outside", "outside": "inside"}
_FW = re.compile(r"\b(before|after|above|below|over|under|inside|outside)\s+(?:the\s+|a\s+|an\s+)?(\w+)", re.I)


def _function_word_flip(claim: str, evidence: str) -> Mismatch | None:
    """ "signed before the war" vs "signed after the war": opposite stop-words on the same object."""
    c = {(m.group(1).lower(), stem(m.group(2).lower())) for m in _FW.finditer(claim)}
    e = {(m.group(1).lower(), stem(m.group(2).lower())) for m in _FW.finditer(evidence)}
    for word, obj in sorted(c):
        if (_FUNCTION_OPPOSITES[word], obj) in e and (word, obj) not in e:
            return Mismatch("negation", f"{word} {obj}", f"{_FUNCTION_OPPOSITES[word]} {obj}", "the evidence states the opposite")
    return None


_NEG_PREFIXES = ("non", "un", "in", "im", "il", "ir", "dis", "anti")


_COPULA = re.compile(r"\b([A-Za-z][\w-]*)\s+(?:is|are|was|were|remains?|remained)\s+(?:(?:always|still|now|also)\s+)?(?:(?:the|a|an)\s+)?"
                     r"([A-Za-z][\w-]*)", re.I)


def _copulas(text: str) -> list[tuple[str, str]]:
    """(subject, predicate) stems of each "X is/are (the) Y" of the text."""
    out = []
    for m in _COPULA.finditer(text):
        subj, pred = content_tokens(m.group(1)), content_tokens(m.group(2))
        if subj and pred:
            out.append((subj[0], pred[0]))
    return out


def _bound_predicate(claim: str, evidence: str) -> Mismatch | None:
    """ "tuples are mutable" against "lists are mutable, whereas tuples are immutable": the claim's subject gets the
    opposite predicate in the evidence, even when the claim's own word is there too (bound to another subject)."""
    c_pairs = _copulas(claim)
    if not c_pairs:
        return None
    e_pairs = set(_copulas(evidence))
    for subj, pred in c_pairs:
        if (subj, pred) in e_pairs:
            continue
        opposites = set(_prefix_opposites(pred)) | _ANTI.get(pred, set())
        for e_subj, e_pred in e_pairs:
            if e_subj == subj and e_pred in opposites:
                return Mismatch("negation", f"{subj} … {pred}", f"{e_subj} … {e_pred}",
                                "the evidence gives the claim's subject the opposite predicate")
    return None


def _prefix_opposites(term: str) -> list[str]:
    """"safe" <-> "unsafe", "steroidal" <-> "nonsteroidal": the same word with a negating prefix."""
    out = [p + term for p in _NEG_PREFIXES]
    out += [term[len(p) :] for p in _NEG_PREFIXES if term.startswith(p) and len(term) - len(p) >= 4]
    return out


def _neighbours(seq: list[str], i: int) -> set[str]:
    return set(seq[max(0, i - 2) : i] + seq[i + 1 : i + 3])


def _same_side_nearby(c_seq: list[str], i: int, e_seq: list[str], term: str, c_all: set[str]) -> bool:
    """The evidence states the claim's direction for the same thing: a word of the term's own side, not
    itself a word of the claim, with a neighbour in common ("prices climbed" against "prices rose in March
    after falling in February"). A same-side word the claim also has is the claim's own other clause
    ("shares rose after the company raised its forecast" against "shares fell after the company raised its
    forecast"): it confirms nothing, so it cannot excuse the opposite."""
    side = _SIDE.get(term, frozenset())
    near = _neighbours(c_seq, i)
    return any(w in side and w not in c_all and near & _neighbours(e_seq, k) for k, w in enumerate(e_seq))


_NO_LONGER = re.compile(r"\b(?:no longer|not any more|not anymore)\b", re.I)
_CEASE = re.compile(r"\b(?:end(?:s|ed)?|stop(?:s|ped)?|ceas(?:e|es|ed)|drop(?:s|ped)?|discontinu\w*|halt(?:s|ed)?|quit|"
                    r"abandon\w*|phas(?:e|es|ed) out|scrap(?:s|ped)?|retir(?:e|es|ed))\b", re.I)


def _ceased(text: str, other: str) -> bool:
    """``other`` says "no longer X" and ``text`` that X ended ("night shifts have ended" / "no longer work night
    shifts"): the same fact, so the negated phrase is not asserted against it."""
    return bool(_NO_LONGER.search(other) and _CEASE.search(text))


def _negation_checks(claim: str, evidence: str) -> list[Mismatch]:
    c_sc, e_sc = _scopes(claim), _scopes(evidence)
    c_neg = {t for sc in c_sc for t in sc}
    e_neg = {t for sc in e_sc for t in sc}
    c_seq, e_seq = content_tokens(claim), content_tokens(evidence)
    c_all, e_all = set(c_seq), set(e_seq)
    short = len(c_seq) <= 12 and len(e_seq) <= 25
    flipped = None if _ceased(evidence, claim) else _flip(c_sc, e_all, e_neg, e_seq, short)
    side = "claim"
    if flipped is None and not _ceased(claim, evidence):
        flipped, side = _flip(e_sc, c_all, c_neg, c_seq, short), "evidence"
    if flipped:
        return [Mismatch("negation", _cue_snippet(claim), _cue_snippet(evidence),
                         f"the {side} negates {' '.join(flipped)!r} and the other side asserts it")]
    flip = _function_word_flip(claim, evidence) or _bound_predicate(claim, evidence)
    if flip:
        return [flip]
    earlier = _earlier_states(evidence)
    attempted = _attempted(evidence)
    for i, term in enumerate(c_seq):
        if term in attempted and term not in c_neg and not _ATTEMPT.search(claim):
            # the evidence only tried it ("voted to convict"): an opposite outcome anywhere in it ("and he was
            # acquitted") denies the claim, when the attempt is about the same thing (shared neighbours)
            j0 = e_seq.index(term)
            opposite = [o for o in e_seq if o in _ANTI.get(term, ()) and o not in c_all]
            if opposite and _neighbours(c_seq, i) & _neighbours(e_seq, j0):
                return [Mismatch("negation", term, opposite[0], "the evidence only attempts it and states the opposite")]
            continue
        if term in e_all:
            continue
        for other in _prefix_opposites(term):
            if other in e_all and other not in c_all:
                return [Mismatch("negation", term, other, "the evidence states the opposite")]
        for j, other in enumerate(e_seq):
            if (other in _ANTI.get(term, ()) and other not in c_all and other not in earlier
                    and not _same_side_nearby(c_seq, i, e_seq, term, c_all)
                    and _neighbours(c_seq, i) & _neighbours(e_seq, j)):
                if _converse(claim, evidence, term, other):
                    continue
                return [Mismatch("negation", term, other, "the evidence states the opposite")]
    return []


# an attempt or an intention is not the event: "voted to convict ... and he was acquitted"
_ATTEMPT = re.compile(r"\b(?:voted|tried|sought|attempted|planned|aimed|proposed|moved|threatened|promised|wanted|"
                      r"hoped|intended)(?:\s+[\w–-]+){0,2}?\s+to\s+(\w+)", re.I)


@lru_cache(maxsize=16_384)
def _attempted(evidence: str) -> frozenset[str]:
    """Stems of the verbs the evidence names only as an attempt or intention ("voted to convict"), never as what
    happened: such a word in the evidence does not confirm the claim's same word, so its opposite still counts."""
    tried = {t for m in _ATTEMPT.finditer(evidence) for t in content_tokens(m.group(1))}
    if not tried:
        return frozenset()
    rest = _ATTEMPT.sub(" ", evidence)
    return frozenset(tried - set(content_tokens(rest)))


# a state the evidence puts before the one it asserts: "reopened in 2021, after it had been closed since 2019"
_EARLIER = re.compile(r"\b(?:had(?:\s+(?:been|first|once|previously))?|previously|formerly|once\s+been)\s+(\w+)", re.I)


@lru_cache(maxsize=16_384)
def _earlier_states(evidence: str) -> frozenset[str]:
    """Stems of the words the evidence says in the pluperfect or as a former state: "the option that had been
    removed in 2019" does not deny "the option was restored in 2021", it tells what came before."""
    return frozenset(t for m in _EARLIER.finditer(evidence) for t in content_tokens(m.group(1)))


# relations whose opposite, said from the other party, is the same fact: "France lost to Argentina" is
# "Argentina won against France"; "B bought it from A" is "A sold it to B"
_CONVERSE = frozenset(stem(w) for w in ["win", "wins", "won", "lose", "loses", "lost", "buy", "buys", "bought", "sell", "sells", "sold", "lend", "lends", "lent", "borrow", "borrows", "borrowed"])
_WORD = re.compile(r"[A-Za-z][\w'-]*")


def _subject_before(text: str, term: str) -> str | None:
    """The capitalised name closest before the first word whose stem is ``term`` (its subject, roughly)."""
    words = list(_WORD.finditer(text))
    for k, m in enumerate(words):
        if stem(m.group(0).lower()) != term:
            continue
        for prev in reversed(words[:k]):
            w = prev.group(0)
            if w[0].isupper() and w.lower() not in _OPENERS and w.lower() not in _NOT_NAMES:
                return w
        return None
    return None


def _converse(claim: str, evidence: str, term: str, other: str) -> bool:
    """The two opposite words are said of different parties, each named on both sides: a converse, not a flip."""
    if term not in _CONVERSE or other not in _CONVERSE:
        return False
    a, b = _subject_before(claim, term), _subject_before(evidence, other)
    return bool(a and b and a != b and re.search(rf"\b{re.escape(a)}\b", evidence)
                and re.search(rf"\b{re.escape(b)}\b", claim))


# -- quantifiers ---------------------------------------------------------------------------

_DET_LEVEL = {
    "all": 3, "every": 3, "each": 3, "everyone": 3, "everything": 3, "entire": 3,
    "most": 2, "majority": 2, "some": 1, "several": 1, "many": 1, "certain": 1, "few": 0, "minority": 0,
}
_FREQ_LEVEL = {
    "always": 3, "invariably": 3, "universally": 3, "usually": 2, "generally": 2, "typically": 2, "mostly": 2,
    "often": 1, "frequently": 1, "sometimes": 1, "occasionally": 1, "rarely": 0, "seldom": 0, "hardly": 0,
}
_Q_PHRASES = {
    "less than half": 0, "fewer than half": 0, "only a few": 0, "very few": 0, "hardly any": 0,
    "a small minority": 0, "more than half": 2, "the vast majority": 2, "the majority": 2,
    "nearly all": 3, "almost all": 2, "virtually all": 3,
    # a share named by a size word: "only a small fraction of the exoplanets" is the few, "the bulk" the most
    "a small fraction": 0, "only a small fraction": 0, "a tiny fraction": 0, "a small number": 0,
    "a small share": 0, "a handful": 0, "the bulk": 2,
}
_Q_PHRASE = re.compile(r"\b(?:" + "|".join(p.replace(" ", r"\s+") for p in _Q_PHRASES) + r")\b")
_ONLY = re.compile(r"\b(?:only|sole|solely|exclusively)\b", re.I)
_NOT_ONLY = re.compile(r"\b(?:one of|among|several|many|various|as well as|along with)\b", re.I)
_QWORD = re.compile(r"[a-z]+")


@lru_cache(maxsize=16_384)
def _quantified(text: str, family: int) -> tuple[tuple[int, str, frozenset[str]], ...]:
    """(level, word, the content words right after it) for each quantifier of one family."""
    levels = _DET_LEVEL if family == 0 else _FREQ_LEVEL
    out = []
    low = text.lower()
    taken: list[tuple[int, int]] = []
    if family == 0:
        for m in _Q_PHRASE.finditer(low):
            phrase = m.group(0)
            out.append((_Q_PHRASES[re.sub(r"\s+", " ", phrase)], phrase,
                        frozenset(content_tokens(low[m.end() : m.end() + 40])[:2])))
            taken.append((m.start(), m.end()))
    for m in _QWORD.finditer(low):
        w = m.group(0)
        if w not in levels or any(a <= m.start() < b for a, b in taken):
            continue
        if w == "few" and low[max(0, m.start() - 2) : m.start()] == "a ":
            out.append((1, "a few", frozenset(content_tokens(low[m.end() : m.end() + 40])[:2])))
            continue
        out.append((levels[w], w, frozenset(content_tokens(low[m.end() : m.end() + 40])[:2])))
    return tuple(out)


_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s?(?:%|percent\b|per cent\b)")


def _share_mismatch(claim: str, evidence: str) -> Mismatch | None:
    """ "the majority of the known species" against "around 10 percent of the known species": a
    quantifier word against a percentage of the same thing on the wrong side of one half."""
    c_q = [(lv, w, nxt) for lv, w, nxt in _quantified(claim, 0) if lv != 1]
    if not c_q:
        return None
    low = evidence.lower()
    shares = [(float(m.group(1)), m.end(), m.group(0)) for m in _PERCENT_OF.finditer(low)]
    for m in _FRACTION_RE.finditer(low):  # "about a fifth of the respondents": a share in words
        if m.group(5) and (m.group(1) or m.group(2) == "half"):
            shares.append((100 * _fraction_value(m), m.end(2), m.group(0)))
    for value, end, raw in shares:
        head = frozenset(content_tokens(low[end : end + 40])[:2])
        for level, word, nxt in c_q:
            if nxt & head and ((level >= 2 and value < 50) or (level == 0 and value > 50)):
                return Mismatch("quantifier", word, raw, "the evidence gives a share on the other side of half")
    return None


def _quantifier_checks(claim: str, evidence: str) -> list[Mismatch]:
    for family in (0, 1):
        c_q, e_q = _quantified(claim, family), _quantified(evidence, family)
        for c_level, c_word, c_next in c_q:
            same_head = [(lv, w) for lv, w, nxt in e_q if nxt & c_next]
            if not same_head or any(lv == c_level for lv, _ in same_head):
                continue
            e_level, e_word = max(same_head)
            if c_level > e_level or (c_level == 0 and e_level >= 2):
                return [Mismatch("quantifier", c_word, e_word, "the claim's quantifier is not what the evidence says")]
    share = _share_mismatch(claim, evidence)
    if share:
        return [share]
    m_only = _ONLY.search(claim)
    if m_only and not _ONLY.search(evidence):
        m = _NOT_ONLY.search(evidence)
        if m:
            return [Mismatch("quantifier", m_only.group(0), m.group(0), "the claim says only one; the evidence names others")]
    return []


# "never" is the universal of the negative: "ls never lists dot files" against "by default ls does not list them"
_UNIVERSAL = re.compile(r"\b(all|every|always|never|invariably|universally|everyone|everybody|anyone|anybody)\b", re.I)
_NOT_UNIVERSAL = re.compile(
    r"\b(?:at all|after all|above all|all but|all[- ]time|all of a sudden|for all (?:its|his|her|their|our|your|that|I)\b|"
    r"once and for all|every other|"
    r"not all|not every|not always|almost all|nearly all|virtually all|all in all|all over)\b", re.I)
_ANY_UNIVERSAL = re.compile(
    r"\b(?:all|every|each|always|invariably|universally|entire|entirely|whole|any|no|none|never|completely|"
    r"everyone|everything|everywhere|everybody|without exception)\b", re.I)


def overclaim(claim: str, evidence: str) -> str | None:
    """A universal the evidence does not state: "all patients report muscle pain" against "muscle pain is the
    most commonly reported side effect". The evidence says something weaker or nothing about how many, so the
    claim is at most partially supported (not contradicted: the evidence does not say "not all").
    Returns the claim's universal word, or None."""
    if _UNIVERSAL.search(claim) is None:  # most claims: one scan, nothing else
        return None
    if _ANY_UNIVERSAL.search(_NOT_UNIVERSAL.sub(" ", evidence)):
        return None
    text = _NOT_UNIVERSAL.sub(" ", claim)
    for m in _UNIVERSAL.finditer(text):
        if m.group(1)[0].isupper() and m.start() > 0:
            continue  # a capital inside the sentence is a title ("All the Money in the World")
        if _NEG.search(" ".join(text[: m.start()].split()[-3:])):
            continue  # "does not include all": the claim itself denies the universal
        return m.group(1).lower()
    return None


# -- named entities ------------------------------------------------------------------------

_CAP = re.compile(r"\b[A-Z][\w&.'-]*(?:\s+(?:of|de|la|van|von|the|and|&)?\s*[A-Z][\w&.'-]*)*")


_NOT_NAMES = frozenset(_MONTH_NAMES) | frozenset(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "i"]
)
_OPENERS = frozenset(
    ["however", "moreover", "additionally", "furthermore", "also", "although", "though", "while", "when", "whereas", "because", "since", "according", "as", "after", "before", "during", "if", "in", "on", "at", "for", "from", "with", "by", "to", "the", "a", "an", "this", "that", "these", "those", "there", "here", "it", "its", "they", "their", "he", "she", "we", "you", "our", "my", "his", "her", "one", "some", "many", "most", "all", "each", "every", "both", "specifically", "generally", "historically", "overall", "finally", "first", "second", "third", "similarly", "unfortunately", "fortunately", "notably", "importantly", "meanwhile", "instead", "thus", "therefore", "hence", "so", "yet", "still", "today", "recently", "currently", "now", "then", "other", "another", "such", "many", "several", "few", "no", "not", "even", "just", "only"]
)


@lru_cache(maxsize=16_384)
def _names(text: str, with_initial: bool = True) -> tuple[tuple[str, bool], ...]:
    """Capitalised names, each with whether it starts the text (a sentence-initial capital may be ordinary)."""
    out: list[tuple[str, bool]] = []
    first_word = re.match(r"\W*", text)
    start_pos = first_word.end() if first_word else 0
    for m in _CAP.finditer(text):
        name = m.group(0).strip(" .'-")
        initial = m.start() <= start_pos
        if initial:
            head, _, rest = name.partition(" ")
            if head.lower() in _OPENERS or head.lower().endswith("ly"):
                if not rest or not rest[:1].isupper():
                    continue
                name, initial = rest, False
            elif not with_initial:
                continue
        if name.lower() in _NOT_NAMES or name.lower() in _OPENERS:
            continue
        if content_tokens(name):
            out.append((name, initial))
    return tuple(out)


_PAGE_WORDS = frozenset(
    ["title", "author", "published", "datetime", "meta", "data", "url", "source", "abstract", "summary", "introduction", "contents", "menu", "home", "skip"]
)


# a roman numeral in a name is the ordinal in another wording: "World War II" is the "Second World War"
_ROMAN_ORDINALS = {"i": "first", "ii": "second", "iii": "third", "iv": "fourth", "v": "fifth", "vi": "sixth",
                   "vii": "seventh", "viii": "eighth"}


def _present(token: str, pool: set[str]) -> bool:
    """Exact, or the same word in another form ("greece"/"greek", "tio2"/"tio", "ii"/"second")."""
    if token in pool:
        return True
    if token in _ROMAN_ORDINALS:
        return stem(_ROMAN_ORDINALS[token]) in pool or _ROMAN_ORDINALS[token] in pool
    head = token[:4]
    return len(token) >= 4 and any(p.startswith(head) and (p.startswith(token[:-1]) or token.startswith(p[:-1]))
                                   for p in pool if len(p) >= 3)


def _next_word(text: str, name: str) -> str | None:
    i = text.find(name)
    after = content_tokens(text[i + len(name) : i + len(name) + 40]) if i >= 0 else []
    return after[0] if after else None


def _entity_checks(claim: str, evidence: str, context: str) -> list[Mismatch]:
    c_names = _names(claim)
    if not c_names:
        return []
    x_tokens = set(content_tokens(context))
    claim_tokens = set(content_tokens(claim))
    missing = [(n, ini) for n, ini in c_names if any(not _present(t, x_tokens) for t in content_tokens(n))]
    if not missing:
        return []
    # a rival that shares a word with one of the claim's names the evidence does have is that name in
    # a longer form ("Neil Armstrong and Buzz Aldrin" for "Armstrong and Aldrin"), not a replacement
    found_names = {t for n, ini in c_names if (n, ini) not in missing for t in content_tokens(n)}
    e_names = [(n, ini) for n, ini in _names(evidence)
               if set(content_tokens(n)) - claim_tokens and not set(content_tokens(n)) & _PAGE_WORDS
               and not set(content_tokens(n)) & found_names]
    for name, initial in missing:
        # a sentence-initial capital is only a name when the evidence puts another name in the same
        # place: also sentence-initial and followed by the same word ("Ibuprofen lowers" / "Aspirin lowers")
        if initial:
            follow = _next_word(claim, name)
            rivals = [n for n, e_ini in e_names if e_ini and follow and _next_word(evidence, n) == follow]
        else:
            rivals = [n for n, _ in e_names]
        if rivals:
            return [Mismatch("named_entity", name, rivals[0], f"the evidence names {rivals[0]!r}, not {name!r}")]
    return []


# -- roles: who did what to whom ---------------------------------------------------------

_ROLE_GAP = 6  # at most this many content words between the two names: one short relation
_ROLE_BREAK = re.compile(r"[,;:()]|\b(?:and|or|while|whereas|but|with|versus|vs)\b", re.I)
_PASSIVE = re.compile(r"\bby\s+(?:the\s+)?$", re.I)  # "was acquired by B": the agent right after "by"


@lru_cache(maxsize=16_384)
def _relations(text: str) -> list[tuple[frozenset[str], frozenset[str], frozenset[str], bool]]:
    """(first name, second name, relation words between them, passive?) for nearby name pairs."""
    found = [(m.start(), m.end(), frozenset(content_tokens(name))) for name, m in _name_spans(text)]
    out = []
    for (_s1, e1, a), (s2, _e2, b) in itertools.combinations(found, 2):
        between = text[e1:s2]
        words = content_tokens(between)
        # two names sharing a word ("Venus Williams", "Serena Williams") are told apart by the rest
        a, b = (a - b, b - a) if a & b else (a, b)
        if not words or len(words) > _ROLE_GAP or _ROLE_BREAK.search(between) or not a or not b:
            continue
        out.append((a, b, frozenset(words), bool(_PASSIVE.search(between))))
    return out


def _name_spans(text: str) -> list[tuple[str, re.Match[str]]]:
    names = {n for n, _ in _names(text)}
    return [(m.group(0).strip(" .'-"), m) for m in _CAP.finditer(text)
            if m.group(0).strip(" .'-") in names or any(n in m.group(0) for n in names)]


_NOUN_GAP = 2  # content words between two common nouns that make one relation ("bank fined regulator")


@lru_cache(maxsize=16_384)
def _noun_relations(text: str) -> list[tuple[frozenset[str], frozenset[str], frozenset[str], bool]]:
    """(first word, second word, the one or two content words between them, passive?) within a clause, for
    words that are not names or numbers: "the regulator fined the bank" -> (regulator, bank, {fine})."""
    out = []
    for clause in _ROLE_BREAK.split(text):
        if not clause:
            continue
        tokens = [(m.start(), m.end(), content_tokens(m.group(0))) for m in _WORD.finditer(clause)]
        spans = [(s0, e0, toks[0]) for s0, e0, toks in tokens if len(toks) == 1 and not toks[0][:1].isdigit()]
        for i, (_s1, e1, a) in enumerate(spans):
            for j in range(i + 2, min(len(spans), i + 2 + _NOUN_GAP)):
                s2, b = spans[j][0], spans[j][2]
                if a != b:
                    between = frozenset(t for _, _, t in spans[i + 1 : j])
                    out.append((frozenset([a]), frozenset([b]), between, bool(_PASSIVE.search(clause[e1:s2]))))
    return out


def _role_checks(claim: str, evidence: str) -> list[Mismatch]:
    """ "Instagram acquired Facebook" against "Facebook acquired Instagram": the same two names and
    the same relation, the roles reversed (a passive "was acquired by" reverses them back). Common nouns
    too ("the bank fined the regulator" against "the regulator fined the bank"), when the relation between
    them is the same word or two on both sides."""
    return _reversed_roles(_relations(claim), _relations(evidence), "names") or _reversed_roles(
        _noun_relations(claim), _noun_relations(evidence), "words", exact=True)


def _reversed_roles(claim_rel: list[tuple[frozenset[str], frozenset[str], frozenset[str], bool]],
                    ev: list[tuple[frozenset[str], frozenset[str], frozenset[str], bool]], what: str,
                    exact: bool = False) -> list[Mismatch]:
    if not ev:
        return []
    for a, b, words, passive in claim_rel:
        for ea, eb, e_words, e_passive in ev:
            if (words != e_words) if exact else not words & e_words:
                continue
            same_order = a & ea and b & eb
            swapped = a & eb and b & ea
            if (swapped and passive == e_passive) or (same_order and passive != e_passive):
                who = " ".join(sorted(a)), " ".join(sorted(b))
                return [Mismatch("role", f"{who[0]} … {who[1]}", "reversed",
                                 f"the evidence gives the two {what} the opposite roles")]
    return []


# verbs whose subject and object cannot trade places: the winner and the loser, the buyer and the bought; the
# same family on both sides ("defeated" / "beating", "acquired" / "bought"), the names found across a phrase or a
# participle clause in between ("Argentina won the final at Lusail, beating France")
_AGENT_VERBS = re.compile(
    r"\b(?P<win>defeat(?:s|ed|ing)?|beat(?:s|en|ing)?|overc(?:ame|omes?|oming)|rout(?:s|ed|ing)?|oust(?:s|ed|ing)?)\b"
    r"|\b(?P<buy>acquir(?:e|es|ed|ing)|bought|buy(?:s|ing)?|purchas(?:e|es|ed|ing)|took\s+over|tak(?:e|es|ing)\s+over)\b",
    re.I)
_AGENT_PASSIVE = re.compile(r"^(?:\s+[\d–-]+)?\s+by\b", re.I)  # "beaten by", "beaten 2–1 by"
_AGENT_BE = re.compile(r"\b(?:is|are|was|were|be|been|being|got|gets|get)\s+(?:\w+ly\s+)?$", re.I)  # "were beaten"
_AGENT_REACH = 160  # characters before the verb where its subject may be (a participle clause's is the sentence's)


def _agent_patient(text: str, names: dict[str, frozenset[str]]) -> list[tuple[str, frozenset[str], frozenset[str]]]:
    """(verb family, subject name tokens, object name tokens) for each agent verb of ``text``, the subject being the
    nearest of ``names`` before the verb and the object the nearest after it (swapped for a passive "by")."""
    spans = []
    for name, toks in names.items():
        for m in re.finditer(r"\b" + re.escape(name) + r"\b", text):
            spans.append((m.start(), m.end(), toks))
    out = []
    for v in _AGENT_VERBS.finditer(text):
        family = "win" if v.group("win") else "buy"
        before = [sp for sp in spans if sp[1] <= v.start() and v.start() - sp[1] <= _AGENT_REACH]
        after = [sp for sp in spans if sp[0] >= v.end() and sp[0] - v.end() <= 60]
        if not before or not after:
            continue
        subj = max(before, key=lambda sp: sp[1])[2]
        obj = min(after, key=lambda sp: sp[0])[2]
        if _AGENT_PASSIVE.search(text[v.end():]) or _AGENT_BE.search(text[max(0, v.start() - 24) : v.start()]):
            subj, obj = obj, subj
        if subj != obj:
            out.append((family, subj, obj))
    return out


def _agent_checks(claim: str, evidence: str) -> list[Mismatch]:
    """ "France defeated Argentina" against "Argentina won the final, beating France": the claim's two names in
    the opposite roles of the same kind of verb in the evidence."""
    if not _AGENT_VERBS.search(claim) or not _AGENT_VERBS.search(evidence):
        return []
    names = {n: frozenset(content_tokens(n)) for n, _ in _names(claim)}
    names = {n: t for n, t in names.items() if t}
    if len(names) < 2:
        return []
    for family, subj, obj in _agent_patient(claim, names):
        # the evidence's subject and object are looked for among these two names only (a stadium or a title
        # between them is no party), each also by its last word ("Harold Godwinson" as "Godwinson")
        pair: dict[str, frozenset[str]] = {}
        for n, toks in names.items():
            if toks in (subj, obj):
                pair[n] = toks
                last = n.split()[-1]
                if last != n and len(last) > 3:
                    pair[last] = toks
        for e_family, e_subj, e_obj in _agent_patient(evidence, pair):
            if family == e_family and e_subj == obj and e_obj == subj:
                return [Mismatch("role", " ".join(sorted(subj)) + " … " + " ".join(sorted(obj)), "reversed",
                                 "the evidence gives the two names the opposite roles")]
    return []


# -- entry point ---------------------------------------------------------------------------

def alignment(claim: str, evidence: str, ignore: set[str] | None = None) -> float:
    """Share of the claim's content tokens (minus ``ignore``) found in the evidence."""
    c = [t for t in dict.fromkeys(content_tokens(claim)) if not (ignore and t in ignore) and not t[0].isdigit()]
    if not c:
        return 0.0
    e = set(content_tokens(evidence))
    return sum(1 for t in c if t in e) / len(c)


def check(claim: str, evidence: str, context: str | None = None) -> list[Mismatch]:
    """Every mismatch between ``claim`` and ``evidence`` (see ``_checks``). A pure function of the
    texts, so it is cached, but only for modest contexts (the cache keeps its keys alive)."""
    context = evidence if context is None else context
    if len(context) > _CACHE_CONTEXT_CHARS:
        return list(_checks(claim, evidence, context))
    return list(_cached_checks(claim, evidence, context))


_CACHE_CONTEXT_CHARS = 20_000


@lru_cache(maxsize=4096)
def _cached_checks(claim: str, evidence: str, context: str) -> tuple[Mismatch, ...]:
    return _checks(claim, evidence, context)


def _opposed(claim: str, evidence: str) -> set[str]:
    """The claim's words whose opposite the evidence has: left out of the alignment gate, or a short claim
    ("The bridge was demolished in 1967" / "... built in 1967") never reaches it by construction."""
    e = set(content_tokens(evidence))
    return {t for t in content_tokens(claim) if t not in e and _ANTI.get(t, set()) & e}


def _checks(claim: str, evidence: str, context: str) -> tuple[Mismatch, ...]:
    """Every mismatch between ``claim`` and ``evidence`` (the aligned sentence or two).

    ``context`` is the whole of the evidence's chunks: a year or name found
    anywhere in them is not a mismatch. Checks run only when the evidence is
    about the same thing (enough of the claim's other content overlaps).
    """
    found: list[Mismatch] = []
    names = {t for n, _ in _names(claim) for t in content_tokens(n)}
    if alignment(claim, evidence, names) >= ALIGNMENT_MIN:
        found += _entity_checks(claim, evidence, context)
    if alignment(claim, evidence, _opposed(claim, evidence)) < ALIGNMENT_MIN:
        return tuple(found)
    found += _role_checks(claim, evidence) or _agent_checks(claim, evidence)
    found += _negation_checks(claim, evidence)
    found += _number_checks(claim, evidence, context) or _ordinal_checks(claim, evidence, context)
    found += _date_checks(claim, evidence, context)
    found += _quantifier_checks(claim, evidence)
    return tuple(found)
