"""The invariants of the memory facts and the withdrawn queries."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memoryquest.invariants.checker import Checker
from memoryquest.invariants.rules import Rule, persona_row
from memoryquest.memory.coverage import uncovered_references


class MemoryChecks(Checker):
    # ------------------------------------------------------------------ facts

    def facts_(self) -> None:
        for f in self.d.facts:
            self.persona_exists("facts", f.fid, f.persona_id)
            flag_fact = self.row("facts", f.fid)
            if not f.session_ids:
                flag_fact(Rule.FACT_PROVENANCE, "no session behind the fact")
            groups = [("fact", f.session_ids, f.source_reference_ids)] + [
                (f"revision {i}", r.session_ids, r.source_reference_ids)
                for i, r in enumerate(f.revisions)
            ]
            for label, session_ids, reference_ids in groups:
                carried = set()
                for sid in session_ids:
                    session = persona_row(
                        flag_fact,
                        Rule.FACT_PROVENANCE,
                        self.sessions.get(sid),
                        f.persona_id,
                        f"{label}: session {sid}",
                    )
                    if session is not None and session.reference_id:
                        carried.add(session.reference_id)
                for rid in reference_ids:
                    if rid not in self.references:
                        flag_fact(
                            Rule.FACT_REFERENCE_CONSISTENCY,
                            f"{label}: reference {rid} does not exist",
                        )
                    elif rid not in carried:
                        flag_fact(
                            Rule.FACT_REFERENCE_CONSISTENCY,
                            f"{label}: reference {rid} is not carried by any of its sessions",
                        )
            for merged in f.merged_fids:
                persona_row(
                    flag_fact,
                    Rule.MERGED_FIDS,
                    self.facts.get(merged),
                    f.persona_id,
                    f"merged fid {merged}",
                )
            if f.merged_into is not None and f.merged_into not in self.facts:
                flag_fact(Rule.MERGED_FIDS, f"merged_into {f.merged_into} does not exist")

    def coverage(self) -> None:
        facts_by_persona: dict[str, list[Any]] = defaultdict(list)
        for f in self.d.facts:
            facts_by_persona[f.persona_id].append(f)
        for q in self.d.queries:
            flag_query = self.row("queries", q.query_id)
            for rid in uncovered_references(q, facts_by_persona.get(q.persona_id, [])):
                flag_query(
                    Rule.REFERENCE_UNCOVERED,
                    f"reference {rid} has no credited fact in memory on the query date {q.query_date}",
                )

    def rejected_(self) -> None:
        for r in self.d.rejected:
            self.persona_exists("rejected", r.rejected_id, r.persona_id)
