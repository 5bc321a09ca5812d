"""Custom personas: new people described in one JSON file, for benchmarks beyond PersonaLens.

A file holds one persona object or a list of them (JSON Schema:
``schemas/custom_persona.schema.json``; example: ``personas/custom/example.json``)::

    {
      "user_id": "maya-okafor",                 # letters, digits, '_', '-', '.'
      "demographics": {"age": "25-34 years old", "gender": "Female", ...},
      "interests": ["Books", "Travel"],         # optional: defaults to the affinity domains
      "affinities": {                           # domain -> attribute -> value or values
        "Books": {"Genre": ["mystery", "memoir"], "Reading Format": "audiobook"}
      },
      "interactions": {                         # domain -> summary of past conversations
        "Books": "She often asks for audiobook recommendations for her commute ..."
      },
      "tasks": [{
        "task_id": "maya-books-1",
        "kind": "single_domain",                # optional: single_domain for one domain, else multi_domain
        "description": "...", "user_intent": "...", "goal": "...",
        "domains": ["Books"],
        "affinity_types": ["Genre"],            # optional
        "situations": {"Location": "Lagos, Nigeria"}   # optional
      }]
    }

Domains are the 20 PersonaLens domains spelt exactly as in
:class:`~memoryquest.contracts.Domain`; demographics use the fields of
:class:`~memoryquest.contracts.Demographics`. Affinity names get the same
normalisation as PersonaLens ("Favourite ..." -> "Favorite ..."). The persona id is
``make_id("persona", "custom", user_id)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from memoryquest.contracts import (
    Demographics,
    Domain,
    Interaction,
    Persona,
    PersonaSource,
    PersonaTask,
    Situation,
    TaskKind,
)
from memoryquest.ids import make_id
from memoryquest.intake.errors import ErrorCollector, IntakeError, IntakeResult, type_name
from memoryquest.intake.normalise import (
    DOMAIN_ORDER,
    JsonProblem,
    canonical_affinity_name,
    check_json,
    merged_affinities,
    parse_json,
    unsafe_id,
    unsafe_user_id,
)
from memoryquest.intake.selection import PersonaSelection


def _one_or_many(value: object) -> object:
    return [value] if isinstance(value, str) else value


AffinityValues = Annotated[
    list[str],
    BeforeValidator(_one_or_many),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "One value, or a list of values.",
        }
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CustomTask(_Strict):
    """Something the persona wants done with an assistant; drives query generation."""

    task_id: str = Field(min_length=1, description="Unique within the persona.")
    kind: TaskKind | None = Field(
        default=None,
        description="Defaults to single_domain for one domain, multi_domain otherwise.",
    )
    description: str = Field(min_length=1)
    user_intent: str = Field(min_length=1)
    goal: str = Field(min_length=1)
    domains: list[Domain] = Field(min_length=1)
    affinity_types: list[str] = Field(
        default_factory=list, description="Affinity names the task relies on."
    )
    situations: dict[str, str] = Field(
        default_factory=dict, description="Context, e.g. Location, Device."
    )

    @field_validator("task_id")
    @classmethod
    def _plain_task_id(cls, value: str) -> str:
        problem = unsafe_id(value, "task id")
        if problem:
            raise ValueError(problem)
        return value


class CustomPersona(_Strict):
    """One persona in the custom input format (see ``personas/README.md``)."""

    user_id: str = Field(description="Letters, digits, '_', '-' and '.'; unique within the file.")
    demographics: Demographics
    interests: list[Domain] | None = Field(
        default=None,
        description="Domains the user cares about; defaults to the domains with affinities.",
    )
    affinities: dict[Domain, dict[str, AffinityValues]] = Field(
        min_length=1, description="Domain -> attribute -> value(s)."
    )
    interactions: dict[Domain, str] = Field(
        min_length=1,
        description="Domain -> summary of the user's past conversations in that domain.",
    )
    tasks: list[CustomTask] = Field(min_length=1)

    @field_validator("user_id")
    @classmethod
    def _safe_user_id(cls, value: str) -> str:
        problem = unsafe_user_id(value)
        if problem:
            raise ValueError(problem)
        return value


class CustomPersonaFile(RootModel[CustomPersona | list[CustomPersona]]):
    """A custom persona file: one persona object or a list of them."""


def _field_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    path = prefix
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def to_persona(custom: CustomPersona) -> Persona:
    """The contract row for a validated custom persona (deterministic ordering as for PersonaLens)."""
    affinities = [
        affinity
        for domain in sorted(custom.affinities, key=DOMAIN_ORDER.__getitem__)
        for affinity in merged_affinities(
            domain,
            (
                (name, [v.strip() for v in values if v.strip()])
                for name, values in custom.affinities[domain].items()
            ),
        )
    ]
    interests = custom.interests if custom.interests is not None else list(custom.affinities)
    interactions = [
        Interaction(domain=domain, summary=custom.interactions[domain].strip())
        for domain in sorted(custom.interactions, key=DOMAIN_ORDER.__getitem__)
        if custom.interactions[domain].strip()
    ]
    tasks = [
        PersonaTask(
            task_id=task.task_id,
            kind=task.kind
            or (TaskKind.SINGLE_DOMAIN if len(set(task.domains)) == 1 else TaskKind.MULTI_DOMAIN),
            description=task.description,
            user_intent=task.user_intent,
            goal=task.goal,
            domains=list(dict.fromkeys(task.domains)),
            affinity_types=list(
                dict.fromkeys(canonical_affinity_name(n) for n in task.affinity_types)
            ),
            situations=[
                Situation(name=name, value=value) for name, value in task.situations.items()
            ],
        )
        for task in custom.tasks
    ]
    return Persona(
        persona_id=make_id("persona", PersonaSource.CUSTOM.value, custom.user_id),
        source=PersonaSource.CUSTOM,
        source_user_id=custom.user_id,
        demographics=custom.demographics,
        interests=sorted(set(interests), key=DOMAIN_ORDER.__getitem__),
        affinities=affinities,
        interactions=interactions,
        tasks=tasks,
    )


def _content_errors(custom: CustomPersona, prefix: str, errors: ErrorCollector) -> bool:
    """Rules the schema cannot say: names that normalise to nothing, unique task ids. True when clean."""
    before = len(errors.errors)
    for domain, attributes in custom.affinities.items():
        for raw_name in attributes:
            if not canonical_affinity_name(raw_name):
                errors.add(
                    _field_path(prefix, ("affinities", domain.value, raw_name)),
                    "attribute name is empty",
                )
    seen: set[str] = set()
    for index, task in enumerate(custom.tasks):
        if task.task_id in seen:
            errors.add(
                _field_path(prefix, ("tasks", index, "task_id")),
                f"task id {task.task_id!r} is used twice",
            )
        seen.add(task.task_id)
    return len(errors.errors) == before


def _persona_or_errors(value: object, prefix: str, errors: ErrorCollector) -> Persona | None:
    """One entry of the file as a persona, or None with its errors reported (whatever goes wrong)."""
    try:
        check_json(value, path=prefix, depth=1 if prefix else 0)
    except JsonProblem as problem:
        errors.add(problem.field, problem.message)
        return None
    try:
        custom = CustomPersona.model_validate(value)
        if not _content_errors(custom, prefix, errors):
            return None
        return to_persona(custom)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            errors.add(_field_path(prefix, tuple(error["loc"])) or None, error["msg"])
        return None
    except Exception as exc:  # one bad persona must never take the good ones beside it down
        errors.add(prefix or None, f"could not be loaded: {type(exc).__name__}: {exc}")
        return None


def load_custom_personas(
    path: str | Path,
    selection: PersonaSelection | None = None,
    *,
    max_file_bytes: int = 5_000_000,
) -> IntakeResult:
    """Personas from a custom JSON file (see module docstring); bad entries are reported, good ones load."""
    path = Path(path)
    label = str(path)
    result = IntakeResult()
    try:
        size = path.stat().st_size
        if not path.is_file():
            result.errors.append(IntakeError(label, None, "not a regular file"))
            return result
        if size > max_file_bytes:
            result.errors.append(
                IntakeError(
                    label, None, f"file is {size} bytes, above the {max_file_bytes}-byte limit"
                )
            )
            return result
        with path.open("rb") as handle:
            raw = handle.read(max_file_bytes + 1)
    except FileNotFoundError:
        result.errors.append(IntakeError(label, None, "file is missing"))
        return result
    except OSError as exc:
        result.errors.append(IntakeError(label, None, f"cannot read file: {exc.strerror or exc}"))
        return result
    if len(raw) > max_file_bytes:
        result.errors.append(
            IntakeError(
                label, None, f"file is {len(raw)} bytes, above the {max_file_bytes}-byte limit"
            )
        )
        return result
    document, problem = parse_json(raw, check=False)  # limits per persona, below
    if problem is not None:
        result.errors.append(IntakeError(label, problem.field, problem.message))
        return result

    errors = ErrorCollector(label)
    if isinstance(document, dict):
        entries: list[tuple[str, object]] = [("", document)]
    elif isinstance(document, list):
        entries = [(f"[{index}]", item) for index, item in enumerate(document)]
    else:
        errors.add(None, f"expected a persona object or a list of them, got {type_name(document)}")
        result.errors.extend(errors.errors)
        return result

    personas: dict[str, Persona] = {}
    for prefix, entry in entries:
        persona = _persona_or_errors(entry, prefix, errors)
        if persona is None:
            continue
        if persona.source_user_id in personas:
            errors.add(
                _field_path(prefix, ("user_id",)),
                f"user id {persona.source_user_id!r} is used twice",
            )
            continue
        personas[persona.source_user_id] = persona

    selection = selection or PersonaSelection()
    if selection.user_ids is not None:
        for user_id in selection.user_ids:
            unsafe = unsafe_user_id(user_id)
            if unsafe:
                errors.add("user_ids", f"rejected: {unsafe}")
            elif user_id not in personas:
                errors.add(
                    None, f"unknown user id {user_id!r}: no persona with this user_id in the file"
                )
        chosen = [u for u in selection.user_ids if u in personas]
    elif selection.is_everything:
        chosen = list(personas)  # file order
    else:
        chosen, _ = selection.pick(list(personas))  # natural order of user ids, as for PersonaLens
    result.personas = [personas[u] for u in chosen]
    result.errors.extend(errors.errors)
    return result
