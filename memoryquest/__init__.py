"""MemoryQuest: regenerate the long-term-memory benchmark and check it with PGR."""

from memoryquest.orchestration.prefect_defaults import apply_defaults as _apply_prefect_defaults

# Quiet, offline Prefect unless the user says otherwise (before anything imports prefect).
_apply_prefect_defaults()


def __getattr__(name: str) -> str:
    """``__version__``, looked up on first use: importlib.metadata costs ``memoryquest --help`` a third of its time."""
    if name != "__version__":
        raise AttributeError(f"module 'memoryquest' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("memoryquest")
    except PackageNotFoundError:  # running from a source tree without install
        found = "0.0.0+source"
    globals()["__version__"] = found
    return found
