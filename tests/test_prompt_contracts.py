"""Every template's ``$variables`` against its typed inputs model, and its simulator against both.

A ``$new_variable`` added to a template without a field in its inputs model,
a field no template shows (unless the model says why in ``not_in_prompt``),
or a simulator answer that takes a dict or another template's model fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from memoryquest.llm.prompts import PromptTemplate, all_templates, placeholder_names
from memoryquest.prompt_inputs import inputs_models
from memoryquest.simulator import simulator_inputs

TEMPLATES = all_templates()

try:
    from tests.conftest import modules_loaded_by
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from conftest import modules_loaded_by


def placeholders(template: PromptTemplate) -> set[str]:
    """The variables both sections show (``$$`` is a literal dollar; ``${a.b}`` shows part of ``a``)."""
    return placeholder_names(template.system) | placeholder_names(template.user)


def test_every_template_has_exactly_one_inputs_model_and_no_model_lacks_a_template() -> None:
    models = inputs_models()
    assert sorted(models) == sorted(t.template_id for t in TEMPLATES)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.template_id)
def test_every_variable_is_a_field_and_every_field_is_shown_or_explained(
    template: PromptTemplate,
) -> None:
    model = inputs_models()[template.template_id]
    used = placeholders(template)
    fields = set(model.model_fields)
    assert used - fields == set(), f"{model.__qualname__} lacks fields for {sorted(used - fields)}"
    unexplained = fields - used - set(model.not_in_prompt)
    assert unexplained == set(), (
        f"{template.template_id} never shows {sorted(unexplained)}: "
        f"use them or say why in {model.__qualname__}.not_in_prompt"
    )
    stale = set(model.not_in_prompt) - fields
    assert stale == set(), f"{model.__qualname__}.not_in_prompt names no field: {sorted(stale)}"
    assert all(reason.strip() for reason in model.not_in_prompt.values())
    unknown = set(model.unread_offline) - fields
    assert unknown == set(), (
        f"{model.__qualname__}.unread_offline names no field: {sorted(unknown)}"
    )
    assert all(reason.strip() for reason in model.unread_offline.values())


def test_a_field_the_simulator_does_not_read_leaves_its_answer_as_it_was() -> None:
    """The dialogue's ledger is context for real models: the simulated session is the same
    with or without it, so adding it did not reshuffle the offline data."""
    from memoryquest.simulator import simulate
    from memoryquest.stages.dialogues_contracts import DialogueInputs

    try:
        from tests.generation_fixture import generated
    except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
        from generation_fixture import generated
    from memoryquest.stages.dialogues import dialogue_inputs

    run = generated()
    query = run.dataset.queries[0]
    timeline = next(t for t in run.dataset.timelines if t.query_id == query.query_id)
    persona = next(p for p in run.personas if p.persona_id == query.persona_id)
    inputs = dialogue_inputs(persona, query, timeline.events[0], run.settings.generation)
    variables = inputs.variables()
    told = {**variables, "ledger": ["2024-01-05: Gave up red meat (until 2024-09-01)"]}
    assert "ledger" in DialogueInputs.unread_offline
    template = DialogueInputs.template_id
    assert simulate(template, told, seed=3) == simulate(template, variables, seed=3)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.template_id)
def test_the_simulator_takes_the_templates_inputs_model(template: PromptTemplate) -> None:
    model = inputs_models()[template.template_id]
    assert simulator_inputs(template.template_id) is model
    assert issubclass(model.output_model, BaseModel)


def test_a_new_variable_without_a_field_is_caught() -> None:
    template = next(t for t in TEMPLATES if t.template_id == "timeline_synthesis")
    grown = PromptTemplate(
        template_id=template.template_id,
        version=template.version,
        purpose=template.purpose,
        system=template.system,
        user=template.user + "\nAlso: $new_variable and ${braced_one}, but not $$literal.\n",
        sha256="",
    )
    model = inputs_models()[template.template_id]
    missing = placeholders(grown) - set(model.model_fields)
    assert missing == {"new_variable", "braced_one"}


PACKAGE = Path(__file__).resolve().parent.parent / "memoryquest"


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.template_id)
def test_a_template_id_is_written_in_one_python_place_its_inputs_model(
    template: PromptTemplate,
) -> None:
    """Stages build requests from the inputs model and the simulator registers against it, so
    the id is spelled once: where the model names its template."""
    literal = f'"{template.template_id}"'
    places = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if literal in path.read_text(encoding="utf-8")
    )
    model = inputs_models()[template.template_id]
    assert places == [model.__module__.removeprefix("memoryquest.").replace(".", "/") + ".py"]
    # Empty inputs of each field's shape: an answer model narrowed by its inputs reads them.
    empty = {list: [], dict: {}, int: 1, str: ""}
    bare = {
        name: empty.get(getattr(field.annotation, "__origin__", field.annotation))
        for name, field in model.model_fields.items()
    }
    request = model.model_construct(**bare).request(seed=3)
    assert request.template_id == model.template_id
    # The template's answer model, or the same narrowed by the inputs (what its schema states).
    assert issubclass(request.response_model, model.output_model)
    assert (request.stage, request.temperature) == (model.stage, model.temperature)


def test_contracts_modules_load_no_client_runner_or_stage() -> None:
    """The simulator and the tests read contracts alone: importing every one of them, in a fresh
    interpreter, loads neither the client layer's client nor a stage or the PGR runner."""
    loaded = modules_loaded_by(
        "from memoryquest.prompt_inputs import inputs_models\ninputs_models()"
    )
    for heavy in ("memoryquest.llm.client", "memoryquest.pgr.runner", "memoryquest.stages.queries"):
        assert heavy not in loaded, sorted(loaded)
    assert "memoryquest.stages.queries_contracts" in loaded


JUDGE_VERDICTS = {
    "reference_relevance": ("rationale", "relevant"),
    "judge_references": ("reason", "memories"),
    "judge_pairwise": ("reasoning", "choice"),
    "session_review": ("reason", "kind"),
}


@pytest.mark.parametrize("template_id", sorted(JUDGE_VERDICTS))
def test_every_judge_gives_its_reasons_before_its_verdict(template_id: str) -> None:
    """A model writes in schema order: a verdict written first is rationalised, not reasoned."""
    reason, verdict = JUDGE_VERDICTS[template_id]
    output = inputs_models()[template_id].output_model
    schema = output.model_json_schema()
    properties = next(
        definition["properties"]
        for definition in [schema, *schema.get("$defs", {}).values()]
        if reason in definition.get("properties", {})
    )
    names = list(properties)
    assert names.index(reason) < names.index(verdict), names


def test_the_timeline_contract_names_no_reference_slot() -> None:
    """Code places the references: neither the slots the model is given nor the events it
    answers have a field that could say which slot carries one."""
    from memoryquest.stages.timelines_contracts import EventDraft, TimelineInputs, TimelineSlot

    assert set(TimelineSlot.__annotations__) == {"slot", "date", "domain", "news"}
    assert set(EventDraft.model_fields) == {"slot", "description", "news"}
    template = TimelineInputs.template()
    shown = placeholders(template)
    assert "references" not in TimelineInputs.model_fields and "references" not in shown
    assert "own_references" in TimelineInputs.not_in_prompt and "own_references" not in shown
