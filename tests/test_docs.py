"""The documentation says what the code does: every ``memoryquest`` command line in README.md,
docs/ and personas/README.md parses against the real command line, and every setting a page
names exists, with the default the page states.

A synopsis such as ``memoryquest audit DIR [--json] [--write]`` is checked without any optional
part and with each optional part (each alternative of ``[a | b]``) on its own; placeholders
(``DIR``, ``N``, ``ORG/NAME``) stand for values. Parsing does not run the command: combinations
that parse but are refused when run (``--users`` with ``--range``) are the commands' own tests'
business.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from memoryquest.cli.main import build_parser
from memoryquest.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "personas" / "README.md"]


def _is_section(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


SECTIONS = [name for name, field in Settings.model_fields.items() if _is_section(field.annotation)]


# --------------------------------------------------------------------------- command lines


def command_lines(page: Path) -> Iterator[tuple[int, str]]:
    """(line number, command) for each ``memoryquest`` command in a code block or inline code."""
    text = page.read_text(encoding="utf-8")
    fenced = False
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced and line.strip().startswith("memoryquest "):
            start = number
            command = line.strip()
            while command.endswith("\\") and number < len(lines):
                command = command[:-1] + " " + lines[number].strip()
                number += 1
            yield start, command.split("  #")[0].split(" # ")[0].strip()
    for match in re.finditer(r"`(memoryquest [^`]+)`", text):
        words = match.group(1).split()
        if len(words) > 2:  # `memoryquest audit` alone names the command, it is not a command line
            yield text.count("\n", 0, match.start()) + 1, " ".join(words)


def _tree(tokens: list[str]) -> tuple[list[object], list[str]]:
    """Tokens up to the closing bracket: words, and optional groups as lists of alternatives."""
    items: list[object] = []
    while tokens:
        token = tokens.pop(0)
        if token == "[":
            alternatives: list[list[object]] = [[]]
            inner, tokens = _tree(tokens)
            for item in inner:
                if item == "|":
                    alternatives.append([])
                else:
                    alternatives[-1].append(item)
            items.append(alternatives)
        elif token == "]":
            return items, tokens
        else:
            items.append(token)
    return items, tokens


def _minimal(items: list[object]) -> list[str]:
    return [item for item in items if isinstance(item, str)]


def _variants(items: list[object]) -> list[list[str]]:
    """Without any optional part, and with each optional part (each alternative) on its own."""
    found = [_minimal(items)]
    for position, item in enumerate(items):
        if isinstance(item, list):
            for alternative in item:
                for inner in _variants(alternative):
                    found.append(
                        _minimal(items[:position]) + inner + _minimal(items[position + 1 :])
                    )
    return found


PLACEHOLDER_VALUES = {"N": "3"}


def argument_lists(command: str) -> list[list[str]]:
    spaced = command.replace("[", " [ ").replace("]", " ] ").replace(" | ", " | ")
    items, _ = _tree(spaced.split())
    return [
        [PLACEHOLDER_VALUES.get(word, word) for word in variant[1:]] for variant in _variants(items)
    ]


DOCUMENTED = [
    pytest.param(page, number, command, id=f"{page.relative_to(ROOT)}:{number}")
    for page in PAGES
    for number, command in command_lines(page)
]


def test_the_pages_document_commands() -> None:
    pages = {p.values[0] for p in DOCUMENTED}
    assert ROOT / "README.md" in pages and len(DOCUMENTED) > 30


@pytest.mark.parametrize(("page", "number", "command"), DOCUMENTED)
def test_every_documented_command_line_parses(page: Path, number: int, command: str) -> None:
    for argv in argument_lists(command):
        try:
            build_parser(argv).parse_args(argv)
        except SystemExit as exit:  # --help exits 0; a refused line exits 2
            assert exit.code == 0, (
                f"{page.name}:{number}: `memoryquest {' '.join(argv)}` is refused"
            )


def test_a_wrong_command_line_is_caught() -> None:
    """The check fails on what it should: an option the command does not have, in any variant."""
    bad = argument_lists("memoryquest audit DIR [--json] [--no-such-option]")
    refused = []
    for argv in bad:
        try:
            build_parser(argv).parse_args(argv)
        except SystemExit as exit:
            refused.append(exit.code)
    assert refused == [2]
    assert (
        len(argument_lists("memoryquest personas list [--users a | --count N | --range 0:9]")) == 4
    )


# --------------------------------------------------------------------------- settings


SETTING = re.compile(
    r"`(?:--set )?(?P<name>(?:" + "|".join(SECTIONS) + r")\.[a-z_]+)(?P<rest>[^`]*)`"
)
STATED_DEFAULT = re.compile(r"^\s*(?:=|\(default)\s*(?P<value>-?[0-9][0-9_,.]*)")


FILE_SUFFIXES = {"log", "json", "jsonl", "md", "toml", "parquet", "png"}  # `pgr.log` is a file


def named_settings(pages: list[Path]) -> Iterator[tuple[Path, str, str]]:
    """(page, setting, what follows the setting's code span) for each ``section.key`` a page names.

    ``pgr.winrate.json`` is a file and ``publish.hub`` a key of ``manifest.json`` (named near the
    word "manifest"), not settings.
    """
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in SETTING.finditer(text):
            rest = match.group("rest")
            if (
                match.group("name").split(".", 1)[1] in FILE_SUFFIXES
                or rest.startswith((".", "/"))
                or "manifest" in text[max(0, match.start() - 80) : match.start()]
            ):
                continue
            yield page, match.group("name"), rest + "`" + text[match.end() : match.end() + 40]


def _default(name: str) -> object:
    section, key = name.split(".", 1)
    model = Settings.model_fields[section].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    field = model.model_fields.get(key)
    if field is None:
        raise KeyError(name)
    return field.get_default(call_default_factory=True)


def settings_problems(pages: list[Path]) -> tuple[list[str], int]:
    """What the pages get wrong about settings, and how many stated defaults were compared."""
    problems = []
    checked = 0
    for page, name, after in named_settings(pages):
        if name.endswith(".*"):
            continue
        try:
            default = _default(name)
        except KeyError:
            problems.append(f"{page.name}: `{name}` is not a setting")
            continue
        inside, _, outside = after.partition("`")
        stated = STATED_DEFAULT.match(outside)
        if stated and "=" not in inside:  # `--set x.y=v` is an example, not a default
            checked += 1
            value = float(stated.group("value").replace(",", "").replace("_", "").rstrip("."))
            if not isinstance(default, (int, float)) or float(default) != value:
                problems.append(
                    f"{page.name}: `{name}` = {stated.group('value')}, but its default is {default!r}"
                )
    return problems, checked


def test_every_setting_a_page_names_exists_with_the_default_it_states() -> None:
    problems, checked = settings_problems(PAGES)
    assert not problems, "\n".join(problems)
    assert checked >= 3  # the pages do state defaults, and they were compared


def test_a_wrong_setting_or_default_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Set `generation.gamma_max` = 0.9 or `generation.no_such_knob`; "
        "`--set generation.gamma_max=0.25` is an example; `pgr.winrate.json` is a file.\n",
        encoding="utf-8",
    )
    problems, checked = settings_problems([page])
    assert checked == 1 and problems == [
        "page.md: `generation.gamma_max` = 0.9, but its default is 0.3",
        "page.md: `generation.no_such_knob` is not a setting",
    ]
