"""``memoryquest personas list|show``: see what intake makes of a persona source before generating."""

from __future__ import annotations

import argparse
import sys
import textwrap

from memoryquest.cli.inputs import add_selection_options, selection_from_args
from memoryquest.cli.main import add_common_options, settings_from_args
from memoryquest.contracts import Persona, TaskKind
from memoryquest.intake import IntakeResult, PersonaSelection, load_personas

SOURCE_HELP = (
    "PersonaLens data directory, http(s) base URL, or custom persona .json file "
    "(default: settings.persona_source, the bundled sample)"
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Load personas the way `generate` does and show them, with every intake error."
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        help="one line per persona: user id, persona id, age/gender/country, #affinities, #tasks",
        description="One line per persona. Errors go to stderr; the exit code is 1 when any persona failed.",
    )
    add_common_options(listing)
    listing.add_argument("--source", help=SOURCE_HELP)
    add_selection_options(listing)
    listing.set_defaults(func=_list)

    show = actions.add_parser(
        "show",
        help="a readable summary of one persona, or its full JSON",
        description="Show one persona as intake maps it to the Persona contract.",
    )
    add_common_options(show)
    show.add_argument("user", metavar="USER", help="the source user id, e.g. user0")
    show.add_argument("--source", help=SOURCE_HELP)
    show.add_argument("--json", action="store_true", help="print the full Persona row as JSON")
    show.set_defaults(func=_show)


def _load(args: argparse.Namespace, selection: PersonaSelection) -> IntakeResult:
    settings = settings_from_args(args, persona_source=args.source)
    return load_personas(
        settings.persona_source, selection, timeout_seconds=settings.endpoint.timeout_seconds
    )


def _report(result: IntakeResult) -> int:
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    if result.errors:
        print(
            f"{len(result.personas)} personas loaded, {len(result.errors)} errors", file=sys.stderr
        )
        return 1
    return 0


def persona_line(persona: Persona) -> str:
    demographics = persona.demographics
    who = " / ".join(
        v or "?" for v in (demographics.age, demographics.gender, demographics.reside_country)
    )
    return (
        f"{persona.source_user_id:<12} {persona.persona_id}  {who:<40} "
        f"{len(persona.affinities):>4} affinities {len(persona.tasks):>4} tasks"
    )


def _list(args: argparse.Namespace) -> int:
    result = _load(args, selection_from_args(args))
    for persona in result.personas:
        print(persona_line(persona))
    return _report(result)


def persona_summary(persona: Persona, width: int = 100) -> str:
    """Everything intake kept about a persona, readable in a terminal."""

    def clip(indent: str, text: str, limit: int) -> str:
        flat = indent + " ".join(text.split())
        return flat if len(flat) <= limit else flat[: limit - 1] + "…"

    lines = [
        f"{persona.source_user_id}  ({persona.persona_id}, source: {persona.source.value})",
        "",
        "demographics:",
    ]
    for name, value in persona.demographics.model_dump().items():
        if value is not None:
            lines.append(f"  {name.replace('_', ' ')}: {value}")
    lines += ["", f"interests: {', '.join(d.value for d in persona.interests) or '(none)'}", ""]
    domains = list(dict.fromkeys(a.domain for a in persona.affinities))
    lines.append(f"affinities ({len(persona.affinities)} in {len(domains)} domains):")
    for domain in domains:
        lines.append(f"  {domain.value}:")
        for affinity in (a for a in persona.affinities if a.domain is domain):
            lines.append(clip("    ", f"{affinity.name}: {', '.join(affinity.values)}", width))
    lines += ["", f"interactions ({len(persona.interactions)} domains):"]
    for interaction in persona.interactions:
        lines.append(clip("  ", f"{interaction.domain.value}: {interaction.summary}", width))
    single = sum(t.kind is TaskKind.SINGLE_DOMAIN for t in persona.tasks)
    lines += ["", f"tasks ({single} single-domain, {len(persona.tasks) - single} multi-domain):"]
    for task in persona.tasks:
        head = f"  {task.task_id} [{', '.join(d.value for d in task.domains)}] "
        lines.append(
            head + textwrap.shorten(task.user_intent, max(20, width - len(head)), placeholder="…")
        )
    return "\n".join(lines)


def _show(args: argparse.Namespace) -> int:
    result = _load(args, PersonaSelection(user_ids=[args.user]))
    for persona in result.personas:
        print(persona.model_dump_json(indent=2) if args.json else persona_summary(persona))
    return _report(result) if result.errors or result.personas else 1
