"""One wording for every piece of personal news, references and filler alike.

A reference is inserted word for word into its event's news, among updates the
timeline model wrote itself. If the two were worded differently (a reference a
subject-less fragment, the model's own updates full third-person sentences),
their form alone would tell a reader which item is the reference. So every news
item, and every reference at the query stage, is held to the references' form:
one subject-less statement about the user ("Moved the weekday alarm to 6:30 AM
after starting an early shift"), stated as what is or was (not as a plan with
"will"), between ``news_words_min`` and ``news_words_max`` words, starting with
a capital and without a closing full stop (which :func:`normalise_news` drops).

The checks are rules, not judgement: a leading subject pronoun or "The user",
any first- or second-person word, a future modal, a question, a second
sentence, or a length outside the band.
"""

from __future__ import annotations

import re

from memoryquest.settings import GenerationSettings

LEADING_SUBJECT = re.compile(
    r"^(?:the user|user|the assistant|she|he|they|her|his|their|it)\b", re.IGNORECASE
)
"""A statement that names its subject (or the user's possessive) is not in the subject-less form."""
FIRST_OR_SECOND_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Ww]e're|[Ww]e've|[Uu]s|"
    r"[Oo]ur|[Oo]urs|[Oo]urselves|[Yy]ou|[Yy]ou're|[Yy]ou've|[Yy]our|[Yy]ours|[Yy]ourself)\b"
)
"""First or second person (case-sensitive where an upper-case form is something else: "US")."""
FUTURE = re.compile(
    r"(?<!\ba )(?<!\bthe )(?<!\bher )(?<!\bhis )(?<!\btheir )(?<!\bliving )"
    r"\b(?:will|won't|shall)\b|'ll\b",
    re.IGNORECASE,
)
"""A plan stated with a future modal ("will"), not the noun ("drafted a will")."""


ABBREVIATIONS = frozenset({"dr", "mr", "mrs", "ms", "st", "jr", "sr", "vs", "mt", "ft", "no"})
_STATEMENT_END = re.compile(r"(\S+?)([.!?])\s+(?=\S)")


def _second_statement(item: str) -> bool:
    """A sentence end before the last word: "?" or "!", or a full stop after a word that is not an
    abbreviation ("Dr. Lee", "6 a.m. shift")."""
    for match in _STATEMENT_END.finditer(item):
        word, mark = match.group(1), match.group(2)
        if mark != "." or not (word.lower() in ABBREVIATIONS or "." in word or len(word) == 1):
            return True
    return False


def normalise_news(text: str) -> str:
    """The item with its spacing collapsed and a closing full stop dropped (not an
    abbreviation's: "6 a.m.")."""
    collapsed = " ".join(text.split())
    last = collapsed.rsplit(" ", 1)[-1]
    if collapsed.endswith(".") and "." not in last[:-1]:
        return collapsed[:-1].rstrip()
    return collapsed


def news_form_problem(text: str, settings: GenerationSettings) -> str | None:
    """Why ``text`` (as normalised) is not in the one news form; None when it is."""
    item = normalise_news(text)
    if not item:
        return "empty"
    count = len(item.split())
    if not settings.news_words_min <= count <= settings.news_words_max:
        return f"{count} words; the band is {settings.news_words_min}-{settings.news_words_max}"
    if not (item[0].isupper() or item[0].isdigit()):
        return "does not start with a capital"
    if _second_statement(item):
        return "more than one statement"
    if item.endswith(("?", "!")):
        return "not a plain statement (ends with ? or !)"
    if match := LEADING_SUBJECT.match(item):
        return f"names its subject ({match.group(0)!r}); the form is subject-less"
    if match := FIRST_OR_SECOND_PERSON.search(item):
        return f"in the first or second person ({match.group(0)!r})"
    if match := FUTURE.search(item):
        return f"stated as a plan ({match.group(0)!r}); the form says what is or was"
    return None


__all__ = ["news_form_problem", "normalise_news"]
