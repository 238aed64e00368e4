"""Correctness: each contender against a float64 reference built from ggml's own dequantized weights.

The reference multiplies the *dequantized* weights (the type's ``to_float``) by the float32
activations in float64, so weight quantization error is not in the comparison; what remains is
what the backend does on its own: rounding or quantizing the activations and accumulating.

Thresholds, per weight type, on two numbers: NMSE = Σ(y−ref)² / Σref², and the worst element
|y−ref| / sqrt(Σ_k w²x²) (its own error scale). Any NaN or infinity (a poisoned output element
never written) fails. A wrong block in a single row of a wide matrix is below both bounds.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .bridge import Bridge, row_pieces
from .constants import BENCH_TYPES, CONTROL_TYPES


@dataclass(frozen=True)
class Threshold:
    nmse: float
    max_rel: float
    why: str


THRESHOLDS: dict[str, Threshold] = {
    "f32": Threshold(
        1e-9, 1e-3, "weights and activations exact; only float32 accumulation order differs (measured NMSE ~1e-13)"
    ),
    "f16": Threshold(
        3e-4,
        0.1,
        "CPU rounds activations to f16 (measured NMSE ~5e-8, worst 1e-3); on sm_90 ggml-cuda's cuBLAS path "
        "multiplies with CUBLAS_COMPUTE_16F and a half result, whose f16 accumulation is estimated at NMSE ~4e-5, "
        "worst ~0.03 at k=14336; the bound leaves room for that and any indexing bug still gives NMSE ~1",
    ),
    "bf16": Threshold(3e-4, 0.1, "activations rounded to bf16 (relative rms ~1e-3, NMSE ~1e-6)"),
}
_QUANTIZED = Threshold(
    5e-4,
    0.1,
    "the weights in the reference are exact (ggml's to_float), so what remains is the backend quantizing "
    "the activations to 8 bits per 32 (q8_0/q8_1) or 256 (q8_K) elements: measured NMSE 3-6e-5 and worst "
    "0.02-0.032 over 512×1024 outputs; 5e-4 is also test-backend-ops' own MUL_MAT bound; moving every block "
    "gives NMSE ~2",
)


def threshold(type_name: str) -> Threshold:
    return THRESHOLDS.get(type_name, _QUANTIZED)


def thresholds_table() -> dict[str, dict[str, Any]]:
    return {t: asdict(threshold(t)) for t in BENCH_TYPES}


@dataclass(frozen=True)
class CheckResult:
    op: str
    type_name: str
    m: int
    k: int
    n: int
    seed: int
    nmse: float
    max_rel: float
    nonfinite: int
    passed: bool
    sabotaged: bool

    def describe(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        verdict = "ok" if self.passed else "FAIL"
        mode = " (sabotaged)" if self.sabotaged else ""
        return (
            f"{verdict:4} {self.op} {self.type_name} {self.m}x{self.k} n={self.n}{mode}: "
            f"nmse {self.nmse:.2e}, worst {self.max_rel:.2e}, non-finite {self.nonfinite}"
        )


def compare(type_name: str, got: np.ndarray, ref: np.ndarray, scale: np.ndarray) -> tuple[float, float, int, bool]:
    """(nmse, worst |y−ref|/scale, non-finite count, passed) against the type's threshold.

    ``scale`` is each output's own error scale, sqrt(Σ_k w²x²): a dot product's rounding error grows
    with it, so one bound fits rows of any magnitude.
    """
    nonfinite = int(np.count_nonzero(~np.isfinite(got)))
    if nonfinite:
        return float("inf"), float("inf"), nonfinite, False
    diff = got.astype(np.float64) - ref
    power = float(np.sum(ref * ref))
    nmse = float(np.sum(diff * diff)) / power if power > 0 else float(np.sum(diff * diff))
    worst = float(np.max(np.abs(diff) / np.maximum(scale, 1e-30))) if diff.size else 0.0
    limit = threshold(type_name)
    return nmse, worst, 0, nmse <= limit.nmse and worst <= limit.max_rel


def sabotage(type_name: str, packed: np.ndarray, k: int) -> np.ndarray:
    """The packed weights with every block moved one block along (block i gets block i+1's bytes).

    Every block stays a valid block of the type (finite scales), but every weight is now
    wrong. Unquantized controls are returned unchanged: they have no blocks to corrupt.
    """
    if type_name in CONTROL_TYPES:
        return packed
    block_bytes = packed.shape[-1] // (k // BENCH_TYPES[type_name])
    blocks = np.ascontiguousarray(packed).reshape(-1, block_bytes)
    return np.roll(blocks, -1, axis=0).reshape(packed.shape)


def random_weights(seed: int, m: int, k: int) -> np.ndarray:
    """Gaussian (m, k) float32 weights from ``seed``; every 8th row ×4 so blocks do not share one magnitude.

    Generated in row chunks, each from its own generator seeded (seed, chunk), on all cores.
    """
    w = np.empty((m, k), dtype=np.float32)
    pieces = row_pieces(m, k)

    def fill(index: int) -> None:
        r0, r1 = pieces[index]
        w[r0:r1] = np.random.default_rng([seed, index]).standard_normal((r1 - r0, k), dtype=np.float32)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(fill, range(len(pieces))))
    w[::8] *= 4.0
    return w


def reference(
    bridge: Bridge, type_name: str, packed: np.ndarray, k: int, xs: list[np.ndarray]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each x (n, k): float64 x·dequant(W)ᵀ and its per-output error scale sqrt(x²·(W²)ᵀ).

    W is dequantized once, in row chunks, for all the activations.
    """
    if not xs:  # a worker that only times (sweep processes after the first) dequantizes nothing
        return []
    m = packed.shape[0]
    outs = [(np.empty((x.shape[0], m)), np.empty((x.shape[0], m))) for x in xs]
    x64 = [x.astype(np.float64) for x in xs]

    def rows(piece: tuple[int, int]) -> None:  # numpy and to_float release the GIL: chunks run on all cores
        r0, r1 = piece
        w = bridge.dequantize(type_name, packed[r0:r1], k, threads=1).astype(np.float64)
        w2 = w * w
        for (out, scale), x in zip(outs, x64, strict=True):
            out[:, r0:r1] = x @ w.T
            scale[:, r0:r1] = np.sqrt((x * x) @ w2.T)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(rows, row_pieces(m, k, 1 << 20)))
    return outs


def check_mul_mat(
    bridge: Bridge,
    type_name: str,
    m: int,
    k: int,
    n: int,
    seed: int,
    corrupt: bool = False,
    packed: np.ndarray | None = None,
) -> tuple[CheckResult, np.ndarray]:
    """One MUL_MAT check with fresh activations (and fresh weights unless ``packed`` is given)."""
    if packed is None:
        packed = bridge.quantize(type_name, random_weights(seed, m, k))
    return check_mul_mat_many(bridge, type_name, packed, k, [(n, seed)], corrupt)[0], packed


def check_mul_mat_many(
    bridge: Bridge, type_name: str, packed: np.ndarray, k: int, runs: list[tuple[int, int]], corrupt: bool = False
) -> list[CheckResult]:
    """MUL_MAT checks of one packed weight at several (tokens, activation seed) pairs."""
    m = packed.shape[0]
    xs = [np.random.default_rng([seed, n, 1]).standard_normal((n, k), dtype=np.float32) for n, seed in runs]
    refs = reference(bridge, type_name, packed, k, xs)
    device_packed = sabotage(type_name, packed, k) if corrupt else packed
    results = []
    for (n, seed), x, (ref, scale) in zip(runs, xs, refs, strict=True):
        got = bridge.mul_mat(type_name, device_packed, k, x)
        nmse, worst, bad, ok = compare(type_name, got, ref, scale)
        results.append(CheckResult("MUL_MAT", type_name, m, k, n, seed, nmse, worst, bad, ok, corrupt))
    return results


def check_mul_mat_id(
    bridge: Bridge,
    type_name: str,
    m: int,
    k: int,
    n_tokens: int,
    n_expert: int,
    n_used: int,
    seed: int,
    corrupt: bool = False,
    wrong_ids: bool = False,
) -> CheckResult:
    """MUL_MAT_ID: ``n_expert`` experts with their own weights, each token routed to ``n_used`` distinct ones.

    Every (token, slot) has its own activation row, so reading another expert's weights (a wrong
    index) changes the result. ``wrong_ids`` hands the device ids shifted by one expert while the
    reference keeps the true ones: that must fail.
    """
    rng = np.random.default_rng(seed)
    packed = np.stack([bridge.quantize(type_name, random_weights(seed * 1000 + e, m, k)) for e in range(n_expert)])
    x = rng.standard_normal((n_tokens, n_used, k), dtype=np.float32)
    ids = np.stack([rng.permutation(n_expert)[:n_used] for _ in range(n_tokens)]).astype(np.int32)
    ref = np.empty((n_tokens, n_used, m), dtype=np.float64)
    scale = np.empty_like(ref)
    dequant = [bridge.dequantize(type_name, packed[e], k).astype(np.float64) for e in range(n_expert)]
    for t in range(n_tokens):
        for u in range(n_used):
            w, xv = dequant[ids[t, u]], x[t, u].astype(np.float64)
            ref[t, u] = w @ xv
            scale[t, u] = np.sqrt((w * w) @ (xv * xv))
    device_packed = np.stack([sabotage(type_name, p, k) for p in packed]) if corrupt else packed
    device_ids = (ids + 1) % n_expert if wrong_ids else ids
    got = bridge.mul_mat_id(type_name, device_packed, k, x, device_ids)
    nmse, worst, bad, ok = compare(type_name, got, ref, scale)
    return CheckResult("MUL_MAT_ID", type_name, m, k, n_tokens, seed, nmse, worst, bad, ok, corrupt or wrong_ids)
