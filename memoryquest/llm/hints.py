"""Request headers that tell a test server which template and variables a prompt came from.

A real model reads the rendered prompt; the bundled fake server
(``memoryquest.testing.fake_openai``) answers from the offline simulator,
which needs the template id and the structured variables instead. Every
request carries the template id and version (small and harmless, handy in
proxy logs). The variables (compressed JSON, 30–40 KB for a dialogue) are
sent only when ``endpoint.simulator_hints`` is on, which only the tests and
benchmarks that start the fake server do: no server, local or remote,
receives the persona data twice by default.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from typing import Any

TEMPLATE_HEADER = "X-MemoryQuest-Template"
VERSION_HEADER = "X-MemoryQuest-Template-Version"
SEED_HEADER = "X-MemoryQuest-Seed"
VARIABLES_HEADER = "X-MemoryQuest-Variables"


@dataclass(frozen=True)
class Hints:
    template_id: str
    version: int
    seed: int
    variables: dict[str, Any] | None


def encode_hints(
    template_id: str, version: int, seed: int, variables: dict[str, Any] | None
) -> dict[str, str]:
    headers = {TEMPLATE_HEADER: template_id, VERSION_HEADER: str(version), SEED_HEADER: str(seed)}
    if variables is not None:
        packed = zlib.compress(
            json.dumps(variables, ensure_ascii=False, default=str).encode("utf-8"), 6
        )
        headers[VARIABLES_HEADER] = base64.urlsafe_b64encode(packed).decode("ascii")
    return headers


def decode_hints(headers: Any) -> Hints | None:
    """From any header mapping (names compared case-insensitively); None without a template header."""
    headers = {str(name).lower(): value for name, value in headers.items()}
    template_id = headers.get(TEMPLATE_HEADER.lower())
    if not template_id:
        return None
    packed = headers.get(VARIABLES_HEADER.lower())
    variables = None
    if packed:
        variables = json.loads(zlib.decompress(base64.urlsafe_b64decode(packed.encode("ascii"))))
    return Hints(
        template_id=template_id,
        version=int(headers.get(VERSION_HEADER.lower()) or 0),
        seed=int(headers.get(SEED_HEADER.lower()) or 0),
        variables=variables,
    )
