"""Typed prompt contracts: what a template is given, and what it answers.

Every template in ``prompts/`` has one :class:`PromptInputs` subclass that
names it (``template_id``), lists its ``$variables`` as fields and names its
answer's model (``output_model``). The class lives in a ``*_contracts``
module beside the module that asks for the template (for example
``stages/timelines_contracts.py`` beside ``stages/timelines.py``), together
with the output model, so that the stage, the offline simulator and the tests
share one definition instead of four copies of a dict.

The inputs model is the template's one object: its id, its answer's model,
the stage it is billed to and its temperature, with the file's version and
output allowance a :meth:`PromptInputs.template` away; stages build requests
with :meth:`PromptInputs.request` and the simulator registers against it.
Contracts modules import only pydantic, :mod:`memoryquest.contracts` and the
light request and template modules of the client layer: the simulator imports
them without pulling in a stage, the LLM client or their cache fingerprints.

A stage builds its request's variables with :meth:`PromptInputs.variables`,
which is exactly the dict it used to write by hand (same keys, same order,
same JSON values), so rendered prompts, cache keys and the simulator's
seeded answers do not change. Row types inside a contract are ``TypedDict``
so that the simulator still reads plain dicts.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, WithJsonSchema, create_model
from pydantic.fields import FieldInfo

from memoryquest.contracts import Domain, Stage
from memoryquest.llm.prompts import PromptTemplate, load_template
from memoryquest.llm.request import LLMRequest

# Constraints an answer's schema states for servers that enforce it (a strict JSON schema, a
# llama.cpp grammar), without pydantic enforcing them: one malformed item is still refused alone,
# by its stage's own check, rather than the whole answer. A date is a ``pattern``: every
# grammar converter takes one (llama.cpp's, vLLM's, OpenAI's strict mode), not all a ``format``.
ISO_DATE_PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
ISO_DATE: dict[str, Any] = {"pattern": ISO_DATE_PATTERN}
ONE_OF_THE_DOMAINS: dict[str, Any] = {"enum": [domain.value for domain in Domain]}


def items_between(low: int, high: int) -> dict[str, Any]:
    """A list's length bounds, as its schema states them."""
    return {"minItems": low, "maxItems": high}


def one_of(values: Iterable[Any]) -> dict[str, Any]:
    """The values a field may take (labels, indices), as its schema states them."""
    return {"enum": list(values)}


Answer = TypeVar("Answer", bound=BaseModel)


@dataclass(frozen=True)
class Says:
    """What one field's schema states beyond its type, for :func:`stated`.

    ``keywords`` (JSON text, so the statement is hashable) are merged into the
    field's schema; ``item_model`` replaces a list field's item model (itself a
    :func:`stated` model); ``whole`` replaces the field's schema by ``keywords``
    (an enum field narrowed to some of its members). Validation never changes.
    """

    keywords: str = "{}"
    item_model: type[BaseModel] | None = None
    whole: bool = False


def says(
    *, item_model: type[BaseModel] | None = None, whole: bool = False, **keywords: Any
) -> Says:
    return Says(json.dumps(keywords, sort_keys=True), item_model, whole)


def stated(model: type[Answer], /, **fields: Says) -> type[Answer]:
    """``model`` as one request's schema states it: a subclass whose schema says more (counts,
    index ranges, labels the inputs bound) and whose validation is the model's own.

    Built once per statement, so its schema, fingerprint and grammar are too.
    """
    return _stated(model, tuple(sorted(fields.items())))


@cache
def _stated(model: type[Answer], fields: tuple[tuple[str, Says], ...]) -> type[Answer]:
    definitions: dict[str, Any] = {}
    for name, said in fields:
        info = model.model_fields[name]
        keywords = json.loads(said.keywords)
        annotation: Any = info.annotation if said.item_model is None else list[said.item_model]  # type: ignore[name-defined]
        if said.whole:
            definitions[name] = (Annotated[annotation, WithJsonSchema(keywords)], info)
            continue
        extra = info.json_schema_extra
        if callable(extra):
            raise TypeError(f"{model.__name__}.{name} states its schema with a function")
        merged = FieldInfo.merge_field_infos(info, json_schema_extra={**(extra or {}), **keywords})
        definitions[name] = (annotation, merged)
    return create_model(model.__name__, __base__=model, __module__=model.__module__, **definitions)


ROW = ConfigDict(extra="ignore")
"""Config of the ``TypedDict`` rows inside a contract: a key a row's type lacks is dropped
(a stage that needs it in the prompt must add it to the row type)."""


class PromptInputs(BaseModel):
    """Base of every template's inputs model.

    ``not_in_prompt`` maps a field the template does not show to why it is
    sent anyway (for example the persona id that groups the provider's prompt
    cache, or material only the offline simulator reads). ``unread_offline``
    maps a field the offline simulator's answer does not read to why: its seeded
    draw leaves such a field out, so context added for real models does not
    reshuffle the simulated data.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    template_id: ClassVar[str]
    output_model: ClassVar[type[BaseModel]]
    # What the usage ledger bills its requests to.
    stage: ClassVar[Stage]
    temperature: ClassVar[float] = 0.7
    # A judge's verdict grades what the chat model wrote: endpoint.judge_model answers it.
    judge: ClassVar[bool] = False
    not_in_prompt: ClassVar[dict[str, str]] = {}
    unread_offline: ClassVar[dict[str, str]] = {}

    def answer_model(self) -> type[BaseModel]:
        """The answer's model as this request's schema states it: ``output_model``, narrowed
        (:func:`stated`) where the inputs bound the answer (how many items, which indices or
        labels), so a server that enforces the schema cannot write what the stage would refuse."""
        return self.output_model

    def variables(self) -> dict[str, Any]:
        """The request's ``variables``: JSON-ready, in field order."""
        return self.model_dump(mode="json")

    @classmethod
    def template(cls, prompts_dir: Path | None = None) -> PromptTemplate:
        """The template file: its version, sections and output allowance (``max_output_tokens``)."""
        return load_template(cls.template_id, prompts_dir)

    def request(
        self,
        *,
        seed: int = 0,
        max_output_tokens: int | None = None,
        cache_scope: str | None = None,
        temperature: float | None = None,
    ) -> LLMRequest[Any]:
        """The request for these inputs, with the template's defaults unless told otherwise."""
        return LLMRequest(
            template_id=self.template_id,
            variables=self.variables(),
            response_model=self.answer_model(),
            stage=self.stage,
            temperature=self.temperature if temperature is None else temperature,
            max_output_tokens=max_output_tokens,
            seed=seed,
            cache_scope=cache_scope,
            judge=self.judge,
        )


class JudgeInputs(PromptInputs):
    """Base of the judges' inputs: each grades what was written for a request made on a day.

    The judge model answers them (``judge``), at temperature 0: a verdict is a
    measurement, and should not change from one run to the next.
    """

    judge: ClassVar[bool] = True
    temperature: ClassVar[float] = 0.0

    query: str
    query_date: str


def _contract_modules() -> list[str]:
    """Dotted names of the ``*_contracts`` modules, found without importing other modules."""
    root = Path(__file__).parent
    return sorted(
        "memoryquest." + ".".join(path.relative_to(root).with_suffix("").parts)
        for path in root.rglob("*_contracts.py")
    )


@cache
def inputs_models() -> dict[str, type[PromptInputs]]:
    """Every template's inputs model, by template id (imports every ``*_contracts`` module)."""
    for name in _contract_modules():
        importlib.import_module(name)
    found: dict[str, type[PromptInputs]] = {}
    pending: list[type[PromptInputs]] = list(PromptInputs.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        template_id = model.__dict__.get("template_id")
        if template_id is None:
            continue  # a shared base, e.g. the PGR plan inputs
        if template_id in found and found[template_id] is not model:
            raise RuntimeError(
                f"template {template_id!r} has two inputs models: "
                f"{found[template_id].__qualname__} and {model.__qualname__}"
            )
        found[template_id] = model
    return found
