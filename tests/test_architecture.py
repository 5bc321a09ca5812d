"""The layers of docs/architecture.md hold: no module imports a layer above its own, every module
has a layer, every layer names modules that exist, and no modules import each other in a circle.

The layers are declared once, in the table of docs/architecture.md; this test reads them from
there. Imports are read from the source (``ast``), at the top of a file and inside functions
alike, since a deferred import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
SOURCE_DIRS = ("memoryquest", "flows", "benchmarks")


@dataclass(frozen=True)
class Layer:
    number: int
    patterns: tuple[str, ...]
    may_import: str


def read_layers(text: str) -> list[Layer]:
    """The rows of the architecture table: ``| number | what | `module`, ... | may import |``."""
    layers = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            patterns = tuple(re.findall(r"`([^`]+)`", cells[2]))
            layers.append(Layer(int(cells[0]), patterns, cells[3]))
    return sorted(layers, key=lambda layer: layer.number)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    return {
        module_name(path, root): path
        for folder in SOURCE_DIRS
        for path in sorted((root / folder).rglob("*.py"))
    }


def imported_modules(
    module: str, source: str, known: Iterable[str], *, is_package: bool = False
) -> set[str]:
    """The project modules ``source`` imports anywhere in it (``from a import b`` names ``a.b``
    when ``b`` is a module, else ``a``)."""
    known = set(known)
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                found.add(submodule if submodule in known else origin)
    return {name for name in found if name in known and name != module}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = project_modules(root)
    return {
        name: imported_modules(
            name, path.read_text(encoding="utf-8"), modules, is_package=path.name == "__init__.py"
        )
        for name, path in modules.items()
    }


def layer_of(module: str, layers: list[Layer]) -> int | None:
    """The layer of the pattern ``module`` matches (a ``*`` pattern), else of the closest package."""
    for layer in layers:
        if any("*" in p and fnmatchcase(module, p) for p in layer.patterns):
            return layer.number
    best: tuple[int, int] | None = None
    for layer in layers:
        for pattern in layer.patterns:
            covers = "*" not in pattern and (module == pattern or module.startswith(pattern + "."))
            if covers and (best is None or len(pattern) > best[0]):
                best = (len(pattern), layer.number)
    return best[1] if best else None


def climbing_imports(
    graph: Mapping[str, set[str]], layers: list[Layer]
) -> list[tuple[str, int, str, int]]:
    """(module, its layer, imported module, that layer) for every import of a higher layer."""
    found = []
    for module, imported in sorted(graph.items()):
        own = layer_of(module, layers)
        for target in sorted(imported):
            theirs = layer_of(target, layers)
            if own is not None and theirs is not None and theirs > own:
                found.append((module, own, target, theirs))
    return found


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


LAYERS = read_layers(ARCHITECTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_the_table_declares_the_layers_from_one_up() -> None:
    assert [layer.number for layer in LAYERS] == list(range(1, len(LAYERS) + 1))
    assert len(LAYERS) >= 5


def test_each_layer_may_import_exactly_the_layers_below_it() -> None:
    """The "may import" column says what the position in the table means."""
    for layer in LAYERS:
        expected = (
            "—" if layer.number == 1 else "1" if layer.number == 2 else f"1–{layer.number - 1}"
        )
        assert layer.may_import == expected, f"layer {layer.number}: {layer.may_import!r}"


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    assert [m for m in graph if layer_of(m, LAYERS) is None] == []


def test_every_layer_names_modules_that_exist(graph: dict[str, set[str]]) -> None:
    for layer in LAYERS:
        for pattern in layer.patterns:
            matched = [m for m in graph if fnmatchcase(m, pattern) or m == pattern]
            matched += [m for m in graph if m.startswith(pattern + ".")]
            assert matched, f"layer {layer.number} names {pattern}, which is no module"


def test_no_module_imports_a_higher_layer(graph: dict[str, set[str]]) -> None:
    climbing = [
        f"{module} (layer {own}) imports {target} (layer {theirs})"
        for module, own, target, theirs in climbing_imports(graph, LAYERS)
    ]
    assert climbing == []


def test_no_modules_import_each_other_in_a_circle(graph: dict[str, set[str]]) -> None:
    assert circles(graph) == []


LONG_MODULE_LINES = 500
LONG_MODULES_MAX = 8


def long_modules(sources: Mapping[str, str]) -> list[str]:
    """The modules of more than ``LONG_MODULE_LINES`` lines, longest first."""
    lengths = {name: len(text.splitlines()) for name, text in sources.items()}
    return sorted(
        (name for name, n in lengths.items() if n > LONG_MODULE_LINES), key=lambda n: -lengths[n]
    )


def package_sources() -> dict[str, str]:
    return {
        name: path.read_text(encoding="utf-8")
        for name, path in project_modules().items()
        if name.startswith("memoryquest")
    }


def test_few_modules_of_the_package_are_long() -> None:
    """A module past 500 lines usually holds two concerns; the package keeps at most 8 of them."""
    long = long_modules(package_sources())
    assert len(long) <= LONG_MODULES_MAX, long


# --------------------------------------------------------------------------- the checks can fail


def test_an_engine_importing_a_stage_is_caught(graph: dict[str, set[str]]) -> None:
    """The real extraction module, given an import of a stage inside a function, climbs."""
    path = ROOT / "memoryquest" / "memory" / "extraction.py"
    source = path.read_text(encoding="utf-8") + (
        "\n\ndef _late() -> None:\n    from memoryquest.stages.dialogues import expand_dialogues\n"
    )
    module = "memoryquest.memory.extraction"
    mutated = {**graph, module: imported_modules(module, source, graph)}
    assert (module, 4, "memoryquest.stages.dialogues", 5) in climbing_imports(mutated, LAYERS)


def test_a_circle_through_two_modules_is_caught(graph: dict[str, set[str]]) -> None:
    """The real command-line entry, given an import of its run log inside a function (the run log
    imports the entry), closes a circle."""
    path = ROOT / "memoryquest" / "cli" / "main.py"
    source = path.read_text(encoding="utf-8") + (
        "\n\ndef _late() -> None:\n    from memoryquest.cli.run_log import LOG_DIR\n"
    )
    module = "memoryquest.cli.main"
    mutated = {**graph, module: imported_modules(module, source, graph)}
    assert ["memoryquest.cli.main", "memoryquest.cli.run_log"] in circles(mutated)


def test_a_ninth_long_module_is_caught() -> None:
    """The package's sources with the longest short module doubled past 500 lines count one more."""
    sources = package_sources()
    before = long_modules(sources)
    short = max(
        (name for name in sources if name not in before), key=lambda n: len(sources[n].splitlines())
    )
    doubled = {
        **sources,
        short: sources[short] * (LONG_MODULE_LINES // len(sources[short].splitlines()) + 1),
    }
    assert long_modules(doubled) == sorted(
        [*before, short], key=lambda n: -len(doubled[n].splitlines())
    )
