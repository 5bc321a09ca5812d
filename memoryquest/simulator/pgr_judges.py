"""Simulated answers of the PGR judges: the reference judge compares content stems
(``JUDGE_OVERLAP``); the pairwise judge counts the user facts an answer cites, else its
specific content beyond the request's own words."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from memoryquest.pgr.judges_contracts import JudgeReferencesInputs
from memoryquest.pgr.winrate_contracts import PairwiseInputs
from memoryquest.simulator import simulates
from memoryquest.simulator.pgr_plan import short
from memoryquest.text import content_stems

JUDGE_OVERLAP = 0.4
JUDGE_MIN_SHARED = 2
CITE_SHARE = 0.6


def _overlap(reference: str, fact: str) -> tuple[float, int]:
    wanted = content_stems(reference)
    if not wanted:
        return 0.0, 0
    shared = len(wanted & content_stems(fact))
    return shared / len(wanted), shared


@simulates(JudgeReferencesInputs)
def judge_references(inputs: JudgeReferencesInputs, rng: random.Random) -> dict[str, Any]:
    retrieved = [(int(item["number"]), str(item.get("info", ""))) for item in inputs.retrieved]
    verdicts = []
    for reference in inputs.references:
        text = str(reference["text"])
        needed = min(JUDGE_MIN_SHARED, len(content_stems(text)))
        stating: list[int] = []
        best_share, best_fact = 0.0, ""
        for number, info in retrieved:
            share, shared = _overlap(text, info)
            if share >= JUDGE_OVERLAP and shared >= needed:
                stating.append(number)
            if share > best_share:
                best_share, best_fact = share, info
        reason = (
            f"'{short(best_fact, 10)}' shares {best_share:.0%} of its content words"
            if best_fact
            else "no retrieved memory shares its content words"
        )
        verdicts.append({"number": int(reference["number"]), "memories": stating, "reason": reason})
    return {"verdicts": verdicts}


def _cited(text: str, statements: Iterable[str]) -> int:
    have = content_stems(text)
    count = 0
    for statement in statements:
        wanted = content_stems(statement)
        if len(wanted) >= 2 and len(wanted & have) >= max(2, CITE_SHARE * len(wanted)):
            count += 1
    return count


@simulates(PairwiseInputs)
def judge_pairwise(inputs: PairwiseInputs, rng: random.Random) -> dict[str, Any]:
    """Shown the references, the answer that takes up more of them wins. Otherwise the judge,
    like a user who knows only their own profile, prefers the answer with more specific content
    beyond the request's own words (distinct content words): a crude reading of helpfulness
    that rewards length too, which the report's length-controlled Win Rate then shows."""
    references = [str(r) for r in inputs.references]
    asked = content_stems(str(inputs.query))

    def weight(response: str) -> tuple[int, int]:
        return _cited(response, references), len(content_stems(response) - asked)

    first = weight(str(inputs.first_response))
    second = weight(str(inputs.second_response))
    labels = (inputs.first_label, inputs.second_label)
    choice = labels[0] if first > second else labels[1] if second > first else "tie"
    reasoning = (
        f"Response {labels[0]} takes up {first[0]} of the points shown and {first[1]} specific "
        f"details, {labels[1]} {second[0]} and {second[1]}."
    )
    return {"reasoning": reasoning, "choice": choice}
