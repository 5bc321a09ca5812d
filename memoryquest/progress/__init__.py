"""Progress of a run: one set of figures (:mod:`.figures`), shown on the terminal (:mod:`.display`)
and summed up at the end (:mod:`.summary`). Nothing here knows about Prefect."""

from memoryquest.progress.display import ProgressMode, periodically, plain_line, render, showing
from memoryquest.progress.figures import ProgressSnapshot, RunFigures, StageProgress
from memoryquest.progress.summary import RunSummary

__all__ = [
    "ProgressMode",
    "ProgressSnapshot",
    "RunFigures",
    "RunSummary",
    "StageProgress",
    "periodically",
    "plain_line",
    "render",
    "showing",
]
