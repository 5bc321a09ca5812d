"""A careless model: the simulator's answers, written the way real models go wrong.

Each :class:`Fault` rewrites one kind of answer as real models tend to: a
news sentence that points ahead or announces itself, references that
echo the request's words, facts that add an inference, a conversation that
contradicts what the user said before, an assistant that answers in markdown
lists. Every fault has the gate that must catch it (:data:`GATES`); the
backend counts what it injected, so a run shows each gate's catch as n of n::

    python -m memoryquest.testing.careless --users user0

prints that table for every fault (one generation run per fault, offline).
It is a test double beside the simulator, never a production backend.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from memoryquest.contracts import RejectionReason, Stage
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.memory.extraction_contracts import ExtractionInputs
from memoryquest.stages.dialogues_contracts import DialogueInputs
from memoryquest.stages.ledger import NEGATION
from memoryquest.stages.queries_contracts import QueryGenerationInputs
from memoryquest.text import STOPWORDS, words


class Fault(StrEnum):
    FORESHADOW = "foreshadow"  # news sentences point ahead to when they will matter
    ANNOUNCE = "announce"  # news sentences announce themselves
    ECHO = "echo"  # a drafted reference repeats the request's words
    INFERENCE = "inference"  # an extracted fact adds what the user did not say
    CONTRADICTION = "contradiction"  # a conversation contradicts a fact the user said earlier
    MARKDOWN = "markdown"  # the assistant answers with a markdown list


@dataclass(frozen=True)
class Gate:
    """Where a fault must be caught: the stage that rejects it and the reason it gives."""

    stage: Stage
    reason: RejectionReason


GATES: dict[Fault, Gate] = {
    Fault.FORESHADOW: Gate(Stage.DIALOGUES, RejectionReason.FORESHADOW),
    Fault.ANNOUNCE: Gate(Stage.DIALOGUES, RejectionReason.MARKED),
    Fault.ECHO: Gate(Stage.QUERIES, RejectionReason.WORD_OVERLAP),
    Fault.INFERENCE: Gate(Stage.MEMORY, RejectionReason.UNSUPPORTED),
    Fault.CONTRADICTION: Gate(Stage.DIALOGUES, RejectionReason.CONTRADICTION),
    Fault.MARKDOWN: Gate(Stage.DIALOGUES, RejectionReason.MARKDOWN),
}

_LEDGER_LINE = re.compile(r"^\d{4}-\d{2}-\d{2}: (?P<said>.+?)(?: \(until [^)]*\))?$")


def _foreshadow(answer: dict[str, Any], variables: dict[str, Any]) -> int:
    return _rewrite_news_turns(
        answer, lambda t: t.rstrip() + " I'll keep that in mind for what's coming up."
    )


def _announce(answer: dict[str, Any], variables: dict[str, Any]) -> int:
    return _rewrite_news_turns(answer, lambda t: "By the way, " + t[:1].lower() + t[1:])


def _rewrite_news_turns(answer: dict[str, Any], rewrite: Callable[[str], str]) -> int:
    """Every user turn named as telling news rewritten: the model does not know which item
    is a reference, so it writes them all alike. Counts the answer once."""
    turns = answer.get("turns") or []
    named = {item.get("turn_index", -1) for item in answer.get("news_said") or []}
    user_turns = named & set(range(0, len(turns), 2))
    for index in user_turns:
        turns[index] = rewrite(turns[index])
    return 1 if user_turns else 0


def _echo(answer: dict[str, Any], variables: dict[str, Any]) -> int:
    echoed = 0
    for candidate in answer.get("candidates", []):
        request_words = [w for w in words(candidate["query"]) if w not in STOPWORDS][:4]
        if len(request_words) >= 3 and candidate["references"]:
            reference = candidate["references"][0]
            reference["text"] = reference["text"].rstrip(".") + ", for " + " ".join(request_words)
            echoed += 1
    return echoed


def _inference(answer: dict[str, Any], variables: dict[str, Any]) -> int:
    for fact in answer.get("facts", []):
        fact["info"] += ", which suggests they value comfort and reliability above everything"
    return 1 if answer.get("facts") else 0  # the answer is refused as a whole


def _contradiction(answer: dict[str, Any], variables: dict[str, Any]) -> int:
    """The user's first turn ends by taking back the latest fact of their ledger, in words of
    its own (a word-for-word repeat is a different rule's catch)."""
    facts = [
        m.group("said") for line in variables.get("ledger", []) if (m := _LEDGER_LINE.match(line))
    ]
    facts = [f for f in facts if not f.startswith("talked about: ")]
    if not facts or not answer.get("turns"):
        return 0
    fact = facts[-1].rstrip(".")
    if NEGATION.search(fact):  # said negated: taken back by saying it plainly
        fact = " ".join(NEGATION.sub("", fact).split())
        opener = "Actually, these days"
    else:
        opener = "Actually, it is not true any more that"
    first, *rest = fact.split()
    taken_back = " ".join([opener, first[:1].lower() + first[1:], "really", *rest]) + "."
    answer["turns"][0] += " " + taken_back
    return 1


def _markdown(answer: dict[str, Any], variables: dict[str, Any]) -> int:
    turns = answer.get("turns", [])
    if len(turns) < 2:
        return 0
    turns[1] += "\n\nHere are your options:\n- the first one\n- the second one"
    return 1


# Per fault: the template it applies to, and the rewrite (how many candidates it wrote into).
_TEMPLATES: dict[Fault, tuple[str, Callable[[dict[str, Any], dict[str, Any]], int]]] = {
    Fault.FORESHADOW: (DialogueInputs.template_id, _foreshadow),
    Fault.ANNOUNCE: (DialogueInputs.template_id, _announce),
    Fault.ECHO: (QueryGenerationInputs.template_id, _echo),
    Fault.INFERENCE: (ExtractionInputs.template_id, _inference),
    Fault.CONTRADICTION: (DialogueInputs.template_id, _contradiction),
    Fault.MARKDOWN: (DialogueInputs.template_id, _markdown),
}


class CarelessChatBackend(SimulatedChatBackend):
    """The simulator, with ``faults`` written into every answer they apply to."""

    def __init__(self, faults: Sequence[Fault], seed: int = 0) -> None:
        super().__init__(seed)
        self.faults = tuple(faults)
        self.injected: Counter[Fault] = Counter()  # candidates each fault was written into

    async def chat(self, call: ChatCall) -> ChatResult:
        result = await super().chat(call)
        template_id = call.request.template_id
        applying = [f for f in self.faults if _TEMPLATES[f][0] == template_id]
        if not applying or result.text is None:
            return result
        answer = json.loads(result.text)
        for fault in applying:
            self.injected[fault] += _TEMPLATES[fault][1](answer, call.request.variables)
        return replace(result, text=json.dumps(answer, ensure_ascii=False))


@dataclass(frozen=True)
class Catch:
    """One fault's row: candidates it was written into, and how many its gate rejected."""

    fault: Fault
    gate: Gate
    injected: int
    caught: int


async def catch(fault: Fault, users: Sequence[str], output: Path, seed: int = 0) -> Catch:
    """Generate ``users`` offline with ``fault`` in every answer it applies to, and count."""
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.llm.client import ModelClient
    from memoryquest.llm.factory import shared_local_embedder
    from memoryquest.pipeline import generate_dataset
    from memoryquest.settings import load_settings

    settings = load_settings(
        overrides={
            "output_dir": str(output),
            "seed": seed,
            "endpoint": {"backend": "simulated"},
            "pgr": {"methods": []},
        }
    )
    personas = load_personas(settings.persona_source, PersonaSelection(user_ids=list(users)))
    backend = CarelessChatBackend([fault], seed=seed)
    client = ModelClient(backend, shared_local_embedder())
    try:
        dataset = await generate_dataset(personas.personas, client, settings)
    finally:
        await client.aclose()
    gate = GATES[fault]
    caught = sum(1 for r in dataset.rejected if r.stage is gate.stage and r.reason is gate.reason)
    return Catch(fault, gate, backend.injected[fault], caught)


def table(catches: Sequence[Catch]) -> str:
    """The markdown table: fault, the gate (stage: reason), caught n of n."""
    lines = ["| fault | gate (stage: reason) | caught |", "|---|---|---|"]
    for c in catches:
        lines.append(
            f"| {c.fault.value} | {c.gate.stage.value}: `{c.gate.reason.value}` "
            f"| {c.caught} of {c.injected} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memoryquest.testing.careless",
        description="Write each fault into the simulator's answers and count what the gates catch.",
    )
    parser.add_argument("--users", default="user0", help="comma-separated PersonaLens user ids")
    parser.add_argument(
        "--faults", default=",".join(Fault), help="comma-separated faults (default: all)"
    )
    args = parser.parse_args(argv)
    users = [u for u in args.users.split(",") if u]
    try:
        faults = [Fault(f) for f in args.faults.split(",") if f]
    except ValueError as exc:
        parser.error(f"{exc}; known: {', '.join(Fault)}")
    catches = []
    with tempfile.TemporaryDirectory() as scratch:
        for fault in faults:
            catches.append(asyncio.run(catch(fault, users, Path(scratch) / fault.value)))
    print(table(catches))
    return 0 if all(c.caught == c.injected > 0 for c in catches) else 1


if __name__ == "__main__":
    sys.exit(main())
