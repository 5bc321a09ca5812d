"""prefect.yaml end to end: a real Prefect server (SQLite, 127.0.0.1), a process work pool,
`prefect deploy`, a worker elsewhere, and `prefect deployment run ... --watch`.

The worker starts in an empty directory with nothing of memoryquest on its Python path: the
flow run gets the code only through the deployment's pull step, which clones the repository
`prefect deploy` recorded (here a local repository of the checkout as it is now).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import stop_process_group

from memoryquest.orchestration.deployment_source import DeploymentSourceError, git_source
from memoryquest.publish import load_published

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))


def _run(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_a_worker_elsewhere_runs_the_deployment_from_its_pulled_code(
    prefect_api: dict[str, str], working_tree_repository: dict[str, str], tmp_path: Path
) -> None:
    deploy_env = {**prefect_api, **working_tree_repository}
    _run([PREFECT, "work-pool", "create", "memoryquest", "--type", "process"], deploy_env)
    _run([PREFECT, "--no-prompt", "deploy", "--name", "offline"], deploy_env)

    elsewhere = tmp_path / "worker-home"
    elsewhere.mkdir()
    worker_env = {k: v for k, v in prefect_api.items() if k != "PYTHONPATH"}
    worker_env["PREFECT_LOGGING_LEVEL"] = "INFO"  # the run's log names its pull step
    worker_log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "memoryquest", "--limit", "1"],
        env=worker_env,
        cwd=elsewhere,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output = tmp_path / "deployed-run"
    params = {
        "output": str(output),
        "users": ["user3"],
        "count": None,
        "allow_failed_audit": True,  # about the deployment, not the dataset's validity
        "overrides": {
            "generation": {"queries_per_user": 2, "candidates_per_user": 8},
            "pgr": {"methods": ["query_only", "pgr_tot"], "judges": ["provenance"]},
        },
    }
    try:
        out = _run(
            [
                PREFECT,
                "deployment",
                "run",
                "memoryquest-generate/offline",
                "--params",
                json.dumps(params),
                "--watch",
            ],
            prefect_api,
            timeout=600,
        )
    finally:
        stop_process_group(worker)
        worker_log.close()
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert "Completed" in out, out + log
    published = load_published(output / "published")
    assert [p.source_user_id for p in published.personas] == ["user3"]
    assert published.queries and published.sessions and published.facts and published.validation
    assert (output / "published" / "README.md").is_file()
    # The run got its code by cloning the repository, not from a directory the worker shares with
    # the deployment; and it left nothing in the worker's own directory.
    assert "Executing deployment step: git_clone" in log, log
    assert "set_working_directory" not in log
    assert list(elsewhere.iterdir()) == []


# --------------------------------------------------------------------------- where the code comes from


def _git(directory: Path, *args: str) -> str:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    return subprocess.run(
        [*git, *args], cwd=directory, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    path = tmp_path / "checkout"
    path.mkdir()
    _git(path, "init", "-q", "-b", "work")
    (path / "README.md").write_text("x\n", encoding="utf-8")
    _git(path, "add", "README.md")
    _git(path, "commit", "-q", "-m", "one")
    (path / "flows").mkdir()
    return path


def test_the_source_defaults_to_the_checkout_its_branch_and_its_output(checkout: Path) -> None:
    # Run from a subdirectory, as `prefect deploy` may be: the checkout's top is what counts.
    assert git_source(directory=str(checkout / "flows")) == {
        "repository": str(checkout),
        "branch": "work",
        "output": str(checkout / "output"),
    }


def test_the_origin_remote_is_the_default_repository(checkout: Path) -> None:
    _git(checkout, "remote", "add", "origin", "https://git.example/memoryquest.git")
    assert (
        git_source(directory=str(checkout))["repository"] == "https://git.example/memoryquest.git"
    )


def test_the_environment_names_each_part(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    given = git_source("ssh://host/repo.git", "v1.2", "shared/out", directory=str(checkout))
    assert given == {
        "repository": "ssh://host/repo.git",
        "branch": "v1.2",
        "output": str(tmp_path / "shared" / "out"),
    }


def test_a_detached_head_or_no_checkout_is_one_clear_error(checkout: Path, tmp_path: Path) -> None:
    _git(checkout, "checkout", "-q", "--detach")
    with pytest.raises(DeploymentSourceError, match="MEMORYQUEST_BRANCH"):
        git_source(directory=str(checkout))
    assert git_source(branch="work", directory=str(checkout))["branch"] == "work"
    bare = tmp_path / "not-a-checkout"
    bare.mkdir()
    with pytest.raises(DeploymentSourceError, match="rev-parse"):
        git_source(directory=str(bare))
