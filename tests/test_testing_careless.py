"""The careless model: faults worded its own way, every planted item traced to its fate."""

from __future__ import annotations

import ast
import asyncio
import functools
import os
import re
import string
from collections.abc import Awaitable, Callable
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TypeVar

import pytest

from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.simulated import SimulatedChatBackend
from memoryquest.testing import careless
from memoryquest.testing.careless.backend import CarelessChatBackend
from memoryquest.testing.careless.faults import (
    CORPUS_FILE,
    PLACEHOLDERS,
    Fault,
    Injection,
    load_corpus,
    normalize,
)
from memoryquest.testing.careless.runs import catch, generate_offline, main, table
from memoryquest.testing.careless.scoring import CATCH_TARGET, Catch, score

try:
    from tests.conftest import SETTINGS_ENV_PREFIXES
except ImportError:  # tests/ on sys.path rather than the repository root
    from conftest import SETTINGS_ENV_PREFIXES  # type: ignore[no-redef]

T = TypeVar("T")
USERS = ["user0"]


def _offline(run: Callable[[], Awaitable[T]]) -> T:
    """Run a generation with no MEMORYQUEST_/OPENAI_ settings from the caller's shell."""
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.startswith(SETTINGS_ENV_PREFIXES):
                env.delenv(name)
        return asyncio.run(run())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Fault], Catch]:
    """One offline generation of ``USERS`` per fault, run when a test first asks for it."""

    @functools.cache
    def run(fault: Fault) -> Catch:
        output = tmp_path_factory.mktemp(fault.value)
        return _offline(lambda: catch(fault, USERS, output))

    return run


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> GeneratedDataset:
    """The same generation with no fault planted."""
    output = tmp_path_factory.mktemp("clean")
    return _offline(lambda: generate_offline(SimulatedChatBackend(), USERS, output))


# --------------------------------------------------------------------------- the corpus


def _shape(template: str) -> str:
    """A wording with case, punctuation, spacing and placeholder names flattened."""
    text = re.sub(r"\{[a-z_]+\}", " ", template).casefold()
    return " ".join(text.translate(str.maketrans("", "", string.punctuation)).split())


@pytest.mark.parametrize("fault", list(Fault))
def test_each_fault_has_at_least_30_wordings_all_different(fault: Fault) -> None:
    wordings = load_corpus()[fault]
    assert len(wordings) >= 30
    shapes = [_shape(w.template) for w in wordings]
    assert len(set(shapes)) == len(shapes), "two wordings differ only in case or punctuation"
    fragments = [w.fragment(echo="x", query_bare="x", fact="x", changed="x") for w in wordings]
    assert len(set(fragments)) == len(fragments), "two wordings plant the same words"


def test_wording_ids_are_unique_and_name_their_fault() -> None:
    corpus = load_corpus()
    ids = [w.id for wordings in corpus.values() for w in wordings]
    assert len(set(ids)) == len(ids)
    for fault, wordings in corpus.items():
        assert all(w.id.startswith(f"{fault.value}-") for w in wordings)


@pytest.mark.parametrize("fault", list(Fault))
def test_each_wording_fills_only_its_faults_placeholders(fault: Fault) -> None:
    for wording in load_corpus()[fault]:
        assert wording.fields, f"{wording.id} plants nothing it was given"
        assert wording.fields <= PLACEHOLDERS[fault], wording.id
        values = dict.fromkeys(PLACEHOLDERS[fault], "<x>")
        assert "{" not in wording.fill(**values), wording.id
        own_words = wording.fragment(**values)
        assert len(own_words) >= 3 and own_words != "<x>", f"{wording.id} adds nothing of its own"


def test_the_corpus_ships_inside_the_package() -> None:
    shipped = resources.files("memoryquest.testing") / "data" / "careless_faults.json"
    assert shipped.is_file()
    assert Path(str(shipped)).resolve() == CORPUS_FILE.resolve()


def test_the_double_reads_none_of_the_gates() -> None:
    """Its faults may not be built from the checks they test: no module of the double imports
    the gates' modules."""
    modules = sorted(Path(careless.__file__).parent.glob("*.py"))
    assert len(modules) > 1, "the double's modules are read, not only its package's __init__"
    trees = [ast.parse(module.read_text(encoding="utf-8")) for module in modules]
    imported = {
        node.module
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    gates = ("memoryquest.text", "memoryquest.audit", "memoryquest.generation.ledger")
    gate_modules = {"memoryquest.stages.dialogues", "memoryquest.stages.queries"}
    gate_modules |= {"memoryquest.memory.extraction", "memoryquest.memory.consolidation"}
    assert not {m for m in imported if m.startswith(gates) or m in gate_modules}


# --------------------------------------------------------------------------- planting and tracing


@pytest.mark.parametrize("fault", list(Fault))
def test_every_planted_item_is_recorded_with_its_wording_and_place(
    fault: Fault, runs: Callable[[Fault], Catch]
) -> None:
    result = runs(fault)
    assert result.injected > 0, f"{fault} was never planted"
    wordings = {w.id for w in load_corpus()[fault]}
    ids = [i.injection_id for i in result.injections]
    assert len(set(ids)) == len(ids)
    for injection in result.injections:
        assert injection.fault is fault and injection.wording_id in wordings
        assert injection.location and all(
            v not in (None, "", []) for v in injection.location.values()
        )
        assert injection.fragment and injection.fragment in normalize(injection.planted)
        assert injection.caught is not None
    assert {i.wording_id for i in result.injections} == wordings, "some wordings were never used"


@pytest.mark.parametrize("fault", list(Fault))
def test_the_double_writes_answers_the_pipeline_can_read(
    fault: Fault, runs: Callable[[Fault], Catch]
) -> None:
    """A fault that broke the answer's shape would be 'caught' by the schema, not by a gate."""
    assert not any(r.reason.value == "schema" for r in runs(fault).dataset.rejected)


def test_an_item_counts_as_caught_only_when_its_words_left_its_session(
    clean: GeneratedDataset,
) -> None:
    events = {e.event_id: e for t in clean.timelines for e in t.events}
    session = clean.sessions[0]
    event = events[session.event_id]
    place = {
        "date": event.date.isoformat(),
        "domain": event.domain.value,
        "description": event.description,
        "turn_index": 1,
    }
    said = normalize(session.turns[1].content)[:60]
    present = Injection("probe", Fault.MARKDOWN, "markdown-01", place, said, said)
    absent = replace(present, fragment="a sentence no turn of this session says")
    elsewhere = replace(present, location={**place, "date": "1999-01-01"})
    score([present, absent, elsewhere], clean)
    assert (present.caught, absent.caught, elsewhere.caught) == (False, True, True)


def test_a_kept_fact_or_reference_is_found_where_it_was_planted(clean: GeneratedDataset) -> None:
    reference = clean.queries[0].references[0].text
    fact = clean.facts[0]
    echo = Injection("e", Fault.ECHO, "echo-01", {"query": "q"}, reference, reference[-40:])
    inference = Injection(
        "i",
        Fault.INFERENCE,
        "inference-01",
        {"session_ids": fact.session_ids},
        fact.info,
        normalize(fact.info)[-30:],
    )
    elsewhere = replace(inference, location={"session_ids": ["s_not_a_session"]})
    score([echo, inference, elsewhere], clean)
    assert (echo.caught, inference.caught, elsewhere.caught) == (False, False, True)


def test_caught_items_name_the_rejections_that_quote_them(runs: Callable[[Fault], Catch]) -> None:
    result = runs(Fault.MARKDOWN)
    quoted = [i for i in result.injections if i.caught and i.caught_by]
    assert quoted
    gates = {f"{r.stage.value}: {r.reason.value}" for r in result.dataset.rejected}
    for injection in quoted:
        assert {g.removesuffix(" (with its query)") for g in injection.caught_by} <= gates
    by = result.by_gate()
    assert sum(by.values()) >= result.caught
    row = table([result])
    assert row.splitlines()[2].startswith(f"| markdown | {result.caught} of {result.injected} ")


# --------------------------------------------------------------------------- the target


@pytest.mark.parametrize("fault", list(Fault))
def test_the_gates_keep_out_95_percent_of_each_fault(
    fault: Fault, runs: Callable[[Fault], Catch]
) -> None:
    result = runs(fault)
    assert result.injected > 0
    assert result.share >= CATCH_TARGET, (
        f"{fault}: {result.caught} of {result.injected} caught; through: "
        f"{dict(result.missed_wordings().most_common(5))}"
    )


def test_an_unknown_fault_is_refused_with_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--faults", "typos"])
    assert exit.value.code == 2
    assert "foreshadow" in capsys.readouterr().err


def test_at_a_lower_rate_the_fault_goes_into_that_part_of_the_answers(tmp_path: Path) -> None:
    """Below 1, queries survive the gates and their data can be audited for what the
    rejections left behind."""
    backend = CarelessChatBackend(Fault.MARKDOWN, rate=0.3)
    dataset = _offline(lambda: generate_offline(backend, USERS, tmp_path))
    planted = len(backend.injections)
    assert backend.answers > 20 and 0.15 <= planted / backend.answers <= 0.45
    assert dataset.queries, "at 0.3 some queries are kept"
    with pytest.raises(ValueError, match="rate"):
        CarelessChatBackend(Fault.MARKDOWN, rate=0)


def test_a_rate_outside_0_to_1_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--rate", "1.5"])
    assert exit.value.code == 2
    assert "--rate must be in (0, 1]" in capsys.readouterr().err
