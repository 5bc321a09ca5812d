"""Bad persona files next to good ones: each bad one is reported clearly, the good ones go through the flow.

The corpus is a PersonaLens directory holding two real users from the bundled
sample and six broken ones (invalid JSON, non-UTF-8 bytes, a missing section,
an unknown domain, a file above the size limit, a directory name that is not
a safe user id). The flow runs in this process against a real Prefect
server (the ``prefect_in_process`` fixture); its log, read back from the server, must name each bad file with
what is wrong, and the dataset must hold exactly the good users.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from memoryquest.dataset import GeneratedDataset
from memoryquest.invariants import check_invariants
from memoryquest.orchestration.flow import generate_benchmark
from memoryquest.settings import load_settings

SMALL: dict[str, Any] = {
    "generation": {"queries_per_user": 2, "candidates_per_user": 8},
    "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
}
GOOD = ["user0", "user1"]
SIZE_LIMIT = 5_000_000  # intake's default max_file_bytes, which the flow uses


def clone(sample: Path, root: Path, name: str, source: str = "user0") -> Path:
    """A copy of a sample user under another name (its profile's user_id follows)."""
    target = root / "profile" / name
    shutil.copytree(sample / "profile" / source, target)
    profile = target / "profile.json"
    document = json.loads(profile.read_text(encoding="utf-8"))
    document["demographics"]["user_id"] = name
    profile.write_text(json.dumps(document), encoding="utf-8")
    return target


def edit_profile(user_dir: Path, change: Any) -> None:
    path = user_dir / "profile.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document), encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, personalens_sample_dir: Path
) -> tuple[Path, list[str]]:
    """The directory, and the error each bad user must produce (as printed)."""
    root = tmp_path_factory.mktemp("corpus") / "data"
    for user in GOOD:
        shutil.copytree(personalens_sample_dir / "profile" / user, root / "profile" / user)

    bad_json = clone(personalens_sample_dir, root, "user_badjson")
    (bad_json / "profile.json").write_text(
        '{"demographics": {"age": "35-44"},\n "interests": [', encoding="utf-8"
    )

    non_utf8 = clone(personalens_sample_dir, root, "user_nonutf8")
    raw = (non_utf8 / "tasks.json").read_bytes()
    (non_utf8 / "tasks.json").write_bytes(raw[:40] + b"\xff\xfe" + raw[40:])

    missing = clone(personalens_sample_dir, root, "user_missing")
    edit_profile(missing, lambda d: d.pop("affinities"))

    unknown_domain = clone(personalens_sample_dir, root, "user_domain")
    edit_profile(
        unknown_domain,
        lambda d: d["affinities"].update({"Underwater Basket Weaving": {"Style": ["coiled"]}}),
    )

    big = clone(personalens_sample_dir, root, "user_big")
    padded = (big / "profile.json").read_text(encoding="utf-8") + " " * SIZE_LIMIT
    (big / "profile.json").write_text(padded, encoding="utf-8")
    big_size = (big / "profile.json").stat().st_size

    unsafe = clone(personalens_sample_dir, root, "bad id!")

    expected = [
        f"{bad_json / 'profile.json'}: invalid JSON: Expecting value (line 2, column",
        f"{non_utf8 / 'tasks.json'}: not valid UTF-8 (byte 0xff at offset 40)",
        f"{missing / 'profile.json'}: affinities: missing field",
        f"{unknown_domain / 'profile.json'}: affinities.Underwater Basket Weaving: unknown domain 'Underwater Basket Weaving'",
        f"{big / 'profile.json'}: file is {big_size} bytes, above the {SIZE_LIMIT}-byte limit",
        f"{unsafe}: skipped: user id 'bad id!' may only contain letters, digits",
    ]
    return root, expected


async def _read_logs(flow_run_id: uuid.UUID) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    only_this_run = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
    async with get_client() as client:
        logs: list[Any] = []
        while page := await client.read_logs(log_filter=only_this_run, limit=200, offset=len(logs)):
            logs.extend(page)
        return logs


def flow_logs(flow_run_id: uuid.UUID, final_message: str) -> list[str]:
    """The run's log as the server stored it (logs are shipped in batches: wait for the flow's last line)."""
    deadline = time.monotonic() + 30
    while True:
        logs = asyncio.run(_read_logs(flow_run_id))
        if (
            any(log.task_run_id is None and final_message in log.message for log in logs)
            or time.monotonic() > deadline
        ):
            return [log.message for log in logs]
        time.sleep(0.5)


def skipped(messages: list[str]) -> list[str]:
    return [
        m.removeprefix("persona skipped: ") for m in messages if m.startswith("persona skipped: ")
    ]


@pytest.mark.slow
def test_bad_persona_files_are_reported_and_the_good_ones_complete(
    prefect_in_process: dict[str, str], corpus: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, expected = corpus
    output = tmp_path / "run"
    state = asyncio.run(
        generate_benchmark(
            output=str(output),
            persona_source=str(root),
            overrides=SMALL,
            publish=False,
            return_state=True,
        )
    )
    assert state.is_completed(), state
    reported = skipped(flow_logs(state.state_details.flow_run_id, "Finished in state Completed"))
    assert len(reported) == len(expected), reported
    for message in expected:
        assert sum(line.startswith(message) for line in reported) == 1, (message, reported)

    dataset = GeneratedDataset.load(output / "dataset")
    assert [p.source_user_id for p in dataset.personas] == GOOD
    assert {q.persona_id for q in dataset.queries} == {p.persona_id for p in dataset.personas}
    assert dataset.sessions and dataset.facts and dataset.validation
    assert check_invariants(dataset, load_settings(overrides=SMALL)) == []


def test_a_selection_of_only_bad_personas_fails_naming_each(
    prefect_in_process: dict[str, str], corpus: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, _ = corpus
    output = tmp_path / "run"
    state = asyncio.run(
        generate_benchmark(
            output=str(output),
            persona_source=str(root),
            users=["../../etc", "user7", "user_missing"],
            overrides=SMALL,
            publish=False,
            return_state=True,
        )
    )
    assert state.is_failed()
    assert f"no persona could be loaded from {root}" in (state.message or "")
    reported = skipped(flow_logs(state.state_details.flow_run_id, "Finished in state Failed"))
    assert reported == [
        f"{root}: user_ids: rejected: user id '../../etc' contains a path separator",
        f"{root / 'profile' / 'user7'}: unknown user id 'user7': no such directory",
        f"{root / 'profile' / 'user_missing' / 'profile.json'}: affinities: missing field",
    ]
    assert not (output / "dataset").exists()
