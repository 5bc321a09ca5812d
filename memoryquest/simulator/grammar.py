"""Grammar shared by every simulated answer: lists, articles, casing, inflection and person.

Pure string functions with no knowledge of personas or prompts, so any part of
the simulator (and nothing outside it) can use them without import cycles.
Each rule exists here once; its word lists and rewrite tables are data
(``data/grammar.json``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Literal

from memoryquest.simulator.schema import GrammarTable
from memoryquest.simulator.tables import load
from memoryquest.text import STOPWORDS


def _table() -> GrammarTable:
    return load(GrammarTable)


def months() -> tuple[str, ...]:
    return _table().months


def weekdays() -> tuple[str, ...]:
    return _table().weekdays


def number_words() -> tuple[str, ...]:
    """Number words from zero to twelve."""
    return _table().number_words


@cache
def calendar_words() -> frozenset[str]:
    """Names of days and months, lower-cased."""
    return frozenset(w.lower() for w in (*weekdays(), *months()))


def number_word(n: int) -> str:
    words = number_words()
    return words[n] if 0 <= n < len(words) else str(n)


def ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def name_key(name: str) -> str:
    """Affinity names compare across spelling variants ("Favourite"/"Favorite") and spacing."""
    return (
        re.sub(r"\s+", " ", name.replace("Favourite", "Favorite").replace("favourite", "favorite"))
        .strip()
        .casefold()
    )


def join_list(values: Sequence[str], conjunction: str = "and") -> str:
    items = [v for v in values if v]
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


# Spelling and sound part ways: "a useful", "a European", "an hour", "an urban".
_VOWEL_LETTER_CONSONANT_SOUND = r"(?i:one\b|one-|uni|use|usu|eu|ur[aeiouy])"
_SILENT_H = r"(?i:hour|honest|heir|honou)"
_VOWEL_SOUND = re.compile(
    rf"\b([Aa]) (?=(?!{_VOWEL_LETTER_CONSONANT_SOUND})[AEIOUaeiou]|{_SILENT_H})"
)
_CONSONANT_SOUND = re.compile(
    rf"\b([Aa])n (?={_VOWEL_LETTER_CONSONANT_SOUND}|(?!{_SILENT_H})[^AEIOUaeiou\W\d])"
)


def fix_articles(text: str) -> str:
    """'a Intercape coach' -> 'an Intercape coach' (and the reverse), for filled-in templates."""
    text = _VOWEL_SOUND.sub(lambda m: m.group(1) + "n ", text)
    return _CONSONANT_SOUND.sub(lambda m: m.group(1) + " ", text)


def sentence(text: str) -> str:
    """Capitalised, single-spaced, no word said twice by accident, the right articles, ending in punctuation."""
    text = upper_first(fix_articles(undoubled(re.sub(r"\s+", " ", text).strip())))
    return text if not text or text[-1] in ".!?" else text + "."


def upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def lower_first(text: str) -> str:
    if len(text) > 1 and text[1].isupper():  # an acronym or a proper noun run ("IMAX", "UK")
        return text
    return text[:1].lower() + text[1:]


def lower_start(text: str) -> str:
    """Lower-case the first letter when the first word is an ordinary word ("Since" yes, "I" and names no)."""
    bare = re.sub(r"[^A-Za-z']", "", text.split(" ", 1)[0]).lower()
    ordinary = bare in STOPWORDS or bare in _table().common_starters
    return (
        lower_first(text) if ordinary and bare not in {"i", "i'm", "i've", "i'd", "i'll"} else text
    )


_DOUBLED_WORD = re.compile(r"\b([a-z][a-z']{2,})\s+\1(?![\w-])")


def undoubled(text: str) -> str:
    """``text`` without a word said twice where two filled pieces meet ("reclining seats seats",
    "sleeping over over the coming weeks"); names ("Banyana Banyana") and "off off-peak" stay."""
    return _DOUBLED_WORD.sub(r"\1", text)


def plural(noun: str) -> str:
    """'Fox' -> 'Foxes', 'Ferry' -> 'Ferries', 'Compass' -> 'Compasses', 'Field' -> 'Fields'."""
    if re.search(r"(?:s|x|z|ch|sh)$", noun, re.IGNORECASE):
        return noun + "es"
    if re.search(r"[^aeiou]y$", noun, re.IGNORECASE):
        return noun[:-1] + "ies"
    return noun + "s"


def clean_value(value: str) -> str:
    """A value ready to drop into a sentence: no parenthetical notes, no trailing stop."""
    value = re.sub(r"\s*\([^)]*\)", "", value)
    return re.sub(r"\s+", " ", value).strip().rstrip(".").rstrip(",")


@cache
def _generic() -> re.Pattern[str]:
    return re.compile(rf"\b({'|'.join(_table().generic_words)})\b", re.IGNORECASE)


def is_proper(value: str) -> bool:
    """A brand, company or place name rather than a description ('Apple Inc.' yes, 'Local tech startups' no)."""
    if _generic().search(value):
        return False
    words = [
        w
        for w in re.findall(r"[A-Za-z][A-Za-z.'&-]*", value)
        if w.lower() not in {"and", "of", "the", "&"}
    ]
    return bool(words) and all(w[0].isupper() for w in words)


def base_form(word: str) -> str:
    """'needs' -> 'need', 'tries' -> 'try', 'has' -> 'have'; any other word as it is."""
    lower = word.lower()
    table = _table()
    if lower in table.base_forms:
        return table.base_forms[lower]
    if lower in table.not_verbs or not lower.endswith("s") or lower.endswith(("ss", "us", "is")):
        return word
    if re.search(r"[^aeiou]ies$", lower):
        return word[:-3] + "y"
    if lower.endswith(("ches", "shes", "sses", "xes", "zzes", "oes")):
        return word[:-2]
    return word[:-1]


def third_singular(verb: str) -> str:
    """'need' -> 'needs', 'try' -> 'tries', 'have' -> 'has'; modals and past forms as they are."""
    lower = verb.lower()
    table = _table()
    if lower in table.third_singulars:
        return table.third_singulars[lower]
    if (
        lower in table.modals
        or lower in table.irregular_past
        or (lower.endswith("ed") and not lower.endswith("eed"))
    ):
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def base_from_stem(stem: str) -> str:
    """'explor' -> 'explore', 'research' -> 'research', 'sett' -> 'set' (what is left after -ing)."""
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "ls":
        return stem[:-1]
    if stem.endswith(
        ("or", "ar", "ur", "at", "iv", "uc", "ag", "ac", "ok", "in", "ov", "us", "id", "ir", "ad")
    ) and not stem.endswith(("ear", "oin", "ain")):
        return stem + "e"
    return stem


Person = Literal["first", "second", "third"]
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.IGNORECASE)
_AMBIGUOUS = re.compile(r"\b(they|them|their|theirs|themselves|they're|they've)\b", re.IGNORECASE)
_ASSISTANT = r"\bthe (?:virtual |AI |shopping |digital )?assistant"


@cache
def _agreement(subject: str) -> re.Pattern[str]:
    adverb_group = r"((?:(?:" + "|".join(sorted(_table().adverbs)) + r")\s+)*)"
    return re.compile(r"(\b" + subject + r"\s+)" + adverb_group + r"([A-Za-z]+)\b")


def _agree(text: str, subject: str, be: str, was: str) -> str:
    """After ``subject`` (I / you), turn third-person verb forms into the matching form."""

    def fix(match: re.Match[str]) -> str:
        lead, adverbs, verb = match.group(1), match.group(2) or "", match.group(3)
        lower = verb.lower()
        if lower in ("is", "are"):  # "they are" said of the user becomes "I are" before this
            new = be
        elif lower in ("was", "were"):
            new = was
        else:
            new = base_form(verb)
        return f"{lead}{adverbs}{new}"

    return _agreement(subject).sub(fix, text)


@cache
def _coordinated() -> re.Pattern[str]:
    verbs = "|".join(_table().coordinated_verbs)
    return re.compile(rf"\b(I|you)\b([^.;:]*?\b(?:and|but|or)\s+)({verbs})\b")


def _agree_coordinated(text: str) -> str:
    """'I am going on a trip and needs ...' -> '... and need ...'."""

    def fix(match: re.Match[str]) -> str:
        subject, middle, verb = match.group(1), match.group(2), match.group(3)
        if re.search(r"\b(he|she|it|who|which|that)\b", middle, re.IGNORECASE):
            return match.group(0)
        new = {"is": "am" if subject == "I" else "are"}.get(verb, base_form(verb))
        return f"{subject}{middle}{new}"

    return _coordinated().sub(fix, text)


def _looks_like_subject(rest: str) -> bool:
    """Is the word after a pronoun / 'the user' a verb (so the pronoun is a subject)?"""
    table = _table()
    for word in re.findall(r"[A-Za-z']+", rest)[:3]:
        lower = word.lower()
        if lower in table.adverbs:
            continue
        if lower in table.auxiliaries:
            return True
        return lower.endswith(("s", "ed")) and lower not in table.not_verbs
    return False


def _one_at_a_time(pattern: str, text: str, say: Callable[[str, re.Match[str]], str]) -> str:
    """Substitute one occurrence at a time, so each decision sees the text after it."""
    while found := re.search(pattern, text, flags=re.IGNORECASE):
        text = text[: found.start()] + say(text, found) + text[found.end() :]
    return text


def shift_person(text: str, person: Person = "first", *, they_is_user: bool = False) -> str | None:
    """A third-person sentence about the user said by the user (``first``) or to them (``second``).

    The assistant becomes the other party. None when a "they" may not mean the user.
    """
    if not they_is_user and _AMBIGUOUS.search(text):
        return None
    user = _table().person_words[person]
    asst = _table().person_words["second" if person == "first" else "first"]

    def said(pattern: str, form: str, into: str) -> str:
        return re.sub(pattern, form, into, flags=re.IGNORECASE)

    out = said(_ASSISTANT + r"'s\b", asst.poss, text)

    def assistant(match: re.Match[str]) -> str:
        return asst.subj if _looks_like_subject(out[match.end() :]) else asst.obj

    out = re.sub(_ASSISTANT + r"\b", assistant, out, flags=re.IGNORECASE)
    out = said(r"\bthe user's\b", user.poss, out)

    def the_user(current: str, match: re.Match[str]) -> str:
        return user.subj if _looks_like_subject(current[match.end() :]) else user.obj

    out = _one_at_a_time(r"\bthe user\b", out, the_user)
    out = said(r"\b(he|she)'s\b", user.subj_be, out)
    out = said(r"\b(he|she)\b", user.subj, out)
    out = said(r"\bhis\b", user.poss, out)
    out = said(r"\bhim\b", user.obj, out)
    out = said(r"\b(himself|herself)\b", user.refl, out)

    def her(current: str, match: re.Match[str]) -> str:
        following = re.match(r"\s*([A-Za-z']+)", current[match.end() :])
        if following is None or following.group(1).lower() in _table().object_followers:
            return user.obj
        return user.poss

    out = _one_at_a_time(r"\bher\b", out, her)
    if they_is_user:
        out = said(r"\btheir\b", user.poss, out)
        out = said(r"\bthemselves\b", user.refl, out)
        out = said(r"\bthem\b", user.obj, out)
        out = said(r"\bthey're\b", user.subj_be, out)
        out = said(r"\bthey\b", user.subj, out)
    out = _agree(out, "I", "am", "was")
    out = _agree(out, "you", "are", "were")
    out = _agree_coordinated(out)
    out = re.sub(r"\bi\b", "I", out)
    return sentence(out)


@cache
def _speaker_forms(person: Person) -> tuple[tuple[re.Pattern[str], str], ...]:
    table = _table()
    words = table.person_words[person].model_dump()
    return tuple((f.pattern, f.replacement.format(**words)) for f in table.speaker_forms)


def from_first_person(text: str, person: Person) -> str:
    """The speaker's "I", "my", "me" ... in ``text`` said of them in the ``"second"`` or ``"third"`` person."""
    for pattern, replacement in _speaker_forms(person):
        text = pattern.sub(replacement, text)
    return text


def from_second_person(text: str) -> str:
    """The assistant's "you", "your" ... in ``text`` said by the user ("my", "I")."""
    for form in _table().addressee_forms:
        text = form.pattern.sub(form.replacement, text)
    return text


def as_fact(clause: str) -> str:
    """A first-person clause as a fact about the user, without a subject.

    'I moved to Toronto' -> 'Moved to Toronto'; 'My sister is a nurse' -> "User's sister is a nurse".
    """
    couple = re.match(r"^My ([\w' -]{1,30}?) and I\b(?!')(.*)$", clause)
    if couple:
        return upper_first(
            f"User and their {couple.group(1)}{from_first_person(couple.group(2), 'third')}"
        )
    if clause.startswith("My "):
        return "User's " + from_first_person(clause[3:], "third")
    companion = re.match(r"^([A-Z][\w' -]{0,30}?) and I\b(?!')(.*)$", clause)
    if companion and not FIRST_PERSON.search(companion.group(1)):
        who = companion.group(1)
        who = who if who.split()[0].lower() in calendar_words() else lower_first(who)
        return f"User and {who}{from_first_person(companion.group(2), 'third')}"
    for start in _table().fact_starts:
        if start.pattern.match(clause):
            after = start.pattern.sub("", clause, count=1)
            return start.replacement + from_first_person(after, "third")
    tokens = clause.split()
    if tokens and tokens[0] == "I":  # the verb after any adverbs agrees with the user
        rest = tokens[1:]
        adverbs: list[str] = []
        while rest and rest[0].lower() in _table().adverbs:
            adverbs.append(rest.pop(0))
        clause = " ".join([*adverbs, third_singular(rest[0]), *rest[1:]] if rest else adverbs)
    return upper_first(from_first_person(clause, "third"))


def from_fact(text: str) -> str:
    """A fact about the user said by the user: 'Is allergic to nuts' -> "I'm allergic to nuts"."""
    for lead in _table().fact_leads:
        if lead.pattern.search(text):
            text = lead.pattern.sub(lead.replacement, text, count=1)
            break
    else:
        if re.match(r"^[A-Za-z]+ed\b", text):
            text = "I " + lower_first(text)
        elif not FIRST_PERSON.match(text):  # a noun phrase ("Upstairs neighbour complained ...")
            text = "My " + lower_first(text)
    text = re.sub(r"\bthe user's\b", "my", text, flags=re.IGNORECASE)
    return re.sub(r"\bthe user\b", "me", text, flags=re.IGNORECASE)
