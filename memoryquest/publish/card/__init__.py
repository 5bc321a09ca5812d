"""The dataset card (README.md): Hugging Face YAML front matter plus a readable body.

Everything in the card is derived from the tables, the run manifest and the
publish settings — never from the clock or the destination path — so the same
input gives the same bytes.

Each section is written by a module named for it: the front matter
(:mod:`~memoryquest.publish.card.front_matter`), the audit's warning and section
(:mod:`~memoryquest.publish.card.audit`), the headline and statistics
(:mod:`~memoryquest.publish.card.results`), one PGR run's baselines and judges' error rates
(:mod:`~memoryquest.publish.card.evaluation`), provenance with usage and cost
(:mod:`~memoryquest.publish.card.provenance`), the graders
(:mod:`~memoryquest.publish.card.judges`), and reading, loading, schema and licence
(:mod:`~memoryquest.publish.card.guide`); this module puts them in order.
"""

from __future__ import annotations

from collections.abc import Mapping

from memoryquest.publish.card.audit import audit_section, audit_stamp
from memoryquest.publish.card.format import markdown_table
from memoryquest.publish.card.front_matter import PRETTY_NAME, front_matter
from memoryquest.publish.card.guide import (
    licence_section,
    loading_section,
    readable_section,
    schema_section,
)
from memoryquest.publish.card.inputs import CardInputs
from memoryquest.publish.card.judges import judges_and_reviewer_lines
from memoryquest.publish.card.provenance import provenance_lines
from memoryquest.publish.card.results import headline_lines, statistics_section
from memoryquest.publish.splits import SPLITS


def _splits_section(inputs: CardInputs) -> list[str]:
    publish = inputs.publish
    lines = [
        "## Splits",
        "",
        "Splits are **by user**: every row of every table follows its persona's split, so no user",
        'appears in two splits. Users are ordered by `sha256("<split_seed>:<persona_id>")` and cut by the',
        f"ratios train {publish.train:g} / validation {publish.validation:g} / test {publish.test:g} (split seed {publish.split_seed}).",
        "Split sizes use the largest-remainder method; a split with a positive ratio that would be empty",
        "takes one user from the largest split while that split keeps at least one. Empty splits have no file.",
        "",
    ]
    header = ["config", *SPLITS]
    rows: list[list[object]] = [["users", *[inputs.users_per_split.get(s, 0) for s in SPLITS]]]
    rows += [
        [f"`{config}`", *[counts.get(s, 0) for s in SPLITS]]
        for config, counts in inputs.row_counts.items()
    ]
    lines += markdown_table(header, rows)
    lines.append("")
    return lines


def render_card(inputs: CardInputs) -> str:
    body = [
        *audit_stamp(inputs),
        f"# {PRETTY_NAME}",
        "",
        "MemoryQuest is a multi-session long-term-memory benchmark: each in-situ planning query depends on",
        "3–5 dated, atomic facts about the user that are spread over a long, chronologically consistent",
        "conversation history and are semantically far from the query (low γ), so similarity-only retrieval",
        "struggles. This copy was regenerated from PersonaLens personas with the `memoryquest` generator and",
        "checked with its bundled Prospection-Guided Retrieval (PGR) runner.",
        "",
        "Configs: " + ", ".join(f"`{c}`" for c in inputs.schemas) + ".",
        "",
    ]
    body += headline_lines(inputs.statistics, inputs.manifest.simulated, inputs.win_rates)
    body += provenance_lines(inputs)
    body += judges_and_reviewer_lines(inputs)
    body += readable_section(inputs)
    body += _splits_section(inputs)
    body += statistics_section(inputs)
    body += audit_section(inputs)
    body += loading_section(inputs)
    body += schema_section(inputs)
    body += licence_section(inputs)
    return front_matter(inputs) + "\n" + "\n".join(body).rstrip("\n") + "\n"


# --------------------------------------------------------------------------- the Hub


HUB_LINE = "- Hub: "
"""The Provenance line of a pushed card (:mod:`memoryquest.publish.hub` writes it after the push)."""


def with_hub_provenance(card: str, hub: Mapping[str, str] | None) -> str:
    """``card`` with its Provenance list naming the Hub commit of its data files (``hub``), or
    naming no push (None): an earlier push's line is replaced either way."""
    lines = [line for line in card.split("\n") if not line.startswith(HUB_LINE)]
    if hub is None:
        return "\n".join(lines)
    heading = "## Provenance"
    if heading not in lines:
        raise ValueError(f"the dataset card has no {heading!r} section to record the push in")
    at = lines.index(heading) + 2  # after the heading and its blank line
    lines.insert(
        at,
        f"{HUB_LINE}[`{hub['repo_id']}`]({hub['url']}), revision `{hub['revision']}`; the data "
        f"files are those of commit `{hub['data_commit']}` (this card and `manifest.json` were "
        "committed right after it, to name it; `publish.hub` in `manifest.json`)",
    )
    return "\n".join(lines)
