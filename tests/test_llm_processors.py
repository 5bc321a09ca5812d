"""Online and Batch API processors are siblings over one ChatExchange."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from memoryquest.llm.accounting import UsageLedger
from memoryquest.llm.client import LLMOutputError
from memoryquest.llm.exchange import ChatExchange
from memoryquest.llm.processors import OnlineProcessor
from memoryquest.llm.request import LLMRequest
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.simulator import simulates

TEMPLATE_ID = "test_llm_processors_greeting"
TEMPLATE = f"""---
id: {TEMPLATE_ID}
version: 1
purpose: greet someone by name (test-only template)
---
## system
You greet people.
## user
Greet $name.
"""

try:
    from tests.conftest import modules_loaded_by
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from conftest import modules_loaded_by


class Greeting(BaseModel):
    text: str


class Unanswerable(BaseModel):
    missing_field: int


@simulates(TEMPLATE_ID)
def _greet(variables: dict[str, Any], rng: random.Random) -> Greeting:
    return Greeting(text=f"Hello, {variables['name']}")


def greeting(name: str, model: type[BaseModel] = Greeting) -> LLMRequest[Any]:
    return LLMRequest(TEMPLATE_ID, {"name": name}, model, stage="dialogues")


def test_neither_processor_module_loads_the_client_or_the_other() -> None:
    loaded = modules_loaded_by("import memoryquest.llm.batch, memoryquest.llm.processors")
    assert "memoryquest.llm.client" not in loaded, sorted(loaded)
    for module, sibling in (("batch", "processors"), ("processors", "batch")):
        source = Path(f"memoryquest/llm/{module}.py").read_text(encoding="utf-8")
        assert f"from memoryquest.llm.{sibling} import" not in source


async def test_the_online_processor_answers_through_the_exchange_alone(tmp_path: Path) -> None:
    """No ModelClient: the exchange gives the processor its prompts, judging and ledger."""
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / f"{TEMPLATE_ID}.md").write_text(TEMPLATE, encoding="utf-8")
    ledger = UsageLedger()
    exchange = ChatExchange(SimulatedChatBackend(seed=1), ledger=ledger, prompts_dir=prompts)
    online = OnlineProcessor(exchange)
    answers = await online.complete_all([greeting("Ada"), greeting("Lin")])
    assert [a.text for a in answers] == ["Hello, Ada", "Hello, Lin"]
    (row,) = ledger.rows()
    assert row.stage == "dialogues" and row.requests == 2
    mixed = [greeting("Ada"), greeting("Lin", Unanswerable)]
    results = await online.complete_all(mixed, return_exceptions=True)
    assert results[0].text == "Hello, Ada" and isinstance(results[1], LLMOutputError)
    with pytest.raises(LLMOutputError, match="Unanswerable"):
        await online.complete_all(mixed)
