"""Running ``memoryquest generate`` as a user does, in a subprocess whose stdout is not a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("memoryquest"))

# Two kept queries per persona, PGR with two methods and one judge: a run of seconds.
SMALL = [
    "--queries-per-user",
    "2",
    "--set",
    "generation.candidates_per_user=8",
    "--set",
    "pgr.methods=[query_only, pgr_tot]",
    "--set",
    "pgr.judges=[provenance]",
]


def environment(prefect_home: Path) -> dict[str, str]:
    """The caller's environment without its memoryquest, OpenAI or Prefect settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMORYQUEST_", "OPENAI_", "AZURE_OPENAI_", "PREFECT_"))
    }
    env["PREFECT_HOME"] = str(prefect_home)
    return env


def generate(
    prefect_home: Path, output: Path, *extra: str, publish: bool = False, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``memoryquest generate`` on the bundled sample with the offline simulator (the default)."""
    publishing = [] if publish else ["--no-publish"]
    return subprocess.run(
        [CLI, "generate", "--output", str(output), *SMALL, *publishing, *extra],
        env=environment(prefect_home),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
