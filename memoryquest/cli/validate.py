"""``memoryquest validate DATASET_DIR``: check a generated dataset against SPEC §2–3."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import TYPE_CHECKING

from memoryquest.cli.inputs import add_dataset_argument, load_generated
from memoryquest.cli.main import add_common_options, settings_from_args
from memoryquest.invariants import EmbeddingFunction, check_invariants, queries_not_recomputed

if TYPE_CHECKING:
    from memoryquest.dataset import GeneratedDataset


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Check a generated dataset directory (as written by 'generate') against every rule of the "
        "specification: reference counts, gamma and per-reference cosines (recomputed with the local "
        "embedder when the dataset used it), timelines, sessions, history order, fact provenance and "
        "reference coverage; then the validity audit (`memoryquest audit`), whose failed gates fail "
        "validation too."
    )
    add_common_options(parser)
    add_dataset_argument(parser, "directory holding queries.jsonl, timelines.jsonl, ...")
    parser.add_argument(
        "--no-recompute",
        action="store_true",
        help="skip recomputing cosines (no embedding model is loaded)",
    )
    parser.add_argument(
        "--no-audit", action="store_true", help="check the invariants only, skip the validity audit"
    )
    parser.set_defaults(func=_validate)


def _embedder(dataset: GeneratedDataset, skip: bool) -> EmbeddingFunction | None:
    """The bundled local embedder, when some query was scored with it; other models are not loaded."""
    if skip:
        return None
    from memoryquest.llm.local_embedder import MODEL_NAME

    if not any(q.embedder == MODEL_NAME for q in dataset.queries):
        return None
    from memoryquest.llm.factory import shared_local_embedder

    return EmbeddingFunction.of(shared_local_embedder())


def _validate(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    dataset = load_generated(args.dataset_dir)
    embedder = _embedder(dataset, args.no_recompute)
    violations = check_invariants(dataset, settings, embedder)
    for violation in violations:
        print(violation)
    skipped = queries_not_recomputed(dataset, embedder)
    if skipped:
        names = ", ".join(sorted({q.embedder for q in skipped}))
        reason = (
            "--no-recompute" if args.no_recompute else f"embedder not available offline: {names}"
        )
        print(f"note: cosines of {len(skipped)} queries were not recomputed ({reason})")
    counts = Counter(v.rule.value for v in violations)
    rows = (
        f"{len(dataset.personas)} personas, {len(dataset.queries)} queries, {len(dataset.timelines)} timelines, "
        f"{len(dataset.sessions)} sessions, {len(dataset.facts)} facts"
    )
    failed_audit: list[str] = []
    if not args.no_audit:
        from memoryquest.audit import audit_dataset, audit_markdown

        report = audit_dataset(dataset, settings)
        print(audit_markdown(report))
        failed_audit = report.failures
        for failure in failed_audit:
            print(f"audit failed: {failure}")
    if violations or failed_audit:
        by_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(counts.items()))
        audit_note = f"; {len(failed_audit)} failed audit gates" if failed_audit else ""
        print(
            f"{len(violations)} violations in {args.dataset_dir} ({rows}): {by_rule or 'none'}{audit_note}"
        )
        return 1
    audited = "" if args.no_audit else ", audit passed"
    print(f"ok: no violations in {args.dataset_dir} ({rows}){audited}")
    return 0
