"""Output tokens per prompt template against its budget: the figures the ``max_output_tokens`` headers come from.

Runs the whole pipeline offline (simulator + local embedder, default
generation settings with PGR answers on, no response cache) on the first
``--personas`` bundled PersonaLens users, then judges each query's first two
PGR answers pairwise (``judge_pairwise``, which only ``pairwise_winrate``
calls), and records every chat answer. Prints per template: calls,
mean, p99 and max output tokens (the simulator's answers, counted with cl100k),
the budget the request was sent with, budget / max, and a suggested budget:
twice the observed max rounded up to a multiple of 256, at least 256. A real
model writes answers of other lengths; a truncated one is retried with twice
the budget, so a budget too tight costs a retry, one too loose only holds
tokens/min reservations longer.

    .venv/bin/python benchmarks/bench_output_lengths.py               # 2 personas
    .venv/bin/python benchmarks/bench_output_lengths.py --personas 4
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
from collections import defaultdict
from pathlib import Path

from memoryquest.dataset import GeneratedDataset
from memoryquest.llm.backends import ChatCall, ChatResult
from memoryquest.llm.client import ModelClient
from memoryquest.llm.simulated import SimulatedChatBackend

MIN_BUDGET = 256
BUDGET_STEP = 256


class RecordingBackend(SimulatedChatBackend):
    """The simulator, remembering each answer's output tokens and the budget it was sent with."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.lengths: dict[str, list[int]] = defaultdict(list)
        self.budgets: dict[str, set[int]] = defaultdict(set)

    async def chat(self, call: ChatCall) -> ChatResult:
        result = await super().chat(call)
        self.lengths[call.request.template_id].append(result.output_tokens)
        self.budgets[call.request.template_id].add(call.max_output_tokens)
        return result


def percentile(values: list[int], share: float) -> int:
    """Nearest-rank percentile: the smallest value at or above ``share`` of the values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def suggested_budget(longest: int) -> int:
    return max(MIN_BUDGET, math.ceil(2 * longest / BUDGET_STEP) * BUDGET_STEP)


def table(recorder: RecordingBackend) -> str:
    lines = [
        f"{'template':<22}{'calls':>7}{'mean':>8}{'p99':>8}{'max':>8}{'budget':>9}"
        f"{'budget/max':>12}{'suggested':>11}"
    ]
    for template_id in sorted(recorder.lengths):
        lengths = recorder.lengths[template_id]
        longest = max(lengths)
        budget = max(recorder.budgets[template_id])
        lines.append(
            f"{template_id:<22}{len(lengths):>7}{sum(lengths) / len(lengths):>8.0f}"
            f"{percentile(lengths, 0.99):>8}{longest:>8}{budget:>9}"
            f"{budget / max(longest, 1):>12.1f}{suggested_budget(longest):>11}"
        )
    return "\n".join(lines)


async def judge_answer_pairs(dataset: GeneratedDataset, client: ModelClient) -> None:
    from memoryquest.pgr.winrate import pairwise_winrate, persona_profile

    answers: dict[str, dict[str, str]] = defaultdict(dict)
    for result in dataset.validation:
        if result.answer:
            answers[result.query_id].setdefault(result.method, result.answer)
    personas = {p.persona_id: p for p in dataset.personas}
    for query in dataset.queries:
        pair = list(answers[query.query_id].values())[:2]
        if len(pair) == 2:
            profile = persona_profile(personas.get(query.persona_id))
            await pairwise_winrate(query, *pair, profile, client)


async def measure(personas: int, output: Path) -> RecordingBackend:
    from memoryquest.estimate import default_sample_dir
    from memoryquest.intake import PersonaSelection, load_personas
    from memoryquest.llm.factory import build_client
    from memoryquest.pipeline import generate_dataset
    from memoryquest.settings import Backend, load_settings

    settings = load_settings(
        overrides={
            "output_dir": str(output),
            "cache": {"enabled": False},
            "endpoint": {"backend": Backend.SIMULATED.value},
            "pgr": {"generate_answers": True},
        }
    )
    sample = load_personas(default_sample_dir(), PersonaSelection(count=personas)).personas
    client = build_client(settings)
    recorder = RecordingBackend(settings.seed)
    client.chat_backend = recorder
    try:
        await judge_answer_pairs(await generate_dataset(sample, client, settings), client)
    finally:
        await client.aclose()
    return recorder


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--personas", type=int, default=2, help="bundled personas to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mq-output-lengths-") as output:
        recorder = asyncio.run(measure(args.personas, Path(output)))
    print(f"output tokens per template, {args.personas} persona(s), offline simulator")
    print(table(recorder))


if __name__ == "__main__":
    main()
