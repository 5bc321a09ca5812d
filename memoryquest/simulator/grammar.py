"""Grammar helpers shared by every simulated answer: lists, articles, sentences, person.

Pure string functions with no knowledge of personas or prompts, so any part of
the simulator (and nothing outside it) can use them without import cycles.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


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
    text = fix_articles(undoubled(re.sub(r"\s+", " ", text).strip()))
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def lower_first(text: str) -> str:
    if len(text) > 1 and text[1].isupper():  # an acronym or a proper noun run ("IMAX", "UK")
        return text
    return text[:1].lower() + text[1:]


def plural(noun: str) -> str:
    """'Fox' -> 'Foxes', 'Ferry' -> 'Ferries', 'Compass' -> 'Compasses', 'Field' -> 'Fields'."""
    if re.search(r"(?:s|x|z|ch|sh)$", noun, re.IGNORECASE):
        return noun + "es"
    if re.search(r"[^aeiou]y$", noun, re.IGNORECASE):
        return noun[:-1] + "ies"
    return noun + "s"


def ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


# --------------------------------------------------------------------------- values

_LOWER_SLOTS = {"event_type", "category", "contact", "seat_type"}
_GENERIC_WORDS = re.compile(
    r"\b(startups?|brands?|compan(?:y|ies)|corporations?|firms?|businesses)\b", re.IGNORECASE
)


def is_proper(value: str) -> bool:
    """A brand or company name rather than a description ('Apple Inc.' yes, 'Local tech startups' no)."""
    if _GENERIC_WORDS.search(value):
        return False
    words = [
        w
        for w in re.findall(r"[A-Za-z][A-Za-z.'&-]*", value)
        if w.lower() not in {"and", "of", "the", "&"}
    ]
    return bool(words) and all(w[0].isupper() for w in words)


def clean_value(value: str, slot: str = "") -> str:
    """A value ready to drop into a sentence: no parenthetical notes, no trailing stop."""
    value = re.sub(r"\s*\([^)]*\)", "", value)
    value = re.sub(r"\s+", " ", value).strip().rstrip(".").rstrip(",")
    if slot == "seat_type":
        value = re.sub(r"\s+seats?$", "", value, flags=re.IGNORECASE)
    if slot in _LOWER_SLOTS and not is_proper(value):
        value = value.lower()
    return value


# --------------------------------------------------------------------------- person conversion

_ADVERBS = {
    "also",
    "often",
    "frequently",
    "usually",
    "typically",
    "generally",
    "always",
    "occasionally",
    "sometimes",
    "consistently",
    "particularly",
    "especially",
    "really",
    "still",
    "regularly",
    "then",
    "now",
    "even",
    "mostly",
    "primarily",
    "mainly",
    "increasingly",
    "recently",
    "later",
    "further",
    "actively",
    "greatly",
    "highly",
    "strongly",
    "clearly",
    "specifically",
    "first",
    "initially",
    "subsequently",
    "therefore",
    "never",
    "rarely",
    "seldom",
    "already",
    "just",
}
_IRREGULAR = {"has": "have", "does": "do", "goes": "go", "focuses": "focus"}
_NOT_VERBS = {
    "this",
    "is",
    "was",
    "as",
    "us",
    "his",
    "its",
    "always",
    "perhaps",
    "various",
    "previous",
}
_OBJECT_FOLLOWERS = {
    "to",
    "with",
    "for",
    "of",
    "on",
    "in",
    "about",
    "and",
    "or",
    "that",
    "the",
    "a",
    "an",
    "up",
    "back",
    "when",
    "while",
    "if",
    "as",
    "at",
    "by",
    "from",
    "into",
    "through",
    "so",
    "but",
    "whenever",
    "based",
    "know",
    "updated",
    "informed",
}


def base_form(word: str) -> str:
    lower = word.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower in _NOT_VERBS or not lower.endswith("s") or lower.endswith(("ss", "us", "is")):
        return word
    if re.search(r"[^aeiou]ies$", lower):
        return word[:-3] + "y"
    if lower.endswith(("ches", "shes", "sses", "xes", "zzes", "oes")):
        return word[:-2]
    return word[:-1]


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

    adverb_group = r"((?:(?:" + "|".join(sorted(_ADVERBS)) + r")\s+)*)"
    pattern = re.compile(r"(\b" + subject + r"\s+)" + adverb_group + r"([A-Za-z]+)\b")
    return pattern.sub(fix, text)


_COORDINATED = re.compile(
    r"\b(I|you)\b([^.;:]*?\b(?:and|but|or)\s+)(has|is|needs|wants|requires|prefers|likes|seeks|enjoys|values|"
    r"appreciates|loves|uses|asks|expects|tends|hopes|plans|relies|finds|looks|shows|sends|provides|offers|"
    r"suggests|helps|makes|gives|keeps|takes|allows|ensures|adjusts|remembers|learns|tailors|notes|delivers|"
    r"recommends|responds|handles|understands|supports|tracks|reminds|would like)\b"
)


def _agree_coordinated(text: str) -> str:
    """'I am going on a trip and needs ...' -> '... and need ...'."""

    def fix(match: re.Match[str]) -> str:
        subject, middle, verb = match.group(1), match.group(2), match.group(3)
        if re.search(r"\b(he|she|it|who|which|that)\b", middle, re.IGNORECASE):
            return match.group(0)
        new = {"is": "am" if subject == "I" else "are"}.get(verb, base_form(verb))
        return f"{subject}{middle}{new}"

    return _COORDINATED.sub(fix, text)


def _looks_like_subject(rest: str) -> bool:
    """Is the word after a pronoun / 'the user' a verb (so the pronoun is a subject)?"""
    words = re.findall(r"[A-Za-z']+", rest)
    for word in words[:3]:
        lower = word.lower()
        if lower in _ADVERBS:
            continue
        if lower in {
            "has",
            "is",
            "was",
            "had",
            "does",
            "did",
            "can",
            "could",
            "will",
            "would",
            "may",
            "might",
            "should",
            "must",
        }:
            return True
        return lower.endswith(("s", "ed")) and lower not in _NOT_VERBS
    return False


_AMBIGUOUS = re.compile(r"\b(they|them|their|theirs|themselves|they're|they've)\b", re.IGNORECASE)


def shift_person(text: str, person: str = "first", *, they_is_user: bool = False) -> str | None:
    """Move a third-person sentence about the user into the first or second person.

    ``person="first"``: the user speaks (I / my / me; the assistant becomes "you").
    ``person="second"``: the assistant speaks to the user (you / your; the
    assistant becomes "I"). Returns None when the sentence cannot be moved
    safely (a "they" that may not mean the user).
    """
    if not they_is_user and _AMBIGUOUS.search(text):
        return None
    user_subj, user_obj, user_poss, user_refl = (
        ("I", "me", "my", "myself") if person == "first" else ("you", "you", "your", "yourself")
    )
    asst_subj, asst_obj, asst_poss = (
        ("you", "you", "your") if person == "first" else ("I", "me", "my")
    )

    out = text
    out = re.sub(
        r"\bthe (?:virtual |AI |shopping |digital )?assistant's\b",
        asst_poss,
        out,
        flags=re.IGNORECASE,
    )

    def assistant(match: re.Match[str]) -> str:
        return asst_subj if _looks_like_subject(out[match.end() :]) else asst_obj

    out = re.sub(
        r"\bthe (?:virtual |AI |shopping |digital )?assistant\b",
        assistant,
        out,
        flags=re.IGNORECASE,
    )
    out = re.sub(r"\bthe user's\b", user_poss, out, flags=re.IGNORECASE)

    def user(match: re.Match[str]) -> str:
        return user_subj if _looks_like_subject(out[match.end() :]) else user_obj

    # Substitute one occurrence at a time so each decision sees the text after it.
    for pattern, handler in ((r"\bthe user\b", user),):
        while True:
            found = re.search(pattern, out, flags=re.IGNORECASE)
            if not found:
                break
            out = out[: found.start()] + handler(found) + out[found.end() :]
    out = re.sub(
        r"\b(he|she)'s\b", "I'm" if person == "first" else "you're", out, flags=re.IGNORECASE
    )
    out = re.sub(r"\b(he|she)\b", user_subj, out, flags=re.IGNORECASE)
    out = re.sub(r"\bhis\b", user_poss, out, flags=re.IGNORECASE)
    out = re.sub(r"\bhim\b", user_obj, out, flags=re.IGNORECASE)
    out = re.sub(r"\b(himself|herself)\b", user_refl, out, flags=re.IGNORECASE)

    def her(match: re.Match[str]) -> str:
        following = re.match(r"\s*([A-Za-z']+)", out[match.end() :])
        if following is None or following.group(1).lower() in _OBJECT_FOLLOWERS:
            return user_obj
        return user_poss

    while True:
        found = re.search(r"\bher\b", out, flags=re.IGNORECASE)
        if not found:
            break
        out = out[: found.start()] + her(found) + out[found.end() :]
    if they_is_user:
        out = re.sub(r"\btheir\b", user_poss, out, flags=re.IGNORECASE)
        out = re.sub(r"\bthemselves\b", user_refl, out, flags=re.IGNORECASE)
        out = re.sub(r"\bthem\b", user_obj, out, flags=re.IGNORECASE)
        out = re.sub(
            r"\bthey're\b", "I'm" if person == "first" else "you're", out, flags=re.IGNORECASE
        )
        out = re.sub(r"\bthey\b", user_subj, out, flags=re.IGNORECASE)
    out = _agree(out, "I", "am", "was")
    out = _agree(out, "you", "are", "were")
    out = _agree_coordinated(out)
    out = re.sub(r"\bi\b", "I", out)
    return sentence(out)


_SPEAKER_FORMS = (
    (r"\bI'm\b", "{subj_be}"),
    (r"\bI've\b", "{subj}'ve"),
    (r"\bI'd\b", "{subj}'d"),
    (r"\bI'll\b", "{subj}'ll"),
    (r"\bI am\b", "{subj} are"),
    (r"\bI was\b", "{subj} were"),
    # A capitalised word after "I", or a capitalised "Me"/"My" inside a clause, belongs to a
    # title ("I Know Why the Caged Bird Sings", "Call Me by Your Name"): left as it is.
    (r"\bI\b(?!\s+[A-Z])", "{subj}"),
    (r"(?:^M|\bm)yself\b", "{refl}"),
    (r"(?:^M|\bm)ine\b", "{pron}"),
    (r"(?:^M|\bm)y\b", "{poss}"),
    (r"(?:^M|\bm)e\b", "{obj}"),
)
_PERSON_WORDS = {
    "second": {
        "subj": "you",
        "subj_be": "you're",
        "obj": "you",
        "poss": "your",
        "pron": "yours",
        "refl": "yourself",
    },
    "third": {
        "subj": "they",
        "subj_be": "they're",
        "obj": "them",
        "poss": "their",
        "pron": "theirs",
        "refl": "themselves",
    },
}
_FROM_FIRST_PERSON = {
    person: tuple((re.compile(pattern), form.format(**forms)) for pattern, form in _SPEAKER_FORMS)
    for person, forms in _PERSON_WORDS.items()
}


def from_first_person(text: str, person: str) -> str:
    """The speaker's "I", "my", "me" ... in ``text`` said of them in the ``"second"`` or ``"third"`` person."""
    for pattern, replacement in _FROM_FIRST_PERSON[person]:
        text = pattern.sub(replacement, text)
    return text


_DOUBLED_WORD = re.compile(r"\b([a-z][a-z']{2,})\s+\1(?![\w-])")


def undoubled(text: str) -> str:
    """``text`` without a word said twice where two filled pieces meet ("reclining seats seats",
    "sleeping over over the coming weeks"); names ("Banyana Banyana") and "off off-peak" stay."""
    return _DOUBLED_WORD.sub(r"\1", text)
