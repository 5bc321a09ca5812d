"""What ``pgr run`` reads from a dataset, generated or published, and the queries of the users
it names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memoryquest.cli.inputs import load_generated
from memoryquest.contracts import Domain, Fact, Persona, Query, RunManifest, Session


@dataclass(frozen=True)
class PGRInputs:
    """What the runner needs from a dataset, whatever its on-disk form."""

    queries: list[Query]
    facts: list[Fact]
    personas: list[Persona]
    source: str
    manifest: RunManifest | None = None  # of the run that wrote the dataset, when it has one
    session_domains: dict[str, Domain] = field(default_factory=dict)  # for the judges' near misses
    sessions: list[Session] = field(default_factory=list)  # the history, for memory systems

    @property
    def generator_model(self) -> str:
        """The chat model that wrote the dataset ('' when no manifest says)."""
        return self.manifest.chat_model if self.manifest is not None else ""


def load_for_pgr(path: Path, *, need_facts: bool = True) -> PGRInputs:
    """Queries, facts and personas from a dataset directory: the working directory
    ``memoryquest generate`` writes, or a published one (its configs joined back with their
    labels, which only the judges read)."""
    from memoryquest.cli.open_dataset import dataset_kind
    from memoryquest.dataset import DatasetError

    path = Path(path)
    try:
        published = dataset_kind(path) == "published"
    except DatasetError:
        published = False
    if published:
        from memoryquest.publish import load_published

        dataset = load_published(path)
        source = f"published dataset {path}"
    else:
        dataset = load_generated(path)
        source = f"generated dataset {path}"
    if need_facts and not dataset.facts:
        raise ValueError(f"{path} has no facts: run the memory stage before PGR")
    return PGRInputs(
        dataset.queries,
        dataset.facts,
        dataset.personas,
        source,
        dataset.manifest,
        {session.session_id: session.domain for session in dataset.sessions},
        dataset.sessions,
    )


def select_users(inputs: PGRInputs, users: Sequence[str] | None) -> list[Query]:
    """Queries of the named users (PersonaLens user ids such as 'user0', or persona ids)."""
    if not users:
        return inputs.queries
    aliases: dict[str, str] = {}
    for persona in inputs.personas:
        aliases[persona.source_user_id] = persona.persona_id
        aliases[persona.persona_id] = persona.persona_id
    for query in inputs.queries:
        aliases.setdefault(query.persona_id, query.persona_id)
    unknown = [u for u in users if u not in aliases]
    if unknown:
        raise ValueError(f"no such user(s) in the dataset: {', '.join(unknown)}")
    wanted = {aliases[u] for u in users}
    selected = [q for q in inputs.queries if q.persona_id in wanted]
    if not selected:
        raise ValueError(f"the dataset has no queries for {', '.join(users)}")
    return selected
