"""Issue #13 end to end: the ``memoryquest`` command against a loopback OpenAI-compatible server.

Three runs of the real console script, sharing one Prefect home (its database
is migrated once):

1. a refused key: one stderr line naming the endpoint, one request, no Prefect;
2. a key revoked mid-run by a server that echoes it in the 401 body: the flow
   stops without retrying, and the key is in none of stderr, the logs, the
   Prefect database, the request cache or the output;
3. the scenario the probe ran by hand — a run takes over a dead run's lock; a
   second run into the same directory fails at once naming the first; the
   first is killed with SIGKILL once it has paid for some answers, and its
   temporary Prefect server goes with it; a third run resumes, succeeds with
   nothing alarming on stderr and no DNS lookup, cleans the staging
   leftovers of killed publishes, and reports exactly what the server billed
   across both attempts (manifest and card), split into this attempt and the
   reused one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryquest.llm.accounting import USAGE_FILE, UsageJournal
from memoryquest.llm.prices import PriceTable
from memoryquest.llm.tokens import token_counter
from memoryquest.orchestration.output_lock import LOCK_FILE
from memoryquest.testing import FakeOpenAIServer, Fault, LoggedRequest

pytestmark = pytest.mark.slow

MODEL = "gpt-4o-mini"  # priced: every answer costs something
API_KEY = f"sk-hardening-{uuid.uuid4().hex}"
CLI = str(Path(sys.executable).with_name("memoryquest"))
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
DNS_RECORDER = """
import os, socket

_real = socket.getaddrinfo


def _recorded(host, *args, **kwargs):
    with open(os.environ["MEMORYQUEST_TEST_DNS_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {host}\\n")
    return _real(host, *args, **kwargs)


socket.getaddrinfo = _recorded
"""


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prefect-home")


@pytest.fixture(scope="module")
def dns_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    (site / "sitecustomize.py").write_text(DNS_RECORDER, encoding="utf-8")
    return site / "lookups.log"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key=API_KEY, echo_key=True) as server:
        yield server


def environment(prefect_home: Path, dns_log: Path, key: str = API_KEY) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("MEMORYQUEST_", "OPENAI_", "AZURE_OPENAI_", "PREFECT_", "DO_NOT_TRACK")
        )
    }
    env.update(
        OPENAI_API_KEY=key,
        PREFECT_HOME=str(prefect_home),
        PYTHONPATH=os.pathsep.join([str(dns_log.parent), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        MEMORYQUEST_TEST_DNS_LOG=str(dns_log),
    )
    return env


def generate_args(server: FakeOpenAIServer, output: Path, *extra: str) -> list[str]:
    settings = {
        "endpoint.backend": "openai",
        "endpoint.base_url": server.url,
        "endpoint.simulator_hints": "true",  # the fake server answers from the simulator
        "endpoint.embedder": "local",
        "endpoint.chat_model": MODEL,
        "endpoint.max_retries": "3",
        "limits.max_concurrency": "2",
        "limits.retry_base_seconds": "0.05",
        "limits.retry_max_seconds": "0.5",
        "generation.queries_per_user": "2",
        "generation.candidates_per_user": "8",
        "pgr.methods": "[query_only, pgr_tot]",
        "pgr.judges": "[provenance]",
    }
    args = [CLI, "generate", "--users", "user0", "--output", str(output), *extra]
    for name, value in settings.items():
        args += ["--set", f"{name}={value}"]
    return args


def start(args: list[str], env: dict[str, str], logs: Path, name: str) -> subprocess.Popen[bytes]:
    with open(logs / f"{name}.out", "wb") as out, open(logs / f"{name}.err", "wb") as err:
        return subprocess.Popen(args, env=env, stdout=out, stderr=err, start_new_session=True)


def finish(proc: subprocess.Popen[bytes], timeout: float = 600) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_for(
    condition: Callable[[], bool],
    what: str,
    timeout: float = 300,
    proc: subprocess.Popen[bytes] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc is None or proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
        time.sleep(0.05)


def files_holding(secret: str, *roots: Path) -> list[str]:
    needle = secret.encode()
    found = []
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(str(path))
    return found


def chat_answers(requests: list[LoggedRequest]) -> list[LoggedRequest]:
    return [r for r in requests if r.path.endswith("/chat/completions") and r.status == 200]


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")  # a zombie no longer listens or holds memory


def journal_requests(output: Path) -> int:
    rows = UsageJournal.read(output / USAGE_FILE).rows
    return sum(row.requests for row in rows)


# --------------------------------------------------------------------------- 1. a refused key


def test_a_refused_key_is_one_line_before_any_work(
    server: FakeOpenAIServer, prefect_home: Path, dns_log: Path, tmp_path: Path
) -> None:
    wrong = f"sk-wrong-{uuid.uuid4().hex}"
    home = tmp_path / "untouched-prefect-home"
    env = environment(home, dns_log, key=wrong)
    output = tmp_path / "run"
    started = time.perf_counter()
    result = subprocess.run(
        generate_args(server, output), env=env, capture_output=True, timeout=120
    )
    elapsed = time.perf_counter() - started
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert stderr.splitlines() == [
        f"memoryquest: error: authentication failed for {server.url} (HTTP 401: Error code: 401 - "
        "Incorrect API key provided: ****. Authorization: Bearer ****); check endpoint.api_key "
        "(or OPENAI_API_KEY / AZURE_OPENAI_API_KEY)"
    ]
    assert wrong not in stderr and wrong not in result.stdout.decode()
    assert [(r.method, r.path, r.status) for r in server.requests] == [
        ("GET", "/v1/models", 401)
    ]  # once
    assert not home.exists()  # no Prefect server was started
    assert files_holding(wrong, output) == []
    assert not (output / LOCK_FILE).exists()
    print(f"refused key: {elapsed:.1f} s")


# --------------------------------------------------------------------------- 2. a key revoked mid-run


def test_a_key_revoked_mid_run_stops_the_flow_and_is_nowhere(
    server: FakeOpenAIServer, prefect_home: Path, dns_log: Path, tmp_path: Path
) -> None:
    # Every chat request from now on: 401, and the key in the body.
    server.script(*[Fault.unauthorized() for _ in range(50)])
    logs = tmp_path / "logs"
    logs.mkdir()
    output = tmp_path / "run"
    started = time.perf_counter()
    proc = start(generate_args(server, output), environment(prefect_home, dns_log), logs, "revoked")
    code = finish(proc)
    elapsed = time.perf_counter() - started
    stderr = (logs / "revoked.err").read_text(errors="replace")
    assert code == 2, stderr[-3000:]
    last = stderr.splitlines()[-1]
    assert last.startswith(
        f"memoryquest: error: authentication failed for {server.url} (HTTP 401: "
    ), last
    # Not retried: not by the client, not by Prefect; each request that got a 401 was sent once.
    refused = [r for r in server.requests if r.status == 401]
    assert refused and all(r.path.endswith("/chat/completions") for r in refused)
    bodies = [json.dumps(r.body, sort_keys=True) for r in refused]
    assert len(bodies) == len(set(bodies)), "a refused request was sent again"
    assert "Retry 1/2" not in stderr
    # This was the first run on a fresh Prefect home: no telemetry, so no heartbeat racing the migration.
    for word in ("telemetry", "database is locked"):
        assert word not in stderr, f"{word!r} on stderr"
    # The server printed the key 50 times' worth of chances; it is nowhere.
    # It was sent (so it could leak) ...
    assert API_KEY in json.dumps([r.headers for r in server.requests])
    leaks = files_holding(API_KEY, logs, output, prefect_home)
    assert leaks == [], leaks
    # ... and the Prefect database was among the files searched.
    assert any(p.name.startswith("prefect.db") for p in prefect_home.iterdir())
    print(f"revoked key: {elapsed:.1f} s, {len(refused)} refused requests")


# --------------------------------------------------------------------------- 3. lock, kill, resume, compare


def prompt_tokens(request: LoggedRequest) -> int:
    return token_counter(MODEL).count_messages(request.body["messages"])


def test_one_writer_kill_resume_and_an_accurate_bill(
    server: FakeOpenAIServer, prefect_home: Path, dns_log: Path, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    output = tmp_path / "run"
    output.mkdir()
    env = environment(prefect_home, dns_log)
    dns_log.unlink(missing_ok=True)
    host = socket.gethostname()
    # A lock left by a run that died (this host, a pid that is not running).
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (output / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": host}), encoding="utf-8")
    server.latency = 0.05

    # Run 1 takes the dead run's lock over and starts paying for answers.
    first = start(generate_args(server, output), env, logs, "first")
    try:

        def owner() -> Any:
            try:
                return json.loads((output / LOCK_FILE).read_text(encoding="utf-8")).get("pid")
            except (OSError, ValueError):
                return None

        wait_for(lambda: owner() == first.pid, "lock taken over by the first run", proc=first)

        # Run 2 into the same directory fails at once, naming run 1.
        second = subprocess.run(
            generate_args(server, output), env=env, capture_output=True, timeout=120
        )
        refused_while_running = first.poll() is None
        lines = second.stderr.decode().splitlines()
        assert second.returncode == 2, lines
        assert len(lines) == 1 and lines[0].startswith(
            f"memoryquest: error: output directory {output} is in use by another memoryquest run "
            f"(pid {first.pid} on {host}, since "
        ), lines
        assert refused_while_running  # it did not wait for run 1 to end

        # Let run 1 pay for some answers, then hold new ones until every answer given is on its bill.
        wait_for(lambda: len(chat_answers(server.requests)) >= 6, "six paid answers", proc=first)
        server.latency = 60.0
        wait_for(
            lambda: journal_requests(output) == len(chat_answers(server.requests)),
            "every answer given in usage.jsonl",
            timeout=60,
            proc=first,
        )
        paid_before_kill = chat_answers(server.requests)
        log_position = len(server.requests)
        below = descendants(first.pid)
        assert below, "the first run has no Prefect server child"
        # The CLI only: its server is in a process group of its own.
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    # Its temporary Prefect server went with it.
    wait_for(
        lambda: all(gone(pid) for pid in below), "the orphaned Prefect server to exit", timeout=30
    )
    server.latency = 0.0

    # Staging leftovers of killed publishes: an old-style one and one whose publisher is dead.
    leftovers = [
        output / ".published.publish-abc123xy",
        output / f".published.publish-{dead.pid}-q1w2e3",
    ]
    for leftover in leftovers:
        (leftover / "data").mkdir(parents=True)

    # Run 3 resumes (and publishes, audit findings or not: this test is about the run, not the data).
    started = time.perf_counter()
    third = start(generate_args(server, output, "--allow-failed-audit"), env, logs, "third")
    code = finish(third)
    resumed_in = time.perf_counter() - started
    stderr = (logs / "third.err").read_text(errors="replace")
    assert code == 0, stderr[-5000:]

    # Quiet and offline: nothing alarming on stderr, no name looked up but loopback.
    for word in ("Traceback", "telemetry", "database is locked", "| ERROR", "| WARNING"):
        assert word not in stderr, f"{word!r} on stderr:\n{stderr[-3000:]}"
    hosts = {line.split(" ", 1)[1] for line in dns_log.read_text().splitlines()}
    assert hosts and hosts <= LOOPBACK, hosts
    # Housekeeping: leftovers cleaned, the lock released.
    assert not any(p.exists() for p in leftovers)
    assert not (output / LOCK_FILE).exists()
    assert not [p for p in output.iterdir() if ".publish-" in p.name]

    # The bill: exactly what the server answered, over both attempts.
    paid_after = chat_answers(server.requests[log_position:])
    paid = paid_before_kill + paid_after
    manifest = json.loads((output / "dataset" / "manifest.json").read_text(encoding="utf-8"))
    usage, this, reused = (
        manifest["usage"],
        manifest["usage_this_attempt"],
        manifest["reused_from_cache"],
    )
    assert manifest["attempts"] == 2
    assert sum(u["requests"] for u in usage) == len(paid)
    assert sum(u["requests"] for u in reused) == len(paid_before_kill)
    assert sum(u["requests"] for u in this) == len(paid_after)
    input_tokens = sum(u["input_tokens"] for u in usage)
    output_tokens = sum(u["output_tokens"] for u in usage)
    assert input_tokens == sum(prompt_tokens(r) for r in paid)  # the server's own count
    expected = PriceTable.load().cost(MODEL, input_tokens, output_tokens, 0)
    assert abs(manifest["total_cost_usd"] - expected) < 1e-5
    assert manifest["cost_this_attempt_usd"] > 0 and manifest["reused_cost_usd"] > 0
    assert (
        abs(
            manifest["cost_this_attempt_usd"]
            + manifest["reused_cost_usd"]
            - manifest["total_cost_usd"]
        )
        < 1e-5
    )
    assert manifest["wall_seconds_all_attempts"] > manifest["wall_seconds"]
    # Nothing answered before the kill was bought again.
    before = {json.dumps(r.body, sort_keys=True) for r in paid_before_kill}
    assert not [r for r in paid_after if json.dumps(r.body, sort_keys=True) in before]
    # The published manifest and card say the same.
    published = json.loads((output / "published" / "manifest.json").read_text(encoding="utf-8"))
    assert published["total_cost_usd"] == manifest["total_cost_usd"] > 0
    card = (output / "published" / "README.md").read_text(encoding="utf-8")
    assert f"total cost ${manifest['total_cost_usd']:.4f}" in card
    # And the key, used all along, was written down nowhere.
    assert files_holding(API_KEY, logs, output, prefect_home) == []
    print(f"resumed run {resumed_in:.1f} s; {len(paid)} paid answers")


def test_the_dns_recorder_works(dns_log: Path, tmp_path: Path) -> None:
    """Guard for the offline check above: the recorder does see a lookup in a child process."""
    log = tmp_path / "lookups.log"
    env = {**os.environ, "PYTHONPATH": str(dns_log.parent), "MEMORYQUEST_TEST_DNS_LOG": str(log)}
    subprocess.run(
        [sys.executable, "-c", "import socket; socket.getaddrinfo('localhost', 80)"],
        env=env,
        check=True,
    )
    assert re.fullmatch(r"\d+ localhost\n", log.read_text())
