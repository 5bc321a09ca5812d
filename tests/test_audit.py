"""The audit end to end on a real generated dataset (simulator + local embedder), and mutated copies of it.

The simulator's own output is not asserted to pass (its wording is being
reworked); each test plants one defect in a copy and checks that the audit
moves exactly where it should, relative to the unmutated dataset.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
from pathlib import Path

import pytest

from memoryquest.audit import AuditReport, audit_dataset, audit_markdown
from memoryquest.audit.material import reference_turns
from memoryquest.audit.structure import turn_units
from memoryquest.cli.main import main
from memoryquest.cli.open_dataset import load_dataset
from memoryquest.contracts import Role, Session, Turn
from memoryquest.dataset import DatasetError, GeneratedDataset
from memoryquest.pipeline import generate_dataset
from memoryquest.settings import AuditSettings, GenerationSettings, PGRSettings, Settings
from memoryquest.text import words

try:
    from tests.generation_fixture import USERS, load_users, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import USERS, load_users, simulated_client

MARKER = "Zephyr quokka memo, filed under lantern."
MARKER_WORDS = set(words(MARKER))
PERMISSIVE = [
    "--set", "audit.exclusive_ngram_share_max=1",
    "--set", "audit.classifier_auc_max=1",
    "--set", "audit.structure_auc_max=1",
    "--set", "audit.uncovered_max=1000",
    "--set", "audit.stale_max=1000",
]  # fmt: skip


def small_settings() -> Settings:
    return Settings(
        generation=GenerationSettings(
            queries_per_user=2, candidates_per_user=6, judge_relevance=False
        ),
        pgr=PGRSettings(methods=["query_only"], judges=["provenance"], budget_baselines=[]),
    )


@functools.cache
def _generated() -> GeneratedDataset:
    """Two bundled PersonaLens users through every stage, two queries each."""
    return asyncio.run(generate_dataset(load_users(*USERS), simulated_client(), small_settings()))


@pytest.fixture(scope="module")
def dataset() -> GeneratedDataset:
    data = _generated()
    assert data.queries and data.facts and any(s.reference_id for s in data.sessions)
    return data.model_copy(deep=True)


@pytest.fixture(scope="module")
def report(dataset: GeneratedDataset) -> AuditReport:
    return audit_dataset(dataset, Settings())


def copy(dataset: GeneratedDataset) -> GeneratedDataset:
    return dataset.model_copy(deep=True)


# --------------------------------------------------------------------------- the report


def test_report_has_every_check_and_counts_the_dataset(
    dataset: GeneratedDataset, report: AuditReport
) -> None:
    assert [c.name for c in report.checks] == [
        "exclusive_ngram",
        "classifier_auc_user_turns",
        "classifier_auc_assistant_turns",
        "classifier_auc_facts",
        "structure_auc_turns",
        "structure_auc_turn_index",
        "structure_auc_turns_after",
        "structure_auc_sessions",
        "structure_auc_session_turns",
        "structure_auc_session_news",
        "structure_auc_event_index",
        "structure_auc_events_after",
        "structure_auc_same_domain",
        "bm25_query_only_recall",
        "dense_query_only_recall",
        "shared_content_words",
        "distinct_n_user_turns",
        "repeated_sentences_user_turns",
        "distinct_n_assistant_turns",
        "repeated_sentences_assistant_turns",
        "uncovered_references",
        "stale_references",
        "references_recovered_by_reask",
    ]
    assert (
        report.size.users == 2
        and report.size.queries == len(dataset.queries)
        and report.size.facts == len(dataset.facts)
    )
    assert report.ground_truth.references == sum(len(q.references) for q in dataset.queries)
    assert report.passed == (not report.failures) == all(c.passed for c in report.checks)
    assert [c.name for c in report.checks if not c.passed] == [
        f.split(":")[0] for f in report.failures
    ]
    for score in [*report.classifiers, *report.structure]:
        assert score.scheme == "leave-one-user-out (2 users)" and not score.within_user
        assert score.auc is None or 0.0 <= score.auc <= 1.0
    assert report.leakage.queries == len(dataset.queries) and report.leakage.dense_queries == len(
        dataset.queries
    )
    assert report.leakage.bm25_recall is not None and 0.0 <= report.leakage.bm25_recall <= 1.0
    assert AuditReport.model_validate_json(report.model_dump_json()) == report


def test_markdown_has_one_row_per_check(report: AuditReport) -> None:
    text = audit_markdown(report)
    assert text.startswith("**Validity audit: ")
    assert "| Check | Value | Limit | Result | Detail |" in text
    for check in report.checks:
        assert f"| {check.name} |" in text
    assert "| exclusive_ngram |" in text and "fails if ≥ 0.1" in text
    assert ("**FAIL**" in text) == (not report.passed)


# --------------------------------------------------------------------------- targets


def test_query_only_recalls_are_shown_beside_chance(report: AuditReport) -> None:
    chance = report.leakage.chance_recall
    assert chance is not None and 0.0 < chance <= 1.0
    said = f"; {chance:.3g} by chance ({report.leakage.k} facts drawn at random)"
    for name in ("bm25_query_only_recall", "dense_query_only_recall"):
        assert said in report.check(name).detail


def _band(low: float, high: float) -> Settings:
    return Settings(audit=AuditSettings(query_only_recall_min=low, query_only_recall_max=high))


def test_query_only_recall_outside_its_band_is_a_missed_target_that_fails_nothing(
    dataset: GeneratedDataset, report: AuditReport
) -> None:
    recall = report.check("dense_query_only_recall").value
    assert recall is not None
    inside = audit_dataset(dataset, _band(max(recall - 0.01, 0.0), min(recall + 0.01, 1.0)))
    assert inside.check("dense_query_only_recall").on_target is True
    assert not any(m.startswith("dense_query_only_recall") for m in inside.targets_missed)
    for band in ((recall + 0.01, 1.0), (0.0, recall - 0.01)):
        if not 0.0 <= band[0] <= band[1] <= 1.0:
            continue  # a recall of 0 or 1 leaves no band on that side
        missed = audit_dataset(dataset, _band(*band))
        check = missed.check("dense_query_only_recall")
        assert check.on_target is False and check.target == f"{band[0]:g}–{band[1]:g}"
        assert (
            f"dense_query_only_recall {recall:.3g} (target {check.target})" in missed.targets_missed
        )
        assert missed.passed == report.passed and missed.failures == report.failures
        text = audit_markdown(missed)
        assert "**Benchmark targets missed: " in text and "| **missed** |" in text


def test_user_turn_variety_is_held_to_its_targets(
    dataset: GeneratedDataset, report: AuditReport
) -> None:
    distinct = report.check("distinct_n_user_turns")
    assert distinct.value == report.diversity[0].distinct_2_sample and distinct.target == "≥ 0.25"
    assert report.check("distinct_n_assistant_turns").target is None  # reported only
    above = Settings(audit=AuditSettings(distinct_2_min=min((distinct.value or 0) + 0.01, 1.0)))
    assert audit_dataset(dataset, above).check("distinct_n_user_turns").on_target is False
    repeated = report.check("repeated_sentences_user_turns").value
    assert repeated is not None
    strict = Settings(audit=AuditSettings(repeated_sentence_share_max=max(repeated - 0.01, 0.0)))
    if repeated > 0:
        assert (
            audit_dataset(dataset, strict).check("repeated_sentences_user_turns").on_target is False
        )
    assert report.check("repeated_sentences_user_turns").on_target is (repeated <= 0.25)


def test_a_band_upside_down_is_rejected() -> None:
    with pytest.raises(ValueError, match="query_only_recall_min"):
        AuditSettings(query_only_recall_min=0.8, query_only_recall_max=0.7)


# --------------------------------------------------------------------------- mutations


def test_a_marker_planted_in_every_reference_turn_fails_exclusive_ngram(
    dataset: GeneratedDataset, report: AuditReport
) -> None:
    marked = copy(dataset)
    shift = len(MARKER) + 1
    for session in marked.sessions:
        indices = reference_turns(session)
        for index in indices:
            turn = session.turns[index]
            session.turns[index] = Turn(role=turn.role, content=f"{MARKER} {turn.content}")
        session.reference_spans = [
            span.model_copy(update={"start": span.start + shift, "end": span.end + shift})
            if span.turn_index in indices
            else span
            for span in session.reference_spans
        ]
    after = audit_dataset(marked, Settings())
    top = after.exclusive_ngrams.top[0]
    assert (
        top.share == 1.0
        and top.units
        == after.exclusive_ngrams.reference_units
        == report.exclusive_ngrams.reference_units
    )
    assert set(top.ngram.split()) & MARKER_WORDS
    if report.exclusive_ngrams.top:
        assert report.exclusive_ngrams.max_share < 1.0
        assert not set(report.exclusive_ngrams.top[0].ngram.split()) & MARKER_WORDS
    check = after.check("exclusive_ngram")
    assert not check.passed and check.value == 1.0 and not after.passed
    assert f"exclusive_ngram: '{top.ngram}' covers 100% of reference turns" in after.failures[0]
    assert after.failures[0].endswith("(>= 10%)")
    assert after.check("classifier_auc_user_turns").value == pytest.approx(1.0)
    # and the classifier names what gives the references away
    user_turns = next(c for c in after.classifiers if c.material == "user_turns")
    assert set(words(" ".join(user_turns.leans_on[:2]))) <= MARKER_WORDS
    assert f"leans on '{user_turns.leans_on[0]}'" in after.check("classifier_auc_user_turns").detail


def test_structural_tells_are_scored_and_gated(report: AuditReport) -> None:
    levels = {"structure_turns": "user turns", "structure_sessions": "sessions"}
    assert [score.material for score in report.structure][:1] == ["structure_turns"]
    for score in report.structure:
        check = report.check(score.material.replace("structure_", "structure_auc_"))
        assert check.threshold == 0.6 and check.fails_if == ">"
        assert check.value == score.auc and check.passed == (score.auc is None or score.auc <= 0.6)
        assert score.positives > 0 and score.scheme == "leave-one-user-out (2 users)"
        if score.material in levels:
            assert f"every structural feature of {levels[score.material]}" in check.detail


def test_reference_turns_are_compared_with_turns_of_their_own_sessions(
    dataset: GeneratedDataset,
) -> None:
    """Every reference turn stands beside two other user turns of its session, the same ones on
    every run: a session's length is then as common on both sides, so it cannot stand in for
    where the reference sits."""
    standing = {r.reference_id for q in dataset.queries for r in q.references}
    units = turn_units(dataset.sessions, standing)
    sessions = {s.session_id: s for s in dataset.sessions}
    by_session: dict[str, list[bool]] = {}
    for unit in units:
        by_session.setdefault(unit.session_id, []).append(unit.reference)
    carrying = {s.session_id for s in dataset.sessions if reference_turns(s, standing)}
    assert set(by_session) == carrying
    for session_id, marks in by_session.items():
        users = sum(t.role is Role.USER for t in sessions[session_id].turns)
        assert marks.count(False) == min(2 * marks.count(True), users - marks.count(True))
    lengths = {
        kind: sorted(len(sessions[u.session_id].turns) for u in units if u.reference is kind)
        for kind in (True, False)
    }
    assert sorted(lengths[True] * 2) == lengths[False]  # where no session falls short of others
    assert turn_units(dataset.sessions, standing) == units


def _reference_moved_to_the_last_user_turn(session: Session) -> Session:
    """The session with its reference turn swapped with its last user turn (spans follow)."""
    marked = sorted(reference_turns(session))
    last = max(i for i, t in enumerate(session.turns) if t.role is Role.USER)
    if not marked or marked[0] == last:
        return session
    first = marked[0]
    turns = list(session.turns)
    turns[first], turns[last] = turns[last], turns[first]
    moved = {first: last, last: first}
    return session.model_copy(
        update={
            "turns": turns,
            "reference_turn_indices": [moved.get(i, i) for i in session.reference_turn_indices],
            "reference_spans": [
                span.model_copy(update={"turn_index": moved.get(span.turn_index, span.turn_index)})
                for span in session.reference_spans
            ],
        }
    )


def test_a_reference_always_in_the_last_user_turn_is_a_structural_tell(
    dataset: GeneratedDataset, report: AuditReport
) -> None:
    moved = copy(dataset)
    moved.sessions = [_reference_moved_to_the_last_user_turn(s) for s in moved.sessions]
    assert all(
        max(reference_turns(s)) == max(i for i, t in enumerate(s.turns) if t.role is Role.USER)
        for s in moved.sessions
        if reference_turns(s)
    )
    after = audit_dataset(moved, Settings())
    for name in ("structure_auc_turns_after", "structure_auc_turns"):
        check, before = after.check(name), report.check(name)
        assert check.value is not None and before.value is not None
        assert check.value > 0.6 and not check.passed and check.value > before.value
        assert any(f.startswith(f"{name}: ") for f in after.failures)
    assert "leans on turns_after=1" in after.check("structure_auc_turns_after").detail
    assert not after.passed
    # the words did not change: the text classifier's verdict stays where it was
    assert after.check("classifier_auc_user_turns").value == pytest.approx(
        report.check("classifier_auc_user_turns").value, abs=0.05
    )


def test_a_reference_expired_before_its_query_is_stale(
    dataset: GeneratedDataset, report: AuditReport
) -> None:
    stale = copy(dataset)
    query = stale.queries[0]
    reference = query.references[0]
    reference.valid_until = query.query_date - dt.timedelta(days=1)
    after = audit_dataset(stale, Settings())
    expected = report.ground_truth.stale + 1  # 1 unless the generator already let one through
    assert after.ground_truth.stale == expected
    check = after.check("stale_references")
    assert not check.passed and check.value == expected and reference.reference_id in check.detail
    assert any(
        f.startswith(f"stale_references: {expected} of ") and reference.reference_id in f
        for f in after.failures
    )
    relaxed = audit_dataset(stale, Settings(audit=AuditSettings(stale_max=expected)))
    assert relaxed.check("stale_references").passed


def test_a_reference_without_credited_facts_is_uncovered(
    dataset: GeneratedDataset, report: AuditReport
) -> None:
    bare = copy(dataset)
    covered = {i.reference_id for i in report.ground_truth.uncovered_references}
    reference = next(r for q in bare.queries for r in q.references if r.reference_id not in covered)
    for fact in bare.facts:
        fact.source_reference_ids = [
            r for r in fact.source_reference_ids if r != reference.reference_id
        ]
        for revision in fact.revisions:
            revision.source_reference_ids = [
                r for r in revision.source_reference_ids if r != reference.reference_id
            ]
    after = audit_dataset(bare, Settings())
    assert after.ground_truth.uncovered == report.ground_truth.uncovered + 1
    assert reference.reference_id in {
        i.reference_id for i in after.ground_truth.uncovered_references
    }
    assert not after.check("uncovered_references").passed and not after.passed
    assert any(f.startswith("uncovered_references: ") for f in after.failures)


def test_one_user_is_audited_within_user(dataset: GeneratedDataset) -> None:
    persona = dataset.personas[0].persona_id
    alone = GeneratedDataset(
        personas=dataset.personas[:1],
        queries=[q for q in dataset.queries if q.persona_id == persona],
        sessions=[s for s in dataset.sessions if s.persona_id == persona],
        facts=[f for f in dataset.facts if f.persona_id == persona],
    )
    after = audit_dataset(alone, Settings())
    assert after.size.users == 1 and after.leakage.dense_recall is None
    for score in after.classifiers:
        assert score.within_user and score.scheme.startswith("within-user")
    assert "within-user" in after.check("classifier_auc_user_turns").detail


def test_an_empty_dataset_is_an_error() -> None:
    with pytest.raises(ValueError, match="nothing to audit"):
        audit_dataset(GeneratedDataset(), Settings())


# --------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def saved(dataset: GeneratedDataset, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return dataset.save(tmp_path_factory.mktemp("audit") / "dataset")


def test_cli_exit_code_follows_the_gates(
    saved: Path,
    dataset: GeneratedDataset,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    assert main(["audit", str(saved), *PERMISSIVE]) == 0
    out = capsys.readouterr().out
    assert out.startswith("**Validity audit: passed**") and "| exclusive_ngram |" in out
    stale = copy(dataset)
    stale.queries[0].references[0].valid_until = stale.queries[0].query_date - dt.timedelta(days=30)
    broken = stale.save(tmp_path / "stale")
    assert main(["audit", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "FAIL stale_references: 1 of " in out
    unreachable = [
        "--set",
        "audit.query_only_recall_min=1",
        "--set",
        "audit.query_only_recall_max=1",
    ]
    assert (
        main(["audit", str(saved), *PERMISSIVE, *unreachable]) == 0
    )  # a missed target fails nothing
    assert "MISSED target dense_query_only_recall " in capsys.readouterr().out


def test_cli_json_and_write(
    saved: Path, capsys: pytest.CaptureFixture[str], clean_settings_env: pytest.MonkeyPatch
) -> None:
    code = main(
        ["audit", str(saved), "--json", "--write", "--set", "audit.classifier_auc_max=0.99"]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == (0 if document["passed"] else 1)
    assert all(
        c["threshold"] == 0.99
        for c in document["checks"]
        if c["name"].startswith("classifier_auc_")
    )
    written = json.loads((saved / "audit.json").read_text(encoding="utf-8"))
    assert written["checks"] == document["checks"]
    (saved / "audit.json").unlink()


def test_cli_user_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clean_settings_env: pytest.MonkeyPatch
) -> None:
    assert main(["audit", str(tmp_path / "missing")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"memoryquest: error: {tmp_path / 'missing'} does not exist"
    )
    (tmp_path / "run" / "dataset").mkdir(parents=True)
    assert main(["audit", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "is not a dataset" in err and f"did you mean {tmp_path / 'run' / 'dataset'}?" in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(DatasetError, match="is not a directory"):
        load_dataset(Path(__file__))


def test_published_dataset_audits_like_the_generated_one(
    dataset: GeneratedDataset,
    report: AuditReport,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    from memoryquest.publish import publish_dataset

    destination = tmp_path / "published"
    publish_dataset(dataset, destination, Settings(), allow_failed_audit=True)
    assert main(["audit", str(destination), "--json"]) in (0, 1)
    document = json.loads(capsys.readouterr().out)
    assert [(c["name"], c["value"]) for c in document["checks"]] == [
        (c.name, pytest.approx(c.value) if c.value is not None else None) for c in report.checks
    ]
