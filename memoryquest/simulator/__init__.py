"""The offline simulator: a deterministic, persona-grounded stand-in for an LLM.

Each prompt template has one answer function registered with
:func:`simulates`. It receives the request's structured variables (the
persona's real PersonaLens content, the references, the conversation so far)
and a seeded random generator, and returns the answer as the template's
response model would carry it. The simulated chat backend serialises that to
JSON text so the client parses it exactly as it parses a real model's output.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pkgutil
import random
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

Answer = Callable[[dict[str, Any], random.Random], BaseModel | dict[str, Any] | list[Any]]

_ANSWERS: dict[str, Answer] = {}
_loaded = False


def simulates(template_id: str) -> Callable[[Answer], Answer]:
    """Register the simulated answer for one prompt template."""

    def register(func: Answer) -> Answer:
        if template_id in _ANSWERS and _ANSWERS[template_id] is not func:
            raise RuntimeError(f"template {template_id!r} already has a simulated answer")
        _ANSWERS[template_id] = func
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
    result = answer(variables, seeded_rng(template_id, variables, seed))
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return json.dumps(result, ensure_ascii=False, default=str)


def simulated_templates() -> list[str]:
    _load_answer_modules()
    return sorted(_ANSWERS)
