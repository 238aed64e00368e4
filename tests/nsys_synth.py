"""Synthetic Nsight-Systems-shaped SQLite files for tests and the benchmark.

Tables and columns carry the names `nsys export --type sqlite` writes (a subset of their columns, the
ones fusekit reads plus a few neighbours); names come from ``evals.profile.schema``. The generator never
computes statistics: tests compute the expected figures themselves from the rows they asked for.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evals.profile import schema

KERNEL_COLUMNS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
    "cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
    "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
    "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER, "
    "localMemoryTotal INTEGER, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, "
    "sharedMemoryLimitConfig INTEGER"
)
RUNTIME_COLUMNS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
    "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER"
)
MEMCPY_COLUMNS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, "
    "copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER, graphNodeId INTEGER"
)
MEMSET_COLUMNS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, "
    "bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER"
)
NVTX_COLUMNS = (
    "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
    "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER"
)
GRAPH_TRACE_COLUMNS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, graphId INTEGER, graphExecId INTEGER"
)


@dataclass
class Kernel:
    name: str
    start: int
    end: int
    short: str = ""
    correlation: int | None = None
    graph_node: int | None = None
    stream: int = 7


@dataclass
class Trace:
    """Rows of a synthetic export; ``write`` turns them into a SQLite file."""

    kernels: list[Kernel] = field(default_factory=list)
    runtime: list[tuple[str, int, int, int]] = field(default_factory=list)  # name, start, end, correlation
    memcpy: list[tuple[int, int, int, int]] = field(default_factory=list)  # start, end, bytes, copyKind
    memset: list[tuple[int, int, int]] = field(default_factory=list)  # start, end, bytes
    nvtx: list[tuple[str, int, int]] = field(default_factory=list)  # text, start, end
    graph_trace: list[tuple[int, int]] = field(default_factory=list)  # start, end
    with_kernel_table: bool = True

    def write(self, path: Path) -> Path:
        conn = sqlite3.connect(path)
        strings: dict[str, int] = {}

        def sid(text: str) -> int:
            return strings.setdefault(text, len(strings) + 1)

        conn.execute(f"CREATE TABLE {schema.STRING_IDS} (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT)")
        conn.execute(f"CREATE TABLE {schema.RUNTIME} ({RUNTIME_COLUMNS})")
        conn.execute(f"CREATE TABLE {schema.MEMCPY} ({MEMCPY_COLUMNS})")
        conn.execute(f"CREATE TABLE {schema.MEMSET} ({MEMSET_COLUMNS})")
        conn.execute(f"CREATE TABLE {schema.NVTX_EVENTS} ({NVTX_COLUMNS})")
        if self.graph_trace:
            conn.execute(f"CREATE TABLE {schema.GRAPH_TRACE} ({GRAPH_TRACE_COLUMNS})")
        if self.with_kernel_table:
            conn.execute(f"CREATE TABLE {schema.KERNEL} ({KERNEL_COLUMNS})")
            insert_kernels(conn, ((k, sid(k.name), sid(k.short or short_name(k.name))) for k in self.kernels))
        conn.executemany(
            f"INSERT INTO {schema.RUNTIME} (start, end, eventClass, globalTid, correlationId, nameId, returnValue) "
            "VALUES (?, ?, 1, 1, ?, ?, 0)",
            ((s, e, c, sid(n)) for n, s, e, c in self.runtime),
        )
        conn.executemany(
            f"INSERT INTO {schema.MEMCPY} (start, end, deviceId, contextId, streamId, bytes, copyKind) "
            "VALUES (?, ?, 0, 1, 7, ?, ?)",
            self.memcpy,
        )
        conn.executemany(
            f"INSERT INTO {schema.MEMSET} (start, end, deviceId, contextId, streamId, value, bytes) "
            "VALUES (?, ?, 0, 1, 7, 0, ?)",
            self.memset,
        )
        conn.executemany(
            f"INSERT INTO {schema.NVTX_EVENTS} (start, end, eventType, textId) VALUES (?, ?, 59, ?)",
            ((s, e, sid(t)) for t, s, e in self.nvtx),
        )
        if self.graph_trace:
            conn.executemany(
                f"INSERT INTO {schema.GRAPH_TRACE} (start, end, deviceId, contextId, streamId) VALUES (?, ?, 0, 1, 7)",
                self.graph_trace,
            )
        conn.executemany(
            f"INSERT INTO {schema.STRING_IDS} (id, value) VALUES (?, ?)", ((i, t) for t, i in strings.items())
        )
        conn.commit()
        conn.close()
        return path


def short_name(demangled: str) -> str:
    """``void foo<int>(float *)`` -> ``foo`` (what nsys stores as the short name)."""
    head = demangled.split("(", 1)[0].split("<", 1)[0]
    return head.split()[-1] if head.split() else demangled


def insert_kernels(conn: sqlite3.Connection, rows: Iterable[tuple[Kernel, int, int]]) -> None:
    conn.executemany(
        f"INSERT INTO {schema.KERNEL} (start, end, deviceId, contextId, streamId, correlationId, demangledName, "
        "shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
        "dynamicSharedMemory, gridId, graphNodeId) VALUES (?, ?, 0, 1, ?, ?, ?, ?, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, ?)",
        ((k.start, k.end, k.stream, k.correlation, d, s, k.graph_node) for k, d, s in rows),
    )


def decode_trace(names: list[str], tokens: int) -> Trace:
    """``tokens`` repetitions of the kernel sequence ``names`` (each 1 µs long, starts 1.5 µs apart)."""
    kernels, clock = [], 0
    for _ in range(tokens):
        for name in names:
            kernels.append(Kernel(name, clock, clock + 1000, correlation=len(kernels) + 1, graph_node=len(kernels)))
            clock += 1500
    return Trace(kernels=kernels)


LLAMA_KERNELS = (
    "void mul_mat_vec_q<(ggml_type)12, 1, false>(const void *, const void *, const int *, "
    "ggml_cuda_mm_fusion_args_device, float *, unsigned int, uint3, unsigned int, unsigned int)",
    "void quantize_q8_1(const float *, void *, long, long, long, long, long, long)",
    "void rms_norm_f32<256, true, false>(const float *, float *, int, long, long, long, float, const float *)",
    "void k_bin_bcast<&op_add, float, float, float>(const float *, const float *, float *, int, int, int, int)",
    "void unary_gated_op_kernel<&op_silu, float>(const float *, const float *, float *, long, long, long, long)",
    "void flash_attn_ext_vec<128, 1, (ggml_type)1, (ggml_type)1, false>(const char *, const char *, float *)",
    "void rope_neox<true, false, float, float>(const float *, float *, int, int, int, int, int, float, float)",
    "void k_set_rows<float, half, long>(const float *, const long *, half *, long, long, long)",
    "void k_get_rows_float<float, float>(const float *, const int *, float *, long, long, long)",
    "void cpy_scalar_contiguous<float, half>(const char *, char *, long)",
    "void soft_max_f32<true, 0, 0, float>(const float *, const float *, float *, int, int, float, float)",
    "void argmax_f32(const float *, int *, long)",
)


def random_kernels(count: int, seed: int = 1, names: tuple[str, ...] = LLAMA_KERNELS) -> Iterator[Kernel]:
    """``count`` kernels in sequence on one stream, durations 1..60 µs, gaps 0..3 µs."""
    rng = random.Random(seed)
    clock = 1_000_000
    for i in range(count):
        name = names[rng.randrange(len(names))]
        dur = rng.randint(1_000, 60_000)
        clock += rng.randint(0, 3_000)
        yield Kernel(name, clock, clock + dur, correlation=i + 1, graph_node=i % 997)
        clock += dur


def write_large(path: Path, count: int, seed: int = 1) -> Path:
    """A synthetic export with ``count`` kernel rows (the benchmark's million), written in batches."""
    Trace(with_kernel_table=False).write(path)
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE {schema.KERNEL} ({KERNEL_COLUMNS})")
    ids = {name: i + 1000 for i, name in enumerate(LLAMA_KERNELS)}
    conn.executemany(
        f"INSERT INTO {schema.STRING_IDS} (id, value) VALUES (?, ?)",
        [(i, n) for n, i in ids.items()] + [(i + 500, short_name(n)) for n, i in ids.items()],
    )
    insert_kernels(conn, ((k, ids[k.name], ids[k.name] + 500) for k in random_kernels(count, seed)))
    conn.commit()
    conn.close()
    return path
