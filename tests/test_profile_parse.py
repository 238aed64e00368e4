"""The SQL parser against statistics computed independently (Python's statistics and decimal modules)."""

from __future__ import annotations

import statistics
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from evals.profile.categories import ATTENTION, MATMUL, QUANTIZE
from evals.profile.parse import GRAPH_ADVICE, read_profile

from .nsys_synth import Kernel, Trace, random_kernels

MMVQ = "void mul_mat_vec_q<(ggml_type)12, 1, false>(const void *, const void *, float *, unsigned int)"
QUANT = "void quantize_q8_1(const float *, void *, long, long, long, long, long, long)"
ROPE = "void rope_neox<true, false, float, float>(const float *, float *, int, int, int, int)"


def half_up(value: Decimal | float) -> float:
    """What SQLite's round(x, 1) gives: halves away from zero (Python's round() would go to even)."""
    return float(Decimal(value).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def kernels_from(durations: dict[str, list[int]]) -> list[Kernel]:
    """Kernels back to back, names interleaved so that table order is not duration order."""
    out, clock = [], 1_000
    queues = {name: list(values) for name, values in durations.items()}
    while any(queues.values()):
        for name, queue in queues.items():
            if queue:
                dur = queue.pop(0)
                out.append(Kernel(name, clock, clock + dur, correlation=len(out) + 1, graph_node=len(out)))
                clock += dur + 100
    return out


def expected_row(values: list[int], grand: int) -> dict:
    total = sum(values)
    return {
        "instances": len(values),
        "total_ns": total,
        "min_ns": min(values),
        "max_ns": max(values),
        "avg_ns": half_up(Decimal(total) / len(values)),
        "med_ns": half_up(Decimal(statistics.median(values))),
        "stddev_ns": half_up(statistics.stdev(values)) if len(values) > 1 else 0.0,
        "time_pct": half_up(Decimal(total) * 100 / grand),
    }


def test_kernel_statistics_match_independent_computation(tmp_path: Path) -> None:
    durations = {
        MMVQ: [10, 10, 10, 11],  # mean 10.25: SQLite rounds to 10.3, Python's round() to 10.2
        QUANT: [4000, 1000, 3000, 2000, 9000],  # odd count: median 3000
        ROPE: [7],  # one instance: stddev 0.0
        "void k_bin_bcast<&op_add, float, float, float>(const float *)": [5, 1, 2, 8],  # even: median 3.5
    }
    path = Trace(kernels=kernels_from(durations)).write(tmp_path / "t.sqlite")
    profile = read_profile(path)
    grand = sum(sum(v) for v in durations.values())
    got = {k.name: k for k in profile.kernels}
    assert set(got) == set(durations)
    for name, values in durations.items():
        row = got[name]
        want = expected_row(values, grand)
        assert {key: getattr(row, key) for key in want} == want, name
    assert got[MMVQ].avg_ns == 10.3
    # nsys order: total time descending, then instances, then name
    assert [k.total_ns for k in profile.kernels] == sorted((k.total_ns for k in profile.kernels), reverse=True)
    assert got[MMVQ].short_name == "mul_mat_vec_q"
    assert got[MMVQ].category == MATMUL and got[QUANT].category == QUANTIZE and got[ROPE].category == ATTENTION


def test_random_trace_statistics(tmp_path: Path) -> None:
    kernels = list(random_kernels(3000, seed=7))
    path = Trace(kernels=kernels).write(tmp_path / "r.sqlite")
    profile = read_profile(path)
    by_name: dict[str, list[int]] = {}
    for k in kernels:
        by_name.setdefault(k.name, []).append(k.end - k.start)
    grand = sum(sum(v) for v in by_name.values())
    assert profile.kernel_ns == grand and profile.launches == 3000
    for row in profile.kernels:
        want = expected_row(by_name[row.name], grand)
        assert {key: getattr(row, key) for key in want} == want, row.name
    shares = {c.category: c.share_pct for c in profile.categories()}
    assert sum(shares.values()) == pytest.approx(100.0)


def test_per_token_figures(tmp_path: Path) -> None:
    path = Trace(kernels=kernels_from({MMVQ: [100] * 8, QUANT: [50] * 8})).write(tmp_path / "t.sqlite")
    profile = read_profile(path, tokens=4, tokens_source="--tokens")
    assert profile.per_token() == {
        "kernels_per_token": 4.0,
        "kernel_us_per_token": 0.3,
        "exclusive_us_per_token": 0.3,  # the kernels do not overlap
    }
    assert read_profile(path).per_token() is None


def test_timeline_busy_share_and_gaps(tmp_path: Path) -> None:
    kernels = [
        Kernel(MMVQ, 0, 10_000, stream=1),
        Kernel(QUANT, 5_000, 20_000, stream=2),  # overlaps the first
        Kernel(ROPE, 45_000, 50_000),  # after a 15 µs gap
    ]
    trace = Trace(kernels=kernels, memcpy=[(30_000, 40_000, 4096, 1)])  # between: gaps of 10 and 5 µs
    span = read_profile(trace.write(tmp_path / "t.sqlite")).timeline
    assert span is not None
    assert (span.start_ns, span.end_ns, span.span_ns) == (0, 50_000, 50_000)
    assert (span.busy_ns, span.idle_ns, span.gaps, span.max_gap_ns) == (35_000, 15_000, 2, 10_000)
    assert span.gaps_over_10us == 0
    assert span.busy_pct == pytest.approx(70.0)


def test_memops_api_and_nvtx(tmp_path: Path) -> None:
    trace = Trace(
        kernels=[Kernel(MMVQ, 0, 100, correlation=1)],
        runtime=[
            ("cudaLaunchKernel_v7000", 0, 5, 1),
            ("cudaLaunchKernel_v7000", 6, 9, 2),
            ("cudaMemcpyAsync_v3020", 9, 19, 3),
        ],
        memcpy=[(200, 300, 1024, 1), (400, 450, 512, 1), (500, 510, 64, 8)],
        memset=[(600, 610, 256)],
        nvtx=[("decode", 0, 1000), ("decode", 1000, 1500)],
    )  # fmt: skip
    profile = read_profile(trace.write(tmp_path / "t.sqlite"))
    ops = {op.name: (op.count, op.total_ns, op.bytes) for op in profile.memops}
    assert ops == {
        "[CUDA memcpy HtoD]": (2, 150, 1536),
        "[CUDA memcpy DtoD]": (1, 10, 64),
        "[CUDA memset]": (1, 10, 256),
    }
    api = {op.name: (op.count, op.total_ns) for op in profile.api}
    assert api == {"cudaLaunchKernel": (2, 8), "cudaMemcpyAsync": (1, 10)}
    assert [(n.name, n.count, n.total_ns) for n in profile.nvtx] == [("decode", 2, 1500)]


def test_graph_node_trace_is_not_flagged(tmp_path: Path) -> None:
    kernels = [Kernel(MMVQ, i * 100, i * 100 + 50, correlation=9, graph_node=i) for i in range(5)]
    trace = Trace(kernels=kernels, runtime=[("cudaGraphLaunch_v10000", 0, 10, 9)])
    profile = read_profile(trace.write(tmp_path / "t.sqlite"))
    assert profile.graphs.graph_launches == 1 and profile.graphs.graph_kernels == 5
    assert not profile.graphs.collapsed and GRAPH_ADVICE not in profile.notes


def test_graph_collapsed_trace_is_flagged(tmp_path: Path) -> None:
    # graph-level tracing: the graph's kernels have no rows, only the kernels launched outside it do
    trace = Trace(
        kernels=[Kernel(QUANT, 0, 50, correlation=1, graph_node=None)],
        runtime=[("cudaLaunchKernel_v7000", 0, 5, 1), ("cudaGraphLaunch_v10000", 6, 9, 2)],
    )
    profile = read_profile(trace.write(tmp_path / "t.sqlite"))
    assert profile.graphs.collapsed and GRAPH_ADVICE in profile.notes
    assert "--cuda-graph-trace=node" in GRAPH_ADVICE


def test_graph_trace_table_is_flagged(tmp_path: Path) -> None:
    trace = Trace(kernels=[Kernel(QUANT, 0, 50, correlation=1)], graph_trace=[(100, 5000)])
    assert read_profile(trace.write(tmp_path / "t.sqlite")).graphs.collapsed


def test_statistics_of_very_long_kernels(tmp_path: Path) -> None:
    """Durations of seconds: squared deviations leave 64-bit integers; the figures must still be right."""
    durations = {QUANT: [1, 4_000_000_000, 8_000_000_001, 3]}
    profile = read_profile(Trace(kernels=kernels_from(durations)).write(tmp_path / "t.sqlite"))
    (row,) = profile.kernels
    want = expected_row(durations[QUANT], sum(durations[QUANT]))
    assert {key: getattr(row, key) for key in want} == want
