"""MemoryQuest: regenerate the long-term-memory benchmark and check it with PGR."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("memoryquest")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+source"
