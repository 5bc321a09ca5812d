"""A static, self-contained dataset explorer: HTML + JS + CSS + per-persona data files.

Layout of an explorer directory::

    index.html                 the page; open it from disk (file://), no server needed
    explorer.js, explorer.css  the viewer (plain JS, no build step, no CDN)
    data/index.js              every persona with its query list (γ, cosines, difficulty, recall by method),
                               and the answer-level Win Rate when `pgr run --win-rate` was given
    data/<persona_id>.js       one persona's queries, timelines, sessions, facts and retrieval results
    plots/*.png                the dataset card's figures, when there are any

Browsers refuse ``fetch()`` of local files, so data files are scripts that hand
their payload to a global function (``MQX.receiveIndex`` / ``MQX.receivePersona``);
the page injects a persona's script only when that persona is opened, so a
1,500-persona dataset costs one index file up front. The payload is JSON with
``<``, ``>`` and ``&`` written as ``\\u003c`` ... so no text can close a script
element, and the viewer only ever puts data into the page as text nodes.

The explorer is a reviewer's view: it shows each session and fact joined with its
labels (the query it serves, the reference it carries), read from the split configs
through :func:`memoryquest.publish.load_published`. Like the labels configs, it is not
for a memory system under test, and the dataset card says so.

Everything is written in a fixed order from sorted rows, so the same dataset
gives the same bytes (the published dataset is byte-for-byte reproducible).
Only provenance that is safe to publish reaches the explorer: the run's models,
seed, cost and the audit, never its settings or endpoint.

The payloads are built by :mod:`~memoryquest.publish.explorer_personas` (a persona's data
file) and :mod:`~memoryquest.publish.explorer_index` (the index); this module writes the files.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from memoryquest.contracts import RunManifest
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.winrate_contracts import WinRateReport
from memoryquest.publish.explorer_index import index_payload
from memoryquest.publish.explorer_personas import ExplorerError, PersonaTables

__all__ = [
    "DATA_DIR",
    "EXPLORER_DIR",
    "ENTRY_FILE",
    "ExplorerError",
    "PLOT_CAPTIONS",
    "Plot",
    "write_explorer",
]

EXPLORER_DIR = "explorer"
"""Name of the explorer directory inside a published dataset."""
ENTRY_FILE = "index.html"
DATA_DIR = "data"
INDEX_FILE = "index.js"
ASSETS = ("index.html", "explorer.js", "explorer.css")
_ASSET_PACKAGE = "memoryquest.publish"
_ASSET_DIR = "explorer_assets"


PLOT_CAPTIONS = {
    "gamma_histogram.png": "Histogram of γ with the threshold",
    "recall_by_method.png": "Recall and RecallExact by method and judge",
}
"""Captions of the card's figures (as in the card), for plots found in a published ``plots/`` folder."""


@dataclass(frozen=True)
class Plot:
    """A PNG to show beside the audit, with its caption."""

    path: Path
    caption: str


# --------------------------------------------------------------------------- files


def script_json(payload: object) -> str:
    """JSON that is also a safe JavaScript expression: nothing in it can end a script element."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _data_script(call: str, *arguments: object) -> str:
    """One call of a global registration function, e.g. ``MQX.receivePersona("p_…", {...});``."""
    return f"{call}({','.join(script_json(a) for a in arguments)});\n"


def _copy_asset(name: str, destination: Path) -> Path:
    source = resources.files(_ASSET_PACKAGE).joinpath(_ASSET_DIR, name)
    target = destination / name
    target.write_bytes(source.read_bytes())
    return target


def write_explorer(
    dataset: GeneratedDataset,
    destination: Path,
    *,
    manifest: RunManifest | None = None,
    audit: Mapping[str, object] | None = None,
    plots: Sequence[Plot] = (),
    win_rates: WinRateReport | None = None,
) -> list[Path]:
    """Write the explorer for ``dataset`` into the directory ``destination``; return the files written.

    ``manifest`` (default: the dataset's) supplies the run summary and, unless
    ``audit`` is given, the audit results. ``plots`` are copied into
    ``destination/plots`` and shown beside the audit. ``win_rates`` (the report
    of ``memoryquest pgr run --win-rate``) is shown in the overview beside
    recall. ``destination`` is created; files already in it with the same
    names are overwritten.
    """
    destination = Path(destination)
    plot_entries: list[dict[str, str]] = []
    used: set[str] = set()
    for plot in plots:
        if not plot.path.is_file():
            raise ExplorerError(f"plot {plot.path} does not exist")
        name = plot.path.name
        if name in used:
            raise ExplorerError(f"two plots are called {name!r}")
        used.add(name)
        plot_entries.append({"src": f"plots/{name}", "caption": plot.caption})
    manifest = manifest if manifest is not None else dataset.manifest
    if audit is None and manifest is not None:
        audit = manifest.audit
    tables = PersonaTables(dataset)

    (destination / DATA_DIR).mkdir(parents=True, exist_ok=True)
    written = [_copy_asset(name, destination) for name in ASSETS]
    entries = []
    for persona_id in tables.persona_ids:  # one persona in memory at a time
        entry, payload = tables.persona(persona_id)
        entries.append(entry)
        path = destination / DATA_DIR / f"{persona_id}.js"
        path.write_text(_data_script("MQX.receivePersona", persona_id, payload), encoding="utf-8")
        written.append(path)
    index_path = destination / DATA_DIR / INDEX_FILE
    index = index_payload(dataset, tables, entries, manifest, audit, plot_entries, win_rates)
    index_path.write_text(_data_script("MQX.receiveIndex", index), encoding="utf-8")
    written.append(index_path)
    if plots:
        (destination / "plots").mkdir(exist_ok=True)
        for plot in plots:
            target = destination / "plots" / plot.path.name
            shutil.copyfile(plot.path, target)
            written.append(target)
    return written
