"""A variant against the variant it extends, measured in the same eval: an experiment patch against the stack it goes
on (``stack-1-5`` and ``stack-1-5+fusion-5-group.patch``), with the same statistics as every variant against stock.

Variant B *extends* variant A when A's entries (names and content hashes) are the first entries of B's, B has more,
and both run under the same environment (an arm, ``B@GGML_CUDA_PDL=0``, extends ``A@GGML_CUDA_PDL=0``, never the
plain ``A``). Each B is compared with the longest A it extends; stock is never a base (every variant is shown against
it already).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .stats import (
    PairedEstimate,
    RatioEstimate,
    grouped_ratio_estimate,
    paired_rounds_estimate,
    process_groups,
    recorded_method,
    round_pairs,
)


@dataclass(frozen=True)
class Extension:
    """One variant against the one it extends at one speed test."""

    test: str
    base: str
    variant: str
    added: tuple[str, ...]  # the entries the variant has beyond its base
    estimate: RatioEstimate  # variant/base of medians, over processes then repetitions
    paired: PairedEstimate | None  # variant/base paired by round
    processes: int  # the fewer processes (rounds) of the two sides; with one, the interval misses their drift


def _entry_keys(variant: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.get("name", ""), e.get("sha256", "")) for e in variant.get("entries", [])]


def bases(result: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """variant name -> (the variant it extends, the names of the entries it adds), for each variant extending one."""
    variants = result.get("variants", [])[1:]  # the first side is stock
    keys = {v["name"]: _entry_keys(v) for v in variants}
    envs = {v["name"]: sorted((v.get("env") or {}).items()) for v in variants}
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for name, held in keys.items():
        candidates = [
            base
            for base, prefix in keys.items()
            if 0 < len(prefix) < len(held) and held[: len(prefix)] == prefix and envs[base] == envs[name]
        ]
        if candidates:
            base = max(candidates, key=lambda b: len(keys[b]))
            found[name] = (base, tuple(n for n, _ in held[len(keys[base]) :]))
    return found


def extensions(result: dict[str, Any]) -> list[Extension]:
    """Every variant that extends another, at every speed test both were timed in, with the interval method the
    result's speed summary recorded (a result made before session 54 keeps its bootstrap)."""
    speed = result.get("payload", {}).get("speed", {})
    runs = speed.get("runs", [])
    method = recorded_method(speed.get("summary", []))
    groups = process_groups(runs)
    found = []
    for variant, (base, added) in bases(result).items():
        for test in sorted(groups):
            base_groups = groups[test].get(base, [])
            variant_groups = groups[test].get(variant, [])
            if not any(base_groups) or not any(variant_groups):
                continue
            found.append(
                Extension(
                    test=test,
                    base=base,
                    variant=variant,
                    added=added,
                    estimate=grouped_ratio_estimate(base_groups, variant_groups, method),
                    paired=paired_rounds_estimate(round_pairs(runs, test, base, variant)),
                    processes=min(sum(1 for g in base_groups if g), sum(1 for g in variant_groups if g)),
                )
            )
    return found
