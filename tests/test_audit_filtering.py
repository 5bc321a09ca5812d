"""The per-item tell filter on a real generated dataset (simulator + local embedder) with forward
cues planted in about a third of its queries, and ``memoryquest audit --filter`` on it."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from memoryquest.audit import AuditReport, audit_dataset
from memoryquest.audit.filtering import FilterResult, filter_tells
from memoryquest.cli.main import main
from memoryquest.cli.open_dataset import load_dataset
from memoryquest.contracts import Query, RejectionReason, Stage, Turn
from memoryquest.dataset import GeneratedDataset
from memoryquest.pipeline import generate_dataset
from memoryquest.settings import AuditSettings, GenerationSettings, PGRSettings, Settings
from memoryquest.text import ANNOUNCEMENTS, FORWARD_CUES

pytestmark = pytest.mark.slow  # six personas generated offline (about three minutes)

try:
    from tests.generation_fixture import load_users, simulated_client
except ModuleNotFoundError:  # tests/ is not a package: pytest puts it on sys.path
    from generation_fixture import load_users, simulated_client

USERS = ("user0", "user1", "user2", "user3", "user4", "user5")
QUERIES_PER_USER = 6

# Clauses that point ahead without any phrase the generation gates list (checked below), each
# appended to the sentence that states a reference: a generator's varied forward cues.
PLANTED_CUES = [
    "which could shape how I plan the next few months",
    "and that's going to figure into a decision I have coming up",
    "so bear that in the back of your head for later",
    "something I'll probably lean on when I book things this autumn",
    "and I suspect that'll count once I start arranging the trip",
    "which feeds into a plan I'm still putting together",
    "and it'll likely weigh on what I pick next month",
    "a detail that should shape the choice I make soon",
    "which I'm guessing you'll need when I ask you something later",
    "and that'll be key for something I'm organising",
    "so hold onto that, it has a bearing on what's next",
    "which is relevant to a booking I'll do in a few weeks",
    "and that's going to affect an errand I've got coming",
    "which ties into the event I'm preparing for",
    "and it'll factor into the arrangements for the holiday",
    "so file that away for when I come back to you",
    "which is the kind of thing I'll want you to recall soon",
    "and it'll shape the gift I end up buying",
    "which I'll be counting on for the planning ahead",
    "and that bears on something I'll ask about before long",
    "so it's a constraint for the next big purchase",
    "and it plays into the schedule I'm drafting for next season",
    "which could change what I order for the celebration",
    "and that's going to steer a choice in the coming weeks",
    "a point that'll count when I settle the details",
    "which should guide whatever you suggest to me later on",
    "and I'll need that in hand for the trip I'm mapping out",
    "so don't lose track of it, I'll circle back",
    "which is going to decide part of the plan for the weekend away",
    "and it'll come up again once the invitations go out",
    "something to lean on when we sort out next month's agenda",
    "and that's a factor in the reservation I'll make",
    "which should inform the advice I'll be after shortly",
    "and that will set limits on the outing I'm arranging",
    "which I'd like reflected in the suggestions you give me later",
    "and it's going to be part of the bigger decision ahead",
]
TEXT_CLASSIFIERS = AuditSettings(filter_classifiers=["user_turns", "news_wording", "facts"])
"""The planted cue is in the text (its words, and the clause it adds to the news item's sentence). The offline generator's reference sessions also differ from the
others by their structure (news items, place in the timeline: structure_auc_sessions ≈ 0.86 on five
personas), which the structural classifiers rightly flag in clean and planted queries alike; the
planted-cue figures are measured on the text classifiers, whose business the cue is."""


def test_the_planted_cues_are_varied_and_not_the_gates_own_phrases() -> None:
    assert len(set(PLANTED_CUES)) == len(PLANTED_CUES) >= 30
    for cue in PLANTED_CUES:
        assert not FORWARD_CUES.search(cue) and not ANNOUNCEMENTS.search(cue), cue


@functools.cache
def _generated() -> GeneratedDataset:
    settings = Settings(
        generation=GenerationSettings(
            queries_per_user=QUERIES_PER_USER,
            candidates_per_user=3 * QUERIES_PER_USER,
            judge_relevance=False,
        ),
        pgr=PGRSettings(methods=["query_only"], judges=["provenance"], budget_baselines=[]),
    )
    return asyncio.run(generate_dataset(load_users(*USERS), simulated_client(), settings))


def plant(
    dataset: GeneratedDataset, share: float, seed: int, cues: Sequence[str] = PLANTED_CUES
) -> tuple[GeneratedDataset, set[str]]:
    """A copy with a forward cue (one of ``cues``) appended to every reference sentence of
    ``share`` of the queries (spans follow); and the ids of those queries."""
    planted = dataset.model_copy(deep=True)
    rng = random.Random(seed)
    ids = sorted(q.query_id for q in planted.queries)
    chosen = set(rng.sample(ids, round(len(ids) * share)))
    references = {
        r.reference_id for q in planted.queries if q.query_id in chosen for r in q.references
    }
    for session in planted.sessions:
        if session.reference_id not in references or not session.reference_spans:
            continue
        span = session.reference_spans[0]
        turn = session.turns[span.turn_index]
        sentence = turn.content[span.start : span.end]
        said = f"{sentence.rstrip(' .!?')}, {rng.choice(list(cues))}."
        session.turns[span.turn_index] = Turn(
            role=turn.role, content=turn.content[: span.start] + said + turn.content[span.end :]
        )
        shift = len(said) - len(sentence)
        session.reference_spans = [
            s.model_copy(update={"end": s.end + shift})
            if s == span
            else s.model_copy(update={"start": s.start + shift, "end": s.end + shift})
            if s.turn_index == span.turn_index and s.start > span.start
            else s
            for s in session.reference_spans
        ]
    return planted, chosen


@pytest.fixture(scope="module")
def planted() -> tuple[GeneratedDataset, set[str]]:
    dataset, chosen = plant(_generated(), share=1 / 3, seed=0)
    assert len(dataset.queries) >= 30 and 0.3 <= len(chosen) / len(dataset.queries) <= 0.36
    return dataset, chosen


@pytest.fixture(scope="module")
def filtered(planted: tuple[GeneratedDataset, set[str]]) -> FilterResult:
    return filter_tells(planted[0], Settings(audit=TEXT_CLASSIFIERS))


@pytest.fixture(scope="module")
def one_phrase() -> tuple[GeneratedDataset, set[str]]:
    """A third of the queries carry the same cue in every reference sentence: a tell a
    generator with a habit leaves, which the classifiers learn across users."""
    return plant(_generated(), share=1 / 3, seed=0, cues=PLANTED_CUES[:1])


@pytest.fixture(scope="module")
def filtered_one(one_phrase: tuple[GeneratedDataset, set[str]]) -> FilterResult:
    return filter_tells(one_phrase[0], Settings(audit=TEXT_CLASSIFIERS))


def _removed(dataset: GeneratedDataset, result: FilterResult) -> set[str]:
    return {q.query_id for q in dataset.queries} - {q.query_id for q in result.dataset.queries}


def _shares(
    planted: tuple[GeneratedDataset, set[str]], result: FilterResult
) -> tuple[float, float]:
    dataset, chosen = planted
    removed = _removed(dataset, result)
    clean = {q.query_id for q in dataset.queries} - chosen
    return len(removed & chosen) / len(chosen), len(removed & clean) / len(clean)


def test_a_habitual_cue_in_a_third_of_the_queries_is_removed_and_the_clean_ones_stay(
    one_phrase: tuple[GeneratedDataset, set[str]], filtered_one: FilterResult
) -> None:
    planted_share, clean_share = _shares(one_phrase, filtered_one)
    print(f"one phrase: planted removed {planted_share:.0%}, clean removed {clean_share:.0%}")
    assert planted_share >= 0.9 and clean_share <= 0.1


def test_a_clean_dataset_keeps_its_queries() -> None:
    """Every classifier, every round: on data with no tell the false-discovery control withdraws
    next to nothing (a fixed 99th percentile withdrew 18 of the demo's 44 clean queries)."""
    dataset = _generated()
    result = filter_tells(dataset, Settings())
    removed = len(dataset.queries) - len(result.dataset.queries)
    print(f"clean: {removed} of {len(dataset.queries)} withdrawn")
    assert removed <= 0.1 * len(dataset.queries)


def test_planted_cues_are_removed_far_more_often_than_clean_queries(
    planted: tuple[GeneratedDataset, set[str]], filtered: FilterResult
) -> None:
    planted_share, clean_share = _shares(planted, filtered)
    print(f"planted removed {planted_share:.0%}, clean removed {clean_share:.0%}")
    # a filter that withdrew queries blind to the plant would take both at the same rate
    assert len(_removed(planted[0], filtered) & planted[1]) >= 3
    assert planted_share > 2 * clean_share and clean_share <= 0.15
    before = filtered.summary.aucs_before["classifier_auc_user_turns"]
    after = filtered.summary.aucs_after["classifier_auc_user_turns"]
    assert before is not None and after is not None and after < before - 0.05


def test_planted_cues_meet_the_issue_target(
    planted: tuple[GeneratedDataset, set[str]], filtered: FilterResult
) -> None:
    """Issue 36: at least 90% of the planted queries out, at most 10% of the clean ones. The
    varied cues share no words, so the n-gram classifiers miss most of them; the clause each
    adds to its news item's sentence, embedded, is what gives them away."""
    planted_share, clean_share = _shares(planted, filtered)
    print(f"planted removed {planted_share:.0%}, clean removed {clean_share:.0%}")
    assert planted_share >= 0.9 and clean_share <= 0.1
    before = filtered.summary.aucs_before["classifier_auc_news_wording"]
    after = filtered.summary.aucs_after["classifier_auc_news_wording"]
    assert before is not None and after is not None and after < before - 0.05


def test_a_withdrawn_query_goes_to_rejected_and_its_history_stays(
    one_phrase: tuple[GeneratedDataset, set[str]], filtered_one: FilterResult
) -> None:
    dataset, _ = one_phrase
    filtered = filtered_one
    removed = _removed(dataset, filtered)
    rows = [r for r in filtered.dataset.rejected if r.reason is RejectionReason.TELL]
    assert removed and sorted(Query.model_validate_json(r.payload_json).query_id for r in rows) == (
        sorted(removed)
    )
    for row in rows:
        assert row.stage in (Stage.DIALOGUES, Stage.TIMELINES, Stage.MEMORY)
        assert "out of fold: p = " in row.detail and "stay in the history" in row.detail
    # the timelines, sessions and facts stay; the input dataset is untouched
    for table in ("timelines", "sessions", "facts", "validation"):
        assert getattr(filtered.dataset, table) == getattr(dataset, table)
    assert len(dataset.queries) == len(filtered.dataset.queries) + len(removed)
    assert not any(r.reason is RejectionReason.TELL for r in dataset.rejected)
    # and their references are no longer ground truth: the audit counts the rest only
    report = filtered.report
    assert report.size.references == sum(len(q.references) for q in filtered.dataset.queries)
    user_turns = next(c for c in report.classifiers if c.material == "user_turns")
    total = next(
        c for c in audit_dataset(dataset, Settings()).classifiers if c.material == "user_turns"
    )
    assert user_turns.positives < total.positives


def test_the_summary_counts_rounds_and_aucs(
    one_phrase: tuple[GeneratedDataset, set[str]], filtered_one: FilterResult
) -> None:
    filtered = filtered_one
    summary = filtered.summary
    assert summary.queries_before == len(one_phrase[0].queries)
    assert summary.queries_removed == sum(len(r.queries_removed) for r in summary.rounds) > 0
    assert 1 <= len(summary.rounds) <= TEXT_CLASSIFIERS.filter_rounds_max
    assert summary.rounds[0].aucs == summary.aucs_before
    assert set(summary.aucs_after) == set(summary.aucs_before)
    assert summary.aucs_after["classifier_auc_user_turns"] == (
        filtered.report.check("classifier_auc_user_turns").value
    )
    if len(summary.rounds) < TEXT_CLASSIFIERS.filter_rounds_max:
        assert summary.rounds[-1].queries_removed == []
        assert summary.stopped.startswith("no reference item stands out")
    assert filtered.report.filtering == summary


# --------------------------------------------------------------------------- CLI


def _digest(directory: Path) -> str:
    hashed = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            hashed.update(path.name.encode() + path.read_bytes())
    return hashed.hexdigest()


@pytest.fixture(scope="module")
def saved(
    one_phrase: tuple[GeneratedDataset, set[str]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return one_phrase[0].save(tmp_path_factory.mktemp("planted") / "dataset")


TEXT_ONLY = ["--set", 'audit.filter_classifiers=["user_turns","news_wording","facts"]']


def test_the_command_writes_the_filtered_dataset_and_leaves_the_input_alone(
    saved: Path,
    filtered_one: FilterResult,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    before = _digest(saved)
    output = tmp_path / "filtered"
    code = main(["audit", str(saved), "--filter", "--output", str(output), *TEXT_ONLY])
    out = capsys.readouterr().out
    assert _digest(saved) == before
    written = load_dataset(output)
    filtered = filtered_one
    assert [q.query_id for q in written.queries] == [q.query_id for q in filtered.dataset.queries]
    report = AuditReport.model_validate(
        json.loads((output / "audit.json").read_text(encoding="utf-8"))
    )
    assert code == (0 if report.passed else 1)
    summary = filtered.summary
    assert report.filtering is not None
    assert report.filtering.queries_removed == summary.queries_removed
    assert (
        f"Per-item tell filter: {summary.queries_removed} of {summary.queries_before} queries"
        in out
    )
    assert f"wrote {output}: {summary.queries_removed} of {summary.queries_before}" in out


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--filter"], "--filter needs --output DIR"),
        (["--output", "{tmp}/x"], "--output is for --filter"),
        (["--filter", "--output", "{tmp}/full"], "already exists and is not an empty directory"),
        (["--filter", "--output", "{saved}"], "already exists and is not an empty directory"),
        (["--filter", "--output", "{saved}/filtered"], "--output must lie outside DATASET_DIR"),
    ],
)
def test_the_command_refuses_bad_options_in_one_line(
    saved: Path,
    tmp_path: Path,
    arguments: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    clean_settings_env: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine", encoding="utf-8")
    before = _digest(saved)
    given = [a.format(tmp=tmp_path, saved=saved) for a in arguments]
    assert main(["audit", str(saved), *given]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert _digest(saved) == before
    assert (tmp_path / "full" / "keep.txt").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / "x").exists() and not (saved / "filtered").exists()
