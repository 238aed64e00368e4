"""Whether a speed spread between processes came with a clock change.

For each side and test of an eval: the spread of its per-process medians, next to the SM and memory clocks, the
temperature and the throttle reasons that nvidia-smi sampled while those processes ran (``evals/clocks.py`` tags each
sample with the bench it fell in: ``bench:<side>:<round>``). Samples flagged "GPU idle" (throttle reason 0x1: the
seconds before a process has loaded its model) are left out. Pure data: the report renders it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median
from typing import Any

IDLE_REASON = 0x1  # nvidia-smi's clocks_throttle_reasons.active bit for "GPU idle"


@dataclass(frozen=True)
class Span:
    """The lowest and highest value seen."""

    low: float
    high: float


@dataclass(frozen=True)
class GpuClocks:
    """One GPU's busy samples during a side's processes."""

    index: int
    samples: int
    sm_mhz: Span
    mem_mhz: Span
    temperature_c: Span
    reasons: tuple[str, ...]  # throttle reasons seen besides idle and none, as nvidia-smi printed them


@dataclass(frozen=True)
class SideSpread:
    """One side's per-process medians of one test and the clocks while its processes ran."""

    side: str
    test: str
    medians: tuple[float, ...]  # tokens/s, one per process, in round order
    gpus: tuple[GpuClocks, ...]

    @property
    def spread(self) -> float:
        """Highest over lowest per-process median, minus one."""
        return max(self.medians) / min(self.medians) - 1.0


def _reason_bits(sample: dict[str, Any]) -> int | None:
    try:
        return int(str(sample.get("clocks_throttle_reasons.active", "")), 16)
    except ValueError:
        return None


def _busy(sample: dict[str, Any]) -> bool:
    """Not flagged idle, with a numeric SM clock."""
    bits = _reason_bits(sample)
    return isinstance(sample.get("clocks.sm"), float) and (bits is None or not bits & IDLE_REASON)


def _span(values: list[float]) -> Span:
    return Span(min(values), max(values))


def _gpu_clocks(samples: list[dict[str, Any]]) -> tuple[GpuClocks, ...]:
    by_gpu: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for sample in samples:
        by_gpu[int(sample.get("index", 0))].append(sample)
    gpus = []
    for index, busy in sorted(by_gpu.items()):
        numeric = [
            s for s in busy if isinstance(s.get("clocks.mem"), float) and isinstance(s.get("temperature.gpu"), float)
        ]
        if not numeric:
            continue
        reasons = sorted({str(s["clocks_throttle_reasons.active"]) for s in numeric if (_reason_bits(s) or 0) != 0})
        gpus.append(
            GpuClocks(
                index=index,
                samples=len(numeric),
                sm_mhz=_span([s["clocks.sm"] for s in numeric]),
                mem_mhz=_span([s["clocks.mem"] for s in numeric]),
                temperature_c=_span([s["temperature.gpu"] for s in numeric]),
                reasons=tuple(reasons),
            )
        )
    return tuple(gpus)


def side_spreads(payload: dict[str, Any]) -> list[SideSpread]:
    """Every side and test with at least two processes, in the order the eval ran them; [] without clock samples."""
    clocks = payload.get("clocks", {})
    if not clocks.get("sampled") or not clocks.get("samples"):
        return []
    busy_by_side: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for sample in clocks["samples"]:
        tag = str(sample.get("tag", ""))
        if tag.startswith("bench:") and _busy(sample):
            busy_by_side[tag.removeprefix("bench:").rsplit(":", 1)[0]].append(sample)
    medians: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in sorted(payload.get("speed", {}).get("runs", []), key=lambda r: r["round"]):
        for test in run.get("tests", []):
            if test.get("samples_ts"):
                medians[(run["side"], test["test"])].append(median(test["samples_ts"]))
    return [
        SideSpread(side, test, tuple(values), _gpu_clocks(busy_by_side.get(side, [])))
        for (side, test), values in medians.items()
        if len(values) >= 2
    ]
