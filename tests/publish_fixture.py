"""A hand-made GeneratedDataset for the edge cases the generator does not produce.

Tests that need "a dataset" use the pipeline's own output
(tests/generated_dataset_fixture.py, the ``generated_dataset`` and
``published_generated`` fixtures). This one stays for what generation cannot
give on demand: a known shape (six users, so three non-trivial splits; fixed
counts on the card, schema and similarity rejections among them; all three PGR methods
and judges without running them), a marker phrase before every reference that
the validity audit must catch, and rows a test rewrites into hostile text.

Built from the real PersonaLens profiles bundled in ``personas/personalens``
(user0 .. user5): personas are parsed from their files; queries come from
their multi-domain tasks; references, timeline filler and dialogue turns are
worded from their affinities and interaction summaries; facts, validation
results and rejected candidates follow the ground-truth chain of SPEC §3.
Everything is deterministic (seeded per user), so tests can compare bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
from pathlib import Path

from memoryquest.contracts import (
    Affinity,
    Demographics,
    Domain,
    EventKind,
    Fact,
    FactRevision,
    FactState,
    FactStatus,
    FactType,
    Interaction,
    JudgeKind,
    Persona,
    PersonaSource,
    PersonaTask,
    PromptVersion,
    ProspectionIteration,
    ProspectionStep,
    Query,
    Reference,
    ReferenceJudgement,
    RejectedCandidate,
    RejectionReason,
    RetrievalMethod,
    Role,
    RunManifest,
    Session,
    Situation,
    StageUsage,
    TaskKind,
    Timeline,
    TimelineEvent,
    Turn,
    ValidationResult,
)
from memoryquest.dataset import GeneratedDataset
from memoryquest.ids import make_id
from memoryquest.settings import Settings

PERSONAS_DIR = Path(__file__).resolve().parent.parent / "personas" / "personalens"
EMBEDDER = "all-MiniLM-L6-v2-onnx-int8"
START = dt.date(2024, 1, 8)
FACT_TYPES = list(FactType)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) > 20]


def _values(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def load_persona(user: str) -> Persona:
    folder = PERSONAS_DIR / "profile" / user
    profile = json.loads((folder / "profile.json").read_text(encoding="utf-8"))
    demographics = {k: v for k, v in profile["demographics"].items() if k != "user_id"}
    tasks: list[PersonaTask] = []
    for file_name, kind in (
        ("tasks.json", TaskKind.SINGLE_DOMAIN),
        ("tasks_md.json", TaskKind.MULTI_DOMAIN),
    ):
        for task in json.loads((folder / file_name).read_text(encoding="utf-8")).values():
            tasks.append(
                PersonaTask(
                    task_id=task["task_id"],
                    kind=kind,
                    description=task["Task Description"],
                    user_intent=task["User Intent"],
                    goal=task["Task Goal"],
                    domains=[Domain(d) for d in task["Relevant Domains"]],
                    affinity_types=list(task["Relevant Affinity Types"]),
                    situations=[Situation(name=k, value=v) for k, v in task["situations"].items()],
                )
            )
    return Persona(
        persona_id=make_id("persona", "personalens", user),
        source=PersonaSource.PERSONALENS,
        source_user_id=user,
        demographics=Demographics(**demographics),
        interests=[Domain(d) for d, on in profile["interests"].items() if on],
        affinities=[
            Affinity(domain=Domain(domain), name=name, values=_values(value))
            for domain, attributes in profile["affinities"].items()
            for name, value in attributes.items()
        ],
        interactions=[
            Interaction(domain=Domain(d), summary=s) for d, s in profile["interactions"].items()
        ],
        tasks=tasks,
    )


class _UserBuilder:
    """Everything generated for one persona: queries, timelines, sessions, facts, validation."""

    def __init__(self, persona: Persona, queries_per_user: int) -> None:
        self.persona = persona
        self.rng = random.Random(
            int(hashlib.sha256(persona.persona_id.encode()).hexdigest()[:8], 16)
        )
        self.queries_per_user = queries_per_user
        self.queries: list[Query] = []
        self.timelines: list[Timeline] = []
        self.sessions: list[Session] = []
        self.facts: list[Fact] = []
        self.validation: list[ValidationResult] = []
        self.rejected: list[RejectedCandidate] = []

    def affinity_statement(self, domain: Domain) -> str:
        options = [a for a in self.persona.affinities if a.domain is domain and a.values]
        affinity = self.rng.choice(options)
        return f"Mentioned that their {affinity.name.lower()} is {', '.join(affinity.values[:2])}"

    def interaction_sentence(self, domain: Domain) -> str:
        summary = next(i.summary for i in self.persona.interactions if i.domain is domain)
        sentences = _sentences(summary) or [summary]
        return self.rng.choice(sentences)

    def build(self) -> None:
        pid = self.persona.persona_id
        multi = [t for t in self.persona.tasks if t.kind is TaskKind.MULTI_DOMAIN]
        chosen = self.rng.sample(multi, k=min(self.queries_per_user + 1, len(multi)))
        kept, rejected_task = chosen[: self.queries_per_user], chosen[self.queries_per_user :]
        for index, task in enumerate(kept):
            self.build_query(index, task)
        for task in rejected_task:
            self.build_rejected(task)
        self.rejected.append(
            RejectedCandidate(
                rejected_id=make_id("rejected", pid, "schema", 0),
                persona_id=pid,
                stage="timelines",
                reason=RejectionReason.SCHEMA,
                detail="events[2].date: input is not a valid date ('next Tuesday')",
                payload_json='{"events": [{"date": "next Tuesday", "description": "truncated',
            )
        )
        self.assign_positions()
        self.build_facts()
        self.build_validation()

    def build_query(self, index: int, task: PersonaTask) -> None:
        pid = self.persona.persona_id
        query_id = make_id("query", pid, task.task_id)
        query_domain = task.domains[0]
        query_date = START + dt.timedelta(days=40 + 25 * index + self.rng.randint(0, 6))
        other = [d for d in Domain if d not in task.domains]
        ref_domains = self.rng.sample(other, k=self.rng.randint(3, 5))
        references: list[Reference] = []
        for r, domain in enumerate(ref_domains):
            references.append(
                Reference(
                    reference_id=make_id("reference", query_id, r),
                    date=query_date - dt.timedelta(days=self.rng.randint(3, 30)),
                    text=self.affinity_statement(domain) + ".",
                    domain=domain,
                    cosine=round(self.rng.uniform(-0.05, 0.3), 6),
                )
            )
        gamma = sum(ref.cosine for ref in references) / len(references)
        self.queries.append(
            Query(
                query_id=query_id,
                persona_id=pid,
                query_date=query_date,
                text=task.user_intent,
                reasoning=f"{task.description} Answering well needs what the user said earlier about "
                + ", ".join(ref.domain.value for ref in references)
                + ".",
                domain=query_domain,
                references=references,
                gamma=gamma,
                embedder=EMBEDDER,
                rank=0,
            )
        )
        self.build_timeline(query_id, query_date, references, task.domains)

    def build_rejected(self, task: PersonaTask) -> None:
        pid = self.persona.persona_id
        candidate = {
            "query": task.user_intent,
            "query_date": "2024-05-02",
            "domain": task.domains[0].value,
            "references": [
                {"text": self.affinity_statement(d), "domain": d.value} for d in task.domains[:3]
            ],
        }
        gamma = round(self.rng.uniform(0.34, 0.55), 6)
        self.rejected.append(
            RejectedCandidate(
                rejected_id=make_id("rejected", pid, task.task_id),
                persona_id=pid,
                stage="queries",
                reason=RejectionReason.SIMILARITY,
                detail=f"gamma {gamma:.3f} is above the threshold 0.3",
                payload_json=json.dumps(candidate, ensure_ascii=False),
                gamma=gamma,
                embedder=EMBEDDER,
            )
        )

    def build_timeline(
        self,
        query_id: str,
        query_date: dt.date,
        references: list[Reference],
        task_domains: list[Domain],
    ) -> None:
        pid = self.persona.persona_id
        events: list[TimelineEvent] = []
        for ref in references:
            events.append(
                TimelineEvent(
                    event_id=make_id("event", query_id, ref.reference_id),
                    date=ref.date,
                    domain=ref.domain,
                    kind=EventKind.REFERENCE,
                    description=f"The user talks to the assistant about {ref.domain.value.lower()}; {ref.text[0].lower()}{ref.text[1:]}",
                    reference_id=ref.reference_id,
                )
            )
        earliest = min(ref.date for ref in references)
        fillers = self.rng.randint(2, 4)
        filler_domains = self.rng.sample(
            [d for d in Domain if d not in {r.domain for r in references}], k=fillers
        )
        for f, domain in enumerate(filler_domains):
            date = (
                earliest - dt.timedelta(days=self.rng.randint(1, 10))
                if f == 0
                else earliest
                + dt.timedelta(days=self.rng.randint(0, (query_date - earliest).days - 1))
            )
            events.append(
                TimelineEvent(
                    event_id=make_id("event", query_id, "filler", f),
                    date=date,
                    domain=domain,
                    kind=EventKind.FILLER,
                    description=self.interaction_sentence(domain),
                )
            )
        events.sort(key=lambda e: (e.date, e.event_id))
        self.timelines.append(
            Timeline(
                timeline_id=make_id("timeline", query_id),
                query_id=query_id,
                persona_id=pid,
                events=events,
            )
        )
        ref_text = {r.reference_id: r.text for r in references}
        for event in events:
            self.sessions.append(
                self.build_session(query_id, event, ref_text.get(event.reference_id or ""))
            )

    def build_session(self, query_id: str, event: TimelineEvent, reference: str | None) -> Session:
        n_turns = 2 * self.rng.randint(3, 7)
        turns: list[Turn] = []
        reference_turns: list[int] = []
        for t in range(n_turns):
            if t % 2 == 0:
                if t == 2 and reference is not None:
                    content = f"By the way, for context: {reference[0].lower()}{reference[1:]}"
                    reference_turns.append(t)
                else:
                    content = f"Could you help me with something in {event.domain.value.lower()}? {self.interaction_sentence(event.domain)}"
                turns.append(Turn(role=Role.USER, content=content))
            else:
                turns.append(
                    Turn(
                        role=Role.ASSISTANT,
                        content=f"Of course. Noted — I'll keep that in mind for {event.domain.value.lower()} requests.",
                    )
                )
        return Session(
            session_id=make_id("session", event.event_id),
            persona_id=self.persona.persona_id,
            query_id=query_id,
            event_id=event.event_id,
            date=event.date,
            domain=event.domain,
            position=0,
            turns=turns,
            reference_id=event.reference_id,
            reference_turn_indices=reference_turns,
        )

    def assign_positions(self) -> None:
        ordered = sorted(self.sessions, key=lambda s: (s.date, s.session_id))
        self.sessions = [s.model_copy(update={"position": i}) for i, s in enumerate(ordered)]

    def build_facts(self) -> None:
        pid = self.persona.persona_id
        for number, session in enumerate(self.sessions):
            user_turn = next(t.content for t in session.turns if t.role is Role.USER)
            info = (
                session.turns[session.reference_turn_indices[0]].content
                if session.reference_id
                else user_turn
            )
            refs = [session.reference_id] if session.reference_id else []
            revision = FactRevision(
                valid_from=session.date,
                info=info,
                type=FACT_TYPES[number % len(FACT_TYPES)],
                frequency=1,
                related_entities=[session.domain.value],
                session_ids=[session.session_id],
                source_reference_ids=refs,
                state=FactState.ADD,
            )
            revisions = [revision]
            if number % 5 == 4:  # seen again a week later
                revisions.append(
                    revision.model_copy(
                        update={
                            "valid_from": session.date + dt.timedelta(days=7),
                            "frequency": 2,
                            "state": FactState.UPDATE,
                        }
                    )
                )
            latest = revisions[-1]
            self.facts.append(
                Fact(
                    fid=make_id("fact", pid, session.session_id),
                    persona_id=pid,
                    info=latest.info,
                    type=latest.type,
                    frequency=latest.frequency,
                    related_entities=latest.related_entities,
                    session_ids=latest.session_ids,
                    source_reference_ids=refs,
                    state=latest.state,
                    created_on=revisions[0].valid_from,
                    updated_on=latest.valid_from,
                    revisions=revisions,
                )
            )
        # one consolidation: the two earliest filler facts fold into a new merged fact
        fillers = [
            f
            for f in sorted(self.facts, key=lambda f: (f.created_on, f.fid))
            if not f.source_reference_ids
        ][:2]
        if len(fillers) == 2:
            merged_on = max(f.updated_on for f in fillers) + dt.timedelta(days=1)
            merged_id = make_id("fact", pid, "merged", *[f.fid for f in fillers])
            sessions = sorted({s for f in fillers for s in f.session_ids})
            self.facts = [
                f.model_copy(
                    update={
                        "status": FactStatus.MERGED,
                        "merged_into": merged_id,
                        "retired_on": merged_on,
                    }
                )
                if f in fillers
                else f
                for f in self.facts
            ]
            info = " ".join(f.info for f in fillers)
            self.facts.append(
                Fact(
                    fid=merged_id,
                    persona_id=pid,
                    info=info,
                    type=FactType.PREFERENCE,
                    frequency=2,
                    related_entities=sorted({e for f in fillers for e in f.related_entities}),
                    session_ids=sessions,
                    merged_fids=[f.fid for f in fillers],
                    state=FactState.UPDATE,
                    created_on=merged_on,
                    updated_on=merged_on,
                    revisions=[
                        FactRevision(
                            valid_from=merged_on,
                            info=info,
                            type=FactType.PREFERENCE,
                            frequency=2,
                            related_entities=sorted(
                                {e for f in fillers for e in f.related_entities}
                            ),
                            session_ids=sessions,
                            state=FactState.UPDATE,
                        )
                    ],
                )
            )

    def build_validation(self) -> None:
        pid = self.persona.persona_id
        for query in self.queries:
            visible = [
                f
                for f in self.facts
                if f.created_on <= query.query_date
                and (f.retired_on is None or f.retired_on > query.query_date)
            ]
            visible.sort(key=lambda f: f.fid)
            shares = {
                RetrievalMethod.QUERY_ONLY: 0.35,
                RetrievalMethod.PGR_COT: 0.6,
                RetrievalMethod.PGR_TOT: 0.75,
            }
            for method, share in shares.items():
                retrieved = [f.fid for f in visible if self.rng.random() < share]
                iterations: list[ProspectionIteration] = []
                if method is not RetrievalMethod.QUERY_ONLY:
                    steps: list[ProspectionStep] = []
                    for s in range(3):
                        parent = (
                            None
                            if s == 0
                            else ("s0" if method is RetrievalMethod.PGR_TOT else f"s{s - 1}")
                        )
                        steps.append(
                            ProspectionStep(
                                step_id=f"s{s}",
                                action=f"Check the user's {query.references[s % len(query.references)].domain.value.lower()} history",
                                constraints="respect stated preferences and dates",
                                parent=parent,
                                retrieved_fids=retrieved[s::3],
                            )
                        )
                    for step in steps:
                        step.children = [c.step_id for c in steps if c.parent == step.step_id]
                    iterations = [
                        ProspectionIteration(
                            iteration=0, steps=steps, new_fids=retrieved[: len(retrieved) // 2]
                        ),
                        ProspectionIteration(
                            iteration=1, steps=steps[:1], new_fids=retrieved[len(retrieved) // 2 :]
                        ),
                    ]
                retrieved_set = set(retrieved)
                for judge in (JudgeKind.PROVENANCE, JudgeKind.EMBEDDING):
                    judgements = []
                    for ref in query.references:
                        supporting = [
                            f.fid
                            for f in visible
                            if f.fid in retrieved_set and ref.reference_id in f.source_reference_ids
                        ]
                        found = (
                            bool(supporting)
                            if judge is JudgeKind.PROVENANCE
                            else bool(supporting) or self.rng.random() < 0.1
                        )
                        judgements.append(
                            ReferenceJudgement(
                                reference_id=ref.reference_id,
                                found=found,
                                reason="retrieved fact descends from it" if supporting else "",
                                supporting_fids=supporting,
                            )
                        )
                    recall = sum(j.found for j in judgements) / len(judgements)
                    self.validation.append(
                        ValidationResult(
                            result_id=make_id("result", query.query_id, method.value, judge.value),
                            query_id=query.query_id,
                            persona_id=pid,
                            method=method,
                            judge=judge,
                            memory_as_of=query.query_date,
                            memory_size=len(visible),
                            retrieved_fids=retrieved,
                            judgements=judgements,
                            recall=recall,
                            recall_exact=all(j.found for j in judgements),
                            ndcg=round(recall * 0.9, 6),
                            llm_calls=0
                            if method is RetrievalMethod.QUERY_ONLY
                            else 1 + len(iterations),
                            embedding_calls=1 + sum(len(i.steps) for i in iterations),
                            iterations=iterations,
                            augmented_query=None
                            if method is RetrievalMethod.QUERY_ONLY
                            else f"{query.text} (user context: {len(retrieved)} facts)",
                            summary=None
                            if method is RetrievalMethod.QUERY_ONLY
                            else "Plan grounded in the user's earlier sessions.",
                        )
                    )


def build_manifest(persona_ids: list[str], settings: Settings | None = None) -> RunManifest:
    settings = settings or Settings()
    stages = ["queries", "timelines", "dialogues", "memory", "pgr"]
    return RunManifest(
        run_id="run-publish-fixture",
        created_at=dt.datetime(2024, 6, 1, 12, 0, tzinfo=dt.UTC),
        package_version="0.1.0",
        simulated=True,
        backend="simulated",
        base_url=None,
        chat_model="simulator",
        embedder=EMBEDDER,
        seed=settings.seed,
        settings=settings.masked(),
        prompts=[
            PromptVersion(template_id=s, version=1, sha256=hashlib.sha256(s.encode()).hexdigest())
            for s in stages[:4]
        ],
        usage=[
            StageUsage(
                stage=s,
                requests=10 * (i + 1),
                input_tokens=1200 * (i + 1),
                output_tokens=400 * (i + 1),
                seconds=0.5 * (i + 1),
            )
            for i, s in enumerate(stages)
        ],
        total_cost_usd=0.0,
        persona_ids=persona_ids,
        wall_seconds=12.5,
    )


def build_publish_fixture(
    users: int = 6, queries_per_user: int = 3, settings: Settings | None = None
) -> GeneratedDataset:
    """A GeneratedDataset for ``user0 .. user{users-1}`` of the bundled PersonaLens sample."""
    dataset = GeneratedDataset()
    for number in range(users):
        persona = load_persona(f"user{number}")
        builder = _UserBuilder(persona, queries_per_user)
        builder.build()
        ranked = sorted(builder.queries, key=lambda q: (q.gamma, q.query_id))
        dataset.personas.append(persona)
        dataset.queries.extend(q.model_copy(update={"rank": r}) for r, q in enumerate(ranked))
        dataset.timelines.extend(builder.timelines)
        dataset.sessions.extend(builder.sessions)
        dataset.facts.extend(builder.facts)
        dataset.validation.extend(builder.validation)
        dataset.rejected.extend(builder.rejected)
    dataset.manifest = build_manifest([p.persona_id for p in dataset.personas], settings)
    return dataset
