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
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from memoryquest.contracts import (
    Fact,
    JudgeKind,
    Persona,
    Query,
    RejectedCandidate,
    RetrievalMethod,
    RunManifest,
    Session,
    Timeline,
    ValidationResult,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.pgr.baselines import BASELINE_METHODS
from memoryquest.pgr.winrate_contracts import WinRateReport

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
FORMAT_VERSION = 1
ASSETS = ("index.html", "explorer.js", "explorer.css")
_ASSET_PACKAGE = "memoryquest.publish"
_ASSET_DIR = "explorer_assets"
_PERSONA_FILE = re.compile(r"^[a-z]_[0-9a-f]{16}$")
_DIGITS = 4  # cosines, γ and recall are rounded to this many decimals

_METHOD_ORDER = [
    m.value for m in (RetrievalMethod.QUERY_ONLY, RetrievalMethod.PGR_COT, RetrievalMethod.PGR_TOT)
]
_BASELINE_ORDER = [m.value for m in BASELINE_METHODS]
_JUDGE_ORDER = [j.value for j in (JudgeKind.PROVENANCE, JudgeKind.LLM, JudgeKind.EMBEDDING)]
_LABELS = {
    "query_only": "query-only",
    "pgr_cot": "PGR-CoT",
    "pgr_tot": "PGR-ToT",
    "bm25": "BM25",
    "random": "random",
    "recency": "recency",
    "multi_query": "multi-query",
    "hypothetical_facts": "hypothetical facts",
}
_SHORT = {
    "query_only": "QO",
    "pgr_cot": "CoT",
    "pgr_tot": "ToT",
    "bm25": "BM25",
    "random": "Rnd",
    "recency": "Rec",
    "multi_query": "MQ",
    "hypothetical_facts": "HyDE",
}


PLOT_CAPTIONS = {
    "gamma_histogram.png": "Histogram of γ with the threshold",
    "recall_by_method.png": "Recall and RecallExact by method and judge",
}
"""Captions of the card's figures (as in the card), for plots found in a published ``plots/`` folder."""


class ExplorerError(ValueError):
    pass


@dataclass(frozen=True)
class Plot:
    """A PNG to show beside the audit, with its caption."""

    path: Path
    caption: str


# --------------------------------------------------------------------------- payloads


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), _DIGITS)


def _natural(text: str) -> tuple[object, ...]:
    """'user10' after 'user9'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def _method_key(row: ValidationResult) -> str:
    return (
        row.method.value
        if row.baseline_for is None
        else f"{row.method.value}@{row.baseline_for.value}"
    )


def _method_sort(key: str) -> tuple[int, int, str]:
    method, _, target = key.partition("@")
    if not target:
        rank = _METHOD_ORDER.index(method) if method in _METHOD_ORDER else len(_METHOD_ORDER)
        return (0, rank, method)
    target_rank = _METHOD_ORDER.index(target) if target in _METHOD_ORDER else len(_METHOD_ORDER)
    method_rank = (
        _BASELINE_ORDER.index(method) if method in _BASELINE_ORDER else len(_BASELINE_ORDER)
    )
    return (1 + target_rank, method_rank, key)


def _method_info(key: str) -> dict[str, Any]:
    method, _, target = key.partition("@")
    if not target:
        return {
            "key": key,
            "method": method,
            "baseline_for": None,
            "label": _LABELS.get(method, method),
            "short": _SHORT.get(method, method),
        }
    return {
        "key": key,
        "method": method,
        "baseline_for": target,
        "label": f"{_LABELS.get(method, method)} at the {_LABELS.get(target, target)} budget",
        "short": f"{_SHORT.get(method, method)}@{_SHORT.get(target, target)}",
    }


def _judge_sort(judge: str) -> tuple[int, str]:
    return (_JUDGE_ORDER.index(judge) if judge in _JUDGE_ORDER else len(_JUDGE_ORDER), judge)


def _about(persona: Persona | None) -> str:
    if persona is None:
        return ""
    d = persona.demographics
    parts = [d.age, d.gender, d.employment_status, d.reside_country]
    return " · ".join(p for p in parts if p)


def _run_summary(manifest: RunManifest | None) -> dict[str, Any] | None:
    """Provenance safe to publish: no settings, no endpoint."""
    if manifest is None:
        return None
    return {
        "run_id": manifest.run_id,
        "created_at": manifest.created_at.isoformat(),
        "package_version": manifest.package_version,
        "simulated": manifest.simulated,
        "backend": manifest.backend,
        "chat_model": manifest.chat_model,
        "embedder": manifest.embedder,
        "seed": manifest.seed,
        "total_cost_usd": manifest.total_cost_usd,
        "wall_seconds": manifest.wall_seconds,
    }


def _persona_payload(persona: Persona | None, persona_id: str) -> dict[str, Any]:
    if persona is None:
        return {
            "id": persona_id,
            "user": persona_id,
            "source": None,
            "demographics": {},
            "interests": [],
            "affinities": [],
            "interactions": [],
        }
    return {
        "id": persona.persona_id,
        "user": persona.source_user_id,
        "source": persona.source.value,
        "demographics": persona.demographics.model_dump(mode="json", exclude_none=True),
        "interests": [d.value for d in persona.interests],
        "affinities": [[a.domain.value, a.name, a.values] for a in persona.affinities],
        "interactions": [[i.domain.value, i.summary] for i in persona.interactions],
    }


def _fact_refs(facts: Sequence[Fact]) -> Callable[[str], int | str]:
    """A fact id as its position in the persona's ``facts`` list (the id itself when it is not there)."""
    position = {fact.fid: number for number, fact in enumerate(facts)}

    def fact_ref(fid: str) -> int | str:
        return position.get(fid, fid)

    return fact_ref


def _verdicts(
    row: ValidationResult, query: Query, fact_ref: Callable[[str], int | str]
) -> list[list[Any] | None]:
    """One ``[found, reason, supporting facts]`` per reference of the query, in its order (null when not judged)."""
    by_reference = {j.reference_id: j for j in row.judgements}
    verdicts: list[list[Any] | None] = []
    for reference in query.references:
        judgement = by_reference.get(reference.reference_id)
        verdicts.append(
            None
            if judgement is None
            else [
                judgement.found,
                judgement.reason,
                [fact_ref(f) for f in judgement.supporting_fids],
            ]
        )
    return verdicts


def _query_detail(
    query: Query,
    timeline: Timeline | None,
    results: list[ValidationResult],
    fact_ref: Callable[[str], int | str],
) -> dict[str, Any]:
    groups: dict[str, list[ValidationResult]] = defaultdict(list)
    for row in results:
        groups[_method_key(row)].append(row)
    retrievals = []
    for key in sorted(groups, key=_method_sort):
        rows = sorted(groups[key], key=lambda r: (_judge_sort(r.judge.value), r.result_id))
        first = rows[0]
        retrieved = [fact_ref(f) for f in first.retrieved_fids]
        steps = [
            [iteration.iteration, step.step_id, step.parent, step.action, len(step.retrieved_fids)]
            for iteration in first.iterations
            for step in iteration.steps
        ]
        judged = []
        for row in rows:
            entry: dict[str, Any] = {
                "judge": row.judge.value,
                "recall": _round(row.recall),
                "exact": row.recall_exact,
                "ndcg": _round(row.ndcg),
                "verdicts": _verdicts(row, query, fact_ref),
            }
            if row.retrieved_fids != first.retrieved_fids:
                entry["retrieved"] = [fact_ref(f) for f in row.retrieved_fids]
            judged.append(entry)
        retrieval: dict[str, Any] = {
            "key": key,
            "budget": first.budget,
            "memory_size": first.memory_size,
            "memory_as_of": first.memory_as_of.isoformat(),
            "retrieved": retrieved,
            "judges": judged,
        }
        if first.augmented_query:
            retrieval["augmented_query"] = first.augmented_query
        if first.summary:
            retrieval["summary"] = first.summary
        if steps:
            retrieval["steps"] = steps
        retrievals.append(retrieval)
    return {
        "id": query.query_id,
        "reasoning": query.reasoning,
        "embedder": query.embedder,
        "references": [
            {
                "id": r.reference_id,
                "date": r.date.isoformat(),
                "text": r.text,
                "domain": r.domain.value,
                "cosine": _round(r.cosine),
                "valid_until": r.valid_until.isoformat() if r.valid_until else None,
                "rationale": r.rationale,
                "relevance": r.relevance,
            }
            for r in query.references
        ],
        "timeline": None
        if timeline is None
        else {
            "id": timeline.timeline_id,
            "events": [
                {
                    "id": e.event_id,
                    "date": e.date.isoformat(),
                    "domain": e.domain.value,
                    "kind": e.kind.value,
                    "description": e.description,
                    "reference_id": e.reference_id,
                }
                for e in sorted(timeline.events, key=lambda e: (e.date, e.event_id))
            ],
        },
        "retrievals": retrievals,
    }


def _session_payload(session: Session) -> dict[str, Any]:
    return {
        "id": session.session_id,
        "query_id": session.query_id,
        "event_id": session.event_id,
        "date": session.date.isoformat(),
        "domain": session.domain.value,
        "position": session.position,
        "reference_id": session.reference_id,
        "reference_turns": session.reference_turn_indices,
        "spans": [[s.turn_index, s.start, s.end] for s in session.reference_spans],
        "turns": [[t.role.value, t.content] for t in session.turns],
    }


def _fact_payload(fact: Fact) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": fact.fid,
        "info": fact.info,
        "type": fact.type.value,
        "status": fact.status.value,
        "frequency": fact.frequency,
        "created_on": fact.created_on.isoformat(),
        "updated_on": fact.updated_on.isoformat(),
        "sessions": fact.session_ids,
        "references": fact.source_reference_ids,
        "revisions": len(fact.revisions),
    }
    if fact.merged_into:
        payload["merged_into"] = fact.merged_into
    if fact.merged_fids:
        payload["merged"] = fact.merged_fids
    if fact.retired_on:
        payload["retired_on"] = fact.retired_on.isoformat()
    return payload


def _rejected_payload(row: RejectedCandidate) -> dict[str, Any]:
    return {
        "id": row.rejected_id,
        "stage": row.stage,
        "reason": row.reason.value,
        "detail": row.detail,
        "gamma": _round(row.gamma),
    }


def _group(rows: Iterable[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        grouped[row.persona_id].append(row)
    return grouped


class _Tables:
    """The dataset's rows grouped the way the explorer reads them, in a fixed order."""

    def __init__(self, dataset: GeneratedDataset) -> None:
        self.personas = {p.persona_id: p for p in dataset.personas}
        self.queries = _group(dataset.queries)
        self.sessions = _group(dataset.sessions)
        self.facts = _group(dataset.facts)
        self.rejected = _group(dataset.rejected)
        self.timelines = {
            t.query_id: t for t in sorted(dataset.timelines, key=lambda t: t.timeline_id)
        }
        self.results: dict[str, list[ValidationResult]] = defaultdict(list)
        for row in dataset.validation:
            self.results[row.query_id].append(row)
        self.method_keys = sorted({_method_key(r) for r in dataset.validation}, key=_method_sort)
        self.judges = sorted({r.judge.value for r in dataset.validation}, key=_judge_sort)
        ids = (
            set(self.personas)
            | set(self.queries)
            | set(self.sessions)
            | set(self.facts)
            | set(self.rejected)
        )
        for persona_id in ids:
            if not _PERSONA_FILE.match(persona_id):
                raise ExplorerError(
                    f"persona id {persona_id!r} is not a valid id; cannot name its data file"
                )
        self.persona_ids = sorted(ids, key=self._order)

    def _order(self, persona_id: str) -> tuple[object, ...]:
        persona = self.personas.get(persona_id)
        return (_natural(persona.source_user_id) if persona is not None else (), persona_id)

    def persona(self, persona_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the persona's entry in the index, the payload of its data file)."""
        persona = self.personas.get(persona_id)
        persona_queries = sorted(
            self.queries.get(persona_id, []), key=lambda q: (q.rank, q.query_id)
        )
        persona_facts = sorted(self.facts.get(persona_id, []), key=lambda f: f.fid)
        persona_sessions = sorted(
            self.sessions.get(persona_id, []), key=lambda s: (s.position, s.date, s.session_id)
        )
        persona_rejected = sorted(self.rejected.get(persona_id, []), key=lambda r: r.rejected_id)
        fact_ref = _fact_refs(persona_facts)
        query_rows = []
        details = []
        for query in persona_queries:
            results = sorted(self.results.get(query.query_id, []), key=lambda r: r.result_id)
            recall: dict[str, list[float | None]] = {}
            for judge in self.judges:
                by_key = {_method_key(r): r.recall for r in results if r.judge.value == judge}
                recall[judge] = [_round(by_key.get(key)) for key in self.method_keys]
            query_rows.append(
                {
                    "id": query.query_id,
                    "text": query.text,
                    "date": query.query_date.isoformat(),
                    "domain": query.domain.value,
                    "rank": query.rank,
                    "gamma": _round(query.gamma),
                    "cosines": [_round(r.cosine) for r in query.references],
                    "difficulty": _round(query.difficulty),
                    "recall": recall,
                }
            )
            details.append(
                _query_detail(query, self.timelines.get(query.query_id), results, fact_ref)
            )
        profile = _persona_payload(persona, persona_id)
        entry = {
            "id": persona_id,
            "user": profile["user"],
            "source": profile["source"],
            "about": _about(persona),
            "sessions": len(persona_sessions),
            "facts": len(persona_facts),
            "rejected": len(persona_rejected),
            "queries": query_rows,
        }
        payload = {
            "format": FORMAT_VERSION,
            "persona": profile,
            "queries": details,
            "sessions": [_session_payload(s) for s in persona_sessions],
            "facts": [_fact_payload(f) for f in persona_facts],
            "rejected": [_rejected_payload(r) for r in persona_rejected],
        }
        return entry, payload


def _win_rates(report: WinRateReport) -> dict[str, Any]:
    """The Win Rate table as the overview shows it (rates 0..1, rounded like recall)."""
    return {
        "interval": report.interval,
        "bootstrap_samples": report.bootstrap_samples,
        "unjudged": len(report.unjudged),
        "judge_model": report.judge_model,
        "judge_is_generator": report.judge_is_generator,
        "judge_sees_references": report.judge_sees_references,
        "answer_context": report.answer_context,
        "rows": [
            {
                "method": row.method.value,
                "baseline": row.baseline.value,
                "label": f"{_LABELS.get(row.method.value, row.method.value)} vs "
                f"{_LABELS.get(row.baseline.value, row.baseline.value)}",
                "judge": row.judge.value,
                "n": row.n,
                "recall": _round(row.recall),
                "recall_exact": _round(row.recall_exact),
                "baseline_recall": _round(row.baseline_recall),
                "baseline_recall_exact": _round(row.baseline_recall_exact),
                "win_rate": _round(row.win_rate),
                "low": _round(row.win_rate_low),
                "high": _round(row.win_rate_high),
                "won_tied_lost": [row.wins, row.ties, row.losses],
                "length_controlled": _round(row.length_controlled),
                "lc_low": _round(row.length_controlled_low),
                "lc_high": _round(row.length_controlled_high),
                "flip_rate": _round(row.flip_rate),
                "words": [round(row.pgr_words), round(row.baseline_words)],
            }
            for row in report.rows
        ],
    }


def _index(
    dataset: GeneratedDataset,
    tables: _Tables,
    personas: list[dict[str, Any]],
    manifest: RunManifest | None,
    audit: Mapping[str, object] | None,
    plots: Sequence[Mapping[str, str]],
    win_rates: WinRateReport | None = None,
) -> dict[str, Any]:
    index = {
        "format": FORMAT_VERSION,
        "run": _run_summary(manifest),
        "totals": {
            "personas": len(personas),
            "queries": len(dataset.queries),
            "sessions": len(dataset.sessions),
            "facts": len(dataset.facts),
            "validation": len(dataset.validation),
            "rejected": len(dataset.rejected),
        },
        "judges": tables.judges,
        "methods": [_method_info(key) for key in tables.method_keys],
        "audit": dict(audit) if audit is not None else None,
        "plots": [dict(p) for p in plots],
        "personas": personas,
    }
    if win_rates is not None:  # absent otherwise, so an explorer without it keeps its bytes
        index["win_rates"] = _win_rates(win_rates)
    return index


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
    tables = _Tables(dataset)

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
    index = _index(dataset, tables, entries, manifest, audit, plot_entries, win_rates)
    index_path.write_text(_data_script("MQX.receiveIndex", index), encoding="utf-8")
    written.append(index_path)
    if plots:
        (destination / "plots").mkdir(exist_ok=True)
        for plot in plots:
            target = destination / "plots" / plot.path.name
            shutil.copyfile(plot.path, target)
            written.append(target)
    return written
