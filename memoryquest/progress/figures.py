"""The figures of a run in progress, kept in one object so every view of them agrees.

The terminal (:mod:`memoryquest.progress.display`), Prefect's progress and
markdown artifacts (:mod:`memoryquest.orchestration.flow`) and the end-of-run
summary (:mod:`memoryquest.progress.summary`) all read a
:class:`ProgressSnapshot` taken from one :class:`RunFigures`. The pipeline
feeds it through its public observer interface
(:class:`memoryquest.pipeline.PipelineObserver`); the spending comes from the
client's public usage ledger and limiter statistics.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from memoryquest.contracts import Persona, StageGroupName
from memoryquest.stages.state import PersonaState

if TYPE_CHECKING:
    from memoryquest.llm.client import ModelClient

RATE_WINDOW_SECONDS = 60.0  # requests/min is measured over the last minute


class StageProgress(BaseModel):
    """One bar: how many units (personas, or queries for ``pgr run``) a stage group has finished."""

    stage: str
    done: int = 0
    total: int = 0
    cached: int = Field(0, description="Of ``done``, how many Prefect served from its cache.")


class ProgressSnapshot(BaseModel):
    """Every figure at one moment; what the terminal, the artifacts and the summary show."""

    unit: str = "personas"
    spending: bool = Field(
        True, description="False when no client is watched: no requests to show."
    )
    elapsed_seconds: float = 0.0
    personas_total: int = 0
    personas_done: int = 0
    personas_skipped: int = 0
    stages: list[StageProgress] = Field(default_factory=list)
    queries_kept: int = 0
    queries_target: int = 0
    rejected: dict[str, int] = Field(
        default_factory=dict, description="Rejected candidates by reason, most frequent first."
    )
    sessions: int = 0
    facts: int = 0
    results: int = 0
    requests: int = 0
    embedding_requests: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    cost_estimate_usd: float | None = None
    requests_per_minute: float = 0.0
    requests_per_minute_limit: int | None = None
    rate_limited: int = Field(0, description="429 answers received.")
    retries: int = Field(0, description="Attempts that failed and were sent again.")
    eta_seconds: float | None = None

    @property
    def steps_done(self) -> int:
        return sum(s.done for s in self.stages)

    @property
    def steps_total(self) -> int:
        return sum(s.total for s in self.stages)

    @property
    def fraction(self) -> float:
        """The share of the run's work units (persona × stage group) done, 0 to 1."""
        return self.steps_done / self.steps_total if self.steps_total else 0.0

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    @property
    def projected_cost_usd(self) -> float | None:
        """What the run will have cost at its spending so far per unit of work (None before any)."""
        if not self.steps_done or not self.cost_usd:
            return None
        return self.cost_usd * self.steps_total / self.steps_done


@dataclass
class _PersonaCounts:
    kept: int = 0
    sessions: int = 0
    facts: int = 0
    results: int = 0
    rejected: Counter[str] = field(default_factory=Counter)


def _counts(state: PersonaState) -> _PersonaCounts:
    return _PersonaCounts(
        kept=len(state.queries),
        sessions=len(state.sessions),
        facts=len(state.facts),
        results=len(state.validation),
        rejected=Counter(str(r.reason) for r in state.rejected),
    )


def endpoint_counts(client: ModelClient) -> tuple[int, int]:
    """429s and retried attempts so far, from the limiter's public statistics (0, 0 without one).

    A limiter that does not count retries itself: every attempt takes a limiter
    slot and every answer is in the ledger, so the attempts beyond the answers
    are the ones that failed and were sent again.
    """
    stats = getattr(client.limiter, "stats", None)
    if stats is None:
        return 0, 0
    rate_limited = int(getattr(stats, "rate_limited", 0))
    retries = getattr(stats, "retries", None)
    if retries is None:
        total = client.total_usage()
        attempts = int(getattr(stats, "acquired", 0))
        retries = max(0, attempts - total.requests - total.embedding_requests)
    return rate_limited, int(retries)


def request_limit(client: ModelClient, requests_per_minute: int) -> int | None:
    """The limit the request rate is shown against: none for the simulator, which is not limited."""
    return None if client.simulated or client.limiter is None else requests_per_minute


@dataclass(eq=False)
class RunFigures:
    """Counters of a run, fed by the pipeline (it is a :class:`~memoryquest.pipeline.PipelineObserver`)
    or by a caller counting its own units (:meth:`unit_done`), read as :meth:`snapshot`.

    Safe to read from another thread (the live display refreshes from one).
    """

    stages: InitVar[Sequence[str]]
    units_total: int
    _: KW_ONLY
    unit: str = "personas"
    client: ModelClient | None = None
    requests_per_minute_limit: int | None = None
    cost_estimate_usd: float | None = None
    queries_target: int = 0
    personas_skipped: int = 0
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self, stages: Sequence[str]) -> None:
        self._started = self.clock()
        self._lock = threading.Lock()
        self._stages = {name: StageProgress(stage=name, total=self.units_total) for name in stages}
        self._personas: dict[str, _PersonaCounts] = {}
        self._finished: list[str] = []  # persona ids in the order they finished
        self._answered: deque[tuple[float, int]] = deque([(self._started, 0)])

    # --- fed by the pipeline (PipelineObserver) --------------------------------------------

    def stage_finished(self, persona: Persona, stage: StageGroupName, state: PersonaState) -> None:
        counts = _counts(state)
        with self._lock:
            self._stages[stage].done += 1
            self._personas[persona.persona_id] = counts

    def persona_finished(self, persona: Persona, state: PersonaState) -> None:
        counts = _counts(state)
        with self._lock:
            self._personas[persona.persona_id] = counts
            if persona.persona_id not in self._finished:
                self._finished.append(persona.persona_id)

    # --- fed by whoever runs the units -----------------------------------------------------

    def served_from_cache(self, stage: str) -> None:
        """One unit of ``stage`` came from Prefect's cache instead of being computed."""
        with self._lock:
            self._stages[stage].cached += 1

    def unit_done(self, stage: str, count: int = 1) -> None:
        """``count`` units of ``stage`` are done (callers that do not run the pipeline: ``pgr run``)."""
        with self._lock:
            self._stages[stage].done += count

    def finished_rank(self, persona: Persona) -> int:
        """1 for the first persona to finish, 2 for the second...; 0 if it has not finished.

        Each persona gets its own rank once, however completions interleave, so
        "persona X done (k/N)" never repeats a k.
        """
        with self._lock:
            try:
                return self._finished.index(persona.persona_id) + 1
            except ValueError:
                return 0

    # --- read ------------------------------------------------------------------------------

    def snapshot(self) -> ProgressSnapshot:
        now = self.clock()
        usage = self.client.total_usage() if self.client is not None else None
        rate_limited, retries = endpoint_counts(self.client) if self.client else (0, 0)
        answered = usage.requests + usage.embedding_requests if usage else 0
        with self._lock:
            stages = [s.model_copy() for s in self._stages.values()]
            rejected: Counter[str] = Counter()
            for counts in self._personas.values():
                rejected.update(counts.rejected)
            people = list(self._personas.values())
            finished = len(self._finished)
            self._answered.append((now, answered))
            while len(self._answered) > 2 and now - self._answered[1][0] >= RATE_WINDOW_SECONDS:
                self._answered.popleft()
            since, answered_then = self._answered[0]
        snapshot = ProgressSnapshot(
            unit=self.unit,
            spending=self.client is not None,
            elapsed_seconds=now - self._started,
            personas_total=self.units_total if self.unit == "personas" else 0,
            personas_done=finished,
            personas_skipped=self.personas_skipped,
            stages=stages,
            queries_kept=sum(c.kept for c in people),
            queries_target=self.queries_target,
            rejected=dict(rejected.most_common()),
            sessions=sum(c.sessions for c in people),
            facts=sum(c.facts for c in people),
            results=sum(c.results for c in people),
            cost_estimate_usd=self.cost_estimate_usd,
            requests_per_minute=(60.0 * (answered - answered_then) / max(now - since, 1.0)),
            requests_per_minute_limit=self.requests_per_minute_limit,
            rate_limited=rate_limited,
            retries=retries,
        )
        if usage is not None:
            snapshot.requests = usage.requests
            snapshot.embedding_requests = usage.embedding_requests
            snapshot.cache_hits = usage.cache_hits
            snapshot.input_tokens = usage.input_tokens
            snapshot.output_tokens = usage.output_tokens
            snapshot.cached_tokens = usage.cached_tokens
            snapshot.cost_usd = usage.cost_usd
        done, total = snapshot.steps_done, snapshot.steps_total
        if 0 < done < total:
            snapshot.eta_seconds = snapshot.elapsed_seconds * (total - done) / done
        elif total and done >= total:
            snapshot.eta_seconds = 0.0
        return snapshot
