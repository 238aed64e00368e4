"""Real exports from the GPU host: the parser must equal `nsys stats --report cuda_gpu_kern_sum` to the
nanosecond (to the 0.1 ns nsys prints for Avg, Med, StdDev and the 0.1 % of Time).

Each ``tests/fixtures/nsys/NAME.sqlite.gz`` has a sibling ``NAME.kern_sum.csv.gz`` written by nsys itself
(scripts/nsys_fixture.sh). Names ending in ``-graphlevel`` were recorded without
``--cuda-graph-trace=node`` and must be flagged as collapsed; every other one must not be.
"""

from __future__ import annotations

import csv
import gzip
import io
from decimal import Decimal
from pathlib import Path

import pytest

from evals.profile import schema
from evals.profile.compare import compare
from evals.profile.parse import read_profile

FIXTURES = Path(__file__).parent / "fixtures" / "nsys"

if not FIXTURES.is_dir():
    pytest.skip(
        f"{FIXTURES} is missing: produce it on the GPU host with scripts/nsys_fixture.sh",
        allow_module_level=True,
    )

EXPORTS = sorted(FIXTURES.glob("*.sqlite.gz"))


def stem(export: Path) -> str:
    return export.name.removesuffix(".sqlite.gz")


def read_kern_sum(path: Path) -> list[dict[str, str]]:
    """Rows of the CSV nsys wrote (header found by its first column; thousands separators removed)."""
    rows = list(csv.reader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))
    start = next(i for i, row in enumerate(rows) if row and row[0].strip().startswith("Time"))
    header = [h.strip() for h in rows[start]]
    assert header[: len(schema.KERN_SUM_COLUMNS)] == list(schema.KERN_SUM_COLUMNS), header
    return [dict(zip(header, row, strict=False)) for row in rows[start + 1 :] if row]


def number(text: str) -> Decimal:
    return Decimal(text.replace(",", "").strip())


def test_fixture_folder_holds_exports() -> None:
    assert EXPORTS, f"{FIXTURES} exists but holds no *.sqlite.gz exports"


@pytest.mark.parametrize("export", EXPORTS, ids=stem)
def test_equals_nsys_stats(export: Path) -> None:
    reference = export.with_name(stem(export) + ".kern_sum.csv.gz")
    assert reference.is_file(), f"{export.name} has no {reference.name} next to it"
    want = read_kern_sum(reference)
    got = read_profile(export).kernels
    assert [k.name for k in got] == [row["Name"] for row in want]  # same kernels, same order
    for k, row in zip(got, want, strict=True):
        assert (k.total_ns, k.instances, k.min_ns, k.max_ns) == (
            int(number(row["Total Time (ns)"])),
            int(number(row["Instances"])),
            int(number(row["Min (ns)"])),
            int(number(row["Max (ns)"])),
        ), k.name
        assert (Decimal(str(k.avg_ns)), Decimal(str(k.med_ns)), Decimal(str(k.stddev_ns))) == (
            number(row["Avg (ns)"]),
            number(row["Med (ns)"]),
            number(row["StdDev (ns)"]),
        ), k.name
        assert Decimal(str(k.time_pct)) == number(row["Time (%)"]), k.name


@pytest.mark.parametrize("export", EXPORTS, ids=stem)
def test_graph_tracing_is_detected(export: Path) -> None:
    profile = read_profile(export)
    assert profile.graphs.collapsed == stem(export).endswith("-graphlevel"), profile.graphs


def test_against_on_real_traces() -> None:
    node_traces = [e for e in EXPORTS if not stem(e).endswith("-graphlevel")]
    if len(node_traces) < 2:
        pytest.skip("needs a stock and a variant trace")
    a, b = (read_profile(e, tokens=16) for e in node_traces[:2])
    c = compare(a, b)
    assert sum(d.delta_ns for d in c.kernels) == c.delta_ns == b.kernel_ns - a.kernel_ns
    assert sum(d.delta_launches for d in c.categories) == c.delta_launches
