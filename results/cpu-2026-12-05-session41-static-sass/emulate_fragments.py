#!/usr/bin/env python3
"""Float64 emulation of the fragment indexing of #10's steps 4f and 5a (session 41, before any GPU run).

Each lane's m16n8k8 TF32 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8") are built with the index expressions
of the kernels, transcribed by hand from kernels/fusekit-chunked-gdn-lean.cuh (step 4f's tile pairs, its job table,
the W product's k ranges and Q K^T's zero stores) and kernels/fusekit-chunked-gdn-fused.cuh (step 5a's product 1 with
the output on the same A fragments, product 2 with QKm over the causal token tiles, the output stores), multiplied in
float64 and compared with numpy's products of the same matrices. It checks indexing only, not the kernels' pipelines
and barriers, and not TF32 rounding. `--sabotage` shortens a k or tile range in each product (as a slip in the index
math would): every comparison must then fail.

    python3 results/cpu-2026-12-05-session41-static-sass/emulate_fragments.py [--sabotage]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

KC, KS, PAD = 64, 128, 4
LS, LC = KS + PAD, KC + PAD  # step 4f's shared rows
LW, LK, LQK = KS + 8, KS + 4, KC + 8  # step 5a's: W and Qe, Kend, QKm
LANES = [(lane // 4, lane % 4) for lane in range(32)]  # (group g, thread-in-group t)


def mma(d: np.ndarray, a: list[tuple[float, ...]], b: list[tuple[float, float]]) -> None:
    """d[lane] += A B for one m16n8k8 block, from the 32 lanes' A (4) and B (2) fragment elements."""
    am, bm = np.zeros((16, 8)), np.zeros((8, 8))
    for (g, t), fa, fb in zip(LANES, a, b, strict=True):
        am[g, t], am[g + 8, t], am[g, t + 4], am[g + 8, t + 4] = fa
        bm[t, g], bm[t + 4, g] = fb
    c = am @ bm
    for lane, (g, t) in enumerate(LANES):
        d[lane] += [c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1]]


def rows(m: np.ndarray, ld: int) -> np.ndarray:
    """A matrix in shared-memory rows ld floats apart."""
    out = np.zeros(m.shape[0] * ld)
    for r, row in enumerate(m):
        out[r * ld : r * ld + len(row)] = row
    return out


def tile_pair_product(ksteps: int, arow: int, acol: int, brow: int, bcol: int, a, b, tm: int, tn0: int, out) -> None:
    """Step 4f's tile_pair_product: row tile tm, column tiles tn0 and tn0 + 1 sharing the A fragment."""
    acc = np.zeros((4, 32, 4))
    for kk in range(ksteps):
        af = []
        for g, t in LANES:
            at = (tm * 16 + g) * arow + t * acol
            offsets = (kk * 8 * acol, 8 * arow + kk * 8 * acol, (kk * 8 + 4) * acol, 8 * arow + (kk * 8 + 4) * acol)
            af.append(tuple(a[at + x] for x in offsets))
        for j in range(2):
            for half in range(2):
                bt = [t * brow + (tn0 * 16 + g) * bcol + (j * 16 + half * 8) * bcol for g, t in LANES]
                mma(acc[2 * j + half], af, [(b[x + kk * 8 * brow], b[x + (kk * 8 + 4) * brow]) for x in bt])
    for lane, (g, t) in enumerate(LANES):
        for j in range(2):
            for half in range(2):
                r, col = tm * 16 + g, (tn0 + j) * 16 + half * 8 + 2 * t
                x = acc[2 * j + half][lane]
                out[r, col : col + 2], out[r + 8, col : col + 2] = x[0:2], x[2:4]


def lower_tile_pair(job: int) -> tuple[int, int]:
    """Step 4f's six tile pairs on or below the block diagonal."""
    return (job, 0) if job < 2 else (2 + (job - 2) // 2, 2 * ((job - 2) % 2))


def step_4f(rng: np.random.Generator, sabotage: bool) -> dict[str, float]:
    """K K^T and Q K^T over the 12 pairs (Q K^T's zero blocks stored), W = P B over the k ranges P needs."""
    k, q = rng.standard_normal((KC, KS)), rng.standard_normal((KC, KS))
    kk_out, qk_out = np.full((KC, KC), np.nan), np.full((KC, KC), np.nan)
    for warp in range(8):
        for job in range(warp, 12, 8):
            tm, tn0 = lower_tile_pair(job % 6)
            a, out = (rows(k, LS), kk_out) if job < 6 else (rows(q, LS), qk_out)
            tile_pair_product(KS // 8 - sabotage, LS, 1, 1, LS, a, rows(k, LS), tm, tn0, out)
    for tid in range(128, 256):  # the warps with one pair: Q K^T's zero blocks
        r, s = (tid - 128) // 4, 32 + 8 * ((tid - 128) % 4)
        qk_out[r, s : s + 8] = 0.0
    lower = np.array([[r // 16 >= c // 16 for c in range(KC)] for r in range(KC)])
    p = rng.standard_normal((KC, KC)) * lower  # P: lower by 16 x 16 blocks
    bm = rng.standard_normal((KC, KS))
    w = np.full((KC, KS), np.nan)
    for warp in range(8):
        tn0 = 2 * (warp % 4)
        for tm, steps in ((0, 2), (3, 8)) if warp < 4 else ((1, 4), (2, 6)):
            steps -= 1 if sabotage and tm == 3 else 0
            tile_pair_product(steps, LC, 1, LS, 1, rows(p, LC), rows(bm, LS), tm, tn0, w)
    qk_lower = np.where(lower, qk_out, 0.0)
    return {
        "4f K K^T (on and below the block diagonal)": float(np.max(np.abs(np.where(lower, kk_out - k @ k.T, 0.0)))),
        "4f Q K^T (every element written)": float(np.max(np.abs(qk_lower - np.where(lower, q @ k.T, 0.0))))
        + (np.inf if np.isnan(qk_out).any() else 0.0),
        "4f W = P B": float(np.max(np.abs(w - p @ bm))) + (np.inf if np.isnan(w).any() else 0.0),
    }


def step_5a(rng: np.random.Generator, sabotage: bool, chunks: int = 2) -> dict[str, float]:
    """One warp (columns 0-15 of a 32-column CTA) over chunks: U, the outputs and the state."""
    s_ref = rng.standard_normal((KS, KS))  # S[i][j]: keys x value columns
    st = np.zeros((KS // 8, 32, 4))
    for n in range(KS // 8):
        for lane, (g, t) in enumerate(LANES):
            r = 8 * n + 2 * t
            st[n][lane] = [s_ref[r, g], s_ref[r + 1, g], s_ref[r, g + 8], s_ref[r + 1, g + 8]]
    errors: dict[str, float] = {}
    for c in range(chunks):
        w_m, u0_m, qe_m = (rng.standard_normal((KC, KS)) for _ in range(3))
        qkm_m, kend_m, decay = np.tril(rng.standard_normal((KC, KC))), rng.standard_normal((KC, KS)), 0.7
        w, qe, kend, qkm, u0 = rows(w_m, LW), rows(qe_m, LW), rows(kend_m, LK), rows(qkm_m, LQK), rows(u0_m[:, :32], 36)
        u_ref = u0_m - w_m @ s_ref
        o_ref = qe_m @ s_ref + qkm_m @ u_ref
        s_ref = decay * s_ref + kend_m.T @ u_ref
        u, o = np.zeros((KC // 8, 32, 4)), np.zeros((KC // 8, 32, 4))
        for m in range(KC // 8):
            for lane, (g, t) in enumerate(LANES):
                base = (8 * m + 2 * t) * 36 + g
                u[m][lane] = [u0[base], u0[base + 36], u0[base + 8], u0[base + 36 + 8]]
        for kk in range(KS // 8):
            a = [(-x[0], -x[2], -x[1], -x[3]) for x in st[kk]]
            for m in range(KC // 8):
                b = [(w[(8 * m + g) * LW + 8 * kk + 2 * t], w[(8 * m + g) * LW + 8 * kk + 2 * t + 1]) for g, t in LANES]
                mma(u[m], a, b)
            for n in range(KC // 8):
                b = [
                    (qe[(8 * n + g) * LW + 8 * kk + 2 * t], qe[(8 * n + g) * LW + 8 * kk + 2 * t + 1]) for g, t in LANES
                ]
                mma(o[n], a, b)
        st *= decay
        for kk in range(KC // 8):
            a = [(x[0], x[2], x[1], x[3]) for x in u[kk]]
            for n in range(KS // 8 - sabotage):
                b = [
                    (kend[(8 * kk + 2 * t) * LK + 8 * n + g], kend[(8 * kk + 2 * t + 1) * LK + 8 * n + g])
                    for g, t in LANES
                ]
                mma(st[n], a, b)
            negated = [tuple(-v for v in x) for x in a]
            for n in range(kk + (1 if sabotage else 0), KC // 8):
                b = [
                    (qkm[(8 * n + g) * LQK + 8 * kk + 2 * t], qkm[(8 * n + g) * LQK + 8 * kk + 2 * t + 1])
                    for g, t in LANES
                ]
                mma(o[n], negated, b)
        out = np.full((KC, 16), np.nan)
        for n in range(KC // 8):
            for lane, (g, t) in enumerate(LANES):
                r = 8 * n + 2 * t
                out[r, g], out[r, g + 8], out[r + 1, g], out[r + 1, g + 8] = -o[n][lane][[0, 2, 1, 3]]
        scale = np.max(np.abs(o_ref[:, :16]))
        errors[f"5a outputs, chunk {c} (relative to the largest)"] = float(np.max(np.abs(out - o_ref[:, :16]))) / scale
    state = np.zeros((KS, 16))
    for n in range(KS // 8):
        for lane, (g, t) in enumerate(LANES):
            r = 8 * n + 2 * t
            state[r, g], state[r + 1, g], state[r, g + 8], state[r + 1, g + 8] = st[n][lane]
    errors["5a final state (relative to the largest)"] = float(np.max(np.abs(state - s_ref[:, :16]))) / np.max(
        np.abs(s_ref[:, :16])
    )
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sabotage", action="store_true", help="shorten one k range in each step: all must fail")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(41)
    errors = step_4f(rng, args.sabotage) | step_5a(rng, args.sabotage)
    limit = 1e-12  # float64 sums of at most 128 products of normal values, relative or on values of order 10
    failed = 0
    for what, err in errors.items():
        ok = err < limit
        failed += not ok
        print(f"{what}: {err:.2e} {'ok' if ok else 'WRONG'}")
    if args.sabotage:
        print(f"sabotage: {failed} of {len(errors)} wrong (all must be)")
        return 0 if failed == len(errors) else 1
    print(f"{len(errors) - failed} of {len(errors)} right")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
