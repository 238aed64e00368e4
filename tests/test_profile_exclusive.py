"""Exclusive kernel time: what each launch adds to the kernel timeline when kernels overlap (launched
early under programmatic dependent launch, a kernel waits inside its own traced duration)."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pytest

from evals.profile.compare import compare
from evals.profile.parse import read_profile

from .nsys_synth import Kernel, Trace

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"
A = "void producer(const float *)"
B = "void consumer(const float *)"


def write(tmp_path: Path, name: str, kernels: list[tuple[str, int, int]]) -> Path:
    trace = Trace(kernels=[Kernel(n, s, e, correlation=i + 1, graph_node=i) for i, (n, s, e) in enumerate(kernels)])
    return trace.write(tmp_path / name)


def test_a_kernel_launched_early_adds_only_what_follows_its_predecessor(tmp_path: Path) -> None:
    # the consumer starts at 2 µs, waits until the producer ends at 10 µs, and ends at 12 µs
    profile = read_profile(write(tmp_path, "t.sqlite", [(A, 0, 10_000), (B, 2_000, 12_000)]), tokens=1)
    assert profile.kernel_ns == 20_000
    assert profile.exclusive == {A: 10_000, B: 2_000}
    assert profile.per_token()["exclusive_us_per_token"] == pytest.approx(12.0)


def test_disjoint_kernels_are_all_exclusive_and_a_covered_kernel_adds_nothing(tmp_path: Path) -> None:
    rows = [(A, 0, 10_000), (B, 2_000, 5_000), (B, 20_000, 21_000)]
    profile = read_profile(write(tmp_path, "t.sqlite", rows))
    assert profile.exclusive == {A: 10_000, B: 1_000}


def test_exclusive_times_add_up_to_the_union_of_kernel_intervals(tmp_path: Path) -> None:
    """On a real H200 decode trace (node-level graph tracing, programmatic dependent launch on)."""
    plain = tmp_path / "stock.sqlite"
    with gzip.open(FIXTURES / "stock-decode16.sqlite.gz") as src, plain.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    rows = sorted(sqlite3.connect(plain).execute('SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchall())
    union, reach = 0, None
    for start, end in rows:
        if reach is None or start >= reach:
            union += end - start
            reach = end
        elif end > reach:
            union += end - reach
            reach = end
    profile = read_profile(plain)
    assert profile.exclusive_ns == union
    assert profile.exclusive_ns < profile.kernel_ns  # kernels overlap there
    by_name = {k.name: k.total_ns for k in profile.kernels}
    assert all(0 <= ns <= by_name[name] for name, ns in profile.exclusive.items())
    assert sum(c.exclusive_ns for c in profile.categories()) == union


def test_a_comparison_carries_the_exclusive_change_per_category(tmp_path: Path) -> None:
    a = read_profile(write(tmp_path, "a.sqlite", [(A, 0, 10_000), (B, 2_000, 12_000)]), tokens=1)
    b = read_profile(write(tmp_path, "b.sqlite", [(A, 0, 10_000)]), tokens=1)
    c = compare(a, b)
    assert c.delta_ns == -10_000 and c.delta_exclusive_ns == -2_000
    assert c.per_token()["exclusive_us_per_token"] == pytest.approx(-2.0)
    gone = next(d for d in c.kernels if d.key == B)
    assert gone.to_dict()["delta_exclusive_ns"] == -2_000
