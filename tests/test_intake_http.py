"""PersonaLens intake over HTTP, against a real loopback server serving the bundled sample.

Routes (base URLs):
  /data    the sample, file for file (upstream raw layout)
  /broken  HTTP 500 for everything
  /slow    answers only after the client has timed out
  /mixed   the sample, except user1 -> 500, user2 -> slow, user3 profile too big (with
           Content-Length), user4 tasks_md.json -> 404, user5 profile too big (no length)
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from memoryquest.intake import IntakeSourceError, PersonaSelection, load_personas

TIMEOUT = 10.0  # generous: real files must never time out on a busy machine
SHORT_TIMEOUT = 0.5  # only where the server is made to stall
MIXED_TIMEOUT = 2.0  # real files and one stalled user in the same run
LIMIT = 100_000


@dataclass
class LoopbackServer:
    url: str
    requests: list[str] = field(default_factory=list)


class PersonaLensHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]
    release: threading.Event

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self.requests.append(self.path)
        prefix, _, rest = self.path.lstrip("/").partition("/")
        if prefix == "broken" or (prefix == "mixed" and rest.startswith("profile/user1/")):
            self.send_error(500, "Internal Server Error")
            return
        if prefix == "slow" or (prefix == "mixed" and rest.startswith("profile/user2/")):
            self.release.wait(5)
            self.send_error(503)
            return
        if prefix == "mixed" and rest == "profile/user3/profile.json":
            body = b" " * (LIMIT * 2)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if prefix == "mixed" and rest == "profile/user5/profile.json":
            self.send_response(200)  # no Content-Length: the body ends when the connection closes
            self.end_headers()
            self.wfile.write(b" " * (LIMIT * 2))
            return
        if prefix == "mixed" and rest == "profile/user4/tasks_md.json":
            self.send_error(404, "Not Found")
            return
        if prefix not in ("data", "mixed"):
            self.send_error(404, "Not Found")
            return
        self.path = "/" + rest
        super().do_GET()


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a stalled handler writing to a client that already gave up is expected here


@pytest.fixture(scope="module")
def loopback(personalens_sample_dir: Path) -> Iterator[LoopbackServer]:
    requests: list[str] = []
    release = threading.Event()
    handler = type("Handler", (PersonaLensHandler,), {"requests": requests, "release": release})
    server = QuietServer(("127.0.0.1", 0), partial(handler, directory=str(personalens_sample_dir)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield LoopbackServer(f"http://127.0.0.1:{server.server_address[1]}", requests)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_http_intake_matches_local_intake(
    loopback: LoopbackServer, personalens_sample_dir: Path
) -> None:
    selection = PersonaSelection(user_ids=["user0", "user17", "user3"])
    over_http = load_personas(f"{loopback.url}/data", selection, timeout_seconds=TIMEOUT)
    local = load_personas(personalens_sample_dir, selection)
    assert over_http.errors == []
    assert [p.source_user_id for p in over_http.personas] == ["user0", "user17", "user3"]
    assert [p.model_dump_json() for p in over_http.personas] == [
        p.model_dump_json() for p in local.personas
    ]
    assert over_http.personas[0].demographics.reside_country == "Canada"


def test_http_count_maps_to_upstream_user_numbers(loopback: LoopbackServer) -> None:
    result = load_personas(
        f"{loopback.url}/data/", PersonaSelection(count=12), timeout_seconds=TIMEOUT
    )
    assert result.errors == []
    assert [p.source_user_id for p in result.personas] == [f"user{i}" for i in range(12)]


def test_http_range_beyond_the_source_reports_unknown_users(loopback: LoopbackServer) -> None:
    result = load_personas(
        f"{loopback.url}/data", PersonaSelection(start=28, stop=31), timeout_seconds=TIMEOUT
    )
    assert [p.source_user_id for p in result.personas] == ["user28", "user29"]
    assert len(result.errors) == 1
    error = result.errors[0]
    assert error.file == f"{loopback.url}/data/profile/user30/profile.json"
    assert error.field is None
    assert error.message.startswith("unknown user id 'user30': HTTP 404")


def test_http_faults_are_per_user_errors(loopback: LoopbackServer) -> None:
    base = f"{loopback.url}/mixed"
    result = load_personas(
        base, PersonaSelection(start=0, stop=7), max_file_bytes=LIMIT, timeout_seconds=MIXED_TIMEOUT
    )
    assert [p.source_user_id for p in result.personas] == ["user0", "user6"]
    errors = {(e.file.removeprefix(base), e.field, e.message) for e in result.errors}
    assert (
        "/profile/user1/profile.json",
        None,
        "server error: HTTP 500 Internal Server Error",
    ) in errors
    assert ("/profile/user2/profile.json", None, f"timed out after {MIXED_TIMEOUT:g} s") in errors
    assert (
        "/profile/user3/profile.json",
        None,
        f"file is {LIMIT * 2} bytes, above the {LIMIT}-byte limit",
    ) in errors
    assert (
        "/profile/user4/tasks_md.json",
        None,
        "file is missing: HTTP 404 Not Found",
    ) in errors  # reason set by the route
    assert (
        "/profile/user5/profile.json",
        None,
        f"file is larger than the {LIMIT}-byte limit",
    ) in errors
    # one error per failing user: after a server error or a timeout on the profile,
    # the user's other files are not requested
    assert len(result.errors) == 5
    assert not [
        path
        for path in loopback.requests
        if path.startswith(("/mixed/profile/user1/tasks", "/mixed/profile/user2/tasks"))
    ]


def test_http_server_error_everywhere(loopback: LoopbackServer) -> None:
    result = load_personas(
        f"{loopback.url}/broken", PersonaSelection(count=2), timeout_seconds=TIMEOUT
    )
    assert result.personas == []
    assert len(result.errors) == 2
    assert result.errors[0].file == f"{loopback.url}/broken/profile/user0/profile.json"
    assert result.errors[0].message == "server error: HTTP 500 Internal Server Error"


def test_http_timeout(loopback: LoopbackServer) -> None:
    result = load_personas(
        f"{loopback.url}/slow", PersonaSelection(user_ids=["user0"]), timeout_seconds=SHORT_TIMEOUT
    )
    assert result.personas == []
    assert [e.message for e in result.errors] == [f"timed out after {SHORT_TIMEOUT:g} s"]
    assert result.errors[0].file == f"{loopback.url}/slow/profile/user0/profile.json"


def test_http_unsafe_ids_are_never_requested(loopback: LoopbackServer) -> None:
    before = len(loopback.requests)
    result = load_personas(
        f"{loopback.url}/data",
        PersonaSelection(user_ids=["../profile/user0", "user%2Fx", "", "user1"]),
        timeout_seconds=TIMEOUT,
    )
    assert [p.source_user_id for p in result.personas] == ["user1"]
    assert [(e.file, e.field) for e in result.errors] == [(f"{loopback.url}/data", "user_ids")] * 3
    assert "contains a path separator" in result.errors[0].message
    assert "may only contain letters" in result.errors[1].message
    assert "user id is empty" in result.errors[2].message
    assert all("/user1/" in path for path in loopback.requests[before:])


def test_connection_refused_is_a_per_user_error() -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = load_personas(
        f"http://127.0.0.1:{port}/data", PersonaSelection(count=1), timeout_seconds=TIMEOUT
    )
    assert result.personas == []
    assert result.errors[0].file == f"http://127.0.0.1:{port}/data/profile/user0/profile.json"
    assert result.errors[0].message.startswith("request failed: ConnectError")


def test_http_needs_an_explicit_selection() -> None:
    with pytest.raises(IntakeSourceError, match="cannot be listed"):
        load_personas("http://127.0.0.1:9/data")
    with pytest.raises(IntakeSourceError, match="cannot be listed"):
        load_personas("http://127.0.0.1:9/data", PersonaSelection(start=5))


def test_malformed_http_source() -> None:
    with pytest.raises(IntakeSourceError, match="is not an http"):
        load_personas("http:///data", PersonaSelection(count=1))
