"""The estimate as the text ``memoryquest estimate`` prints."""

from __future__ import annotations

import math

from memoryquest.estimate import RunEstimate


def estimate_table(estimate: RunEstimate) -> str:
    lines = [
        f"Estimate for {estimate.planned_personas} personas with {estimate.chat_model}"
        f"{' (Batch API, discounted)' if estimate.batch else ''}; embeddings: {estimate.embedding_model}",
        f"{'stage':<14}{'requests':>12}{'input tok':>16}{'cached input':>16}{'output tok':>16}"
        f"{'embed req':>12}{'cost USD':>12}",
    ]
    for s in estimate.stages:
        lines.append(
            f"{s.stage:<14}{s.requests:>12,.0f}{s.input_tokens:>16,.0f}{s.cached_input_tokens:>16,.0f}"
            f"{s.output_tokens:>16,.0f}{s.embedding_requests:>12,.0f}{s.cost_usd:>12,.2f}"
        )
    lines.append(
        f"{'total':<14}{estimate.total_requests:>12,.0f}{estimate.total_input_tokens:>16,.0f}"
        f"{estimate.total_cached_input_tokens:>16,.0f}{estimate.total_output_tokens:>16,.0f}"
        f"{'':>12}{estimate.total_cost_usd:>12,.2f}"
    )
    lines.append(
        f"per persona: ${estimate.per_persona_cost_usd:,.4f}; sampled {', '.join(estimate.sample_personas)} "
        f"in {estimate.sample_seconds:.1f} s (offline, no request sent)"
    )
    if estimate.templates:
        lines.append(
            "output lengths assumed per template: the offline simulator's answers on the sample "
            "(per call; allowance: the output budget reserved)"
        )
        lines.append(
            f"{'template':<22}{'stage':<11}{'calls/persona':>14}{'input tok':>11}{'cached':>8}"
            f"{'output tok':>12}{'max':>7}{'allowance':>11}"
        )
        for t in estimate.templates:
            lines.append(
                f"{t.template_id:<22}{t.stage:<11}{t.calls_per_persona:>14,.1f}"
                f"{t.input_tokens_per_call:>11,.0f}{t.cached_share:>8.0%}"
                f"{t.output_tokens_per_call:>12,.0f}{t.output_tokens_max:>7,}{t.allowance:>11,}"
            )
    if estimate.modes:
        lines.append("")
        lines.append(
            f"{'':<14}{'requests':>12}{'input tok':>16}{'output tok':>16}{'cost USD':>14}{'wall time':>12}"
        )
        for mode in estimate.modes:
            lines.append(
                f"{mode.mode:<14}{mode.requests:>12,.0f}{mode.input_tokens:>16,.0f}"
                f"{mode.output_tokens:>16,.0f}{mode.cost_usd:>14,.2f}{_hours(mode.wall_hours):>12}"
                f"  ({mode.wall_basis})"
            )
        lines.append(
            "batch rounds holding each stage's requests (a round may hold two stages): "
            + ", ".join(f"{stage} {n}" for stage, n in estimate.rounds.items())
        )
        if estimate.memory_online_note:
            lines.append(estimate.memory_online_note)
    lines.extend(f"approximation: {note}" for note in estimate.approximations)
    return "\n".join(lines)


def _hours(hours: float) -> str:
    if hours < 1:
        return f"{math.ceil(hours * 60):.0f} min"
    return f"{hours:,.1f} h" if hours < 48 else f"{hours / 24:,.1f} d"
