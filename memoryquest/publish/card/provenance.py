"""The card's Provenance section, from the redacted run manifest: generator, models, seed,
cost, prompt templates, thresholds, and each stage's usage and cost."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memoryquest.publish.card.format import markdown_table
from memoryquest.publish.card.inputs import CardInputs


def _settings_rows(settings: Mapping[str, Any], sections: Sequence[str]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for section in sections:
        values = settings.get(section)
        if isinstance(values, Mapping):
            for key, value in values.items():
                rows.append(
                    (f"{section}.{key}", json.dumps(value, ensure_ascii=False, sort_keys=True))
                )
    return rows


def provenance_lines(inputs: CardInputs) -> list[str]:
    manifest = inputs.manifest
    lines: list[str] = []
    if manifest.simulated:
        lines += [
            "> [!WARNING]",
            "> **SIMULATED DATA.** Every text in this dataset — queries, references, timelines, dialogues,",
            "> facts and prospection traces — comes from memoryquest's offline, deterministic, persona-grounded",
            "> simulator, **not from a language model**. It exercises the whole pipeline and keeps every",
            "> structural invariant, but it is not a substitute for the benchmark generated with a real model.",
            f"> Embeddings (and therefore every cosine and γ) come from the real embedder `{manifest.embedder}`.",
            "",
        ]
    endpoint = manifest.base_url or f"the default endpoint of the `{manifest.backend}` backend"
    lines += [
        "## Provenance",
        "",
        f"- Generator: memoryquest {manifest.package_version}, run `{manifest.run_id}`, created {manifest.created_at.isoformat()}",
    ]
    if manifest.simulated:
        lines.append(
            f"- Text: offline simulator (backend `{manifest.backend}`; no language model was called)"
        )
    else:
        lines.append(
            f"- Text: chat model `{manifest.chat_model}` via `{manifest.backend}` at {endpoint}"
        )
    lines += [
        f"- Embedder: `{manifest.embedder}`",
        f"- Seed: {manifest.seed}; wall time {manifest.wall_seconds:.1f} s; total cost ${manifest.total_cost_usd:.4f}"
        + (
            f" over {manifest.attempts} attempts (${manifest.cost_this_attempt_usd:.4f} in the last one, "
            f"${manifest.reused_cost_usd:.4f} spent earlier and reused from the cache)"
            if manifest.attempts > 1
            else ""
        ),
        f"- Personas: {len(manifest.persona_ids)} in the run",
        "- Full details (every threshold, prompt version, token count and sha256 of every file): `manifest.json`",
        "",
    ]
    if manifest.prompts:
        lines += ["### Prompt templates", ""]
        lines += markdown_table(
            ["template", "version", "sha256"],
            [
                (p.template_id, p.version, f"`{p.sha256[:16]}…`")
                for p in sorted(manifest.prompts, key=lambda p: p.template_id)
            ],
        )
        lines.append("")
    threshold_rows = _settings_rows(manifest.settings, ("generation", "pgr"))
    if threshold_rows:
        lines += ["### Thresholds and constants", ""]
        lines += markdown_table(["setting", "value"], threshold_rows)
        lines.append("")
    if manifest.usage:
        lines += ["### Usage", ""]
        lines += markdown_table(
            [
                "stage",
                "requests",
                "cache hits",
                "input tokens",
                "output tokens",
                "embedding requests",
                "cost (USD)",
                "seconds",
            ],
            [
                (
                    u.stage,
                    u.requests,
                    u.cache_hits,
                    u.input_tokens,
                    u.output_tokens,
                    u.embedding_requests,
                    f"{u.cost_usd:.4f}",
                    f"{u.seconds:.1f}",
                )
                for u in manifest.usage
            ],
        )
        lines.append("")
    return lines
