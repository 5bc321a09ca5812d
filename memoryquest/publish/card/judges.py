"""Which model graded the data (the judges and the blind reviewer) and whether it is the
model that wrote it: a grader shares its author's blind spots."""

from __future__ import annotations

from memoryquest.contracts import JudgeKind, RunManifest
from memoryquest.publish.card.format import markdown_table
from memoryquest.publish.card.inputs import CardInputs


def judge_model(manifest: RunManifest) -> str:
    """The model that answered the judges: ``endpoint.judge_model``, else the chat model."""
    endpoint = manifest.settings.get("endpoint")
    named = endpoint.get("judge_model") if isinstance(endpoint, dict) else None
    return str(named or manifest.chat_model)


def _grader_model(manifest: RunManifest) -> str:
    """Who answered the judges' and the reviewer's requests (the simulator answers all of them offline)."""
    return manifest.chat_model if manifest.simulated else judge_model(manifest)


def judges_and_reviewer_lines(inputs: CardInputs) -> list[str]:
    """Which model graded the data (relevance, PGR and pairwise judges, the blind reviewer),
    whether that is the model that wrote it, and the reviewer's flag rate."""
    manifest = inputs.manifest
    generation = manifest.settings.get("generation")
    relevance = isinstance(generation, dict) and bool(generation.get("judge_relevance"))
    author, grader = manifest.chat_model, _grader_model(manifest)
    graders = [
        ("relevance judge (`reference_relevance`)", relevance),
        (
            "PGR reference judge (`judge_references`)",
            any(s.judge == JudgeKind.LLM.value for s in inputs.statistics.validation),
        ),
        ("pairwise judge (`judge_pairwise`)", inputs.win_rates is not None),
        ("blind reviewer (`session_review`)", manifest.review is not None),
    ]
    ran = [name for name, used in graders if used]
    lines = ["### Judges and the blind reviewer", ""]
    if not ran:
        return [*lines, "No model judge or reviewer ran for this dataset.", ""]
    lines += markdown_table(
        ["grader", "ran", "model", "the model that wrote the data?"],
        [
            (name, "yes", f"`{grader}`", "yes" if grader == author else "no")
            if used
            else (name, "no", "", "")
            for name, used in graders
        ],
    )
    lines.append("")
    if grader == author:
        lines += [
            f"**The model that wrote the data, `{author}`, also graded it** ({', '.join(ran)}): a judge or "
            "reviewer shares its author's blind spots, so what it passes is weaker evidence than an "
            "independent model's verdict (set `endpoint.judge_model`).",
            "",
        ]
    review = manifest.review
    if review is not None:
        reviewer = review.reviewer_model or grader
        share = (
            f" ({review.sessions_flagged / review.sessions_reviewed:.1%})"
            if review.sessions_reviewed
            else ""
        )
        lines += [
            f"Blind reviewer: `{reviewer}` read {review.sessions_reviewed} conversations, each without its "
            "references, query or any label, and flagged a sentence that points ahead, announces itself or "
            f"retells an earlier conversation in {review.sessions_flagged}{share}. A flagged conversation was "
            "written again; one still flagged after the last regeneration is among the rejected candidates "
            "with the reason `flagged`.",
            "",
        ]
    return lines
