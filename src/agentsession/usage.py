"""Token usage: the normalised counts of the usage ledger, and their price.

A run reports its usage as a mapping of token counts under the names its provider
uses; :func:`normalise` reads the names below into the five counts of a
:class:`~agentsession.models.UsageEntry` (docs/semantics.md, "Usage and budgets"):

=====================  ============================================================
count                  names read (the first is ours)
=====================  ============================================================
``input_tokens``       ``input_tokens`` (Anthropic, OpenAI Responses), ``prompt_tokens``
                       (OpenAI Chat), ``prompt_token_count`` (Gemini)
``output_tokens``      ``output_tokens``, ``completion_tokens``,
                       ``candidates_token_count``
``cache_read_tokens``  ``cache_read_tokens``, ``cache_read_input_tokens`` (Anthropic),
                       ``cached_tokens`` (OpenAI), ``cached_content_token_count``
``cache_write_tokens`` ``cache_write_tokens``, ``cache_creation_input_tokens``
``reasoning_tokens``   ``reasoning_tokens`` (OpenAI), ``thoughts_token_count`` (Gemini)
=====================  ============================================================

Other names (``total_tokens``...) stay in the run's own ``usage`` and are not counted.

The price table is the operator's (``AGENTSESSION_PRICES_FILE``): per model, a price
per million tokens of each kind, in one currency. There is none by default, so no
cost is made up: a model without a price has no cost (None).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic import ValidationError as PydanticError

from .errors import ValidationError
from .fieldlimits import MODEL_CHARS
from .models import UsageEntry

__all__ = [
    "KINDS",
    "NAMES",
    "TOTAL_KINDS",
    "ModelPrice",
    "PriceTable",
    "check_model",
    "entry_cost",
    "load_prices",
    "normalise",
    "total_tokens",
]

#: The five normalised counts, in the order of the ledger's columns.
KINDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)

#: The counts a token total (and a token budget) adds up: reasoning tokens are inside
#: output tokens.
TOTAL_KINDS = KINDS[:4]

#: Provider name -> normalised count (the table in the module docstring).
NAMES: dict[str, str] = {
    "input_tokens": "input_tokens",
    "prompt_tokens": "input_tokens",
    "prompt_token_count": "input_tokens",
    "output_tokens": "output_tokens",
    "completion_tokens": "output_tokens",
    "candidates_token_count": "output_tokens",
    "cache_read_tokens": "cache_read_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cached_tokens": "cache_read_tokens",
    "cached_content_token_count": "cache_read_tokens",
    "cache_write_tokens": "cache_write_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
    "reasoning_tokens": "reasoning_tokens",
    "thoughts_token_count": "reasoning_tokens",
}


_MODEL = re.compile(rf"[\x21-\x7e]{{1,{MODEL_CHARS}}}")


def check_model(model: Any, field: str = "model") -> str | None:
    """None, or a model's name: 1..``MODEL_CHARS`` printable ASCII characters, no space.

    Raises:
        ValidationError: anything else.
    """
    if model is None:
        return None
    if type(model) is not str or not _MODEL.fullmatch(model):
        raise ValidationError(
            f"{field} must be 1..{MODEL_CHARS} printable ASCII characters without spaces",
            field=field,
        )
    return model


def normalise(usage: Mapping[str, int], model: str | None) -> UsageEntry:
    """The ledger entry of one model's counts, read by :data:`NAMES`.

    Args:
        usage: token counts by name, already checked (integers >= 0).
        model: the model's name, or None.

    Raises:
        ValidationError: two names of one count (``input_tokens`` and
            ``prompt_tokens``): which one is meant cannot be told.
    """
    counts: dict[str, int] = {}
    seen: dict[str, str] = {}
    for name, value in usage.items():
        kind = NAMES.get(name)
        if kind is None:
            continue
        if kind in seen:
            raise ValidationError(
                f"usage names {kind} twice ({seen[kind]!r} and {name!r}): send one", field="usage"
            )
        seen[kind] = name
        counts[kind] = value
    return UsageEntry(model=model, **counts)


def total_tokens(counts: Any) -> int:
    """What a token budget counts of an entry or total: input + output + cache read +
    cache write tokens (reasoning tokens are inside output tokens)."""
    return sum(int(getattr(counts, kind)) for kind in TOTAL_KINDS)


class ModelPrice(BaseModel):
    """One model's prices per million tokens of each kind (one currency for the whole
    table). ``reasoning`` defaults to 0: providers bill reasoning as output tokens,
    which already count them. A kind left out has no price: tokens of it make the
    cost unknown (None)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float | None = Field(None, ge=0)
    output: float | None = Field(None, ge=0)
    cache_read: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)
    reasoning: float | None = Field(0.0, ge=0)


#: Model name -> its prices.
PriceTable = Mapping[str, ModelPrice]

_TABLE: TypeAdapter[dict[str, ModelPrice]] = TypeAdapter(dict[str, ModelPrice])


def entry_cost(entry: Any, prices: PriceTable | None) -> float | None:
    """The cost of ``entry``'s counts (a :class:`UsageEntry` or anything with the five
    counts and ``model``) by ``prices``; 0.0 with no tokens; None when ``prices`` is
    None, the model has no price, or a kind with tokens has no price."""
    if prices is None:
        return None
    if not any(getattr(entry, kind) for kind in KINDS):
        return 0.0
    price = prices.get(entry.model) if entry.model is not None else None
    if price is None:
        return None
    cost = 0.0
    for kind in KINDS:
        count = getattr(entry, kind)
        per_million = getattr(price, kind.removesuffix("_tokens"))
        if count and per_million is None:
            return None
        cost += count * (per_million or 0.0) / 1_000_000
    return cost


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """Read a price table: a JSON object of model name -> ``{"input": 3.0, "output":
    15.0, "cache_read": 0.3, "cache_write": 3.75, "reasoning": 0}`` (per million
    tokens).

    Raises:
        ValidationError: the file is missing, not JSON, or not of that shape.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return _TABLE.validate_python(data)
    except (OSError, ValueError, PydanticError) as exc:
        raise ValidationError(f"price table {str(path)!r}: {exc}", field="prices_file") from None
