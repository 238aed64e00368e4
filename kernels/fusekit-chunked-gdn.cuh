// fusion-4 step 1: the chunked (WY / UT-transform) form of ggml's GATED_DELTA_NET, ggml-free.
//
// Every piece of arithmetic is a __host__ __device__ function, so the SAME code runs on the CPU in
// kernels/chunked_gdn_host_check.cu (one "thread", no-op barrier) and inside the CUDA kernel of
// kernels/chunked_gdn_check.cu (a CTA, __syncthreads barrier). Nothing here is wired into ggml yet.
//
// ---- The op contract (pinned tree: ggml.h ~2639, ggml.c ~6375, ggml-cpu/ops.cpp ~11123) ----------
//   q, k  [S, H_k, T, Bq]  rows contiguous, any nb1..nb3 (views of the conv output); NOT pre-scaled:
//                          the op multiplies its output by 1/sqrt(S) (ops.cpp `scale`), the model's
//                          fused path (delta-net-base.cpp build_delta_net_fused) passes q unscaled.
//   v     [S, H_v, T, B]   rows contiguous, any nb1..nb3 (a strided view)
//   g     [1, H_v, T, B]   contiguous, log-space decay (alpha_t = exp(g_t) <= 1). The KDA form
//                          [S, H_v, T, B] is NOT handled here: it falls back to the serial kernel.
//   beta  [1, H_v, T, B]   contiguous, already through the sigmoid
//   state [S, S, H_v, B]   contiguous, TRANSPOSED: state[j*S + i] = S[i][j], i = key channel,
//                          j = value channel; a value column of S is a contiguous row of the buffer.
//   heads: value head h reads key head h % H_k (tiled, not interleaved: ops.cpp iq1 = iv1 % neq1);
//          sequence b reads q/k sequence b / (B / Bq).
//   dst:  attention output [S, H_v, T, B] (element ((b*T + t)*H_v + h)*S + j), followed by K state
//         snapshots of S*S*H_v*B floats each; slot s = the state after token T-1-s, written only for
//         s < min(K, T); slot 0 is the final state. Within a slot, (b, h) sits at (b*H_v + h)*S*S.
//         ggml-cuda's fused cache write sends the snapshots to the recurrent cache instead, with its
//         own slot stride (state_out / state_slot_stride below); the per-slot layout is the same.
//
// ---- The recurrence (per value head, per sequence; ops.cpp's order) ------------------------------
//   S_t   = a_t S_{t-1} + k_t u_t^T,   a_t = exp(g_t)
//   u_t   = beta_t (v_t - a_t S_{t-1}^T k_t)
//   o_t   = scale * S_t^T q_t                      (the state AFTER token t)
// Value columns j never mix: column j of S evolves from k, beta, g and v[j] alone. That is why a
// CTA can own a slice of value columns and why the stock kernel gives one warp per column.
//
// ---- The chunked form (chunk of L <= C tokens r = 0..L-1, chunk-start state S0) -------------------
//   G_r   = g_0 + ... + g_r (log of the decay from the chunk start through token r; kept in float64,
//           see Workspace: a float G loses exp(g) for neighbouring tokens once |G| is large)
//   Unrolling the recurrence inside the chunk, with D(r,s) = exp(G_r - G_s) (<= 1 for s <= r):
//     a_s S_{s-1} = exp(G_s) S0 + sum_{m<s} D(s,m) k_m u_m^T
//   so u_s + beta_s sum_{m<s} D(s,m) (k_s.k_m) u_m = beta_s (v_s - exp(G_s) S0^T k_s), i.e.
//     (I + A) U = R,   A[s][m] = beta_s D(s,m) (k_s.k_m)  (m < s, strictly lower),
//                      R[s]    = beta_s (v_s - exp(G_s) S0^T k_s)
//   U = P R with P = (I + A)^{-1} (the UT transform; P depends on k, beta, g only, so it is shared by
//   every value column; U = P diag(beta) V - (P diag(beta e^G) K) S0 is the WY form of the same).
//     o_r   = scale * ( exp(G_r) S0^T q_r + sum_{s<=r} D(r,s) (q_r.k_s) u_s )
//     S_r   = exp(G_r) S0 + sum_{s<=r} D(r,s) k_s u_s^T      (snapshots; r = L-1 is the next S0)
//   Decays are always formed as exp(G_r - G_s) with s <= r, never as exp(G_r) / exp(G_s): the ratio
//   form overflows / underflows over a chunk of strong decays; the difference form stays in [0, 1].
//
// Every product above is a small matrix product (K K^T, Q K^T, K S0, Q S0, P R, (QK) U, K^T U): the
// places where the next step puts tensor-core mma / wgmma. Step 1 writes them as plain loops.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FUSEKIT_GDN_HD __host__ __device__
#else
#define FUSEKIT_GDN_HD
#endif

namespace fusekit_gdn {

// ggml's shapes and strides, in elements (ggml's nb / sizeof(float)). Inputs are float as in ggml;
// Out is float for ggml's dst, double only in the host check (to see the chunked algebra to 1e-12).
template <typename Out> struct GdnParamsT {
    const float * q;
    const float * k;
    const float * v;
    const float * g;      // [1, H_v, T, B] contiguous (scalar gate only)
    const float * beta;   // [1, H_v, T, B] contiguous
    const float * state;  // [S, S, H_v, B] contiguous, transposed
    Out *         dst;    // attention output [S, H_v, T, B]
    Out *         state_out;          // snapshot slot 0: dst + S*H_v*T*B, or the recurrent cache when
    int64_t       state_slot_stride;  // ggml-cuda fuses the cache write (ggml_cuda_gated_delta_net_fused_cache)
    int     S, H_v, H_k, T, B;
    int     rq3;                    // B / (q, k sequence count): q/k sequence = b / rq3
    int64_t q_s1, q_s2, q_s3;       // q strides (head, token, sequence)
    int64_t k_s1, k_s2, k_s3;       // k strides
    int64_t v_s1, v_s2, v_s3;       // v strides
    int     K;                      // snapshot slots, >= 1
    float   scale;                  // 1/sqrt(S), as ops.cpp
};
using GdnParams = GdnParamsT<float>;

// The op's own output: snapshots right after the attention output, one S*S*H_v*B block per slot.
// (The fused cache write instead points state_out at the cache and sets its slot stride.)
template <typename Out> inline void point_output_at_dst(GdnParamsT<Out> & p, Out * dst) {
    p.dst               = dst;
    p.state_out         = dst + int64_t(p.S) * p.H_v * p.T * p.B;
    p.state_slot_stride = int64_t(p.S) * p.S * p.H_v * p.B;
}

// Per-CTA working memory of one (sequence, value head, value-column slice): n_cols columns of the
// state, one chunk of keys/queries, the C x C matrices, and the chunk's cumulative log decay.
template <typename Real> struct Workspace {
    double * G;  // [C]          cumulative log decay G_r, in float64 even when Real is float: see below
    Real * M;    // [n_cols][S]  state slice, transposed like ggml: M[jj*S + i] = S0[i][j0+jj]
    Real * Kc;   // [C][S]       the chunk's keys
    Real * Qc;   // [C][S]       the chunk's queries
    Real * R;    // [C][n_cols]  right-hand side beta (v - e^G S0^T k)
    Real * U;    // [C][n_cols]  pseudo-values u
    Real * A;    // [C][C]       strictly lower A, later reused for the decayed Q K^T
    Real * P;    // [C][C]       (I + A)^{-1}, unit lower
    Real * beta; // [C]
};

// Why G is float64: the decay between two tokens is exp(G_r - G_s), and G_r - G_s for neighbours is
// one g, which a float G loses once G itself is large: with g near -20 (test-backend-ops draws
// U(-20, 0)) G reaches -1000 within a chunk, its float spacing is 6e-5, and exp(G_r - G_{r-1})
// carries a 6e-5 relative error that the serial rule (exp(g) directly) never has. The host check saw
// it as 1e-5 output error; with G in float64 (64 values, a few double adds per pair) it is gone.
template <typename Real> FUSEKIT_GDN_HD inline int64_t workspace_bytes(int S, int C, int n_cols) {
    const int64_t reals = int64_t(n_cols) * S + 2 * int64_t(C) * S + 2 * int64_t(C) * n_cols + 2 * int64_t(C) * C + C;
    return int64_t(C) * int64_t(sizeof(double)) + reals * int64_t(sizeof(Real));
}

// base must be 8-byte aligned (G comes first).
template <typename Real> FUSEKIT_GDN_HD Workspace<Real> carve_workspace(void * base, int S, int C, int n_cols) {
    Workspace<Real> w;
    w.G        = static_cast<double *>(base);
    Real * r   = reinterpret_cast<Real *>(w.G + C);
    w.M    = r;            r += int64_t(n_cols) * S;
    w.Kc   = r;            r += int64_t(C) * S;
    w.Qc   = r;            r += int64_t(C) * S;
    w.R    = r;            r += int64_t(C) * n_cols;
    w.U    = r;            r += int64_t(C) * n_cols;
    w.A    = r;            r += int64_t(C) * C;
    w.P    = r;            r += int64_t(C) * C;
    w.beta = r;
    return w;
}

FUSEKIT_GDN_HD inline float  real_exp(float x) { return expf(x); }
FUSEKIT_GDN_HD inline double real_exp(double x) { return exp(x); }

// exp(G_r - G_s): the decay from just after token s to just after token r (s <= r, so <= 1). The
// difference is taken in float64 before rounding to Real (see Workspace).
template <typename Real> FUSEKIT_GDN_HD inline Real decay_between(const Workspace<Real> & w, int r, int s) {
    return real_exp(Real(w.G[r] - w.G[s]));
}

// exp(G_r): the decay of the chunk-start state through token r.
template <typename Real> FUSEKIT_GDN_HD inline Real decay_from_start(const Workspace<Real> & w, int r) {
    return real_exp(Real(w.G[r]));
}

// Sabotage switch (the host check's and the standalone program's --sabotage): the causal mask of the
// intra-chunk system includes the diagonal, so every token also "corrects" against its own key
// (an off-by-one a real kernel could make). It changes u for every token, T = 1 included.
enum : int { kSabotageNone = 0, kSabotageMaskDiagonal = 1 };

// Dot products over the S key channels start at a per-thread offset and wrap around: neighbouring
// threads of a warp that read rows S floats apart (state rows, key rows) then hit different
// shared-memory banks instead of all hitting one. It only changes the summation order.
FUSEKIT_GDN_HD inline int rotated_channel(int n, int shift, int S) {
    const int i = n + shift;
    return i < S ? i : i - S;
}

// ---- Phase 0: stage one chunk (tokens t0 .. t0+L-1) of keys, queries, gates for (b, h) -----------
// Elements are split over nthr workers by index; worker tid does idx = tid, tid + nthr, ...
template <typename Real, typename Out>
FUSEKIT_GDN_HD void stage_chunk(const GdnParamsT<Out> & p, const Workspace<Real> & w, int b, int h, int t0, int L,
                                int tid, int nthr) {
    const int     S  = p.S;
    const int     hk = h % p.H_k;     // tiled heads, as ops.cpp
    const int     bq = b / p.rq3;
    const float * qb = p.q + bq * p.q_s3 + hk * p.q_s1;
    const float * kb = p.k + bq * p.k_s3 + hk * p.k_s1;
    for (int idx = tid; idx < L * S; idx += nthr) {
        const int r = idx / S, i = idx % S;
        w.Kc[idx] = Real(kb[int64_t(t0 + r) * p.k_s2 + i]);
        w.Qc[idx] = Real(qb[int64_t(t0 + r) * p.q_s2 + i]);
    }
    for (int r = tid; r < L; r += nthr) {
        const int64_t gi = (int64_t(b) * p.T + t0 + r) * p.H_v + h;  // [1, H_v, T, B] contiguous
        w.beta[r] = Real(p.beta[gi]);
    }
}

// G_r = g_0 + ... + g_r: a serial prefix over <= C values, done by worker 0 alone.
template <typename Real, typename Out>
FUSEKIT_GDN_HD void chunk_log_decay(const GdnParamsT<Out> & p, const Workspace<Real> & w, int b, int h, int t0, int L, int tid) {
    if (tid != 0) {
        return;
    }
    double acc = 0;
    for (int r = 0; r < L; ++r) {
        acc += double(p.g[(int64_t(b) * p.T + t0 + r) * p.H_v + h]);
        w.G[r] = acc;
    }
}

// ---- Phase 1: A[s][m] = beta_s exp(G_s - G_m) (k_s . k_m) for m < s, 0 elsewhere ------------------
template <typename Real>
FUSEKIT_GDN_HD void build_intra_chunk_system(const Workspace<Real> & w, int S, int C, int L, int sabotage, int tid,
                                             int nthr) {
    for (int idx = tid; idx < L * L; idx += nthr) {
        const int  s = idx / L, m = idx % L;
        const bool below = sabotage == kSabotageMaskDiagonal ? m <= s : m < s;
        Real       a     = 0;
        if (below) {
            Real      dot   = 0;
            const int shift = m % S;
            for (int n = 0; n < S; ++n) {
                const int i = rotated_channel(n, shift, S);
                dot += w.Kc[s * S + i] * w.Kc[m * S + i];
            }
            a = w.beta[s] * decay_between(w, s, m) * dot;
        }
        w.A[s * C + m] = a;
    }
}

// ---- Phase 2: P = (I + A)^{-1}; the columns of the inverse are independent, one worker each -------
// Forward substitution down column c: P[r][c] = [r == c] - sum_{c <= m < r} A[r][m] P[m][c].
// (In sabotage mode A has a diagonal; it is still treated as unit lower here: the error must come
// from the wrong entries of A, not from a different solve.)
template <typename Real>
FUSEKIT_GDN_HD void invert_unit_lower(const Workspace<Real> & w, int C, int L, int tid, int nthr) {
    for (int c = tid; c < L; c += nthr) {
        for (int r = 0; r < c; ++r) {
            w.P[r * C + c] = 0;
        }
        w.P[c * C + c] = 1;
        for (int r = c + 1; r < L; ++r) {
            Real acc = 0;
            for (int m = c; m < r; ++m) {
                acc += w.A[r * C + m] * w.P[m * C + c];
            }
            w.P[r * C + c] = -acc;
        }
    }
}

// The sabotaged system's diagonal: with the mask off by one, u_s also absorbs beta_s |k_s|^2 u_s,
// i.e. the row is divided by (1 + A[s][s]). Applied to R so the sabotage acts on every token.
template <typename Real>
FUSEKIT_GDN_HD Real sabotage_row_factor(const Workspace<Real> & w, int C, int s, int sabotage) {
    return sabotage == kSabotageMaskDiagonal ? Real(1) / (Real(1) + w.A[s * C + s]) : Real(1);
}

// ---- Phase 3: R = beta (v - e^G S0^T k) for this slice's columns ------------------------------
// Reads only staged data, the chunk-start state and (sabotage only) A's diagonal, so it shares a
// barrier interval with invert_unit_lower, which also only reads A.
template <typename Real, typename Out>
FUSEKIT_GDN_HD void build_rhs(const GdnParamsT<Out> & p, const Workspace<Real> & w, int b, int h, int t0, int L,
                              int j0, int n_cols, int C, int sabotage, int tid, int nthr) {
    const int     S  = p.S;
    const float * vb = p.v + int64_t(b) * p.v_s3 + int64_t(h) * p.v_s1 + j0;
    for (int idx = tid; idx < L * n_cols; idx += nthr) {
        const int s = idx / n_cols, jj = idx % n_cols;
        Real      kS    = 0;  // (S0^T k_s)[j] = dot(column j of S0, k_s) = dot(row jj of M, k_s)
        const int shift = jj % S;
        for (int n = 0; n < S; ++n) {
            const int i = rotated_channel(n, shift, S);
            kS += w.M[jj * S + i] * w.Kc[s * S + i];
        }
        const Real v = Real(vb[int64_t(t0 + s) * p.v_s2 + jj]);
        w.R[idx]     = w.beta[s] * (v - decay_from_start(w, s) * kS) * sabotage_row_factor(w, C, s, sabotage);
    }
}

// ---- Phase 3b: A <- decayed causal Q K^T, QK[r][s] = exp(G_r - G_s) (q_r . k_s) for s <= r --------
// Overwrites A, so it runs only after the barrier that ends phases 2 and 3 (P and R are done with A).
template <typename Real>
FUSEKIT_GDN_HD void build_decayed_qk(const Workspace<Real> & w, int S, int C, int L, int tid, int nthr) {
    for (int idx = tid; idx < L * L; idx += nthr) {
        const int r = idx / L, s = idx % L;
        Real      qk = 0;
        if (s <= r) {  // inclusive: o_r reads the state after token r
            const int shift = s % S;
            for (int n = 0; n < S; ++n) {
                const int i = rotated_channel(n, shift, S);
                qk += w.Qc[r * S + i] * w.Kc[s * S + i];
            }
            qk *= decay_between(w, r, s);
        }
        w.A[r * C + s] = qk;
    }
}

// ---- Phase 4: U = P R (unit lower times the slice's right-hand side) ----------------------------
template <typename Real>
FUSEKIT_GDN_HD void solve_pseudo_values(const Workspace<Real> & w, int C, int L, int n_cols, int tid, int nthr) {
    for (int idx = tid; idx < L * n_cols; idx += nthr) {
        const int s = idx / n_cols, jj = idx % n_cols;
        Real      u = w.R[idx];  // P[s][s] = 1
        for (int m = 0; m < s; ++m) {
            u += w.P[s * C + m] * w.R[m * n_cols + jj];
        }
        w.U[idx] = u;
    }
}

// ---- Phase 5: outputs o_r = scale (e^{G_r} S0^T q_r + sum_{s<=r} QK[r][s] u_s), written to dst ---
template <typename Real, typename Out>
FUSEKIT_GDN_HD void write_outputs(const GdnParamsT<Out> & p, const Workspace<Real> & w, int b, int h, int t0, int L, int j0,
                                  int n_cols, int C, int tid, int nthr) {
    const int S = p.S;
    for (int idx = tid; idx < L * n_cols; idx += nthr) {
        const int r = idx / n_cols, jj = idx % n_cols;
        Real      qS    = 0;
        const int shift = jj % S;
        for (int n = 0; n < S; ++n) {
            const int i = rotated_channel(n, shift, S);
            qS += w.M[jj * S + i] * w.Qc[r * S + i];
        }
        Real o = decay_from_start(w, r) * qS;
        for (int s = 0; s <= r; ++s) {
            o += w.A[r * C + s] * w.U[s * n_cols + jj];
        }
        p.dst[((int64_t(b) * p.T + t0 + r) * p.H_v + h) * S + j0 + jj] = Out(o * Real(p.scale));
    }
}

// State after chunk token r, column jj, key channel i: e^{G_r} S0[i][j] + sum_{s<=r} D(r,s) k_s[i] u_s[j].
template <typename Real>
FUSEKIT_GDN_HD Real state_after(const Workspace<Real> & w, int S, int n_cols, int r, int jj, int i) {
    Real acc = decay_from_start(w, r) * w.M[jj * S + i];
    for (int s = 0; s <= r; ++s) {
        acc += decay_between(w, r, s) * w.Kc[s * S + i] * w.U[s * n_cols + jj];
    }
    return acc;
}

// ---- Phase 5b: the snapshot slots that fall inside this chunk (slot = T-1-t, slot < K) ------------
template <typename Real, typename Out>
FUSEKIT_GDN_HD void write_snapshots(const GdnParamsT<Out> & p, const Workspace<Real> & w, int b, int h, int t0, int L,
                                    int j0, int n_cols, int tid, int nthr) {
    const int S = p.S;
    for (int r = 0; r < L; ++r) {
        const int slot = p.T - 1 - (t0 + r);
        if (slot < 0 || slot >= p.K) {
            continue;
        }
        Out * out = p.state_out + slot * p.state_slot_stride + (int64_t(b) * p.H_v + h) * S * S + int64_t(j0) * S;
        for (int idx = tid; idx < n_cols * S; idx += nthr) {
            const int jj = idx / S, i = idx % S;
            out[idx]     = Out(state_after(w, S, n_cols, r, jj, i));
        }
    }
}

// ---- Phase 6: the next chunk-start state, in place (each worker reads and writes its own entries) --
template <typename Real>
FUSEKIT_GDN_HD void advance_state(const Workspace<Real> & w, int S, int L, int n_cols, int tid, int nthr) {
    for (int idx = tid; idx < n_cols * S; idx += nthr) {
        const int jj = idx / S, i = idx % S;
        w.M[idx]     = state_after(w, S, n_cols, L - 1, jj, i);
    }
}

// Barriers between phases: a CTA's __syncthreads on the device, nothing on the CPU (one worker).
struct NoBarrier {
    FUSEKIT_GDN_HD void operator()() const {}
};
struct CtaBarrier {
    FUSEKIT_GDN_HD void operator()() const {
#if defined(__CUDA_ARCH__)
        __syncthreads();
#endif
    }
};

// ---- The whole sequence for one (sequence b, value head h, columns j0 .. j0+n_cols-1) -------------
// `barrier` separates phases: __syncthreads() in a CTA, a no-op on the CPU (nthr = 1). Every phase
// writes only buffers no other worker reads in the same interval.
template <typename Real, typename Out, typename Barrier>
FUSEKIT_GDN_HD void chunked_gdn_slice(const GdnParamsT<Out> & p, const Workspace<Real> & w, int b, int h, int j0, int n_cols,
                                      int C, int sabotage, int tid, int nthr, Barrier barrier) {
    const int S = p.S;
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * S * S + int64_t(j0) * S;
    for (int idx = tid; idx < n_cols * S; idx += nthr) {
        w.M[idx] = Real(s_in[idx]);
    }
    for (int t0 = 0; t0 < p.T; t0 += C) {
        const int L = p.T - t0 < C ? p.T - t0 : C;
        stage_chunk(p, w, b, h, t0, L, tid, nthr);
        chunk_log_decay(p, w, b, h, t0, L, tid);
        barrier();
        build_intra_chunk_system(w, S, C, L, sabotage, tid, nthr);
        barrier();
        invert_unit_lower(w, C, L, tid, nthr);
        build_rhs(p, w, b, h, t0, L, j0, n_cols, C, sabotage, tid, nthr);
        barrier();
        build_decayed_qk(w, S, C, L, tid, nthr);
        solve_pseudo_values(w, C, L, n_cols, tid, nthr);
        barrier();
        write_outputs(p, w, b, h, t0, L, j0, n_cols, C, tid, nthr);
        write_snapshots(p, w, b, h, t0, L, j0, n_cols, tid, nthr);
        barrier();
        advance_state(w, S, L, n_cols, tid, nthr);
        barrier();
    }
}

}  // namespace fusekit_gdn
