"""What `memoryquest generate` loads while its temporary Prefect server boots."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from memoryquest.cli.generate import _warm_up
from memoryquest.settings import Settings
_warm_up(Settings(), publish={publish})
print(" ".join(name for name in ("matplotlib", "pyarrow", "sklearn.linear_model") if name in sys.modules))
"""


@pytest.mark.parametrize(
    ("publish", "loaded"),
    [(True, "matplotlib pyarrow sklearn.linear_model"), (False, "")],
)
def test_a_publishing_run_loads_the_publishing_libraries_during_the_warm_up(
    publish: bool, loaded: str
) -> None:
    """Fresh interpreters: what the warm-up imports and nothing the test process already has."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(publish=publish)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.strip() == loaded
