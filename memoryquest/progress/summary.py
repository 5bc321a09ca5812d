"""The end-of-run summary: what a run kept, what it threw away and why, and what it spent.

A run that keeps no query must not look like a success: the command line
prints this summary and exits non-zero (:mod:`memoryquest.cli.generate`).
The flow stores it in ``run_report.json`` so the command line reads the same
figures the flow counted, in whatever process the flow ran.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from memoryquest.progress.figures import ProgressSnapshot
from memoryquest.progress.text import duration, reasons


class RunSummary(BaseModel):
    personas_done: int
    personas_skipped: int
    skipped: list[str] = Field(default_factory=list, description="Why each skipped persona was.")
    queries_kept: int
    rejected: dict[str, int] = Field(default_factory=dict)
    sessions: int = 0
    facts: int = 0
    stages_computed: int = 0
    stages_cached: int = 0
    requests: int = 0
    embedding_requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    rate_limited: int = 0
    retries: int = 0
    wall_seconds: float = 0.0

    @classmethod
    def from_snapshot(
        cls, snapshot: ProgressSnapshot, skipped: list[str], wall_seconds: float
    ) -> RunSummary:
        cached = sum(s.cached for s in snapshot.stages)
        # The figures both name alike are the snapshot's; the skipped personas are the caller's.
        counted = snapshot.model_dump(include=set(cls.model_fields) - {"personas_skipped"})
        return cls(
            **counted,
            personas_skipped=len(skipped),
            skipped=skipped,
            stages_computed=snapshot.steps_done - cached,
            stages_cached=cached,
            wall_seconds=wall_seconds,
        )

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def lines(self) -> list[str]:
        """The summary as aligned plain-text lines (the console's)."""
        rejected = f"{self.rejected_total:,} rejected"
        if self.rejected:
            rejected += f" ({reasons(self.rejected)})"
        cached = f", {self.cached_tokens:,} of them cached" if self.cached_tokens else ""
        lines = [
            "run summary",
            f"  personas   {self.personas_done:,} done, {self.personas_skipped:,} skipped",
            *(f"             skipped: {why}" for why in self.skipped),
            f"  queries    {self.queries_kept:,} kept, {rejected}",
            f"  history    {self.sessions:,} sessions, {self.facts:,} facts",
            f"  stages     {self.stages_computed:,} computed, {self.stages_cached:,} from Prefect's cache",
            f"  requests   {self.requests:,} chat, {self.embedding_requests:,} embedding; "
            f"{self.rate_limited:,} × 429, {self.retries:,} retries",
            f"  tokens     {self.input_tokens:,} in{cached}, {self.output_tokens:,} out",
            f"  cost       ${self.cost_usd:,.2f}",
            f"  wall time  {duration(self.wall_seconds)}",
        ]
        return lines

    def text(self) -> str:
        return "\n".join(self.lines())

    def markdown(self) -> str:
        """The summary for Prefect's UI."""
        body = "\n".join(line[2:] if line.startswith("  ") else line for line in self.lines()[1:])
        return f"## Run summary\n\n```\n{body}\n```\n"
