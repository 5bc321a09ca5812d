"""The generation stages: plain typed async functions, no orchestration.

* :func:`generate_queries` — candidate queries, invariant checks, γ filter, n_q cap;
* :func:`synthesise_timeline` — one query's dated events;
* :func:`expand_dialogues` — one session per event;
* :func:`merge_history` — a user's sessions as one chronological history.
"""

from memoryquest.stages.dialogues import DialogueStageResult, expand_dialogues
from memoryquest.stages.history import merge_history
from memoryquest.stages.queries import QueryStageResult, generate_queries
from memoryquest.stages.timelines import TimelineStageResult, synthesise_timeline

__all__ = [
    "DialogueStageResult",
    "QueryStageResult",
    "TimelineStageResult",
    "expand_dialogues",
    "generate_queries",
    "merge_history",
    "synthesise_timeline",
]
