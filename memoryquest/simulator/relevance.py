"""Simulated answer for ``reference_relevance``: would this reference change a good answer to the request?

Decided from wording alone, never a hidden id: a reference is relevant when the need its
words name (the cue lexicon) bears on one of the request's plan steps and its stated time
limit, if any, has not ended before the request. An allergist's advice matters to a
dinner booking; a liking for solo outings names no need and matters to nothing.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from functools import cache
from typing import Any

from memoryquest.contracts import parse_date, parse_domain
from memoryquest.simulator import simulates
from memoryquest.simulator.grammar import months, number_words
from memoryquest.simulator.needs import (
    classify_need,
    need_categories,
    needs_of_request,
    request_needs,
    step_for,
)
from memoryquest.simulator.needs.bank import month_end
from memoryquest.stages.queries_contracts import ReferenceRelevanceInputs

_UNTIL_ORDINAL = re.compile(r"\b(?:until|till|by|on) the (\d{1,2})(?:st|nd|rd|th)\b")
_SPAN = re.compile(r"\bfor the next (?:(\w+) )?(weeks?|months?)\b")


@cache
def _month_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A last day ("until May 20") and a month's end ("until the end of May")."""
    month = "|".join(months())
    return (
        re.compile(rf"\b(?:until|till|through|by|on) ({month}) (\d{{1,2}})\b"),
        re.compile(rf"\buntil the end of ({month})\b"),
    )


def stated_end(text: str, said_on: dt.date) -> dt.date | None:
    """The last day a reference says it holds, counted from the day it was said (None: no limit stated)."""
    until_date, end_of_month = _month_patterns()
    if match := until_date.search(text):
        month, day = months().index(match.group(1)) + 1, int(match.group(2))
        year = said_on.year + (1 if month < said_on.month else 0)
        try:
            return dt.date(year, month, day)
        except ValueError:
            return None
    if match := end_of_month.search(text):
        month = months().index(match.group(1)) + 1
        return month_end(dt.date(said_on.year + (1 if month < said_on.month else 0), month, 1))
    if match := _UNTIL_ORDINAL.search(text):
        day = int(match.group(1))
        month, year = said_on.month, said_on.year
        if day <= said_on.day:
            month, year = (1, year + 1) if month == 12 else (month + 1, year)
        try:
            return dt.date(year, month, day)
        except ValueError:
            return None
    if match := _SPAN.search(text):
        word = (match.group(1) or "one").casefold()
        count = number_words().index(word) if word in number_words() else 1
        days = 7 * count if match.group(2).startswith("week") else 30 * count
        return said_on + dt.timedelta(days=days - 1)
    return None


def verdict(
    query: str, query_domain: str, query_date: dt.date | None, text: str, said_on: dt.date | None
) -> tuple[bool, str]:
    """(relevant, one-sentence rationale) for one reference."""
    steps = needs_of_request(query, parse_domain(query_domain))
    need = classify_need(text)
    if need is None:
        needs = ", ".join(need_categories()[n].label for n in request_needs(steps)[:4])
        none = "It states no personal need that would change the plan"
        return False, f"{none}; this request turns on {needs}."
    about = f"It is about {need_categories()[need].label}"
    step = step_for(need, steps)
    if step is None:
        phrases = ", ".join(s.phrase for s in steps[:4])
        return False, f"{about}, which bears on none of the steps ({phrases})."
    end = stated_end(text, said_on) if query_date is not None and said_on is not None else None
    if end is not None and query_date is not None and end < query_date:
        return False, f"{about}, but it stopped holding on {end.isoformat()}, before the request."
    return True, f"{about}, which matters when {step.phrase}."


@simulates(ReferenceRelevanceInputs)
def judge_relevance(inputs: ReferenceRelevanceInputs, rng: random.Random) -> dict[str, Any]:
    query = str(inputs.query)
    domain = str(inputs.query_domain or "")
    query_date = parse_date(str(inputs.query_date or ""))
    verdicts = []
    for reference in inputs.references:
        said_on = parse_date(str(reference.get("date") or ""))
        relevant, rationale = verdict(query, domain, query_date, str(reference["text"]), said_on)
        verdicts.append(
            {"index": int(reference["index"]), "relevant": relevant, "rationale": rationale}
        )
    return {"verdicts": verdicts}
