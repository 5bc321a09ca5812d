"""Issue #13, usage row: what a run spent stays accurate across kills and resumes.

The ledger appends to ``<output>/usage.jsonl`` as it goes (a real endpoint's
answers at once), so an attempt killed with SIGKILL keeps what it paid for;
the next attempt reads it back and the manifest reports the total, split
into this attempt and the earlier attempts it reused. The full
kill-resume-compare run through the command line is in ``test_hardening_runs.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

from memoryquest.contracts import RunManifest, StageUsage
from memoryquest.llm.accounting import USAGE_FILE, UsageJournal, UsageLedger, merge_usage

KILLED_ATTEMPT = """
import os, signal, sys
from memoryquest.llm.accounting import UsageLedger
ledger = UsageLedger()
ledger.write_through = True
ledger.persist(sys.argv[1])
for _ in range(3):
    ledger.chat("queries", input_tokens=1000, output_tokens=200, cached_tokens=0, cost_usd=0.0125, approximate=False)
ledger.embedding("queries", tokens=50, cost_usd=0.000001, approximate=False)
os.kill(os.getpid(), signal.SIGKILL)  # no close(), no atexit: as a kill -9 leaves it
"""


def manifest_with(usage: list[StageUsage], wall_seconds: float = 2.0) -> RunManifest:
    return RunManifest(
        run_id="r",
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        package_version="0",
        simulated=False,
        backend="openai",
        chat_model="gpt-4o-mini",
        embedder="local",
        seed=0,
        settings={},
        prompts=[],
        usage=usage,
        total_cost_usd=round(sum(u.cost_usd for u in usage), 6),
        persona_ids=[],
        wall_seconds=wall_seconds,
    )


def record(ledger: UsageLedger, stage: str, calls: int, cost: float) -> None:
    for _ in range(calls):
        ledger.chat(
            stage,
            input_tokens=100,
            output_tokens=10,
            cached_tokens=5,
            cost_usd=cost,
            approximate=False,
        )


def test_a_killed_attempt_keeps_what_it_paid_and_the_next_one_adds_it(tmp_path: Path) -> None:
    journal = tmp_path / USAGE_FILE
    killed = subprocess.run([sys.executable, "-c", KILLED_ATTEMPT, str(journal)], timeout=120)
    assert killed.returncode == -9
    earlier = UsageJournal.read(journal)
    assert earlier.attempts == 1
    (row,) = earlier.rows
    assert (row.requests, row.input_tokens, row.output_tokens, row.embedding_requests) == (
        3,
        3000,
        600,
        1,
    )
    assert abs(row.cost_usd - 0.037501) < 1e-9

    ledger = UsageLedger()
    ledger.write_through = True
    ledger.persist(journal)
    record(ledger, "queries", 2, 0.01)
    record(ledger, "dialogues", 1, 0.005)
    manifest = ledger.annotate(manifest_with(ledger.rows()))
    ledger.close()

    totals = {u.stage: u for u in manifest.usage}
    assert totals["queries"].requests == 5 and totals["dialogues"].requests == 1
    assert totals["queries"].input_tokens == 3200
    assert manifest.attempts == 2
    assert manifest.total_cost_usd == round(0.037501 + 0.025, 6)
    assert manifest.cost_this_attempt_usd == 0.025 and manifest.reused_cost_usd == 0.037501
    assert [u.stage for u in manifest.usage_this_attempt] == ["queries", "dialogues"]
    assert [(u.stage, u.requests) for u in manifest.reused_from_cache] == [("queries", 3)]
    assert (
        abs(manifest.cost_this_attempt_usd + manifest.reused_cost_usd - manifest.total_cost_usd)
        < 1e-9
    )
    assert (
        manifest.wall_seconds_all_attempts is not None and manifest.wall_seconds_all_attempts >= 2.0
    )

    # A third attempt that finds everything cached spends nothing and reports the same total.
    third = UsageLedger()
    third.persist(journal)
    again = third.annotate(manifest_with(third.rows()))
    third.close()
    assert again.attempts == 3 and again.cost_this_attempt_usd == 0
    assert again.total_cost_usd == manifest.total_cost_usd
    assert [(u.stage, u.requests) for u in again.usage] == [("queries", 5), ("dialogues", 1)]


def test_a_torn_last_line_is_skipped_and_the_next_attempt_starts_a_new_one(tmp_path: Path) -> None:
    journal = tmp_path / USAGE_FILE
    first = UsageLedger()
    first.write_through = True
    first.persist(journal)
    record(first, "queries", 1, 0.5)
    first.close()
    with journal.open("ab") as handle:
        handle.write(
            b'{"attempt":"x","at":"2026-01-01T00:00:00+00:00","usage":[{"stage":"queries","requ'
        )
    second = UsageLedger()
    second.persist(journal)
    assert second.earlier.rows[0].requests == 1 and second.earlier.attempts == 1
    second.close()
    lines = journal.read_bytes().splitlines()
    assert all(json.loads(line) for line in lines if not line.startswith(b'{"attempt":"x"'))


def test_the_simulators_free_calls_are_written_in_batches(tmp_path: Path) -> None:
    journal = tmp_path / USAGE_FILE
    ledger = UsageLedger()  # write_through off: the simulator costs nothing
    ledger.persist(journal, flush_seconds=1.0)
    with ledger.timing("queries"):
        record(ledger, "queries", 500, 0.0)
        time.sleep(1.1)
        record(ledger, "queries", 1, 0.0)  # the first record after flush_seconds writes the batch
        assert UsageJournal.read(journal).rows[0].requests == 501
        record(ledger, "queries", 9, 0.0)
        assert UsageJournal.read(journal).rows[0].requests == 501
    assert UsageJournal.read(journal).rows[0].requests == 510  # the stage went idle: written
    assert len(journal.read_bytes().splitlines()) <= 6  # not one line per call
    ledger.close()


def test_every_paid_answer_is_on_disk_before_the_next(tmp_path: Path) -> None:
    journal = tmp_path / USAGE_FILE
    ledger = UsageLedger()
    ledger.write_through = True
    ledger.persist(journal, flush_seconds=3600)
    for calls in range(1, 6):
        record(ledger, "memory", 1, 0.001)
        assert UsageJournal.read(journal).rows[0].requests == calls
    ledger.close()


def test_merge_usage_sums_per_stage_in_first_seen_order() -> None:
    a = [
        StageUsage(stage="queries", requests=2, cost_usd=0.1),
        StageUsage(stage="memory", requests=1),
    ]
    b = [
        StageUsage(stage="pgr", requests=4),
        StageUsage(stage="queries", requests=1, cost_usd=0.05),
    ]
    merged = merge_usage(a, b)
    assert [(u.stage, u.requests) for u in merged] == [("queries", 3), ("memory", 1), ("pgr", 4)]
    assert abs(merged[0].cost_usd - 0.15) < 1e-12


def test_a_client_with_a_real_endpoint_writes_through(tmp_path: Path) -> None:
    from memoryquest.llm.factory import build_client
    from memoryquest.settings import Settings
    from memoryquest.testing import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        settings = Settings(
            output_dir=tmp_path,
            endpoint={
                "backend": "openai",
                "base_url": server.url,
                "simulator_hints": True,  # the fake server answers from the simulator
                "embedder": "local",
                "chat_model": "gpt-4o-mini",
            },
        )
        client = build_client(settings)
        assert client.ledger.write_through
    simulated = build_client(Settings(output_dir=tmp_path))
    assert not simulated.ledger.write_through
