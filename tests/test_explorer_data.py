"""The explorer's data files and the ``memoryquest explore`` command (no browser needed).

The explorer is a folder of static files: ``data/index.js`` lists every persona
with its queries, and ``data/<persona_id>.js`` holds one persona's rows. Both
are one JavaScript call with a JSON argument; these tests read that JSON back.
"""

from __future__ import annotations

import inspect
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from memoryquest.cli.main import main
from memoryquest.contracts import ReferenceSpan, RetrievalMethod
from memoryquest.dataset import DATASET_TABLES, GeneratedDataset
from memoryquest.publish import load_published, publish_dataset
from memoryquest.publish.explorer import EXPLORER_DIR, ExplorerError, write_explorer
from memoryquest.settings import Settings

try:
    from tests.publish_fixture import build_publish_fixture
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from publish_fixture import build_publish_fixture

HOSTILE = '</script><img src=x onerror="window.__xss=1"><i data-xss>&amp; "quoted"</i>'
EMOJI_LEAD = "🙂👍🏽 Quick one."
PLAIN_LEAD = "Quick one."
TAIL = "Anyway, what would you suggest?"
AUDIT = {
    "passed": False,
    "failures": ["classifier_auc_facts: facts AUC 0.940 (> 0.65)"],
    "checks": [
        {
            "name": "exclusive_ngram",
            "value": 0.05,
            "threshold": 0.1,
            "fails_if": ">=",
            "passed": True,
            "detail": "'to plan a' covers 5.4% of reference turns",
        },
        {
            "name": "classifier_auc_facts",
            "value": 0.94,
            "threshold": 0.65,
            "fails_if": ">",
            "passed": False,
            "detail": "facts AUC 0.940 (> 0.65)",
        },
        {
            "name": "dense_query_only_recall",
            "value": 0.0,
            "threshold": None,
            "fails_if": None,
            "passed": True,
            "detail": HOSTILE,
        },
    ],
    "size": {"users": 3, "queries": 6, "references": 20, "sessions": 40, "turns": 400, "facts": 45},
    "seconds": 1.5,
}


def explorer_dataset(users: int = 3, queries_per_user: int = 2) -> GeneratedDataset:
    """The publish fixture with reference sentences recorded as spans, some emoji, hostile text and an audit.

    Each reference turn becomes ``<lead> <reference sentence> <tail>`` and its
    span covers exactly the reference sentence; the first reference session's
    lead has emoji (characters outside the BMP, so code points and UTF-16 units
    differ). One query and one turn carry markup that must stay text.
    """
    dataset = build_publish_fixture(users=users, queries_per_user=queries_per_user)
    first = True
    sessions = []
    for session in dataset.sessions:
        if session.reference_id is not None and session.reference_turn_indices:
            index = session.reference_turn_indices[0]
            sentence = session.turns[index].content
            lead = EMOJI_LEAD if first else PLAIN_LEAD
            first = False
            content = f"{lead} {sentence} {TAIL}"
            turns = list(session.turns)
            turns[index] = turns[index].model_copy(update={"content": content})
            start = len(lead) + 1
            span = ReferenceSpan(turn_index=index, start=start, end=start + len(sentence))
            session = session.model_copy(update={"turns": turns, "reference_spans": [span]})
        sessions.append(session)
    dataset.sessions = sessions
    dataset.queries[0] = dataset.queries[0].model_copy(
        update={"text": f"{dataset.queries[0].text} {HOSTILE}"}
    )
    filler = next(s for s in dataset.sessions if s.reference_id is None)
    position = dataset.sessions.index(filler)
    turns = list(filler.turns)
    turns[0] = turns[0].model_copy(update={"content": f"{turns[0].content} {HOSTILE}"})
    dataset.sessions[position] = filler.model_copy(update={"turns": turns})
    assert dataset.manifest is not None
    dataset.manifest = dataset.manifest.model_copy(update={"audit": AUDIT})
    return dataset


def publish(dataset: GeneratedDataset, destination: Path) -> Path:
    """Publish even when the fixture fails the validity audit (the explorer shows whatever audit publish recorded)."""
    options: dict[str, Any] = {}
    if "allow_failed_audit" in inspect.signature(publish_dataset).parameters:
        options["allow_failed_audit"] = True
    publish_dataset(dataset, destination, Settings(), **options)
    return destination


def recorded_audit(published: Path) -> Any:
    """The audit in a published dataset's manifest.json."""
    return json.loads((published / "manifest.json").read_text(encoding="utf-8"))["audit"]


def read_data_file(path: Path) -> tuple[str, list[Any]]:
    """(function called, its arguments) of one data file."""
    text = path.read_text(encoding="utf-8")
    match = re.fullmatch(r"(MQX\.receive\w+)\((.*)\);\n", text, flags=re.DOTALL)
    assert match, f"{path.name} is not one registration call"
    return match.group(1), json.loads(f"[{match.group(2)}]")


def read_index(explorer: Path) -> dict[str, Any]:
    call, arguments = read_data_file(explorer / "data" / "index.js")
    assert call == "MQX.receiveIndex"
    return arguments[0]


def read_persona(explorer: Path, persona_id: str) -> dict[str, Any]:
    call, arguments = read_data_file(explorer / "data" / f"{persona_id}.js")
    assert call == "MQX.receivePersona"
    assert arguments[0] == persona_id
    return arguments[1]


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def dataset() -> GeneratedDataset:
    return explorer_dataset()


@pytest.fixture(scope="module")
def explorer(dataset: GeneratedDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    destination = tmp_path_factory.mktemp("explorer") / "explorer"
    write_explorer(dataset, destination)
    return destination


def test_index_lists_every_persona_with_its_queries(
    explorer: Path, dataset: GeneratedDataset
) -> None:
    index = read_index(explorer)
    assert [p["id"] for p in index["personas"]] == [
        p.persona_id for p in sorted(dataset.personas, key=lambda p: int(p.source_user_id[4:]))
    ]
    assert index["totals"]["personas"] == len(dataset.personas)
    assert index["totals"]["queries"] == len(dataset.queries)
    queries = {q.query_id: q for q in dataset.queries}
    methods = [m["key"] for m in index["methods"]]
    assert methods == ["query_only", "pgr_cot", "pgr_tot"]
    assert index["judges"] == ["provenance", "embedding"]
    for persona in index["personas"]:
        expected = sorted(
            (q for q in dataset.queries if q.persona_id == persona["id"]), key=lambda q: q.rank
        )
        assert [q["id"] for q in persona["queries"]] == [q.query_id for q in expected]
        for row in persona["queries"]:
            query = queries[row["id"]]
            assert row["text"] == query.text
            assert row["gamma"] == pytest.approx(query.gamma, abs=1e-4)
            assert row["cosines"] == pytest.approx([r.cosine for r in query.references], abs=1e-4)
            assert row["difficulty"] == query.difficulty
            for judge in index["judges"]:
                recall = {
                    (
                        v.method.value
                        if v.baseline_for is None
                        else f"{v.method.value}@{v.baseline_for.value}"
                    ): v.recall
                    for v in dataset.validation
                    if v.query_id == query.query_id and v.judge.value == judge
                }
                assert row["recall"][judge] == pytest.approx(
                    [recall.get(m) for m in methods], abs=1e-4
                )
    assert index["audit"] == AUDIT
    assert index["run"]["run_id"] == dataset.manifest.run_id  # type: ignore[union-attr]
    assert "settings" not in index["run"] and "base_url" not in index["run"]


def test_each_persona_file_holds_exactly_that_personas_rows(
    explorer: Path, dataset: GeneratedDataset
) -> None:
    persona_files = sorted(p.stem for p in (explorer / "data").glob("p_*.js"))
    assert persona_files == sorted(p.persona_id for p in dataset.personas)
    for persona_id in persona_files:
        data = read_persona(explorer, persona_id)
        assert data["persona"]["id"] == persona_id
        own = {
            name: [row for row in getattr(dataset, name) if row.persona_id == persona_id]
            for name in DATASET_TABLES
        }
        assert {q["id"] for q in data["queries"]} == {q.query_id for q in own["queries"]}
        assert {s["id"] for s in data["sessions"]} == {s.session_id for s in own["sessions"]}
        assert {f["id"] for f in data["facts"]} == {f.fid for f in own["facts"]}
        assert {r["id"] for r in data["rejected"]} == {r.rejected_id for r in own["rejected"]}
        assert [s["position"] for s in data["sessions"]] == sorted(
            s.position for s in own["sessions"]
        )
        timelines = {t.query_id: t for t in own["timelines"]}
        for query in data["queries"]:
            assert {e["id"] for e in query["timeline"]["events"]} == {
                e.event_id for e in timelines[query["id"]].events
            }
        # every retrieval result of the persona is there, its facts resolvable to this persona's facts
        results = {
            (v.query_id, v.method.value, v.baseline_for, v.judge.value): v
            for v in own["validation"]
        }
        seen = set()
        facts = data["facts"]
        for query in data["queries"]:
            for retrieval in query["retrievals"]:
                for judged in retrieval["judges"]:
                    method, _, target = retrieval["key"].partition("@")
                    key = (
                        query["id"],
                        method,
                        RetrievalMethod(target) if target else None,
                        judged["judge"],
                    )
                    row = results[key]
                    seen.add(key)
                    retrieved = judged.get("retrieved", retrieval["retrieved"])
                    assert [facts[i]["id"] for i in retrieved] == row.retrieved_fids
                    by_reference = {j.reference_id: j for j in row.judgements}
                    for reference, verdict in zip(
                        query["references"], judged["verdicts"], strict=True
                    ):
                        judgement = by_reference[reference["id"]]
                        assert verdict[0] == judgement.found
                        assert [facts[i]["id"] for i in verdict[2]] == judgement.supporting_fids
        assert seen == set(results)


def test_spans_and_text_survive_unchanged(explorer: Path, dataset: GeneratedDataset) -> None:
    for session in dataset.sessions:
        data = read_persona(explorer, session.persona_id)
        stored = next(s for s in data["sessions"] if s["id"] == session.session_id)
        assert stored["turns"] == [[t.role.value, t.content] for t in session.turns]
        assert stored["spans"] == [[s.turn_index, s.start, s.end] for s in session.reference_spans]
        assert stored["reference_id"] == session.reference_id


def test_text_is_escaped_so_no_data_can_end_a_script(
    explorer: Path, dataset: GeneratedDataset
) -> None:
    for path in (explorer / "data").glob("*.js"):
        raw = path.read_text(encoding="utf-8")
        assert "<" not in raw and ">" not in raw and "&" not in raw, path.name
        assert "\u2028" not in raw and "\u2029" not in raw
    # escaped in the file, the same text once parsed
    index = read_index(explorer)
    assert any(HOSTILE in q["text"] for p in index["personas"] for q in p["queries"])
    turns = [
        c
        for p in dataset.personas
        for s in read_persona(explorer, p.persona_id)["sessions"]
        for _, c in s["turns"]
    ]
    assert any(HOSTILE in content for content in turns)
    assert any(check["detail"] == HOSTILE for check in index["audit"]["checks"])


def test_the_viewer_never_parses_data_as_markup() -> None:
    source = (
        Path(__file__).resolve().parent.parent
        / "memoryquest"
        / "publish"
        / "explorer_assets"
        / "explorer.js"
    ).read_text(encoding="utf-8")
    for sink in (
        r"\binnerHTML\b",
        r"\bouterHTML\b",
        r"\binsertAdjacentHTML\b",
        r"\bdocument\.write",
        r"\beval\s*\(",
        r"\bnew Function\b",
    ):
        assert not re.search(sink, source), sink


def test_same_dataset_gives_the_same_bytes(
    dataset: GeneratedDataset, explorer: Path, tmp_path: Path
) -> None:
    shuffled = dataset.model_copy(deep=True)
    rng = random.Random(3)
    for name in DATASET_TABLES:
        rng.shuffle(getattr(shuffled, name))
    again = tmp_path / "again"
    write_explorer(shuffled, again)
    assert _files(again) == _files(explorer)


def test_an_id_that_cannot_name_a_file_is_refused(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    broken = dataset.model_copy(deep=True)
    broken.rejected[0] = broken.rejected[0].model_copy(
        update={"persona_id": "../../evil"}
    )  # not validated
    with pytest.raises(ExplorerError, match="not a valid id"):
        write_explorer(broken, tmp_path / "x")


# --------------------------------------------------------------------------- publish


@pytest.fixture(scope="module")
def published(dataset: GeneratedDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return publish(dataset, tmp_path_factory.mktemp("published") / "memoryquest")


def test_publish_writes_the_explorer_with_the_plots(
    published: Path, dataset: GeneratedDataset
) -> None:
    explorer = published / EXPLORER_DIR
    assert {"index.html", "explorer.js", "explorer.css", "data/index.js"} <= set(_files(explorer))
    index = read_index(explorer)
    assert [p["src"] for p in index["plots"]] == [
        "plots/gamma_histogram.png",
        "plots/recall_by_method.png",
    ]
    for plot in index["plots"]:
        assert (explorer / plot["src"]).read_bytes() == (published / plot["src"]).read_bytes()
    assert index["audit"] == recorded_audit(published)
    listed = {
        f["path"]
        for f in json.loads((published / "manifest.json").read_text(encoding="utf-8"))["publish"][
            "files"
        ]
    }
    assert {f"{EXPLORER_DIR}/{name}" for name in _files(explorer)} <= listed
    # the explorer built from the published copy is the one publish wrote
    rebuilt = published.parent / "rebuilt"
    write_explorer(load_published(published), rebuilt, plots=[])
    assert read_data_file(
        rebuilt / "data" / f"{dataset.personas[0].persona_id}.js"
    ) == read_data_file(explorer / "data" / f"{dataset.personas[0].persona_id}.js")


# --------------------------------------------------------------------------- memoryquest explore


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explore", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_explore_a_published_dataset_prints_its_explorer(
    published: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    before = _files(published)
    code, out, err = run(capsys, str(published), "--open")
    assert (code, err) == (0, "")
    entry = published / EXPLORER_DIR / "index.html"
    assert out == f"explorer: {entry.absolute()}\n"
    assert opened == [entry.absolute().as_uri()]
    assert _files(published) == before  # nothing rebuilt


def test_explore_builds_for_a_generated_dataset(
    generated_dataset: GeneratedDataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pipeline's own output saved as ``generate`` saves it (tests/generated_dataset_fixture.py)."""
    dataset = generated_dataset
    generated = dataset.model_copy(deep=True)
    assert generated.manifest is not None
    generated.manifest = generated.manifest.model_copy(update={"audit": None})
    directory = generated.save(tmp_path / "dataset")
    (directory / "audit.json").write_text(json.dumps(AUDIT), encoding="utf-8")
    code, out, err = run(capsys, str(directory))
    assert (code, err) == (0, "")
    assert out.startswith(f"explorer: {(directory / 'explorer' / 'index.html').absolute()}\n")
    index = read_index(directory / "explorer")
    assert index["totals"] == {
        "personas": len(dataset.personas),
        "queries": len(dataset.queries),
        "sessions": len(dataset.sessions),
        "facts": len(dataset.facts),
        "validation": len(dataset.validation),
        "rejected": len(dataset.rejected),
    }
    assert [m["key"] for m in index["methods"]] == ["query_only", "pgr_cot", "bm25@pgr_cot"]
    assert sorted(p["id"] for p in index["personas"]) == sorted(
        p.persona_id for p in dataset.personas
    )
    assert index["audit"] == AUDIT  # from `memoryquest audit --write`
    assert index["plots"] == []
    # building again replaces the earlier explorer, also at an explicit --output
    code, _, _ = run(capsys, str(directory), "--output", str(tmp_path / "elsewhere" / "x"))
    assert code == 0
    code, _, _ = run(capsys, str(directory), "--output", str(tmp_path / "elsewhere" / "x"))
    assert code == 0
    assert _files(tmp_path / "elsewhere" / "x") == _files(directory / "explorer")
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["x"]


def test_explore_a_published_dataset_into_another_folder(
    published: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, str(published), "--output", str(tmp_path / "copy"))
    assert (code, err) == (0, "")
    assert "built in" in out
    assert _files(tmp_path / "copy") == _files(published / EXPLORER_DIR)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "does not exist"),
        ("file", "is not a directory"),
        ("empty", "is not a dataset"),
        ("parent", "did you mean"),
        ("output", "holds no explorer"),
    ],
)
def test_explore_user_errors_are_one_line_and_exit_2(
    setup: str,
    message: str,
    tmp_path: Path,
    dataset: GeneratedDataset,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = tmp_path / "target"
    extra: list[str] = []
    if setup == "file":
        target.write_text("x", encoding="utf-8")
    elif setup == "empty":
        target.mkdir()
    elif setup == "parent":
        dataset.save(target / "dataset")
    elif setup == "output":
        dataset.save(target)
        (tmp_path / "busy").mkdir()
        (tmp_path / "busy" / "notes.txt").write_text("keep me", encoding="utf-8")
        extra = ["--output", str(tmp_path / "busy")]
    code, out, err = run(capsys, str(target), *extra)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("memoryquest: error: ") and message in err
    if setup == "output":
        assert (tmp_path / "busy" / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_a_dataset_with_missing_tables_still_gets_an_explorer(
    dataset: GeneratedDataset, tmp_path: Path
) -> None:
    """Queries without timelines, sessions or validation (e.g. a run stopped early) and no manifest."""
    partial = GeneratedDataset(
        personas=dataset.personas[:1],
        queries=[q for q in dataset.queries if q.persona_id == dataset.personas[0].persona_id],
    )
    write_explorer(partial, tmp_path / "partial")
    index = read_index(tmp_path / "partial")
    assert index["run"] is None and index["audit"] is None
    assert index["methods"] == [] and index["judges"] == []
    assert len(index["personas"][0]["queries"]) == len(partial.queries)
    persona = read_persona(tmp_path / "partial", dataset.personas[0].persona_id)
    assert persona["sessions"] == [] and all(
        q["timeline"] is None and q["retrievals"] == [] for q in persona["queries"]
    )
    write_explorer(GeneratedDataset(), tmp_path / "empty")
    assert read_index(tmp_path / "empty")["personas"] == []
