"""The run manifest: what produced a dataset (code, prompts, models, seed, settings, usage).

A run in one process builds it from its client (:func:`build_manifest`); a run
whose personas were generated elsewhere (shards, Dask workers) builds it from
the parts' manifests (:func:`memoryquest.orchestration.spread.merge_parts`). Both go
through :func:`manifest_for`, so every manifest carries the same fields.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Sequence

from pydantic import BaseModel

import memoryquest
from memoryquest.contracts import PromptVersion, RunManifest, StageUsage
from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.client import ModelClient
from memoryquest.llm.prompts import all_templates
from memoryquest.settings import Settings


class Origin(BaseModel):
    """What produced the rows; every part of a merged run must have the same (``simulated`` aside)."""

    package_version: str
    simulated: bool
    backend: str
    base_url: str | None
    chat_model: str
    embedder: str
    seed: int
    prompts: list[PromptVersion]

    @classmethod
    def of_client(cls, client: ModelClient, settings: Settings) -> Origin:
        return cls(
            package_version=memoryquest.__version__,
            simulated=client.simulated,
            backend=client.chat_backend.name,
            base_url=client.chat_backend.base_url,
            chat_model=client.chat_backend.model,
            embedder=client.embedder_name,
            seed=settings.seed,
            prompts=prompt_versions(),
        )

    @classmethod
    def of_manifest(cls, manifest: RunManifest) -> Origin:
        return cls.model_validate(manifest.model_dump(include=set(cls.model_fields)))


def prompt_versions() -> list[PromptVersion]:
    return [
        PromptVersion(template_id=t.template_id, version=t.version, sha256=t.sha256)
        for t in all_templates()
    ]


def grader_model(origin: Origin, settings: Settings) -> str:
    """The model that answers judges' and the reviewer's requests: the simulator offline, else
    ``endpoint.judge_model``, else the chat model (as :mod:`memoryquest.llm.factory` routes them)."""
    if origin.simulated:
        return origin.chat_model
    return settings.endpoint.judge_model or origin.chat_model


def manifest_for(
    dataset: GeneratedDataset,
    settings: Settings,
    started: float,
    *,
    origin: Origin,
    usage: Sequence[StageUsage],
) -> RunManifest:
    """A new run's manifest; ``started`` is the ``time.perf_counter()`` of the run's start."""
    return RunManifest(
        run_id=uuid.uuid4().hex,
        created_at=dt.datetime.now(dt.UTC),
        settings=settings.masked(),
        usage=list(usage),
        total_cost_usd=round(sum(u.cost_usd for u in usage), 6),
        persona_ids=[p.persona_id for p in dataset.personas],
        review=(
            dataset.review.model_copy(update={"reviewer_model": grader_model(origin, settings)})
            if dataset.review is not None
            else None
        ),
        wall_seconds=round(time.perf_counter() - started, 3),
        **origin.model_dump(),
    )


def build_manifest(
    dataset: GeneratedDataset, client: ModelClient, settings: Settings, started: float
) -> RunManifest:
    """The manifest of ``dataset`` as generated in this process with ``client``."""
    return manifest_for(
        dataset, settings, started, origin=Origin.of_client(client, settings), usage=client.usage()
    )
