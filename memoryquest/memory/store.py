"""The user's fact store while the history is replayed: upsert and merge, with full history.

Every change appends a :class:`FactRevision` instead of overwriting, and merged
facts are retired rather than deleted, so :func:`memoryquest.memory.snapshot.memory_as_of`
can rebuild the store exactly as it stood on any date.

Dating rule: a revision is valid from the date of the latest session behind it
(its evidence), never earlier than the fact's previous revision. A fact learnt
from a session is therefore visible from that session's date on, even when the
extraction ran a few sessions later, and nothing learnt from a later session is
visible before that session happened.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryquest.contracts import Fact, FactRevision, FactState, FactStatus, FactType, Session
from memoryquest.ids import make_id


@dataclass(frozen=True)
class FactChange:
    """One validated write from an extraction answer."""

    fid: str | None  # an existing active fid to update; None for a new fact
    info: str
    type: FactType
    related_entities: list[str]
    evidence: dict[str, list[int]]  # session_id -> turn indices in that session
    quotes: dict[str, list[tuple[int, int, int]]] = field(
        default_factory=dict
    )  # session_id -> (turn, start, end)

    def credits(self, session: Session) -> bool:
        """Was this change extracted from the sentence that states ``session``'s reference?

        Sessions recorded before sentence spans existed fall back to the turn.
        """
        if session.reference_id is None:
            return False
        if not session.reference_spans:
            return bool(
                set(self.evidence.get(session.session_id, ())) & set(session.reference_turn_indices)
            )
        return any(
            turn == span.turn_index and start < span.end and span.start < end
            for turn, start, end in self.quotes.get(session.session_id, ())
            for span in session.reference_spans
        )


def _stated_by(revision: FactRevision) -> dict[str, Any]:
    """What a fact states while ``revision`` is its latest: every field of the revision but its date."""
    return revision.model_dump(exclude={"valid_from"})


def fact_with_history(
    fid: str, persona_id: str, revisions: Sequence[FactRevision], merged_fids: Sequence[str] = ()
) -> Fact:
    """A fact as its revisions leave it: stating what the latest states, created on the first's
    date and last updated on the latest's."""
    latest = revisions[-1]
    return Fact(
        fid=fid,
        persona_id=persona_id,
        **_stated_by(latest),
        merged_fids=list(merged_fids),
        created_on=revisions[0].valid_from,
        updated_on=latest.valid_from,
        revisions=list(revisions),
    )


class FactStore:
    """Active and retired facts of one persona, keyed by fid."""

    def __init__(self, persona_id: str, history: Sequence[Session]) -> None:
        self.persona_id = persona_id
        self._facts: dict[str, Fact] = {}
        self._sessions = {s.session_id: s for s in history}
        self._position = {s.session_id: s.position for s in history}

    # ------------------------------------------------------------------ reading

    def active(self) -> list[Fact]:
        return [f for fid, f in sorted(self._facts.items()) if f.status is FactStatus.ACTIVE]

    def get(self, fid: str) -> Fact:
        return self._facts[fid]

    def all(self) -> list[Fact]:
        return [self._facts[fid] for fid in sorted(self._facts)]

    def __contains__(self, fid: object) -> bool:
        return fid in self._facts

    # ------------------------------------------------------------------ provenance

    def _ordered_sessions(self, session_ids: Iterable[str]) -> list[str]:
        return sorted(set(session_ids), key=lambda sid: (self._position[sid], sid))

    def _references(self, change: FactChange) -> list[str]:
        """References whose stating sentence the change was extracted from."""
        found: list[str] = []
        for session_id in self._ordered_sessions(change.evidence):
            session = self._sessions[session_id]
            if (
                session.reference_id is not None
                and session.reference_id not in found
                and change.credits(session)
            ):
                found.append(session.reference_id)
        return found

    def _evidence_date(self, evidence: dict[str, list[int]]) -> dt.date:
        return max(self._sessions[sid].date for sid in evidence)

    # ------------------------------------------------------------------ writing

    def add(self, change: FactChange, anchor_session_id: str, ordinal: int) -> Fact:
        """Insert a new fact; its id depends only on the batch's first session and its rank."""
        fid = make_id("fact", self.persona_id, anchor_session_id, ordinal)
        if fid in self._facts:
            raise ValueError(
                f"fact id {fid} already exists (anchor {anchor_session_id}, ordinal {ordinal})"
            )
        date = self._evidence_date(change.evidence)
        session_ids = self._ordered_sessions(change.evidence)
        references = self._references(change)
        revision = FactRevision(
            valid_from=date,
            info=change.info,
            type=change.type,
            frequency=1,
            related_entities=list(change.related_entities),
            session_ids=session_ids,
            source_reference_ids=references,
            state=FactState.ADD,
        )
        fact = fact_with_history(fid, self.persona_id, [revision])
        self._facts[fid] = fact
        return fact

    def update(self, change: FactChange) -> Fact:
        """Update an active fact in place: frequency + 1 and a new revision."""
        assert change.fid is not None
        old = self._facts[change.fid]
        if old.status is not FactStatus.ACTIVE:
            raise ValueError(
                f"fact {change.fid} was merged into {old.merged_into} and cannot be updated"
            )
        date = max(old.updated_on, self._evidence_date(change.evidence))
        session_ids = self._ordered_sessions([*old.session_ids, *change.evidence])
        references = list(old.source_reference_ids)
        references += [r for r in self._references(change) if r not in references]
        revision = FactRevision(
            valid_from=date,
            info=change.info,
            type=change.type,
            frequency=old.frequency + 1,
            related_entities=list(change.related_entities),
            session_ids=session_ids,
            source_reference_ids=references,
            state=FactState.UPDATE,
        )
        fact = old.model_copy(
            update={
                **_stated_by(revision),
                "updated_on": date,
                "revisions": [*old.revisions, revision],
            }
        )
        self._facts[fact.fid] = fact
        return fact

    def merge(
        self,
        member_fids: Sequence[str],
        info: str,
        fact_type: FactType,
        related_entities: list[str],
        on: dt.date,
    ) -> Fact:
        """Fold active facts into one new fact dated ``on``; the members are retired, not deleted."""
        members = [self._facts[fid] for fid in sorted(set(member_fids))]
        if len(members) < 2:
            raise ValueError(f"a merge needs at least two facts, got {len(members)}")
        for member in members:
            if member.status is not FactStatus.ACTIVE:
                raise ValueError(f"fact {member.fid} is not active and cannot be merged")
            if member.updated_on > on:
                raise ValueError(
                    f"fact {member.fid} is dated {member.updated_on}, after the merge date {on}"
                )
        fid = make_id("fact", "merge", *(m.fid for m in members))
        session_ids = self._ordered_sessions(sid for m in members for sid in m.session_ids)
        references: list[str] = []
        for member in sorted(members, key=lambda m: (m.created_on, m.fid)):
            references += [r for r in member.source_reference_ids if r not in references]
        merged_fids = sorted({m.fid for m in members} | {f for m in members for f in m.merged_fids})
        frequency = sum(m.frequency for m in members)
        revision = FactRevision(
            valid_from=on,
            info=info,
            type=fact_type,
            frequency=frequency,
            related_entities=list(related_entities),
            session_ids=session_ids,
            source_reference_ids=references,
            state=FactState.ADD,
        )
        merged = fact_with_history(fid, self.persona_id, [revision], merged_fids)
        for member in members:
            self._facts[member.fid] = member.model_copy(
                update={"status": FactStatus.MERGED, "merged_into": fid, "retired_on": on}
            )
        self._facts[fid] = merged
        return merged
