"""Bridge: one variant's ggml libraries, loaded with cffi (ABI mode), running ggml_mul_mat on one backend.

One variant per process: two copies of libggml in one process would share the dynamic loader's
symbol namespace and ggml's global state (backend registry, quantization tables), so the second
variant could silently run the first one's kernels. :mod:`ggml_bridge.worker` runs each variant
in its own process and the sweep interleaves their rounds.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from cffi import FFI

from fusekit.errors import FusekitError

from .cdef import CDEF
from .constants import GGML_STATUS_SUCCESS, GGML_TYPE_F32, GGML_TYPE_I32, type_id

LIBS_IN_LOAD_ORDER = ("libggml-base.so", "libggml-cpu.so", "libggml-cuda.so", "libggml.so")
REQUIRED_LIBS = ("libggml-base.so", "libggml.so")
_CHUNK_ELEMENTS = 1 << 22  # rows per quantize/dequantize task hold about this many elements
_NAN_BYTE = 0xFF  # every f32 made of 0xFF bytes is a NaN: the poison for outputs


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    description: str
    memory_total: int
    cache_bytes: int  # the last-level cache the timing must defeat (GPU L2, CPU L3)
    cache_source: str
    threads: int | None

    def describe(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Graph:
    """A no-alloc ggml context, its graph and the backend buffer holding every tensor; freed on close."""

    def __init__(self, bridge: Bridge, n_tensors: int, graph_size: int) -> None:
        self.b = bridge
        lib, ffi = bridge.lib, bridge.ffi
        mem = lib.ggml_tensor_overhead() * (n_tensors + 8) + lib.ggml_graph_overhead_custom(graph_size, False)
        params = ffi.new("struct ggml_init_params *", {"mem_size": mem, "mem_buffer": ffi.NULL, "no_alloc": True})
        self.ctx = lib.ggml_init(params[0])
        if self.ctx == ffi.NULL:
            raise FusekitError("ggml_init failed")
        self.graph = lib.ggml_new_graph_custom(self.ctx, graph_size, False)
        self.buffer = ffi.NULL
        self.activations: list[Any] = []  # a timing graph's input tensors, one per product

    def allocate(self) -> None:
        self.buffer = self.b.lib.ggml_backend_alloc_ctx_tensors(self.ctx, self.b.backend)
        if self.buffer == self.b.ffi.NULL:
            raise FusekitError(f"could not allocate the tensors on {self.b.device_name} (out of memory?)")

    def compute(self) -> None:
        status = self.b.lib.ggml_backend_graph_compute(self.b.backend, self.graph)
        if status != GGML_STATUS_SUCCESS:
            raise FusekitError(f"ggml_backend_graph_compute failed on {self.b.device_name} (status {status})")

    def close(self) -> None:
        if self.buffer != self.b.ffi.NULL:
            self.b.lib.ggml_backend_buffer_free(self.buffer)
            self.buffer = self.b.ffi.NULL
        if self.ctx != self.b.ffi.NULL:
            self.b.lib.ggml_free(self.ctx)
            self.ctx = self.b.ffi.NULL


class Bridge:
    """The ggml libraries of one build (its ``bin/``) and one initialised backend device."""

    def __init__(self, lib_dir: Path | str, device: str = "CPU", threads: int | None = None) -> None:
        self.lib_dir = Path(lib_dir).resolve()
        missing = [name for name in REQUIRED_LIBS if not (self.lib_dir / name).is_file()]
        if missing:
            raise FusekitError(
                f"no ggml shared libraries in {self.lib_dir} (missing {', '.join(missing)}); "
                "build the variant first with 'fusekit build'"
            )
        self.ffi = FFI()
        self.ffi.cdef(CDEF)
        # Load dependencies by full path first so the dynamic loader binds this build's copies, not others.
        self._handles = [
            self.ffi.dlopen(str(self.lib_dir / n)) for n in LIBS_IN_LOAD_ORDER if (self.lib_dir / n).is_file()
        ]
        self.lib: Any = self._handles[-1]  # libggml.so: its dependencies answer the ggml-base symbols
        dev = self._find_device(device)
        self.device_name = self.ffi.string(self.lib.ggml_backend_dev_name(dev)).decode()
        self.device_description = self.ffi.string(self.lib.ggml_backend_dev_description(dev)).decode()
        self.backend = self.lib.ggml_backend_dev_init(dev, self.ffi.NULL)
        if self.backend == self.ffi.NULL:
            raise FusekitError(f"could not initialise backend device {self.device_name}")
        self._device = dev
        self.threads = self._set_threads(dev, threads)

    # ----- setup ---------------------------------------------------------------------------
    def devices(self) -> list[str]:
        lib, ffi = self.lib, self.ffi
        return [
            ffi.string(lib.ggml_backend_dev_name(lib.ggml_backend_dev_get(i))).decode()
            for i in range(lib.ggml_backend_dev_count())
        ]

    def _find_device(self, wanted: str) -> Any:
        for attempt in range(2):
            for i in range(self.lib.ggml_backend_dev_count()):
                dev = self.lib.ggml_backend_dev_get(i)
                if self.ffi.string(self.lib.ggml_backend_dev_name(dev)).decode().lower() == wanted.lower():
                    return dev
            if attempt == 0:  # builds with GGML_BACKEND_DL register backends only when loaded
                self.lib.ggml_backend_load_all_from_path(str(self.lib_dir).encode())
        present = ", ".join(self.devices()) or "none"
        raise FusekitError(f"backend {wanted} is not present in the build at {self.lib_dir} (present: {present})")

    def _set_threads(self, dev: Any, threads: int | None) -> int | None:
        reg = self.lib.ggml_backend_dev_backend_reg(dev)
        fn = self.lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_set_n_threads")
        if fn == self.ffi.NULL:
            return None
        n = threads or os.cpu_count() or 1
        self.ffi.cast("ggml_backend_set_n_threads_t", fn)(self.backend, n)
        return n

    def close(self) -> None:
        if self.backend != self.ffi.NULL:
            self.lib.ggml_backend_free(self.backend)
            self.backend = self.ffi.NULL

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> DeviceInfo:
        free = self.ffi.new("size_t *")
        total = self.ffi.new("size_t *")
        self.lib.ggml_backend_dev_memory(self._device, free, total)
        cache, source = self._cache_size()
        return DeviceInfo(self.device_name, self.device_description, int(total[0]), cache, source, self.threads)

    def _cache_size(self) -> tuple[int, str]:
        if self.device_name.upper().startswith("CUDA"):
            size = _cuda_l2_bytes(int(self.device_name[4:] or 0))
            return (size, "cudaDevAttrL2CacheSize") if size else (0, "unknown")
        size = _cpu_last_level_cache()
        return (size, "/sys/devices/system/cpu/cpu0/cache") if size else (0, "unknown")

    # ----- type facts ----------------------------------------------------------------------
    def type_name(self, type_: int) -> str:
        return self.ffi.string(self.lib.ggml_type_name(type_)).decode()

    def row_size(self, type_name: str, k: int) -> int:
        return int(self.lib.ggml_row_size(type_id(type_name), k))

    # ----- quantize / dequantize (ggml's own code) -----------------------------------------
    def quantize(self, type_name: str, weights: np.ndarray) -> np.ndarray:
        """Pack ``weights`` (m, k) float32 with ggml_quantize_chunk; returns (m, row_size) uint8."""
        t = type_id(type_name)
        src = np.ascontiguousarray(weights, dtype=np.float32)
        m, k = src.shape
        out = np.empty((m, self.row_size(type_name, k)), dtype=np.uint8)
        imatrix = np.ones(k, dtype=np.float32)  # uniform importance: only read by types that need one
        imat = self.ffi.from_buffer("float[]", imatrix) if self.lib.ggml_quantize_requires_imatrix(t) else self.ffi.NULL
        src_p = self.ffi.from_buffer("float[]", src)
        dst_p = self.ffi.from_buffer(out, require_writable=True)

        def run(rows: tuple[int, int]) -> int:
            return int(self.lib.ggml_quantize_chunk(t, src_p, dst_p, rows[0] * k, rows[1] - rows[0], k, imat))

        pieces = row_pieces(m, k)
        written = run(pieces[0])  # the first call initialises ggml's quantization tables
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # cffi releases the GIL
            written += sum(pool.map(run, pieces[1:]))
        if written != out.nbytes:
            raise FusekitError(f"ggml_quantize_chunk wrote {written} bytes for {type_name}, expected {out.nbytes}")
        return out

    def dequantize(self, type_name: str, packed: np.ndarray, k: int, threads: int | None = None) -> np.ndarray:
        """Unpack (m, row_size) bytes to (m, k) float32 with the type's own to_float."""
        t = type_id(type_name)
        m = packed.shape[0]
        if t == GGML_TYPE_F32:
            return np.frombuffer(packed.tobytes(), dtype=np.float32).reshape(m, k).copy()
        traits = self.lib.ggml_get_type_traits(t)
        if traits.to_float == self.ffi.NULL:
            raise FusekitError(f"ggml has no to_float for {type_name}")
        src = np.ascontiguousarray(packed)
        out = np.empty((m, k), dtype=np.float32)
        row = src.shape[1]
        src_p = self.ffi.from_buffer(src)
        dst_p = self.ffi.from_buffer("float[]", out, require_writable=True)

        def run(rows: tuple[int, int]) -> None:
            traits.to_float(src_p + rows[0] * row, dst_p + rows[0] * k, (rows[1] - rows[0]) * k)

        if threads == 1:
            run((0, m))
            return out
        with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as pool:
            list(pool.map(run, row_pieces(m, k)))
        return out

    # ----- the operations ------------------------------------------------------------------
    @contextlib.contextmanager
    def _graph(self, n_tensors: int, graph_size: int) -> Iterator[Graph]:
        g = Graph(self, n_tensors, graph_size)
        try:
            yield g
        finally:
            g.close()

    def _set(self, tensor: Any, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array)
        nbytes = int(self.lib.ggml_nbytes(tensor))
        if data.nbytes != nbytes:
            raise FusekitError(f"internal: {data.nbytes} bytes for a tensor of {nbytes}")
        self.lib.ggml_backend_tensor_set(tensor, self.ffi.from_buffer(data), 0, nbytes)

    def _get_f32(self, tensor: Any, shape: tuple[int, ...]) -> np.ndarray:
        out = np.empty(shape, dtype=np.float32)
        self.lib.ggml_backend_tensor_get(tensor, self.ffi.from_buffer(out, require_writable=True), 0, out.nbytes)
        return out

    def _poison(self, tensor: Any) -> None:
        self.lib.ggml_backend_tensor_memset(tensor, _NAN_BYTE, 0, self.lib.ggml_nbytes(tensor))

    def _require_support(self, node: Any, what: str) -> None:
        if not self.lib.ggml_backend_supports_op(self.backend, node):
            raise FusekitError(f"{self.device_name} does not support {what}")

    def mul_mat(self, type_name: str, packed: np.ndarray, k: int, x: np.ndarray) -> np.ndarray:
        """y = W·xᵀ on the device: ``packed`` (m, row_size) weights, ``x`` (n, k) float32 → (n, m) float32."""
        m, n = packed.shape[0], x.shape[0]
        with self._graph(4, 16) as g:
            a = self.lib.ggml_new_tensor_2d(g.ctx, type_id(type_name), k, m)
            b = self.lib.ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, k, n)
            out = self.lib.ggml_mul_mat(g.ctx, a, b)
            self._require_support(out, f"MUL_MAT with {type_name} weights")
            self.lib.ggml_build_forward_expand(g.graph, out)
            g.allocate()
            self._set(a, packed)
            self._set(b, x.astype(np.float32))
            self._poison(out)
            g.compute()
            return self._get_f32(out, (n, m))

    def mul_mat_id(self, type_name: str, packed: np.ndarray, k: int, x: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Expert products: ``packed`` (E, m, row_size), ``x`` (T, U, k), ``ids`` (T, U) → (T, U, m) float32."""
        n_expert, m = packed.shape[0], packed.shape[1]
        n_tok, n_used = ids.shape
        with self._graph(5, 16) as g:
            a = self.lib.ggml_new_tensor_3d(g.ctx, type_id(type_name), k, m, n_expert)
            b = self.lib.ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, k, n_used, n_tok)
            i = self.lib.ggml_new_tensor_2d(g.ctx, GGML_TYPE_I32, n_used, n_tok)
            out = self.lib.ggml_mul_mat_id(g.ctx, a, b, i)
            self._require_support(out, f"MUL_MAT_ID with {type_name} weights")
            self.lib.ggml_build_forward_expand(g.graph, out)
            g.allocate()
            self._set(a, packed)
            self._set(b, x.astype(np.float32))
            self._set(i, ids.astype(np.int32))
            self._poison(out)
            g.compute()
            return self._get_f32(out, (n_tok, n_used, m))

    # ----- timing --------------------------------------------------------------------------
    def timing_graph(self, type_name: str, packed: np.ndarray, k: int, n: int, copies: int, nodes: int) -> Graph:
        """An allocated graph of ``nodes`` products cycling over ``copies`` weight copies (caller closes it).

        Every copy holds the same packed bytes at its own address, so once the copies together
        are several times the last-level cache, each product streams its weights from memory.
        Every product also reads its own activation tensor (the same values): a variant that
        reuses work between products of one input (fusion-1 quantizes each tensor once) must not
        skip, in a race of single products, the work stock does for each. ``g.activations`` keeps them.
        """
        m = packed.shape[0]
        g = Graph(self, copies + 2 * nodes + 1, copies + nodes + 8)  # leafs: the copies and the activations
        try:
            weights = [self.lib.ggml_new_tensor_2d(g.ctx, type_id(type_name), k, m) for _ in range(copies)]
            g.activations = [self.lib.ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, k, n) for _ in range(nodes)]
            for j, act in enumerate(g.activations):
                out = self.lib.ggml_mul_mat(g.ctx, weights[j % copies], act)
                if j == 0:
                    self._require_support(out, f"MUL_MAT with {type_name} weights")
                self.lib.ggml_build_forward_expand(g.graph, out)
            g.allocate()
            for w in weights:
                self._set(w, packed)
            values = np.random.default_rng(n).standard_normal((n, k), dtype=np.float32)
            for act in g.activations:
                self._set(act, values)
        except BaseException:
            g.close()
            raise
        return g

    def time_mul_mat(
        self, type_name: str, packed: np.ndarray, k: int, n: int, copies: int, nodes: int, rounds: int, warmup: int
    ) -> list[float]:
        """Seconds per mul_mat node, one sample per ``ggml_backend_graph_compute`` of the timing graph.

        A sample is wall clock around a synchronised graph compute divided by the node count, so it
        includes each node's launch cost and any activation-quantization kernel the backend runs.
        """
        g = self.timing_graph(type_name, packed, k, n, copies, nodes)
        try:
            return timed(g, nodes, rounds, warmup)
        finally:
            g.close()

    def copy_graph(self, nbytes: int) -> Graph:
        """An allocated graph of one f32 GGML_OP_CPY of ``nbytes``: the memory roofline (caller closes it)."""
        count = max(nbytes // 4, 1)
        g = Graph(self, 4, 8)
        try:
            src = self.lib.ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, count)
            dst = self.lib.ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, count)
            self.lib.ggml_build_forward_expand(g.graph, self.lib.ggml_cpy(g.ctx, src, dst))
            g.allocate()
            self.lib.ggml_backend_tensor_memset(src, 0, 0, count * 4)
        except BaseException:
            g.close()
            raise
        return g

    def time_copy(self, nbytes: int, rounds: int, warmup: int = 2) -> list[float]:
        """Seconds per copy of ``nbytes`` (bytes moved: read + written = 2 × nbytes)."""
        g = self.copy_graph(nbytes)
        try:
            return timed(g, 1, rounds, warmup)
        finally:
            g.close()


def timed(g: Graph, per: int, rounds: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        g.compute()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        g.compute()  # ggml_backend_graph_compute returns after the device has finished
        samples.append((time.perf_counter() - start) / per)
    return samples


def row_pieces(m: int, k: int, elements: int = _CHUNK_ELEMENTS) -> list[tuple[int, int]]:
    """Row ranges of about ``elements`` elements each."""
    step = max(1, elements // max(k, 1))
    return [(r, min(r + step, m)) for r in range(0, m, step)]


def _cpu_last_level_cache() -> int:
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        value = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
        best = max(best, value)
    return best


def _cuda_l2_bytes(ordinal: int) -> int:
    """L2 size through the CUDA runtime that libggml-cuda already loaded (0 when it cannot be read)."""
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return 0
    paths = sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
    for path in paths:
        try:
            cudart = ctypes.CDLL(path)
            value = ctypes.c_int(0)
            if cudart.cudaDeviceGetAttribute(ctypes.byref(value), 38, ordinal) == 0:  # 38: cudaDevAttrL2CacheSize
                return int(value.value)
        except OSError:
            continue
    return 0
