"""Stage fingerprints cover the code a stage runs: a changed rule invalidates that stage and later ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memoryquest.fingerprint import (
    PACKAGE_ROOT,
    STAGE_ENTRIES,
    module_closure,
    runs_simulator,
    stage_fingerprint,
)
from memoryquest.settings import Settings


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the package source to edit."""
    shutil.copytree(
        PACKAGE_ROOT / "memoryquest",
        tmp_path / "memoryquest",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path


def fingerprints(root: Path, *, simulator: bool = True) -> dict[str, str]:
    return {stage: stage_fingerprint(stage, root, simulator=simulator) for stage in STAGE_ENTRIES}


def edit(root: Path, relative: str, old: str, new: str) -> None:
    path = root / "memoryquest" / relative
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {relative}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_copy_has_the_installed_fingerprints(tree: Path) -> None:
    assert fingerprints(tree) == fingerprints(PACKAGE_ROOT)


def test_changing_the_gamma_rule_recomputes_queries_and_every_stage_that_runs_it(
    tree: Path,
) -> None:
    before = fingerprints(tree)
    edit(
        tree,
        "stages/queries.py",
        "if gamma > settings.gamma_max:",
        "if gamma >= settings.gamma_max:",
    )
    after = fingerprints(tree)
    assert after["queries"] != before["queries"]
    for stage in STAGE_ENTRIES:
        runs_it = "memoryquest.stages.queries" in module_closure(STAGE_ENTRIES[stage], tree)
        assert (after[stage] != before[stage]) == runs_it, stage


def test_changing_a_simulator_answer_recomputes_every_stage(tree: Path) -> None:
    before = fingerprints(tree)
    edit(tree, "simulator/__init__.py", '"""', '"""Edited. ')
    after = fingerprints(tree)
    assert all(after[stage] != before[stage] for stage in STAGE_ENTRIES)


def test_a_real_model_runs_cached_stages_survive_a_simulator_edit(tree: Path) -> None:
    """The simulator's wording is no part of a real-backend run's stages: its cache stays valid."""
    real, simulated = fingerprints(tree, simulator=False), fingerprints(tree)
    edit(tree, "simulator/dialogues.py", '"""', '"""Reworded. ')
    assert fingerprints(tree, simulator=False) == real
    assert all(fingerprints(tree)[stage] != simulated[stage] for stage in STAGE_ENTRIES)
    assert (
        not any(
            module.startswith("memoryquest.simulator")
            for stage in STAGE_ENTRIES
            for module in module_closure(STAGE_ENTRIES[stage], tree)
        )
        or real != simulated
    )


def test_editing_a_simulator_data_file_recomputes_a_simulated_run_only(tree: Path) -> None:
    real, simulated = fingerprints(tree, simulator=False), fingerprints(tree)
    edit(tree, "simulator/data/bridges.json", "complicates {scene}", "gets in the way of {scene}")
    assert fingerprints(tree, simulator=False) == real
    assert all(fingerprints(tree)[stage] != simulated[stage] for stage in STAGE_ENTRIES)


def test_which_runs_count_the_simulator(tmp_path: Path) -> None:
    assert runs_simulator(Settings(output_dir=tmp_path))
    hinted = {"base_url": "http://127.0.0.1:9/v1", "simulator_hints": True}
    assert runs_simulator(Settings(output_dir=tmp_path, endpoint=hinted))
    real = {"base_url": "http://127.0.0.1:9/v1", "backend": "openai"}
    assert not runs_simulator(Settings(output_dir=tmp_path, endpoint=real))


def test_the_pgr_runner_does_not_depend_on_the_generation_stages(tree: Path) -> None:
    before = fingerprints(tree)
    edit(tree, "stages/timelines.py", '"""', '"""Edited. ')
    after = fingerprints(tree)
    assert after["conversations"] != before["conversations"]
    assert after["pgr-validation"] == before["pgr-validation"]


def test_an_unknown_stage_is_named() -> None:
    with pytest.raises(ValueError, match="unknown stage 'publish'"):
        stage_fingerprint("publish")
