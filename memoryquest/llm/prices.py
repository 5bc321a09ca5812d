"""What tokens cost: a built-in table (``data/prices.json``) a run can override.

Prices are USD per million tokens. A dated model name (``gpt-4o-2024-08-06``)
falls back to its family (``gpt-4o``) unless the table names it exactly.
Simulated and local models cost nothing; a remote model missing from the
table costs 0 and is reported once, because a silent 0 would make the cost
estimate lie.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_BUILTIN = Path(__file__).parent / "data" / "prices.json"
_PER_TOKEN = 1e-6


@dataclass(frozen=True)
class ModelPrice:
    input: float  # USD per 1M input tokens
    output: float = 0.0
    cached_input: float | None = None  # None: cached tokens cost the input price


class PriceTable:
    def __init__(self, models: dict[str, ModelPrice], batch_multiplier: float = 0.5) -> None:
        self.models = models
        self.batch_multiplier = batch_multiplier
        self.unpriced: set[str] = set()

    @classmethod
    def load(cls, override: Path | None = None) -> PriceTable:
        """The built-in table, with ``override``'s entries (same JSON format) laid over it."""
        data = _read(_BUILTIN)
        models = _parse_models(data, _BUILTIN)
        multiplier = float(data.get("batch_multiplier", 0.5))
        if override is not None:
            extra = _read(override)
            models.update(_parse_models(extra, override))
            multiplier = float(extra.get("batch_multiplier", multiplier))
        return cls(models, multiplier)

    def price(self, model: str) -> ModelPrice | None:
        if model in self.models:
            return self.models[model]
        family = [name for name in self.models if model.startswith(name + "-")]
        return self.models[max(family, key=len)] if family else None

    def cost(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int = 0,
        cached_tokens: int = 0,
        *,
        batch: bool = False,
    ) -> float:
        price = self.price(model)
        if price is None:
            if model not in self.unpriced:
                self.unpriced.add(model)
                log.warning(
                    "no price for model %r: its cost is counted as 0 (add it to settings.prices_file)",
                    model,
                )
            return 0.0
        cached = min(cached_tokens, input_tokens)
        cached_price = price.input if price.cached_input is None else price.cached_input
        usd = (
            (input_tokens - cached) * price.input
            + cached * cached_price
            + output_tokens * price.output
        ) * _PER_TOKEN
        return usd * (self.batch_multiplier if batch else 1.0)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ValueError(f"price table {path} does not exist") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"price table {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ValueError(
            f"price table {path} needs a 'models' object: {{model: {{input, output, cached_input}}}}"
        )
    return data


def _parse_models(data: dict[str, Any], source: Path) -> dict[str, ModelPrice]:
    models: dict[str, ModelPrice] = {}
    for name, entry in data["models"].items():
        if not isinstance(entry, dict) or "input" not in entry:
            raise ValueError(
                f"price table {source}: model {name!r} needs at least an 'input' price"
            )
        try:
            models[name] = ModelPrice(
                input=float(entry["input"]),
                output=float(entry.get("output", 0.0)),
                cached_input=None
                if entry.get("cached_input") is None
                else float(entry["cached_input"]),
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"price table {source}: model {name!r} has a non-numeric price: {exc}"
            ) from exc
    return models
