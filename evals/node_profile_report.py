"""The session step node-profile's results as Markdown: for each shape, the bridge's one-token race of it alone for
stock and a variant, traced with Nsight Systems (``node-race-SHAPE-NAME.json``, bench-mulmat results) and compared by
``fusekit profile`` (``node-profile-SHAPE-LABEL.json``): each kernel's median and exclusive time beside the race's node
time.
Session 48 asked it of 6144 x 4096, where the stream kernel's node took 1.7 µs more than the kernel alone."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROFILE_NAME = re.compile(r"node-profile-(\d+x\d+(?:_[A-Z][A-Z0-9_]*)?)-(.+)\.json")  # SHAPE[_SETTING]
TOP_KERNELS = 6  # the kernels with the most time in either trace (the product, the quantize, the bridge's copies)
MIN_LAUNCHES = 10  # a kernel launched fewer times ran in the bridge's checks, not in its timed graphs

Loader = Callable[[Path, str], dict[str, Any]]
Table = Callable[[list[str], list[list[Any]]], list[str]]


def node_profile_paths(folder: Path) -> list[Path]:
    """The comparisons of the step, by shape then variant."""
    return sorted(p for p in folder.glob("node-profile-*.json") if PROFILE_NAME.fullmatch(p.name))


def _node_us(folder: Path, shape: str, name: str, load: Loader) -> str:
    """The traced race's time per node of ``name`` from ``node-race-SHAPE-NAME.json`` (blank where absent)."""
    path = folder / f"node-race-{shape}-{name}.json"
    if not path.is_file():
        return "—"
    cases = load(path, "bench-mulmat")["payload"]["cases"]
    times = [c["us"] for case in cases for c in case["contenders"].values() if c.get("us") is not None]
    return f"{times[0]:.2f}" if times else "—"


def _kernel_rows(stock: dict[str, Any], variant: dict[str, Any]) -> list[list[Any]]:
    """The busiest kernels of either trace with their launches, median µs and mean exclusive µs on each side.

    The exclusive time is what a kernel's launches add to the GPU's busy timeline: under programmatic dependent launch
    a kernel starts before its predecessor ends and its traced duration includes that wait (session 49: stock's
    product overlapped its quantize by about 1 µs a launch on 6144 x 4096), so only the exclusive times of two
    traces compare kernel against kernel."""
    left = {k["name"]: k for k in stock["kernels"] if k["instances"] >= MIN_LAUNCHES}
    right = {k["name"]: k for k in variant["kernels"] if k["instances"] >= MIN_LAUNCHES}
    busiest = sorted(
        left.keys() | right.keys(),
        key=lambda n: -max(left.get(n, {}).get("total_ns", 0), right.get(n, {}).get("total_ns", 0)),
    )
    rows = []
    for name in busiest[:TOP_KERNELS]:
        cells = []
        for side in (left, right):
            kernel = side.get(name)
            if kernel:
                exclusive = kernel.get("exclusive_ns", 0) / kernel["instances"] / 1000
                cells += [kernel["instances"], f"{kernel['med_ns'] / 1000:.2f}", f"{exclusive:.2f}"]
            else:
                cells += ["—", "—", "—"]
        short = (left.get(name) or right[name])["short_name"]
        rows.append([f"`{short}`", *cells])
    return rows


def render_node_profiles(folder: Path, load: Loader, table: Table) -> list[str]:
    """One table per shape and variant; empty when the folder has no node profile."""
    paths = node_profile_paths(folder)
    if not paths:
        return []
    out = [
        "## Race nodes under Nsight Systems (`node-profile-*.json`)",
        "",
        "Each shape raced alone at one token under `nsys` (tracing lengthens every launch, so the node times here "
        "are longer than the race's); kernels with fewer than "
        f"{MIN_LAUNCHES} launches ran in the bridge's checks and are left out; median µs per launch, and the mean "
        "exclusive µs per launch (what the launches add to the busy timeline: a kernel started early under "
        "programmatic dependent launch counts its wait for the one before it in its duration, not there).",
    ]
    for path in paths:
        match = PROFILE_NAME.fullmatch(path.name)
        assert match is not None
        shape, label = match.groups()
        profiles = load(path, "profile")["payload"]["profiles"]
        node_stock = _node_us(folder, shape, "stock", load)
        node_variant = _node_us(folder, shape, label, load)
        out += [
            "",
            f"### {shape}: stock against `{label}`",
            "",
            f"Node time in the traced race: stock {node_stock} µs, variant {node_variant} µs.",
            "",
            *table(
                [
                    "kernel",
                    "stock launches",
                    "stock median µs",
                    "stock exclusive µs",
                    "variant launches",
                    "variant median µs",
                    "variant exclusive µs",
                ],
                _kernel_rows(profiles[0], profiles[1]),
            ),
        ]
    return out
