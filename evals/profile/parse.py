"""Summaries of one Nsight Systems export, aggregated in SQL.

Per-kernel statistics reproduce ``nsys stats --report cuda_gpu_kern_sum`` (default form, grouped by the
demangled name). How that report computes them, and where it was read:

* The report (``reports/cuda_gpu_kern_sum.py``, nsys 2024-2025, read in the public copy
  singularitti/nsys-recipe ``src/nsys_recipe/reports/cuda_gpu_kern_sum.py``) runs
  ``sum/count/avg/median/min/max/stdev(end - start)`` grouped by kernel name, then
  ``round(total * 100.0 / sum(total), 1)`` for Time (%), ``round(avg, 1)``, ``round(med, 1)``,
  ``round(stddev, 1)``; Total, Instances, Min and Max are the integers; rows are ordered by
  ``Total DESC, Instances, Name``. ``round`` and ``avg`` are SQLite's built-ins, so this module uses them too
  (SQLite rounds halves away from zero: ``round(1234.25, 1) = 1234.3``, unlike Python's ``round``).
* ``median`` and ``stdev`` are not SQLite built-ins and nsys's ``nsysstats.py`` registers only
  ``unique_duration``, so they come with the SQLite nsys ships. Their names (with ``lower_quartile`` and
  ``upper_quartile``) are exactly those of SQLite's contributed ``extension-functions.c`` (Liam Healy);
  that nsys uses that file is an inference from the names, not read in nsys's binary. Its code defines
  ``median`` = the middle value, or the mean of the two middle values for an even count
  (``medianIterate``/``_medianFinalize``), and ``stdev`` = the *sample* standard deviation
  ``sqrt(S / (n - 1))`` by Welford's update, ``0.0`` for a single instance (``stdevFinalize``; one copy
  returns NULL there, but nsys prints 0.0 for one instance, e.g. in the ``nvtx_sum`` output quoted below).
  nsys's own console output agrees (two calls 2,971,823 and 333,015,608 ns print Med 167,993,715.5 and
  StdDev 233,376,198.5 = |a - b| / sqrt(2), i.e. n - 1).
  (That output is the ``osrt_sum`` report, quoted with ``nvtx_sum`` in the public README of
  ayush-os/nsight-systems-deep-dive; the population formula would give 165,021,892.5.)
* Here one pass copies (name, duration) into a temporary table indexed by (name, duration): group sums
  read it in order, the median is read at offset ``(n - 1) // 2`` (one or two rows), and the standard
  deviation is formed exactly (integer sums of deviations from an integer pivot, then fractions; only
  the square root is rounded), which agrees with Welford's floating result far below the 0.1 ns printed.
  The fixtures in ``tests/fixtures/nsys`` check every column against CSVs written by nsys itself.
"""

from __future__ import annotations

import math
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from fusekit.errors import FusekitError

from . import schema
from .categories import CATEGORIES, categorize
from .source import columns, connect, prepared, tables

GRAPH_ADVICE = (
    "kernels inside CUDA graphs are collapsed in this trace: record it again with "
    "'nsys profile -t cuda --cuda-graph-trace=node ...' so every kernel of the graph is traced"
)


@dataclass(frozen=True)
class KernelStat:
    """One row of the kernel summary, as ``cuda_gpu_kern_sum`` prints it (times in ns)."""

    name: str
    short_name: str
    category: str
    time_pct: float
    total_ns: int
    instances: int
    avg_ns: float
    med_ns: float
    min_ns: int
    max_ns: int
    stddev_ns: float


@dataclass(frozen=True)
class CategoryStat:
    category: str
    kernels: int
    instances: int
    total_ns: int
    share_pct: float
    exclusive_ns: int = 0  # see Profile.exclusive


@dataclass(frozen=True)
class OpStat:
    """A memory operation kind, a CUDA API function or an NVTX range: count and total time."""

    name: str
    count: int
    total_ns: int
    bytes: int | None = None


@dataclass(frozen=True)
class Timeline:
    """GPU activity (kernels and memory operations, all devices) over the traced span."""

    start_ns: int
    end_ns: int
    span_ns: int
    busy_ns: int
    idle_ns: int
    gaps: int
    gaps_over_10us: int
    max_gap_ns: int

    @property
    def busy_pct(self) -> float:
        return 100.0 * self.busy_ns / self.span_ns if self.span_ns else 0.0


@dataclass(frozen=True)
class GraphCheck:
    """Evidence on whether the kernels inside CUDA graphs were traced one by one."""

    graph_launches: int
    graph_kernels: int
    graph_trace_rows: int
    collapsed: bool


@dataclass
class Profile:
    path: str
    kernels: list[KernelStat]
    memops: list[OpStat]
    api: list[OpStat]
    nvtx: list[OpStat]
    timeline: Timeline | None
    graphs: GraphCheck
    tokens: int | None = None
    tokens_source: str = ""
    notes: list[str] = field(default_factory=list)
    # Per kernel name: the time its launches add to the GPU's busy timeline (exclusive_kernel_ns).
    exclusive: dict[str, int] = field(default_factory=dict)

    @property
    def kernel_ns(self) -> int:
        return sum(k.total_ns for k in self.kernels)

    @property
    def exclusive_ns(self) -> int:
        return sum(self.exclusive.values())

    @property
    def launches(self) -> int:
        return sum(k.instances for k in self.kernels)

    def categories(self) -> list[CategoryStat]:
        """Kernel time per category, in the order of the rule table (empty categories left out)."""
        total = self.kernel_ns
        out = []
        for category in CATEGORIES:
            rows = [k for k in self.kernels if k.category == category]
            if rows:
                ns = sum(k.total_ns for k in rows)
                exclusive = sum(self.exclusive.get(k.name, 0) for k in rows)
                instances = sum(k.instances for k in rows)
                out.append(CategoryStat(category, len(rows), instances, ns, 100.0 * ns / total, exclusive))
        return out

    def per_token(self) -> dict[str, float] | None:
        if not self.tokens:
            return None
        out = {
            "kernels_per_token": self.launches / self.tokens,
            "kernel_us_per_token": self.kernel_ns / self.tokens / 1000.0,
        }
        if self.exclusive:
            out["exclusive_us_per_token"] = self.exclusive_ns / self.tokens / 1000.0
        return out

    def to_dict(self) -> dict[str, Any]:
        span = self.timeline
        return {
            "path": self.path,
            "tokens": self.tokens,
            "tokens_source": self.tokens_source,
            "kernel_ns": self.kernel_ns,
            "exclusive_ns": self.exclusive_ns,
            "launches": self.launches,
            "per_token": self.per_token(),
            "categories": [asdict(c) for c in self.categories()],
            "kernels": [{**asdict(k), "exclusive_ns": self.exclusive.get(k.name, 0)} for k in self.kernels],
            "memops": [asdict(m) for m in self.memops],
            "api": [asdict(a) for a in self.api],
            "nvtx": [asdict(n) for n in self.nvtx],
            "timeline": None if span is None else {**asdict(span), "busy_pct": span.busy_pct},
            "graphs": {**asdict(self.graphs), "advice": GRAPH_ADVICE if self.graphs.collapsed else ""},
            "notes": list(self.notes),
        }


def _stddev(conn: sqlite3.Connection, ids: list[int], count: int, total: int) -> float:
    """Sample standard deviation of one kernel's durations (0.0 for a single instance), nearly exact.

    Sums of deviations from an integer pivot near the mean are exact integers in SQLite; the variance is
    then formed with exact fractions and only the square root is rounded. A sum too large for 64 bits
    (durations of seconds) falls back to SQLite's floating ``total``.
    """
    if count < 2:
        return 0.0
    pivot = total // count
    marks = ", ".join("?" * len(ids))
    try:
        s1, s2 = conn.execute(
            f"SELECT sum(dur - ?), sum((dur - ?) * (dur - ?)) FROM temp.kd WHERE nid IN ({marks})",
            (pivot, pivot, pivot, *ids),
        ).fetchone()
    except sqlite3.OperationalError:  # integer overflow
        s1, s2 = conn.execute(
            f"SELECT total(dur - ?), total((dur - ?) * (dur - ?)) FROM temp.kd WHERE nid IN ({marks})",
            (pivot, pivot, pivot, *ids),
        ).fetchone()
        s1, s2 = Fraction(s1), Fraction(s2)
    variance = (Fraction(s2) - Fraction(s1) * s1 / count) / (count - 1)
    return math.sqrt(max(variance, Fraction(0)))


def _median(conn: sqlite3.Connection, ids: list[int], count: int) -> float:
    """The middle duration, or the mean of the two middle ones (read from the ordered temp index)."""
    marks = ", ".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT dur FROM temp.kd WHERE nid IN ({marks}) ORDER BY dur LIMIT ? OFFSET ?",
        (*ids, 2 - count % 2, (count - 1) // 2),
    ).fetchall()
    return sum(r[0] for r in rows) / len(rows)


def kernel_stats(conn: sqlite3.Connection) -> list[KernelStat]:
    """Per-kernel statistics grouped by demangled name, equal to ``cuda_gpu_kern_sum``.

    One pass copies (name id, duration) into a temporary table indexed by (name, duration), so that the
    group sums read it in order and each median is an offset into it; no Python loop touches the rows.
    """
    conn.execute("DROP TABLE IF EXISTS temp.kd")
    conn.execute(
        f'CREATE TEMP TABLE kd AS SELECT {schema.K_DEMANGLED} AS nid, "{schema.K_END}" - {schema.K_START} AS dur, '
        f"rowid AS rid FROM main.{schema.KERNEL}"
    )
    conn.execute("CREATE INDEX temp.kd_order ON kd (nid, dur, rid)")  # one sort; every later read is in order
    groups = conn.execute(
        f"""SELECT g.nid, names.value, shorts.value, g.n, g.total, g.lo, g.hi
        FROM (
            SELECT nid, count(*) AS n, sum(dur) AS total, min(dur) AS lo, max(dur) AS hi, min(rid) AS rid
            FROM temp.kd GROUP BY nid
        ) AS g
        LEFT JOIN {schema.STRING_IDS} AS names ON names.id = g.nid
        LEFT JOIN main.{schema.KERNEL} AS first ON first.rowid = g.rid
        LEFT JOIN {schema.STRING_IDS} AS shorts ON shorts.id = first.{schema.K_SHORT}"""
    ).fetchall()
    # Group by the name's text, as the report does (StringIds should hold each text once; merge if not).
    merged: dict[str, dict[str, Any]] = {}
    for nid, name, short, count, total, lo, hi in groups:
        entry = merged.setdefault(name or "", {"ids": [], "short": short or "", "n": 0, "total": 0, "lo": lo, "hi": hi})
        entry["ids"].append(nid)
        entry["n"] += count
        entry["total"] += total
        entry["lo"] = min(entry["lo"], lo)
        entry["hi"] = max(entry["hi"], hi)
    grand = sum(e["total"] for e in merged.values())
    out = []
    for name, e in merged.items():
        n, total = e["n"], e["total"]
        pct, avg_r, med_r, sd_r = conn.execute(
            # SQLite's avg() of integers is sum / count in doubles; round() halves away from zero.
            "SELECT round(? * 100.0 / ?, 1), round(CAST(? AS REAL) / ?, 1), round(?, 1), round(?, 1)",
            (total, grand, total, n, _median(conn, e["ids"], n), _stddev(conn, e["ids"], n, total)),
        ).fetchone()
        out.append(KernelStat(name, e["short"], categorize(name), pct, total, n, avg_r, med_r, e["lo"], e["hi"], sd_r))
    conn.execute("DROP TABLE temp.kd")
    return sorted(out, key=lambda k: (-k.total_ns, k.instances, k.name))


def exclusive_kernel_ns(conn: sqlite3.Connection) -> dict[str, int]:
    """Per kernel name (demangled text): the time its launches add to the union of kernel intervals.

    A launch's exclusive time is ``end - max(start, reach)``, where ``reach`` is the latest end of every
    kernel that started before it (0 when an earlier kernel covers it entirely). Under programmatic
    dependent launch a kernel starts before its predecessor ends and waits inside its own duration, so its
    traced duration counts time the GPU spent on the predecessor; its exclusive time does not. The
    exclusive times of all launches add up to the busy time of the kernel timeline. Ties in start time go
    by end time, then row, so the attribution is deterministic.
    """
    rows = conn.execute(
        f"""SELECT names.value, g.ns
        FROM (
            SELECT nid, sum(max(0, "end" - max(start, coalesce(reach, start)))) AS ns
            FROM (
                SELECT {schema.K_DEMANGLED} AS nid, start, "end", max("end") OVER before AS reach
                FROM main.{schema.KERNEL}
                WINDOW before AS (ORDER BY start, "end", rowid ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
            )
            GROUP BY nid
        ) AS g
        LEFT JOIN {schema.STRING_IDS} AS names ON names.id = g.nid"""
    ).fetchall()
    out: dict[str, int] = {}
    for name, ns in rows:
        out[name or ""] = out.get(name or "", 0) + int(ns or 0)
    return out


def memop_stats(conn: sqlite3.Connection, present: set[str]) -> list[OpStat]:
    """Memory copies by kind and memsets: count, total time, bytes."""
    out: list[OpStat] = []
    if schema.MEMCPY in present:
        labels = dict(schema.MEMCPY_KINDS)
        if schema.MEMCPY_OPER_ENUM in present and "label" in columns(conn, schema.MEMCPY_OPER_ENUM):
            for kind, label in conn.execute(f"SELECT id, label FROM {schema.MEMCPY_OPER_ENUM}"):
                labels[kind] = f"[CUDA memcpy {label}]"
        query = f'SELECT copyKind, count(*), sum("end" - start), sum(bytes) FROM {schema.MEMCPY} GROUP BY copyKind'
        for kind, count, total, nbytes in conn.execute(query):
            out.append(OpStat(labels.get(kind, f"[CUDA memcpy kind {kind}]"), count, total, nbytes))
    if schema.MEMSET in present:
        count, total, nbytes = conn.execute(
            f'SELECT count(*), sum("end" - start), sum(bytes) FROM {schema.MEMSET}'
        ).fetchone()
        if count:
            out.append(OpStat(schema.MEMSET_NAME, count, total, nbytes))
    return sorted(out, key=lambda op: (-op.total_ns, op.name))


def _api_base_name(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel`` (the version suffix CUPTI appends)."""
    return re.sub(r"_v\d+$", "", name)


def api_stats(conn: sqlite3.Connection, present: set[str]) -> list[OpStat]:
    """CUDA runtime API calls per function (launch counts among them)."""
    if schema.RUNTIME not in present:
        return []
    query = f"""
        SELECT s.value, count(*), sum(r."end" - r.start)
        FROM {schema.RUNTIME} AS r LEFT JOIN {schema.STRING_IDS} AS s ON s.id = r.{schema.R_NAME}
        GROUP BY r.{schema.R_NAME}"""
    merged: dict[str, list[int]] = {}
    for name, count, total in conn.execute(query):
        entry = merged.setdefault(_api_base_name(name or "?"), [0, 0])
        entry[0] += count
        entry[1] += total or 0
    return sorted((OpStat(n, c, t) for n, (c, t) in merged.items()), key=lambda op: (-op.count, op.name))


def nvtx_stats(conn: sqlite3.Connection, present: set[str]) -> list[OpStat]:
    """NVTX ranges (push/pop and start/end) by name."""
    if schema.NVTX_EVENTS not in present:
        return []
    cols = columns(conn, schema.NVTX_EVENTS)
    text = "coalesce(n.text, s.value)" if "textId" in cols else "n.text"
    join = f"LEFT JOIN {schema.STRING_IDS} AS s ON s.id = n.textId" if "textId" in cols else ""
    types = ", ".join(str(t) for t in schema.NVTX_RANGE_TYPES)
    query = f"""
        SELECT {text} AS name, count(*), sum(n."end" - n.start)
        FROM {schema.NVTX_EVENTS} AS n {join}
        WHERE n.eventType IN ({types}) AND n."end" IS NOT NULL
        GROUP BY name ORDER BY 3 DESC, name"""
    return [OpStat(name or "?", count, total) for name, count, total in conn.execute(query)]


def timeline(conn: sqlite3.Connection, present: set[str]) -> Timeline | None:
    """Busy share and idle gaps: the union of kernel and memory-operation intervals over the traced span."""
    parts = [f'SELECT start, "end" FROM {t}' for t in (schema.KERNEL, schema.MEMCPY, schema.MEMSET) if t in present]
    query = f"""
WITH
    ev AS ({" UNION ALL ".join(parts)}),
    o AS (
        SELECT start, "end",
            max("end") OVER (ORDER BY start, "end" ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
        FROM ev
    )
SELECT min(start), max("end"),
    coalesce(sum(CASE WHEN start > reach THEN start - reach END), 0),
    count(CASE WHEN start > reach THEN 1 END),
    count(CASE WHEN start - reach > 10000 THEN 1 END),
    coalesce(max(CASE WHEN start > reach THEN start - reach END), 0)
FROM o"""
    first, last, idle, gaps, long_gaps, max_gap = conn.execute(query).fetchone()
    if first is None:
        return None
    span = last - first
    return Timeline(first, last, span, span - idle, idle, gaps, long_gaps, max_gap)


def graph_check(conn: sqlite3.Connection, present: set[str]) -> GraphCheck:
    """Were kernels inside CUDA graphs traced one by one?

    Evidence, from strongest: (1) a ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` table with rows means graphs were
    traced as whole units (the default ``--cuda-graph-trace=graph``); (2) ``cudaGraphLaunch`` calls in the
    runtime table while no kernel row carries a ``graphNodeId`` or shares a correlation id with a graph
    launch means the graph's kernels are missing. Node-level tracing gives every kernel of a graph its own
    row, with the graph launch's correlation id and its node id. (A 16-token llama.cpp decode traced at
    graph level showed 59 kernels instead of about 25,000: shared/gpu-host/H200.md.)
    """
    trace_rows = 0
    if schema.GRAPH_TRACE in present:
        trace_rows = conn.execute(f"SELECT count(*) FROM {schema.GRAPH_TRACE}").fetchone()[0]
    launches = 0
    graph_kernels = 0
    if schema.RUNTIME in present:
        launch_ids = f"SELECT id FROM {schema.STRING_IDS} WHERE value LIKE '{schema.GRAPH_LAUNCH_PREFIX}%'"
        launch_rows = f"SELECT {schema.K_CORRELATION} FROM {schema.RUNTIME} WHERE {schema.R_NAME} IN ({launch_ids})"
        launches = conn.execute(f"SELECT count(*) FROM ({launch_rows})").fetchone()[0]
        if launches:
            graph_kernels = conn.execute(
                f"SELECT count(*) FROM {schema.KERNEL} WHERE {schema.K_CORRELATION} IN ({launch_rows})"
            ).fetchone()[0]
    if schema.K_GRAPH_NODE in columns(conn, schema.KERNEL):
        graph_kernels = max(
            graph_kernels,
            conn.execute(f"SELECT count(*) FROM {schema.KERNEL} WHERE {schema.K_GRAPH_NODE} IS NOT NULL").fetchone()[0],
        )
    collapsed = (trace_rows > 0 or launches > 0) and graph_kernels == 0
    return GraphCheck(launches, graph_kernels, trace_rows, collapsed)


def _kernel_part(path: Path) -> list[KernelStat]:
    conn = connect(path)
    try:
        return kernel_stats(conn)
    finally:
        conn.close()


def _other_part(
    path: Path,
) -> tuple[list[OpStat], list[OpStat], list[OpStat], Timeline | None, GraphCheck, dict[str, int]]:
    conn = connect(path)
    try:
        present = tables(conn)
        return (
            memop_stats(conn, present),
            api_stats(conn, present),
            nvtx_stats(conn, present),
            timeline(conn, present),
            graph_check(conn, present),
            exclusive_kernel_ns(conn),  # here: this part was the shorter of the two
        )
    finally:
        conn.close()


def read_profile(path: Path, tokens: int | None = None, tokens_source: str = "") -> Profile:
    """Parse and summarize one export (``.sqlite``, ``.sqlite.gz`` or ``.sqlite.xz``).

    The kernel summary and the timeline each need a sort of every row; they run on two connections in
    two threads (SQLite releases the GIL), so a two-core machine does both at once.
    """
    if tokens is not None and tokens <= 0:
        raise FusekitError(f"the token count must be positive (got {tokens})")
    with prepared(Path(path)) as plain:
        try:
            with ThreadPoolExecutor(max_workers=2) as pool:
                kernels = pool.submit(_kernel_part, plain)
                others = pool.submit(_other_part, plain)
                memops, api, nvtx, span, graphs, exclusive = others.result()
                kernel_rows = kernels.result()
        except sqlite3.DatabaseError as exc:
            raise FusekitError(f"{path} is damaged or not a complete Nsight Systems export ({exc})") from exc
    profile = Profile(
        path=str(path),
        kernels=kernel_rows,
        memops=memops,
        api=api,
        nvtx=nvtx,
        timeline=span,
        graphs=graphs,
        tokens=tokens,
        tokens_source=tokens_source if tokens else "",
        exclusive=exclusive,
    )
    if not profile.kernels:
        profile.notes.append("the kernel table is empty: no CUDA kernel ran while the trace was recorded")
    if profile.graphs.collapsed:
        profile.notes.append(GRAPH_ADVICE)
    return profile
