"""One PersonaLens user's decoded files -> :class:`~memoryquest.contracts.Persona`.

Mapping rules (the same for every user, so the output is deterministic):

* ``persona_id = make_id("persona", "personalens", <user>)``;
* ``interests``: the domains marked 1, in :class:`Domain` order;
* ``affinities``: one :class:`Affinity` per (domain, attribute), domains in
  :class:`Domain` order, attributes in file order, a single string value becoming
  a one-element list; "Favourite ..." is spelt "Favorite ..." everywhere;
* ``tasks``: tasks.json (single_domain) then tasks_md.json (multi_domain), each by
  task number; task keys are matched ignoring case, spacing and underscores.

Every error is collected (each naming its file and field), so a user is reported whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memoryquest.contracts import (
    Affinity,
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
from memoryquest.intake.errors import ErrorCollector, IntakeError, type_name
from memoryquest.intake.normalise import (
    DOMAIN_ORDER,
    canonical_affinity_name,
    collapse_spaces,
    field_key,
    merged_affinities,
    natural_key,
    parse_domain,
    unknown_domain_message,
    unsafe_id,
)

PROFILE_SECTIONS = ("demographics", "interests", "affinities", "interactions")
DEMOGRAPHIC_FIELDS = tuple(Demographics.model_fields)

# canonical upstream key -> (PersonaTask field, accepted spellings after field_key())
TASK_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "task_id": ("task_id", ("task id", "taskid", "id")),
    "Task Description": ("description", ("task description", "description")),
    "User Intent": ("user_intent", ("user intent", "intent")),
    "Task Goal": ("goal", ("task goal", "goal")),
    "Relevant Domains": ("domains", ("relevant domains", "domains", "relevant domain")),
    "Relevant Affinity Types": (
        "affinity_types",
        ("relevant affinity types", "affinity types", "relevant affinity type"),
    ),
    "situations": ("situations", ("situations", "situation")),
}
OPTIONAL_TASK_FIELDS = {"situations"}


def _domain_keys(
    value: object, prefix: str, errors: ErrorCollector
) -> list[tuple[Domain, str, object]] | None:
    """(domain, original key, value) for each key of a per-domain object, in Domain order; None
    (reported) when ``value`` is not an object."""
    section = _object(value, prefix, errors)
    if section is None:
        return None
    seen: dict[Domain, str] = {}
    entries: list[tuple[Domain, str, object]] = []
    for key, item in section.items():
        domain = parse_domain(key)
        if domain is None:
            errors.add(f"{prefix}.{key}", unknown_domain_message(key))
            continue
        if domain in seen:
            errors.add(
                f"{prefix}.{key}",
                f"domain {domain.value!r} is given twice (also as {seen[domain]!r})",
            )
            continue
        seen[domain] = key
        entries.append((domain, key, item))
    entries.sort(key=lambda entry: DOMAIN_ORDER[entry[0]])
    return entries


MappedT = TypeVar("MappedT")


def _per_domain(
    value: object,
    section: str,
    errors: ErrorCollector,
    map_one: Callable[[Domain, str, object], Iterable[MappedT]],
) -> list[MappedT] | None:
    """A per-domain section (domain -> value) mapped domain by domain (``map_one(domain, key as
    written, value)``), in Domain order; None (reported) when it is not an object."""
    entries = _domain_keys(value, section, errors)
    if entries is None:
        return None
    return [mapped for domain, key, item in entries for mapped in map_one(domain, key, item)]


def _string_list(value: object, field_path: str, errors: ErrorCollector) -> list[str] | None:
    """A string or a list of strings, as a list of non-empty stripped strings."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        errors.add(field_path, f"expected a string or a list of strings, got {type_name(value)}")
        return None
    items: list[str] = []
    ok = True
    for index, item in enumerate(value):
        if not isinstance(item, str):
            errors.add(f"{field_path}[{index}]", f"expected a string, got {type_name(item)}")
            ok = False
        elif item.strip():
            items.append(item.strip())
    return items if ok else None


ModelT = TypeVar("ModelT", bound=BaseModel)


def _validated(
    model: type[ModelT], values: dict[str, Any], prefix: str | None, errors: ErrorCollector
) -> ModelT | None:
    """``model`` built from ``values``, or None after reporting each validation error at its field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            parts = [str(part) for part in error["loc"]]
            field = ".".join([prefix, *parts] if prefix else parts) or None
            errors.add(field, error["msg"])
        return None


def _object(
    value: object, field_path: str | None, errors: ErrorCollector
) -> dict[str, object] | None:
    if not isinstance(value, dict):
        errors.add(field_path, f"expected an object, got {type_name(value)}")
        return None
    return value


def map_demographics(value: object, user_id: str, errors: ErrorCollector) -> Demographics | None:
    section = _object(value, "demographics", errors)
    if section is None:
        return None
    values: dict[str, str | None] = {}
    written: dict[str, str] = {}
    for key, item in section.items():
        name = field_key(key).replace(" ", "_")
        path = f"demographics.{key}"
        if name in written:
            errors.add(path, f"conflicts with {written[name]!r} (same field)")
            continue
        written[name] = key
        if name == "user_id":
            if item != user_id:
                errors.add(path, f"{item!r} does not match the user id {user_id!r} of this profile")
            continue
        if name not in DEMOGRAPHIC_FIELDS:
            continue  # extra upstream attributes carry no contract field
        if item is None or isinstance(item, str):
            values[name] = collapse_spaces(item) if item is not None else None
        elif isinstance(item, int | float) and not isinstance(item, bool):
            values[name] = str(item)
        else:
            errors.add(path, f"expected a string, got {type_name(item)}")
    return _validated(Demographics, values, "demographics", errors)


def map_interests(value: object, errors: ErrorCollector) -> list[Domain] | None:
    def interest(domain: Domain, key: str, flag: object) -> Iterator[Domain]:
        if isinstance(flag, bool):
            flag = int(flag)
        if flag not in (0, 1):
            errors.add(f"interests.{key}", f"expected 0 or 1, got {flag!r}")
        elif flag == 1:
            yield domain

    return _per_domain(value, "interests", errors, interest)


def map_affinities(value: object, errors: ErrorCollector) -> list[Affinity] | None:
    def affinities(domain: Domain, key: str, attributes: object) -> list[Affinity]:
        attribute_map = _object(attributes, f"affinities.{key}", errors)
        if attribute_map is None:
            return []
        named: list[tuple[str, list[str]]] = []
        for raw_name, raw_values in attribute_map.items():
            path = f"affinities.{key}.{raw_name}"
            name = canonical_affinity_name(raw_name)
            if not name:
                errors.add(path, "attribute name is empty")
                continue
            values = _string_list(raw_values, path, errors)
            if values is not None:
                named.append((name, values))
        return merged_affinities(domain, named)

    return _per_domain(value, "affinities", errors, affinities)


def map_interactions(value: object, errors: ErrorCollector) -> list[Interaction] | None:
    def interaction(domain: Domain, key: str, summary: object) -> Iterator[Interaction]:
        if not isinstance(summary, str):
            errors.add(f"interactions.{key}", f"expected a string, got {type_name(summary)}")
        elif summary.strip():
            yield Interaction(domain=domain, summary=summary.strip())

    return _per_domain(value, "interactions", errors, interaction)


def _task_fields(
    task: dict[str, object], prefix: str, errors: ErrorCollector
) -> dict[str, tuple[str, object]]:
    """Canonical upstream key -> (key as written, value); reports missing and conflicting keys."""
    spelling = {
        alias: canonical for canonical, (_, aliases) in TASK_FIELDS.items() for alias in aliases
    }
    found: dict[str, tuple[str, object]] = {}
    for key, value in task.items():
        canonical = spelling.get(field_key(key))
        if canonical is None:
            continue  # unknown extra keys are not part of the contract
        if canonical in found:
            errors.add(f"{prefix}.{key}", f"conflicts with {found[canonical][0]!r} (same field)")
            continue
        found[canonical] = (key, value)
    for canonical in TASK_FIELDS:
        if canonical not in found and canonical not in OPTIONAL_TASK_FIELDS:
            errors.add(f"{prefix}.{canonical}", "missing field")
    return found


def map_task(
    task_key: str, value: object, kind: TaskKind, errors: ErrorCollector
) -> PersonaTask | None:
    task = _object(value, task_key, errors)
    if task is None:
        return None
    before = len(errors.errors)
    fields = _task_fields(task, task_key, errors)
    mapped: dict[str, object] = {"kind": kind}
    for canonical, (key, item) in fields.items():
        target = TASK_FIELDS[canonical][0]
        path = f"{task_key}.{key}"
        if target in ("task_id", "description", "user_intent", "goal"):
            if not isinstance(item, str):
                errors.add(path, f"expected a string, got {type_name(item)}")
            elif not item.strip():
                errors.add(path, "is empty")
            elif target == "task_id" and (problem := unsafe_id(item.strip(), "task id")):
                errors.add(path, problem)
            else:
                mapped[target] = item.strip()
        elif target == "domains":
            names = _string_list(item, path, errors)
            if names is None:
                continue
            if not names:
                errors.add(path, "names no domain")
                continue
            domains: list[Domain] = []
            for index, name in enumerate(names):
                domain = parse_domain(name)
                if domain is None:
                    errors.add(f"{path}[{index}]", unknown_domain_message(name))
                elif domain not in domains:
                    domains.append(domain)
            mapped["domains"] = domains
        elif target == "affinity_types":
            names = _string_list(item, path, errors)
            if names is not None:
                mapped["affinity_types"] = list(
                    dict.fromkeys(canonical_affinity_name(n) for n in names)
                )
        else:  # situations
            situations = map_situations(item, path, errors)
            if situations is not None:
                mapped["situations"] = situations
    if len(errors.errors) > before:
        return None
    return _validated(PersonaTask, mapped, task_key, errors)


def map_situations(value: object, path: str, errors: ErrorCollector) -> list[Situation] | None:
    if value is None:
        return []
    section = _object(value, path, errors)
    if section is None:
        return None
    situations: list[Situation] = []
    for name, item in section.items():
        if isinstance(item, int | float) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            errors.add(f"{path}.{name}", f"expected a string, got {type_name(item)}")
            return None
        situations.append(Situation(name=collapse_spaces(name), value=item.strip()))
    return situations


def map_tasks(value: object, kind: TaskKind, errors: ErrorCollector) -> list[PersonaTask] | None:
    section = _object(value, None, errors)
    if section is None:
        return None
    tasks: list[PersonaTask] = []
    for task_key in sorted(section, key=natural_key):
        task = map_task(task_key, section[task_key], kind, errors)
        if task is not None:
            tasks.append(task)
    return tasks


def map_personalens_user(
    user_id: str,
    profile: tuple[str, object],
    task_files: list[tuple[str, TaskKind, object]],
) -> tuple[Persona | None, list[IntakeError]]:
    """One PersonaLens user from its decoded files: ``(file label, JSON value)`` per file.

    Returns the persona, or None and every error found (each naming its file and field).
    """
    profile_file, profile_value = profile
    errors = ErrorCollector(profile_file)
    sections: dict[str, object] = {}
    if _object(profile_value, None, errors) is not None:
        assert isinstance(profile_value, dict)
        written: dict[str, str] = {}
        for key, value in profile_value.items():
            name = field_key(key)
            if name in written:
                errors.add(key, f"conflicts with {written[name]!r} (same field)")
                continue
            written[name] = key
            sections[name] = value
        for name in PROFILE_SECTIONS:
            if name not in sections:
                errors.add(name, "missing field")
    demographics = (
        map_demographics(sections["demographics"], user_id, errors)
        if "demographics" in sections
        else None
    )
    interests = map_interests(sections["interests"], errors) if "interests" in sections else None
    affinities = (
        map_affinities(sections["affinities"], errors) if "affinities" in sections else None
    )
    interactions = (
        map_interactions(sections["interactions"], errors) if "interactions" in sections else None
    )
    all_errors = list(errors.errors)

    tasks: list[PersonaTask] = []
    seen_task_ids: dict[str, str] = {}
    for task_file, kind, value in task_files:
        task_errors = ErrorCollector(task_file)
        for task in map_tasks(value, kind, task_errors) or []:
            if task.task_id in seen_task_ids:
                task_errors.add(
                    "task_id",
                    f"task id {task.task_id!r} is used twice (also in {seen_task_ids[task.task_id]})",
                )
                continue
            seen_task_ids[task.task_id] = task_file
            tasks.append(task)
        all_errors.extend(task_errors.errors)

    if (
        all_errors
        or demographics is None
        or interests is None
        or affinities is None
        or interactions is None
    ):
        return None, all_errors
    values = {
        "persona_id": make_id("persona", PersonaSource.PERSONALENS.value, user_id),
        "source": PersonaSource.PERSONALENS,
        "source_user_id": user_id,
        "demographics": demographics,
        "interests": interests,
        "affinities": affinities,
        "interactions": interactions,
        "tasks": tasks,
    }
    persona = _validated(Persona, values, None, errors)
    return persona, list(errors.errors)
