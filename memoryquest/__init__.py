"""MemoryQuest: regenerate the long-term-memory benchmark and check it with PGR."""

from importlib.metadata import PackageNotFoundError, version

from memoryquest.prefect_runtime import apply_defaults as _apply_prefect_defaults

try:
    __version__ = version("memoryquest")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+source"

# Quiet, offline Prefect unless the user says otherwise (before anything imports prefect).
_apply_prefect_defaults()
