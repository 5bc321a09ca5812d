"""What the judges' calibration reports (``NAME.calibration.json``), apart from the code that
measures it, so the dataset card reads it without the judges (:mod:`memoryquest.pgr.calibration`)."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from memoryquest.contracts import JudgeKind

CALIBRATION_SUFFIX = ".calibration.json"  # beside a results file: pgr.jsonl -> pgr.calibration.json


class CalibrationItem(BaseModel):
    """One fact put to a judge for one reference, and what the right verdict is."""

    query_id: str
    reference_id: str
    fid: str
    kind: str = Field(description="right, other_query or near_miss")
    judge: JudgeKind
    accepted: bool


class JudgeErrorRow(BaseModel):
    judge: JudgeKind
    right: int
    rejected_right: int
    other_query: int
    accepted_other_query: int
    near_miss: int
    accepted_near_miss: int
    false_accept: float = Field(description="Wrong facts (either kind) the judge accepted.")
    false_accept_low: float
    false_accept_high: float
    false_reject: float = Field(description="Facts stating the reference the judge rejected.")
    false_reject_low: float
    false_reject_high: float


class JudgeAgreementRow(BaseModel):
    first: JudgeKind
    second: JudgeKind
    verdicts: int
    agreement: float
    kappa: float | None = Field(description="Cohen's κ; null when one judge gave a single verdict.")


class JudgeCalibrationReport(BaseModel):
    """What ``memoryquest pgr run`` prints and writes as ``*.calibration.json``."""

    facts_per_kind: int
    queries: int
    judges: list[JudgeErrorRow]
    agreement: list[JudgeAgreementRow]
    unjudged: list[str] = Field(default_factory=list)


def wilson_interval(
    successes: int, trials: int, z: float = 1.959963984540054
) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (a rate near 0 keeps a sensible upper bound)."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    scale = 1 + z * z / trials
    # the bounds hold p itself (rounding can put a bound a hair past a rate of 0 or 1)
    return max(0.0, min(p, (centre - spread) / scale)), min(1.0, max(p, (centre + spread) / scale))
