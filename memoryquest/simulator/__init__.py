"""The offline simulator: a deterministic, persona-grounded stand-in for an LLM.

Each prompt template has one answer function registered with :func:`simulates`. It
receives the template's inputs model, validated here from the request's variables, and a
seeded random generator, and returns what the template's output model carries (checked
here), serialised to JSON so the client parses it as a real model's output. An answer whose
first parameter is a plain dict (a test's template) receives the variables as they are.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
import random
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from memoryquest.prompt_inputs import PromptInputs

Answer = Callable[[Any, random.Random], BaseModel | dict[str, Any] | list[Any]]

_ANSWERS: dict[str, Answer] = {}
_INPUTS: dict[str, type[PromptInputs] | None] = {}
_loaded = False


def _inputs_model(func: Answer) -> type[PromptInputs] | None:
    """The inputs model an answer function takes (its first parameter's type), if any."""
    try:
        hints = typing.get_type_hints(func)
    except NameError:  # an annotation its module cannot resolve: not one of our models
        return None
    hints.pop("return", None)
    first = next(iter(hints.values()), None)
    if isinstance(first, type) and issubclass(first, PromptInputs):
        return first
    return None


def simulates(template: type[PromptInputs] | str) -> Callable[[Answer], Answer]:
    """Register the simulated answer for one prompt template: its inputs model (the template's
    one object), or a bare template id for an answer that takes a plain dict (test templates)."""
    template_id = template if isinstance(template, str) else template.template_id

    def register(func: Answer) -> Answer:
        if template_id in _ANSWERS and _ANSWERS[template_id] is not func:
            raise RuntimeError(f"template {template_id!r} already has a simulated answer")
        model = _inputs_model(func)
        if model is not None and model.template_id != template_id:
            raise RuntimeError(
                f"{func.__qualname__} answers {template_id!r} but takes "
                f"{model.__qualname__}, the inputs of {model.template_id!r}"
            )
        _ANSWERS[template_id] = func
        _INPUTS[template_id] = model
        return func

    return register


def _load_answer_modules() -> None:
    global _loaded
    if _loaded:
        return
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    _loaded = True


def seeded_rng(template_id: str, variables: dict[str, Any], seed: int) -> random.Random:
    """Same template, variables and seed: same answer, on any machine."""
    material = json.dumps([template_id, variables, seed], sort_keys=True, default=str)
    return random.Random(int(hashlib.sha256(material.encode()).hexdigest()[:16], 16))


def simulate(template_id: str, variables: dict[str, Any], seed: int = 0) -> str:
    """The simulated model's reply as JSON text."""
    _load_answer_modules()
    try:
        answer = _ANSWERS[template_id]
    except KeyError:
        raise KeyError(f"the simulator has no answer for template {template_id!r}") from None
    model = _INPUTS[template_id]
    inputs = model.model_validate(variables) if model is not None else variables
    unread = model.unread_offline if model is not None else {}
    drawn_from = {k: v for k, v in variables.items() if k not in unread}
    result = answer(inputs, seeded_rng(template_id, drawn_from, seed))
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    if model is not None:
        # The answer must be the template's output model; it is sent as the function wrote it.
        model.output_model.model_validate(result)
    return json.dumps(result, ensure_ascii=False, default=str)


def simulator_inputs(template_id: str) -> type[PromptInputs] | None:
    """The inputs model the simulator's answer for ``template_id`` takes (None: a plain dict)."""
    _load_answer_modules()
    if template_id not in _INPUTS:
        raise KeyError(f"the simulator has no answer for template {template_id!r}")
    return _INPUTS[template_id]
