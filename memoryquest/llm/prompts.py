"""Versioned prompt templates, one Markdown file each under ``prompts/``.

A template file starts with a small header block::

    ---
    id: query_generation
    version: 1
    purpose: one line on why the template exists
    max_output_tokens: 3000
    ---
    ## system
    ...text with $variables...
    ## user
    ...text with $variables...

Variables use ``string.Template`` syntax (``$name`` / ``${name}``); values that
are not strings are rendered as compact JSON, a list one row per line. The version and a hash of the
file travel into the cache key and the run manifest. ``max_output_tokens``
(optional) is the answer's budget, sized to what the answer schema can need:
it sits with the template because the template decides how long the answer is.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memoryquest.resources import data_dir


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class PromptTemplate:
    template_id: str
    version: int
    purpose: str
    system: str
    user: str
    sha256: str
    max_output_tokens: int | None = None  # None: the request's own budget or the default

    def render(self, variables: dict[str, Any]) -> list[dict[str, str]]:
        """Chat messages with every ``$variable`` filled; a missing one is an error."""
        values = _Values(variables)
        messages = []
        for role, text in (("system", self.system), ("user", self.user)):
            try:
                content = PromptText(text).substitute(values)
            except KeyError as exc:
                raise PromptError(
                    f"prompt {self.template_id} v{self.version}: variable {exc.args[0]!r} not supplied "
                    f"(given: {', '.join(sorted(variables)) or 'none'})"
                ) from exc
            except ValueError as exc:  # a stray '$' the template syntax cannot read
                raise PromptError(
                    f"prompt {self.template_id} v{self.version}, {role} section: {exc} (write a literal $ as $$)"
                ) from exc
            messages.append({"role": role, "content": content.strip()})
        return messages


class PromptText(string.Template):
    """``$name``, ``${name}``, and ``${name.key}`` for one key of a mapping variable: a prompt
    can show a variable's date without its text (the timeline is not told the request)."""

    braceidpattern = r"(?a:[_a-z][_a-z0-9]*(?:\.[_a-z][_a-z0-9]*)*)"


class _Values(Mapping[str, str]):
    """The variables as prompt text, looked up by name or by a dotted path into a mapping."""

    def __init__(self, variables: dict[str, Any]) -> None:
        self._variables = variables

    def __getitem__(self, name: str) -> str:
        head, *path = name.split(".")
        value = self._variables[head]
        for key in path:
            if not isinstance(value, dict) or key not in value:
                raise KeyError(name)
            value = value[key]
        return _as_text(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._variables)

    def __len__(self) -> int:
        return len(self._variables)


def placeholder_names(text: str) -> set[str]:
    """The variables a template section shows (a dotted placeholder shows part of its head)."""
    names: set[str] = set()
    for match in PromptText.pattern.finditer(text):
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name.split(".")[0])
    return names


def _as_text(value: Any) -> str:
    """Strings as they are; anything else as compact JSON, a list one row per line.

    Indented JSON spends about half of a prompt's tokens on whitespace; one row
    per line keeps lists just as easy to read for a model and a person.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(_compact_json(row) for row in value) + "\n]"
    return _compact_json(value)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def parse_template(text: str, source: str) -> PromptTemplate:
    if not text.startswith("---\n"):
        raise PromptError(f"{source}: missing the '---' header block")
    header_text, _, body = text[4:].partition("\n---\n")
    header: dict[str, str] = {}
    for line in header_text.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            header[key.strip()] = value.strip()
    for key in ("id", "version", "purpose"):
        if key not in header:
            raise PromptError(f"{source}: header lacks {key!r}")
    system_part, sep, user_part = body.partition("\n## user\n")
    if not sep or "## system\n" not in system_part:
        raise PromptError(f"{source}: needs a '## system' and a '## user' section")
    system = system_part.split("## system\n", 1)[1]
    version = _integer_header(header, "version", source)
    max_output_tokens = None
    if "max_output_tokens" in header:
        max_output_tokens = _integer_header(header, "max_output_tokens", source)
        if max_output_tokens < 1:
            raise PromptError(
                f"{source}: max_output_tokens must be positive, got {max_output_tokens}"
            )
    return PromptTemplate(
        template_id=header["id"],
        version=version,
        purpose=header["purpose"],
        system=system,
        user=user_part,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        max_output_tokens=max_output_tokens,
    )


def _integer_header(header: dict[str, str], key: str, source: str) -> int:
    try:
        return int(header[key])
    except ValueError:
        raise PromptError(f"{source}: {key} must be an integer, got {header[key]!r}") from None


@cache
def _load(template_id: str, directory: Path) -> PromptTemplate:
    path = directory / f"{template_id}.md"
    if not path.is_file():
        raise PromptError(f"no prompt template {template_id!r} (looked for {path})")
    template = parse_template(path.read_text(encoding="utf-8"), str(path))
    if template.template_id != template_id:
        raise PromptError(
            f"{path}: header id {template.template_id!r} does not match the file name"
        )
    return template


def load_template(template_id: str, prompts_dir: Path | None = None) -> PromptTemplate:
    """The template ``<prompts_dir>/<template_id>.md``; the shipped ``prompts/`` by default."""
    return _load(template_id, Path(prompts_dir) if prompts_dir is not None else data_dir("prompts"))


def all_templates(prompts_dir: Path | None = None) -> list[PromptTemplate]:
    directory = Path(prompts_dir) if prompts_dir is not None else data_dir("prompts")
    return [
        load_template(path.stem, directory)
        for path in sorted(directory.glob("*.md"))
        if path.stem != "README"
    ]
