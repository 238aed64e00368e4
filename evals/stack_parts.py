"""A stack of fusions against its parts measured in the same eval: the product of the parts' speed ratios, and the
sum of the time per token each part saves, next to the stack's measured ratio.

A variant is a *part* when it holds exactly one registered fusion (with any patch files), and a *stack* when it holds
two or more. A stack is compared only when every one of its fusions has a part in the same result. Time saved adds up
where the parts remove different work from the same token; ratios then do not multiply: a fixed saving is a larger
share of a token that other fusions have already shortened.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StackAgainstParts:
    """One stack at one test (tg128, pp512 ...): the parts it is made of and three ratios against stock."""

    test: str
    stack: str
    parts: tuple[str, ...]
    measured: float  # stack median t/s over stock median t/s
    product: float  # the parts' ratios multiplied
    additive: float  # stock time per token over (stock time less every part's saving)


def fusions_of(variant: dict[str, Any]) -> frozenset[str]:
    """The registered fusions a variant of an eval result holds."""
    return frozenset(e["name"] for e in variant.get("entries", []) if e.get("kind") == "fusion")


def _ratio_from_savings(stock_ts: float, part_ts: list[float]) -> float:
    stock_time = 1.0 / stock_ts
    remaining = stock_time - sum(stock_time - 1.0 / ts for ts in part_ts)
    return math.inf if remaining <= 0 else stock_time / remaining


def stacks_against_parts(result: dict[str, Any]) -> list[StackAgainstParts]:
    """Every stack of the result whose fusions all have a part, at every speed test both were measured in."""
    variants = result.get("variants", [])
    fusions = {v["name"]: fusions_of(v) for v in variants}
    parts: dict[str, str] = {}
    for name, held in fusions.items():
        if len(held) == 1:
            parts.setdefault(next(iter(held)), name)  # the first part of a fusion in the result's order
    summary = result.get("payload", {}).get("speed", {}).get("summary", [])
    rows = {(row["test"], row["variant"]): row for row in summary}
    found = []
    for row in summary:
        held = fusions.get(row["variant"], frozenset())
        if len(held) < 2 or not held <= parts.keys():
            continue
        members = tuple(parts[f] for f in sorted(held, key=lambda f: int(f.split("-")[-1])))
        member_rows = [rows.get((row["test"], m)) for m in members]
        if any(r is None for r in member_rows):
            continue
        found.append(
            StackAgainstParts(
                test=row["test"],
                stack=row["variant"],
                parts=members,
                measured=row["ratio"],
                product=math.prod(r["ratio"] for r in member_rows),
                additive=_ratio_from_savings(row["stock_median"], [r["variant_median"] for r in member_rows]),
            )
        )
    return found
