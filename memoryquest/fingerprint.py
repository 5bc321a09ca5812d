"""Stage fingerprints: what a cached stage result depends on besides its inputs.

A stage's cached result stays valid only while the code that computes it and
the prompts it renders are unchanged. The fingerprint of a stage hashes the
package version, every prompt template, and the source of every module the
stage can execute: the import closure of its entry modules inside
``memoryquest`` (a parent package's ``__init__`` runs on import, so it counts),
plus, when the run's answers come from it, the simulator, whose answer modules
are loaded by name at run time, and its data files (phrase banks, word lists).
A run against a real model never executes the simulator, so editing its
wording leaves that run's cached stages valid.
Editing a rule in ``stages/queries.py`` therefore changes the fingerprint of
the queries stage, and of every later stage whose code imports it; the later
stages also see new inputs whenever the earlier output changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import memoryquest
from memoryquest.contracts import StageGroupName
from memoryquest.llm.prompts import all_templates
from memoryquest.pipeline import STAGE_GROUPS
from memoryquest.settings import Backend, Settings

PACKAGE = "memoryquest"
PACKAGE_ROOT = Path(memoryquest.__file__).resolve().parent.parent
ALWAYS = ("memoryquest.simulator",)  # loaded by template id, invisible to a static import scan
SIMULATOR_DATA = Path("memoryquest", "simulator", "data")

STAGE_ENTRIES: dict[StageGroupName, tuple[str, ...]] = {
    stage.name: (stage.module,) for stage in STAGE_GROUPS
}
"""Stage group (as :data:`memoryquest.pipeline.STAGE_GROUPS` names it) -> the modules it starts from."""


def source_file(module: str, root: Path) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<base>memoryquest[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n#]+)"
    r"|import[ \t]+(?P<module>memoryquest[\w.]*))",
    re.MULTILINE,
)


@cache
def _imported(path: Path) -> tuple[str, ...]:
    """Modules named by the file's ``memoryquest`` imports, at any depth (the package uses absolute imports)."""
    found: list[str] = []
    for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
        if match["module"]:
            found.append(match["module"])
            continue
        base = match["base"]
        found.append(base)
        for name in re.split(r"[\s,()]+", match["names"]):
            if name and name.isidentifier():
                found.append(f"{base}.{name}")
    return tuple(found)


def module_closure(entries: Iterable[str], root: Path = PACKAGE_ROOT) -> list[str]:
    """Every ``memoryquest`` module that importing ``entries`` can execute, found by reading the source."""
    seen: set[str] = set()
    stack = list(entries)
    while stack:
        name = stack.pop()
        if name in seen or not (name == PACKAGE or name.startswith(PACKAGE + ".")):
            continue
        path = source_file(name, root)
        if path is None:
            continue
        seen.add(name)
        parts = name.split(".")
        stack.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        if (
            path.name == "__init__.py" and name in ALWAYS
        ):  # submodules loaded by name (the simulator)
            stack.extend(f"{name}.{child.stem}" for child in path.parent.glob("*.py"))
            stack.extend(
                f"{name}.{child.name}"
                for child in path.parent.iterdir()
                if (child / "__init__.py").is_file()
            )
        stack.extend(_imported(path))
    return sorted(seen)


def stage_fingerprint(
    stage: StageGroupName, root: Path = PACKAGE_ROOT, *, simulator: bool = True
) -> str:
    """Changes whenever the version, any prompt, or the source of a module the stage can run changes.

    ``simulator``: the run's answers come from the offline simulator (its own backend, or the
    fake server's hints), so its modules and data files count; otherwise none of them does.
    """
    try:
        entries = STAGE_ENTRIES[stage]
    except KeyError:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(STAGE_ENTRIES)}") from None
    digest = hashlib.sha256(memoryquest.__version__.encode())
    for template in all_templates():
        digest.update(f"{template.template_id}:{template.version}:{template.sha256}\n".encode())
    modules = module_closure((*entries, *ALWAYS) if simulator else entries, root)
    if not simulator:
        modules = [m for m in modules if not _in_package(m, ALWAYS)]
    for module in modules:
        path = source_file(module, root)
        assert path is not None
        digest.update(module.encode() + b"\0" + path.read_bytes() + b"\0")
    for path in sorted((root / SIMULATOR_DATA).glob("*.json")) if simulator else ():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _in_package(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@cache
def stage_fingerprints(simulator: bool = True) -> dict[StageGroupName, str]:
    """Every stage's fingerprint for the installed code (computed once per process and kind of run)."""
    return {stage: stage_fingerprint(stage, simulator=simulator) for stage in STAGE_ENTRIES}


def runs_simulator(settings: Settings) -> bool:
    """Whether a run's answers come from the offline simulator (its backend, or the fake server's hints)."""
    endpoint = settings.endpoint
    return endpoint.resolved_backend() is Backend.SIMULATED or endpoint.simulator_hints
