"""Timing tables from the standalone kernel programs' JSON (q8-gemv, moe-router), for the session report.

The programs time every experiment of a kernel on the same data in one process; these tables set the
experiments side by side per shape so a report shows what an experiment gained before it reached ggml.
Only checked timings count: a row whose check failed shows its time struck out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusekit.errors import FusekitError


@dataclass(frozen=True)
class TimingTable:
    """One table: its file, a line that says what it shows, headers and rows."""

    source: str
    caption: str
    headers: list[str]
    rows: list[list[Any]]


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FusekitError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise FusekitError(f"{path} is not a standalone program's JSON object")
    return data


def _us(entry: dict[str, Any]) -> str:
    """Microseconds with two decimals; struck out when the entry's check failed."""
    text = f"{entry['us']:.2f}"
    return text if entry.get("ok", True) else f"~~{text}~~"


def q8_gemv_table(path: Path) -> TimingTable | None:
    """Per shape: the bandwidth floor and every experiment's time (µs), fastest in bold."""
    shapes = _load(path).get("shapes", [])
    names: list[str] = []
    for shape in shapes:
        names += [name for name in shape.get("experiments", {}) if name not in names]
    if not names:
        return None
    rows = []
    for shape in shapes:
        experiments = shape.get("experiments", {})
        times = {name: experiments[name]["us"] for name in names if name in experiments and experiments[name]["ok"]}
        best = min(times.values(), default=None)
        cells = []
        for name in names:
            if name not in experiments:
                cells.append("")
                continue
            cell = _us(experiments[name])
            cells.append(f"**{cell}**" if experiments[name]["us"] == best else cell)
        what = f"{shape['what']} ({shape['weights']}, {shape['bytes'] / 1e6:.1f} MB)"
        rows.append([what, f"{shape['floor_us']:.2f}", *cells])
    caption = (
        "µs per call of each launch-shape experiment on the same weights (the floor: a 16-byte streaming read of "
        "the same bytes); the fastest checked time of a row in bold"
    )
    return TimingTable(path.name, caption, ["shape", "floor", *names], rows)


def moe_router_table(path: Path) -> TimingTable | None:
    """Per router case: the router kernel and, where timed, its weights-ahead variant (µs)."""
    cases = _load(path).get("router", [])
    if not any("ahead" in case for case in cases):
        return None
    rows = []
    for case in cases:
        ahead = case.get("ahead")
        ratio = f"{ahead['us'] / case['us']:.3f}" if ahead else ""
        rows.append([case["what"], case["n_embd"], case["n_expert"], case["n_used"], _us(case),
                     _us(ahead) if ahead else "", ratio])  # fmt: skip
    caption = "µs per call of the fused router, and with its weights loaded before the grid-dependency wait"
    return TimingTable(
        path.name, caption, ["case", "n_embd", "experts", "used", "router", "ahead", "ahead / router"], rows
    )


TABLE_MAKERS = {"q8-gemv-standalone.json": q8_gemv_table, "moe-router-standalone.json": moe_router_table}


def timing_tables(folder: Path) -> list[TimingTable]:
    """Every timing table the folder's standalone JSON files hold (sabotage runs are not timings)."""
    tables = []
    for name, make in TABLE_MAKERS.items():
        if (folder / name).is_file() and (table := make(folder / name)) is not None:
            tables.append(table)
    return tables
