"""The invariants of the queries: references, dates, γ and its cosines, queries per user."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from memoryquest.contracts import (
    Query,
)
from memoryquest.invariants.checker import Checker
from memoryquest.invariants.rules import Rule, count_within
from memoryquest.text import shared_content_words


class QueryChecks(Checker):
    # ------------------------------------------------------------------ queries

    def queries_(self) -> None:
        per_persona: dict[str, list[Query]] = defaultdict(list)
        for q in self.d.queries:
            self.persona_exists("queries", q.query_id, q.persona_id)
            flag_query = self.row("queries", q.query_id)
            per_persona[q.persona_id].append(q)
            count_within(
                flag_query,
                Rule.REFERENCE_COUNT,
                len(q.references),
                (self.g.references_min, self.g.references_max),
                "references",
            )
            for r in q.references:
                if r.date >= q.query_date:
                    flag_query(
                        Rule.REFERENCE_DATE,
                        f"reference {r.reference_id} dated {r.date} is not before the query date {q.query_date}",
                    )
                if r.cosine > self.g.reference_cosine_max + self.g.cosine_tolerance:
                    flag_query(
                        Rule.REFERENCE_COSINE_MAX,
                        f"reference {r.reference_id} has cosine {r.cosine:.4f} > {self.g.reference_cosine_max}",
                    )
                shared = shared_content_words(q.text, r.text)
                if len(shared) > self.g.shared_words_max:
                    flag_query(
                        Rule.REFERENCE_WORD_OVERLAP,
                        f"reference {r.reference_id} shares {len(shared)} content words with the query "
                        f"({', '.join(sorted(shared))}; at most {self.g.shared_words_max})",
                    )
                if r.valid_until is not None and r.valid_until < q.query_date:
                    flag_query(
                        Rule.REFERENCE_STALE,
                        f"reference {r.reference_id} held until {r.valid_until}, before the query date {q.query_date}",
                    )
                if r.domain == q.domain:
                    flag_query(
                        Rule.REFERENCE_DOMAIN,
                        f"reference {r.reference_id} is in the query's own domain {q.domain.value}",
                    )
            if q.references:
                mean = float(np.mean([r.cosine for r in q.references]))
                if abs(mean - q.gamma) > self.g.cosine_tolerance:
                    flag_query(
                        Rule.GAMMA_MEAN,
                        f"gamma {q.gamma:.4f} is not the mean of its cosines ({mean:.4f})",
                    )
            if q.gamma > self.g.gamma_max:
                flag_query(
                    Rule.GAMMA_THRESHOLD,
                    f"gamma {q.gamma:.4f} > {self.g.gamma_max}",
                )
        for persona_id, queries in per_persona.items():
            flag_persona = self.row("queries", persona_id)
            if len(queries) > self.g.queries_per_user:
                flag_persona(
                    Rule.QUERIES_PER_USER,
                    f"persona {persona_id} has {len(queries)} queries; at most {self.g.queries_per_user}",
                )
            # Ranks may have gaps: a query dropped later (no valid timeline) keeps the others' ranks.
            by_rank = sorted(queries, key=lambda q: q.rank)
            ranks = [q.rank for q in by_rank]
            if len(set(ranks)) != len(ranks):
                flag_persona(
                    Rule.QUERY_RANK,
                    f"persona {persona_id} has repeated ranks {ranks}",
                )
            elif any(
                b.gamma < a.gamma - self.g.cosine_tolerance
                for a, b in zip(by_rank, by_rank[1:], strict=False)
            ):
                flag_persona(
                    Rule.QUERY_RANK,
                    f"ranks of persona {persona_id} are not in ascending gamma",
                )
        self.recompute()

    def recompute(self) -> None:
        if self.embedder is None:
            return
        targets = [q for q in self.d.queries if q.embedder == self.embedder.name]
        texts = [t for q in targets for t in (q.text, *(r.text for r in q.references))]
        if not texts:
            return
        vectors = self.embedder.embed(texts)
        row = 0
        for q in targets:
            flag_query = self.row("queries", q.query_id)
            query_vector = vectors[row]
            for offset, r in enumerate(q.references, start=1):
                cosine = float(vectors[row + offset] @ query_vector)
                if abs(cosine - r.cosine) > self.g.cosine_tolerance:
                    flag_query(
                        Rule.COSINE_RECOMPUTED,
                        f"reference {r.reference_id}: stored cosine {r.cosine:.4f}, recomputed {cosine:.4f} with {self.embedder.name}",
                    )
            row += 1 + len(q.references)
