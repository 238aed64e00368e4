"""test-backend-ops ``perf`` output of a session (``tbo-perf-*.txt``): each variant's µs per case beside stock's.

A session writes ``tbo-perf-<group>-<label>.txt``: ``tbo-perf-gdn-stock.txt`` is stock's file for the group
``gdn`` and ``tbo-perf-gdn-fusion-4.txt`` a variant's. A variant pairs with the stock file of the longest group
its name starts with; a case stock did not run shows no ratio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

STOCK_SUFFIX = "-stock.txt"
# "  OP(params):   123 runs -    4.56 us/run - ..." (test-backend-ops perf, one line per case)
PERF_LINE = re.compile(r"^\s*([A-Z_0-9]+\(.*\)):\s+(\d+) runs -\s+([0-9.]+) us/run")


@dataclass(frozen=True)
class PerfFile:
    """One ``tbo-perf-*.txt``: its variant label and µs per run of each case, in file order."""

    name: str
    label: str
    us_per_case: dict[str, float]


def parse_perf(text: str) -> dict[str, float]:
    """Case (``OP(params)``) -> µs per run; a case printed twice keeps its first time."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if match := PERF_LINE.match(line):
            out.setdefault(match.group(1), float(match.group(3)))
    return out


def _stock_prefixes(folder: Path) -> dict[str, Path]:
    """``tbo-perf-<group>-`` -> stock's file of that group (``tbo-perf-`` for ``tbo-perf-stock.txt``)."""
    return {p.name[: -len(STOCK_SUFFIX)] + "-": p for p in folder.glob("tbo-perf*" + STOCK_SUFFIX)}


def paired_files(folder: Path) -> list[tuple[PerfFile, PerfFile]]:
    """(stock, variant) for each variant file with a stock file of its group and at least one timed case."""
    stocks = _stock_prefixes(folder)
    pairs = []
    for path in sorted(folder.glob("tbo-perf-*.txt")):
        if path.name.endswith(STOCK_SUFFIX):
            continue
        prefixes = [p for p in stocks if path.name.startswith(p)]
        if not prefixes:
            continue
        prefix = max(prefixes, key=len)
        variant = PerfFile(path.name, path.name[len(prefix) : -len(".txt")], parse_perf(path.read_text()))
        stock_path = stocks[prefix]
        stock = PerfFile(stock_path.name, "stock", parse_perf(stock_path.read_text()))
        if variant.us_per_case:
            pairs.append((stock, variant))
    return pairs


def perf_rows(stock: PerfFile, variant: PerfFile) -> list[list[str]]:
    """Case, stock µs, variant µs, stock/variant (above 1: the variant is faster)."""
    rows = []
    for case, us in variant.us_per_case.items():
        base = stock.us_per_case.get(case)
        ratio = f"{base / us:.2f}" if base and us > 0 else "—"
        rows.append([f"`{case}`", f"{base:.2f}" if base else "—", f"{us:.2f}", ratio])
    return rows
