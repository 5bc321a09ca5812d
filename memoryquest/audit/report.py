"""The audit's result: named checks with values and limits, the measurements behind them, and a markdown table.

The report is JSON-serialisable (``model_dump(mode="json")``) so it can sit in
``manifest.json`` and ``audit.json``; :func:`audit_markdown` renders the table
the dataset card embeds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memoryquest.audit.detectability import MIN_MARKER_EXCHANGES, ClassifierScore, ExclusiveNgrams
from memoryquest.audit.diversity import Diversity
from memoryquest.audit.ground_truth import GroundTruth
from memoryquest.audit.leakage import Leakage

MARKDOWN_NGRAMS = 10
"""Exclusive n-grams listed under the table."""


class AuditCheck(BaseModel):
    name: str
    value: float | None = Field(
        description="The measurement; null when the data does not allow it."
    )
    threshold: float | None = Field(
        description="The limit from AuditSettings; null for a check that only reports."
    )
    fails_if: Literal[">", ">="] | None = Field(
        default=None, description="The check fails when value <fails_if> threshold."
    )
    passed: bool
    detail: str
    target: str | None = Field(
        default=None,
        description="The benchmark target the value is held to ('0.3–0.7', '≥ 0.25'); null for none. A target only reports.",
    )
    on_target: bool | None = Field(
        default=None,
        description="Whether the value meets its target; null without a target or a value.",
    )


class DatasetSize(BaseModel):
    users: int
    queries: int
    references: int
    sessions: int
    turns: int
    facts: int


class FilterRound(BaseModel):
    round: int = Field(ge=1)
    aucs: dict[str, float | None] = Field(
        description="Each gated AUC (check name -> value) measured at the start of the round."
    )
    flagged_items: dict[str, int] = Field(
        description="Per classifier, the reference items whose out-of-fold score stood out."
    )
    queries_removed: list[str] = Field(description="The queries of those items, withdrawn.")


class FilterSummary(BaseModel):
    """What the per-item tell filter (:mod:`memoryquest.audit.filtering`) did to a dataset."""

    fdr: float = Field(
        description="The false discovery rate at which items were flagged (Benjamini-Hochberg over "
        "the out-of-fold p-values of each classifier's items and queries)."
    )
    queries_before: int
    queries_removed: int
    rounds: list[FilterRound]
    aucs_before: dict[str, float | None]
    aucs_after: dict[str, float | None]
    stopped: str = Field(description="Why the rounds ended.")


class AuditReport(BaseModel):
    passed: bool
    failures: list[str] = Field(description="One line per failed check: '<check>: <reason>'.")
    targets_missed: list[str] = Field(
        default_factory=list,
        description="One line per check that misses its target: '<check>: <value> (target <target>)'. Fails nothing.",
    )
    checks: list[AuditCheck]
    size: DatasetSize
    exclusive_ngrams: ExclusiveNgrams
    classifiers: list[ClassifierScore]
    structure: list[ClassifierScore] = Field(
        default_factory=list,
        description="Classifiers on where references sit (turn index, session length, news items, "
        "timeline position, domain relative to the query), combined per level and one feature at a time.",
    )
    leakage: Leakage
    diversity: list[Diversity]
    ground_truth: GroundTruth
    filtering: FilterSummary | None = Field(
        default=None,
        description="The per-item tell filter that made this dataset, as its manifest records it.",
    )
    seconds: float | None = Field(
        default=None,
        description="Wall time of the audit; left out where output must be reproducible.",
    )

    def check(self, name: str) -> AuditCheck:
        """The check called ``name`` (KeyError when there is none)."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)


def _number(value: float | None) -> str:
    """Three significant digits: counts print as integers, shares and AUCs as 0.518."""
    return "—" if value is None else f"{value:.3g}"


def _limit(check: AuditCheck) -> str:
    if check.target is not None:
        return f"target {check.target}"
    if check.threshold is None or check.fails_if is None:
        return "—"
    return f"fails if {'≥' if check.fails_if == '>=' else '>'} {_number(check.threshold)}"


def _result(check: AuditCheck) -> str:
    if check.target is not None:
        return {True: "met", False: "**missed**", None: "—"}[check.on_target]
    return "—" if check.threshold is None else ("pass" if check.passed else "**FAIL**")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def audit_markdown(report: AuditReport) -> str:
    """A markdown summary: verdict line, one table row per check, the top exclusive n-grams."""
    size = report.size
    verdict = (
        "passed"
        if report.passed
        else f"FAILED ({len(report.failures)} of {sum(c.threshold is not None for c in report.checks)} gates)"
    )
    lines = [
        f"**Validity audit: {verdict}** — {size.users} users, {size.queries} queries, {size.references} references, "
        f"{size.sessions} sessions, {size.turns} turns, {size.facts} facts"
        + (f" ({report.seconds:.1f} s)." if report.seconds is not None else "."),
        "",
    ]
    if report.targets_missed:
        targets = sum(c.target is not None for c in report.checks)
        lines += [
            f"**Benchmark targets missed: {len(report.targets_missed)} of {targets}** — "
            + "; ".join(report.targets_missed)
            + ". A missed target fails nothing, but results on this dataset say less than they seem to.",
            "",
        ]
    lines += [
        "| Check | Value | Limit | Result | Detail |",
        "|---|---:|---|---|---|",
    ]
    for check in report.checks:
        lines.append(
            f"| {check.name} | {_number(check.value)} | {_limit(check)} | {_result(check)} | {_cell(check.detail)} |"
        )
    if report.filtering is not None:
        lines += ["", *filtering_markdown(report.filtering)]
    top = report.exclusive_ngrams.top[:MARKDOWN_NGRAMS]
    if top:
        lines += [
            "",
            f"Word n-grams found only around reference turns (top {len(top)} of those in {MIN_MARKER_EXCHANGES}+ reference exchanges):",
            "",
            "| n-gram | Reference exchanges | Share |",
            "|---|---:|---:|",
        ]
        lines += [f"| {_cell(item.ngram)} | {item.units} | {item.share:.1%} |" for item in top]
    return "\n".join(lines) + "\n"


def filtering_markdown(summary: FilterSummary) -> list[str]:
    """The tell filter's lines: queries removed, rounds, and each gated AUC before and after."""
    rounds = len(summary.rounds)
    lines = [
        f"Per-item tell filter: {summary.queries_removed} of {summary.queries_before} queries withdrawn "
        f"(reason `tell`) in {rounds} round{'s' * (rounds != 1)}; a query stood out when few of the "
        "other items scored as high out of fold as its reference items (their p-values combined), "
        f"at a false discovery rate of {summary.fdr:g} over queries (Benjamini-Hochberg). "
        f"{summary.stopped[:1].upper()}{summary.stopped[1:]}.",
        "",
        "| AUC | Before filtering | After |",
        "|---|---:|---:|",
    ]
    lines += [
        f"| {name} | {_number(before)} | {_number(summary.aucs_after.get(name))} |"
        for name, before in summary.aucs_before.items()
    ]
    return lines
