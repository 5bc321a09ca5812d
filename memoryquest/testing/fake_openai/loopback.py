"""The HTTP server the fakes run on: the stdlib ``ThreadingHTTPServer`` (one thread per
connection, HTTP/1.1 keep-alive) on 127.0.0.1, port 0, run in a background thread.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 for one test or benchmark: ``with Server(...) as s``.

    Subclasses name their request handler (whose ``owner`` is set to the server) and backlog.
    """

    backlog = 128  # ~30 concurrent connects must not overflow the backlog
    thread_name = "loopback-openai"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class; each request's handler reads the server as ``owner``."""
        raise NotImplementedError

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        handler = type("Handler", (self.handler(),), {"owner": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.request_queue_size = self.backlog
        httpd.allow_reuse_address = True
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on latency or timeout faults
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"the {type(self).__name__} is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL for the SDK (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"


def write_response(
    handler: BaseHTTPRequestHandler,
    status: int,
    data: bytes,
    content_type: str,
    headers: dict[str, str],
) -> None:
    """Send one answer; a client that hung up meanwhile only closes the connection."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True
