"""The validity audit on the card: a warning before anything else when the dataset failed
its audit or missed a target, and the audit's own section."""

from __future__ import annotations

from collections.abc import Sequence

from memoryquest.publish.card.inputs import CardInputs


def _stamp(lead: str, items: Sequence[str], tail: str) -> list[str]:
    """One bold line naming ``items`` (none: no line)."""
    return [f"**{lead}: " + "; ".join(items) + f".** {tail}", ""] if items else []


def audit_stamp(inputs: CardInputs) -> list[str]:
    """A dataset that failed its audit, or missed one of its targets, says so before anything else."""
    return _stamp(
        "WARNING: this dataset FAILED its validity audit and was published anyway (--allow-failed-audit)",
        inputs.audit_failures,
        "Results on it may reward shortcuts rather than memory retrieval.",
    ) + _stamp(
        "Note: this dataset misses benchmark targets of its validity audit",
        inputs.audit_targets_missed,
        "See the Validity audit section for what each target guards against.",
    )


def audit_section(inputs: CardInputs) -> list[str]:
    if inputs.audit_markdown is None:
        return [
            "## Validity audit",
            "",
            "No audit was run on this dataset (`memoryquest audit`).",
            "",
        ]
    verdict = "failed" if inputs.audit_failures else "passed"
    # An unmeasured target (no query-only rows, say) is neither met nor missed.
    targets = (
        f" It missed {len(inputs.audit_targets_missed)} of the targets a usable benchmark meets"
        if inputs.audit_targets_missed
        else " It missed none of the targets a usable benchmark meets that it could measure"
    )
    return [
        "## Validity audit",
        "",
        f"The dataset {verdict} `memoryquest audit`, which looks for shortcuts a generator can leave without "
        "breaking any invariant: wording that marks the turns stating a reference (n-grams found only there, "
        "and a classifier trained on other users), where references sit (classifiers on the reference "
        "turn's index, the session's length and news items, the event's place in its timeline and the "
        "domain relative to the query's), query words that already point at the references "
        "(BM25 beside dense query-only recall), templated text (distinct n-grams, repeated sentences), and "
        "references that memory does not cover on the query date or that expired before it."
        + targets
        + ": dense query-only recall inside a band (below it the query finds its references hardly better "
        "than chance, so the set measures noise; above it the set is trivial), and varied user turns "
        "(distinct-2 on a fixed-size sample, few repeated sentences). A missed target fails nothing. "
        "When the table is followed by the per-item tell filter's lines, queries whose reference items "
        "stood out to those classifiers, one by one, were withdrawn (reason `tell`, in the rejected "
        "table) before publishing; the lines give how many, in how many rounds, and each AUC before and after.",
        "",
        inputs.audit_markdown.strip(),
        "",
    ]
