"""Check a generated dataset against every invariant of SPEC §2–3.

``check_invariants`` returns one :class:`Violation` per broken rule and row;
an empty list means the dataset is sound. Rules are named (``Rule``) so tests
and scripts can match them exactly.

Cosines are recomputed only for queries whose ``embedder`` matches the
embedder passed in: a different embedding model gives different cosines, so
comparing across models would be meaningless. Queries with another embedder
are still checked for internal consistency (γ equals the mean of the stored
cosines, γ within the threshold) and are listed by
:func:`queries_not_recomputed`.
"""

from __future__ import annotations

from memoryquest.dataset import GeneratedDataset
from memoryquest.invariants.conversations import ConversationChecks
from memoryquest.invariants.memory import MemoryChecks
from memoryquest.invariants.queries import QueryChecks
from memoryquest.invariants.rules import EmbeddingFunction, Rule, Violation, queries_not_recomputed
from memoryquest.settings import Settings


class DatasetChecks(QueryChecks, ConversationChecks, MemoryChecks):
    """Every table's checks over one dataset, in table order."""

    def run(self) -> list[Violation]:
        self.unique_ids()
        self.queries_()
        self.timelines_()
        self.sessions_()
        self.history()
        self.facts_()
        self.coverage()
        self.rejected_()
        return self.out


def check_invariants(
    dataset: GeneratedDataset, settings: Settings, embedder: EmbeddingFunction | None = None
) -> list[Violation]:
    """Every broken invariant, in table order; [] when the dataset is sound."""
    return DatasetChecks(dataset, settings, embedder).run()


__all__ = ["EmbeddingFunction", "Rule", "Violation", "check_invariants", "queries_not_recomputed"]
