"""Shared fixtures. Each group is named after what it provides; add new ones below."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- personas


@pytest.fixture(scope="session")
def personalens_sample_dir() -> Path:
    """The bundled PersonaLens sample (30 users, upstream data/ layout)."""
    return REPO_ROOT / "personas" / "personalens"


@pytest.fixture(scope="session")
def custom_personas_example() -> Path:
    """The documented custom persona example file."""
    return REPO_ROOT / "personas" / "custom" / "example.json"


# --------------------------------------------------------------------------- settings


SETTINGS_ENV_PREFIXES = ("MEMORYQUEST_", "OPENAI_", "AZURE_OPENAI_")


@pytest.fixture
def clean_settings_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No MEMORYQUEST_* / OPENAI_* / AZURE_OPENAI_* variables from the caller's shell leak in."""
    for name in list(os.environ):
        if name.startswith(SETTINGS_ENV_PREFIXES):
            monkeypatch.delenv(name)
    return monkeypatch
