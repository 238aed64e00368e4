// fusion-4 step 2a: the chunked gated delta rule in two passes, the chunk products on tensor cores (TF32 wmma).
//
// Step 1 (fusekit-chunked-gdn.cuh) runs every chunk of a (sequence, head, value-column slice) in one CTA, one after
// another, with scalar FMAs. Most of a chunk's work does not depend on the state, so this step splits it:
//
//   prep pass   one CTA per (chunk, value head, sequence), all chunks at once. From k, q, v, g, beta of the chunk
//               alone it writes a ChunkRecord: the UT transform's products W = P diag(beta e^G f) K and
//               U0 = P diag(beta f) V (P = (I + A)^-1), the decayed causal Q K^T (QKm), e^G Q (Qe), the keys decayed
//               to the chunk's end (Kend), e^G and G.
//   state pass  one CTA per (value-column slice, value head, sequence), chunk after chunk, the state slice in shared
//               memory: U = U0 - W S0, o = scale (Qe S0 + QKm U), S0 <- e^{G_last} S0 + Kend^T U.
//
// The algebra is step 1's (see the comments there): R = diag(beta f)(V - diag(e^G) K S0), U = P R. f is 1, or under
// the sabotage switch 1 / (1 + beta |k|^2) (the causal mask taking the diagonal, as in step 1). Rows of a short last
// chunk are zero in every record matrix, so the passes run full 64-row tiles and write only real tokens.
//
// Shapes: S = 128 key and value channels, chunks of 64 tokens (the 35B preset); other S stay on the serial kernel.
// The host functions below (prep_chunk_host, state_pass_host) are the specification in plain loops: the host check
// runs them against the float64 serial recurrence; the device kernels compute the same records with wmma.
#pragma once

#include "fusekit-chunked-gdn.cuh"

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_pipeline.h>
#include <mma.h>
#endif

namespace fusekit_gdn_tc {

using fusekit_gdn::GdnParams;

constexpr int kC = 64;   // tokens per chunk
constexpr int kS = 128;  // key = value channels

// One chunk's record in the workspace, offsets in floats. G is float64 (see step 1's Workspace: a float G loses
// exp(g) between neighbours once |G| is large); its offset is even, so it is 8-byte aligned.
struct Record {
    static constexpr int64_t W      = 0;                    // [kC][kS]  P diag(beta e^G f) K
    static constexpr int64_t U0     = W + kC * kS;          // [kC][kS]  P diag(beta f) V
    static constexpr int64_t Qe     = U0 + kC * kS;         // [kC][kS]  e^{G_r} q_r
    static constexpr int64_t Kend   = Qe + kC * kS;         // [kC][kS]  e^{G_last - G_s} k_s
    static constexpr int64_t QKm    = Kend + kC * kS;       // [kC][kC]  e^{G_r - G_s} q_r.k_s, s <= r
    static constexpr int64_t eG     = QKm + kC * kC;        // [kC]      e^{G_r}
    static constexpr int64_t G      = eG + kC;              // [kC]      G_r as double (2 floats each)
    static constexpr int64_t floats = G + 2 * kC;           // a multiple of 8: every record stays 32-byte aligned
};

inline int64_t chunk_count(int T) {
    return (T + kC - 1) / kC;
}

// The record of chunk c of value head h, sequence b.
template <typename Out> FUSEKIT_GDN_HD inline int64_t record_index(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int c) {
    return (int64_t(b) * p.H_v + h) * ((p.T + kC - 1) / kC) + c;
}

inline int64_t workspace_floats(const GdnParams & p) {
    return int64_t(p.B) * p.H_v * chunk_count(p.T) * Record::floats;
}

// An element of the op's inputs (q, k, v, g, beta), which no kernel here writes. On the device it is an explicit
// global load (ld.global.ca): one the compiler may batch ahead of the shared-memory stores it feeds, where a generic
// load must wait for each (the prep pass's staging loops, session 16's SASS stall samples). Not __ldg: non-coherent
// loads are not ordered by programmatic dependent launch (tests/test_no_noncoherent_loads.py).
FUSEKIT_GDN_HD inline float read_input(const float * x) {
#ifdef __CUDA_ARCH__
    return __ldca(x);
#else
    return *x;
#endif
}

// Key, query and value row t of value head h (tiled key heads), sequence b (q/k broadcast over sequences), and their
// element i.
template <typename Out> FUSEKIT_GDN_HD inline const float * key_row(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t) {
    return p.k + int64_t(b / p.rq3) * p.k_s3 + int64_t(h % p.H_k) * p.k_s1 + int64_t(t) * p.k_s2;
}
template <typename Out> FUSEKIT_GDN_HD inline const float * query_row(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t) {
    return p.q + int64_t(b / p.rq3) * p.q_s3 + int64_t(h % p.H_k) * p.q_s1 + int64_t(t) * p.q_s2;
}
template <typename Out> FUSEKIT_GDN_HD inline const float * value_row(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t) {
    return p.v + int64_t(b) * p.v_s3 + int64_t(h) * p.v_s1 + int64_t(t) * p.v_s2;
}
template <typename Out> FUSEKIT_GDN_HD inline float key_at(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t, int i) {
    return read_input(key_row(p, b, h, t) + i);
}
template <typename Out> FUSEKIT_GDN_HD inline float query_at(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t, int i) {
    return read_input(query_row(p, b, h, t) + i);
}
template <typename Out> FUSEKIT_GDN_HD inline float value_at(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t, int j) {
    return read_input(value_row(p, b, h, t) + j);
}
template <typename Out> FUSEKIT_GDN_HD inline int64_t gate_index(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t) {
    return (int64_t(b) * p.T + t) * p.H_v + h;  // g and beta: [1, H_v, T, B] contiguous
}

// ---- The specification, plain loops (host) -----------------------------------------------------------------------
// Records of Real elements at the Record offsets (the device's are float, G as double in two floats; the host check
// also runs it in double, to see the algebra to 1e-12).

template <typename Real> inline double & record_G(Real * rec, int r) {
    if constexpr (sizeof(Real) == sizeof(double)) {
        return reinterpret_cast<double *>(rec)[Record::G + r];
    } else {
        return reinterpret_cast<double *>(rec + Record::G)[r];
    }
}

// The prep pass for chunk c of (b, h), in Real arithmetic, written into rec (Record::floats elements).
template <typename Real, typename Out>
void prep_chunk_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int c, int sabotage, Real * rec) {
    const int t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    double    G[kC];
    double    acc = 0;
    for (int r = 0; r < kC; ++r) {
        acc += r < L ? double(p.g[gate_index(p, b, h, t0 + r)]) : 0.0;
        G[r] = acc;
    }
    Real k[kC][kS], q[kC][kS], beta[kC], f[kC];
    for (int r = 0; r < kC; ++r) {
        Real kk = 0;
        for (int i = 0; i < kS; ++i) {
            k[r][i] = r < L ? Real(key_at(p, b, h, t0 + r, i)) : Real(0);
            q[r][i] = r < L ? Real(query_at(p, b, h, t0 + r, i)) : Real(0);
            kk += k[r][i] * k[r][i];
        }
        beta[r] = r < L ? Real(p.beta[gate_index(p, b, h, t0 + r)]) : Real(0);
        f[r]    = sabotage == fusekit_gdn::kSabotageMaskDiagonal ? Real(1) / (Real(1) + beta[r] * kk) : Real(1);
    }
    static thread_local Real A[kC][kC], P[kC][kC];
    for (int s = 0; s < kC; ++s) {
        for (int m = 0; m < kC; ++m) {
            Real dot = 0;
            for (int i = 0; i < kS; ++i) {
                dot += k[s][i] * k[m][i];
            }
            A[s][m] = m < s && s < L ? beta[s] * Real(std::exp(G[s] - G[m])) * dot : Real(0);
        }
    }
    for (int col = 0; col < kC; ++col) {  // forward substitution, unit lower
        for (int r = 0; r < kC; ++r) {
            if (r <= col) {
                P[r][col] = r == col ? Real(1) : Real(0);
                continue;
            }
            Real s = 0;
            for (int m = col; m < r; ++m) {
                s += A[r][m] * P[m][col];
            }
            P[r][col] = -s;
        }
    }
    for (int r = 0; r < kC; ++r) {
        record_G(rec, r)     = G[r];
        const bool real_row  = r < L;
        rec[Record::eG + r]  = real_row ? Real(std::exp(G[r])) : Real(0);
        const Real to_end    = real_row ? Real(std::exp(G[L - 1] - G[r])) : Real(0);
        for (int i = 0; i < kS; ++i) {
            Real w = 0, u = 0;
            for (int m = 0; m <= r; ++m) {
                const Real pm = P[r][m];
                w += pm * beta[m] * Real(std::exp(G[m])) * f[m] * k[m][i];
                u += pm * beta[m] * f[m] * (m < L ? Real(value_at(p, b, h, t0 + m, i)) : Real(0));
            }
            rec[Record::W + r * kS + i]    = w;
            rec[Record::U0 + r * kS + i]   = u;
            rec[Record::Qe + r * kS + i]   = real_row ? Real(std::exp(G[r])) * q[r][i] : Real(0);
            rec[Record::Kend + r * kS + i] = to_end * k[r][i];
        }
        for (int s = 0; s < kC; ++s) {
            Real dot = 0;
            for (int i = 0; i < kS; ++i) {
                dot += q[r][i] * k[s][i];
            }
            rec[Record::QKm + r * kC + s] = s <= r && real_row ? Real(std::exp(G[r] - G[s])) * dot : Real(0);
        }
    }
}

// Pieces of the state passes' specification (step 2a's state_pass_host and step 2b's chain_host), on S0[i][j] and
// U[s][j] of one (sequence, head).
template <typename Real, typename Out> void load_state_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, Real (*S0)[kS]) {
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS;
    for (int i = 0; i < kS; ++i) {
        for (int j = 0; j < kS; ++j) {
            S0[i][j] = Real(s_in[int64_t(j) * kS + i]);  // transposed: state[j*S + i] = S[i][j]
        }
    }
}

// U = U0 - W S0
template <typename Real> void pseudo_values_host(const Real * rec, const Real (*S0)[kS], Real (*U)[kS]) {
    for (int s = 0; s < kC; ++s) {
        for (int j = 0; j < kS; ++j) {
            Real ws = 0;
            for (int i = 0; i < kS; ++i) {
                ws += Real(rec[Record::W + s * kS + i]) * S0[i][j];
            }
            U[s][j] = Real(rec[Record::U0 + s * kS + j]) - ws;
        }
    }
}

// The snapshot slot of token t0 + r, if it is one of the sequence's last K: e^{G_r} S0 + sum_{s<=r} e^{G_r - G_s} k_s u_s^T.
template <typename Real, typename Out>
void snapshot_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t0, int r, const double * G,
                   const Real (*S0)[kS], const Real (*U)[kS]) {
    const int slot = p.T - 1 - (t0 + r);
    if (slot >= p.K) {
        return;
    }
    Out * out = p.state_out + slot * p.state_slot_stride + (int64_t(b) * p.H_v + h) * kS * kS;
    for (int j = 0; j < kS; ++j) {
        for (int i = 0; i < kS; ++i) {
            Real x = Real(std::exp(G[r])) * S0[i][j];
            for (int s = 0; s <= r; ++s) {
                x += Real(std::exp(G[r] - G[s])) * Real(key_at(p, b, h, t0 + s, i)) * U[s][j];
            }
            out[int64_t(j) * kS + i] = Out(x);
        }
    }
}

// The snapshot slot of token t, if it is one of the sequence's last K, from the state S after it.
template <typename Real, typename Out>
void state_snapshot_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t, const Real (*S)[kS]) {
    const int slot = p.T - 1 - t;
    if (slot >= p.K) {
        return;
    }
    Out * out = p.state_out + slot * p.state_slot_stride + (int64_t(b) * p.H_v + h) * kS * kS;
    for (int j = 0; j < kS; ++j) {
        for (int i = 0; i < kS; ++i) {
            out[int64_t(j) * kS + i] = Out(S[i][j]);
        }
    }
}

// The chunk's outputs o_r = scale (Qe S0 + QKm U)[r] of its real tokens into dst.
template <typename Real, typename Out>
void chunk_outputs_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int t0, int L, const Real * rec,
                        const Real (*S0)[kS], const Real (*U)[kS]) {
    for (int r = 0; r < L; ++r) {
        for (int j = 0; j < kS; ++j) {
            Real o = 0;
            for (int i = 0; i < kS; ++i) {
                o += Real(rec[Record::Qe + r * kS + i]) * S0[i][j];
            }
            for (int s = 0; s <= r; ++s) {
                o += Real(rec[Record::QKm + r * kC + s]) * U[s][j];
            }
            p.dst[((int64_t(b) * p.T + t0 + r) * p.H_v + h) * kS + j] = Out(o * Real(p.scale));
        }
    }
}

// S0 <- e^{G_{L-1}} S0 + Kend^T U
template <typename Real> void advance_state_host(const Real * rec, double G_last, Real (*S0)[kS], const Real (*U)[kS]) {
    const Real decay = Real(std::exp(G_last));
    for (int i = 0; i < kS; ++i) {
        for (int j = 0; j < kS; ++j) {
            Real x = decay * S0[i][j];
            for (int s = 0; s < kC; ++s) {
                x += Real(rec[Record::Kend + s * kS + i]) * U[s][j];
            }
            S0[i][j] = x;
        }
    }
}

// The state pass for (b, h), all value columns, from the records of its chunks; writes dst and the snapshots
// (as Out: float as ggml's dst, double in the host check).
template <typename Real, typename Out>
void state_pass_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, Real * records) {
    static thread_local Real S0[kS][kS], U[kC][kS];
    load_state_host(p, b, h, S0);
    for (int c = 0; c < (p.T + kC - 1) / kC; ++c) {
        Real *    rec = records + record_index(p, b, h, c) * Record::floats;
        double    G[kC];
        const int t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        for (int r = 0; r < kC; ++r) {
            G[r] = record_G(rec, r);
        }
        pseudo_values_host(rec, S0, U);
        chunk_outputs_host(p, b, h, t0, L, rec, S0, U);
        for (int r = 0; r < L; ++r) {
            snapshot_host(p, b, h, t0, r, G, S0, U);
        }
        advance_state_host(rec, G[L - 1], S0, U);
    }
}

// ---- Step 2b's split of the state pass (after session 13): a chain, then an output pass -----------------------------
// Step 2a's state pass computes each chunk's output inside its chunk-after-chunk loop, so the output's products (Qe S0,
// QKm U) and their 48 KB of record per chunk sit on the sequential path. Step 2b keeps only the state on it, as fla does:
//   chain   per (column slice, head, sequence), chunk after chunk: writes the chunk-start state S0 of every chunk
//           (states: kS x kS floats per chunk, S0[i][j] row-major) and U = U0 - W S0 over the record's U0, then
//           S0 <- e^{G_last} S0 + Kend^T U, and the snapshot slots.
//   output  per (chunk, head, sequence), all at once: o = scale (Qe S0 + QKm U) from the record and the chunk's state.
inline int64_t states_floats(const GdnParams & p) {
    return int64_t(p.B) * p.H_v * chunk_count(p.T) * kS * kS;
}

template <typename Real, typename Out>
void chain_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, Real * records, Real * states) {
    static thread_local Real S0[kS][kS], U[kC][kS];
    load_state_host(p, b, h, S0);
    for (int c = 0; c < (p.T + kC - 1) / kC; ++c) {
        Real *    rec = records + record_index(p, b, h, c) * Record::floats;
        Real *    st  = states + record_index(p, b, h, c) * kS * kS;
        const int t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        double    G[kC];
        for (int r = 0; r < kC; ++r) {
            G[r] = record_G(rec, r);
        }
        for (int i = 0; i < kS; ++i) {
            for (int j = 0; j < kS; ++j) {
                st[i * kS + j] = S0[i][j];
            }
        }
        pseudo_values_host(rec, S0, U);
        for (int s = 0; s < kC; ++s) {
            for (int j = 0; j < kS; ++j) {
                rec[Record::U0 + s * kS + j] = U[s][j];  // the output pass reads U where U0 was
            }
        }
        for (int r = 0; r + 1 < L; ++r) {
            snapshot_host(p, b, h, t0, r, G, S0, U);
        }
        advance_state_host(rec, G[L - 1], S0, U);
        state_snapshot_host(p, b, h, t0 + L - 1, S0);  // the state after the chunk's last token is the new S0
    }
}

template <typename Real, typename Out>
void output_host(const fusekit_gdn::GdnParamsT<Out> & p, int b, int h, int c, const Real * records, const Real * states) {
    const Real * rec = records + record_index(p, b, h, c) * Record::floats;
    const Real * st  = states + record_index(p, b, h, c) * kS * kS;
    const int    t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    // the chunk's state and U (over U0) are row-major kS-wide matrices
    chunk_outputs_host(p, b, h, t0, L, rec, reinterpret_cast<const Real (*)[kS]>(st),
                       reinterpret_cast<const Real (*)[kS]>(rec + Record::U0));
}

// ---- P = (I + A)^-1 by 16 x 16 blocks (the prep pass's solve since session 13) ----------------------------------
// Step 2a's first prep kernel solved for P one column per thread, a chain of up to 2,016 dependent shared-memory
// FMAs (session 13 on the H200: about 78 us per prep CTA). With L = I + A unit lower and split into 16 x 16 blocks,
// its inverse P satisfies sum_k L_ik P_kj = delta_ij, so
//   P_ii = L_ii^-1                                  (forward substitution inside the block: 15 steps at most)
//   P_ij = -P_ii X_ij,  X_ij = sum_{k=j..i-1} A_ik P_kj   (i > j, by distance d = i - j = 1, 2, 3 in turn:
//                                                          every P_kj it reads is nearer the diagonal)
// and every element of a phase is a dot product of at most 48 terms that no other element of the phase needs.
// Phases are separated by `barrier` (__syncthreads in a CTA; the host check also runs 256 turn-taking workers).
// A, P, X: kC x kC row-major with rows ld floats apart (ld >= kC: the device pads them); A strictly lower (read only),
// X scratch. sabotage (the host check's only) drops the last term of every X_ij, so every block below the diagonal
// band comes out wrong.
constexpr int kBlock  = 16;
constexpr int kBlocks = kC / kBlock;

template <typename Real, typename Barrier>
FUSEKIT_GDN_HD void invert_unit_lower_blocked(const Real * A, Real * P, Real * X, int tid, int nthr, Barrier barrier,
                                              int sabotage = 0, int ld = kC) {
    // the diagonal blocks, one column per worker item, solved in registers: once x_m is final, every later row takes
    // its term (session 19; before, each row's dot product read the column back from P, a chain of up to 120 FMAs
    // behind shared-memory loads). Row r still sums its terms from m = col up, negated as it goes: the same roundings
    // as -(sum A_rm x_m). The blocks above the diagonal are zero.
    for (int item = tid; item < kBlocks * kBlock; item += nthr) {
        const int b0 = (item / kBlock) * kBlock, col = item % kBlock;
        Real      x[kBlock];
#pragma unroll
        for (int r = 0; r < kBlock; ++r) {
            x[r] = r == col ? Real(1) : Real(0);
        }
#pragma unroll
        for (int m = 0; m < kBlock - 1; ++m) {
            if (m >= col) {
#pragma unroll
                for (int r = m + 1; r < kBlock; ++r) {
                    x[r] -= A[(b0 + r) * ld + b0 + m] * x[m];
                }
            }
        }
#pragma unroll
        for (int r = 0; r < kBlock; ++r) {
            P[(b0 + r) * ld + b0 + col] = x[r];
        }
    }
    for (int idx = tid; idx < kC * kC; idx += nthr) {
        const int r = idx / kC, c = idx % kC;
        if (r / kBlock != c / kBlock) {
            P[r * ld + c] = Real(0);  // above the diagonal: stays 0; below: written by its distance's phase
        }
    }
    barrier();
    for (int d = 1; d < kBlocks; ++d) {
        // X_ij for every block pair at distance d (i = j + d)
        for (int idx = tid; idx < (kBlocks - d) * kBlock * kBlock; idx += nthr) {
            const int j = idx / (kBlock * kBlock), i = j + d;
            const int r = i * kBlock + (idx / kBlock) % kBlock, c = j * kBlock + idx % kBlock;
            const int m_end = i * kBlock - (sabotage ? 1 : 0);
            Real      acc   = 0;
            for (int m = j * kBlock; m < m_end; ++m) {  // the columns of blocks j .. i-1 of row r
                acc += A[r * ld + m] * P[m * ld + c];
            }
            X[r * ld + c] = acc;
        }
        barrier();
        // P_ij = -P_ii X_ij (P_ii unit lower)
        for (int idx = tid; idx < (kBlocks - d) * kBlock * kBlock; idx += nthr) {
            const int j = idx / (kBlock * kBlock), i = j + d;
            const int r = i * kBlock + (idx / kBlock) % kBlock, c = j * kBlock + idx % kBlock;
            Real      acc = X[r * ld + c];
            for (int m = i * kBlock; m < r; ++m) {
                acc += P[r * ld + m] * X[m * ld + c];
            }
            P[r * ld + c] = -acc;
        }
        barrier();
    }
}

// Rows of the device passes' shared matrices: Pad floats longer than their width. Without padding (kPadNone) the rows
// of a wmma fragment lie 64 or 128 floats apart, all on the same few of the 32 banks (up to 8-way conflicts on every
// fragment load); with kPadBanks each row starts 4 banks after the last. Every padded address stays 32-byte aligned
// (wmma's requirement): 16 rows of 132, 68 or 36 floats are multiples of 8 floats.
constexpr int kPadNone  = 0;
constexpr int kPadBanks = 4;
template <int Pad> struct Rows {
    static constexpr int S = kS + Pad;  // rows of kS floats: keys, queries, W, Kend, states, U
    static constexpr int C = kC + Pad;  // rows of kC floats: A, P
};

// ---- The device passes (TF32 wmma m16n16k8, fp32 accumulation) ---------------------------------------------------
#if defined(__CUDACC__)

constexpr int kPrepThreads  = 256;  // 8 warps
constexpr int kStageBatch   = 8;    // input rows per thread loaded before any is stored (prep pass staging)
constexpr int kStateThreads = 256;

namespace wmma = nvcuda::wmma;
using FragA    = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragAt   = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragB    = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBt   = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragAcc  = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

__device__ inline float tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return wmma::__float_to_tf32(x);
#else
    return x;
#endif
}

template <typename Frag> __device__ inline void to_tf32(Frag & f) {
    for (int e = 0; e < f.num_elements; ++e) {
        f.x[e] = tf32(f.x[e]);
    }
}

// out (M x N tile grid of 16 x 16, row-major, ld ldo) = a (M x K, layout of FA) * b (K x N, layout of FB),
// the tiles dealt to the CTA's warps in turn. a_at(tm, kk) / b_at(kk, tn): pointers of the 16 x 8 / 8 x 16 blocks.
// RoundA false: a is stored in TF32 already (the prep pass's W), so its fragments skip the conversion (the same
// values: rounding to TF32 is idempotent).
template <typename FA, typename FB, bool RoundA = true, typename APtr, typename BPtr, typename Store>
__device__ inline void tile_products(int tiles_m, int tiles_n, int k_steps, APtr a_at, int lda, BPtr b_at, int ldb,
                                     Store store) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32;
    for (int tile = warp; tile < tiles_m * tiles_n; tile += warps) {
        const int tm = tile / tiles_n, tn = tile % tiles_n;
        FragAcc   acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < k_steps; ++kk) {
            FA a;
            FB bf;
            wmma::load_matrix_sync(a, a_at(tm, kk), lda);
            wmma::load_matrix_sync(bf, b_at(kk, tn), ldb);
            if constexpr (RoundA) {
                to_tf32(a);
            }
            to_tf32(bf);
            wmma::mma_sync(acc, a, bf, acc);
        }
        store(tm, tn, acc);
    }
#endif
}

// Shared memory of the prep pass: keys, queries (later the inverse's scratch, the scaled keys, then the scaled
// values), A and P. Q K^T goes straight into the record, where the decay pass scales it in place.
template <int Pad> struct PrepShared {
    float  k[kC * Rows<Pad>::S];
    float  qb[kC * Rows<Pad>::S];
    float  a[kC * Rows<Pad>::C];
    float  pinv[kC * Rows<Pad>::C];
    double G[kC];
    float  beta[kC];
    float  row_q[kC];     // step 3d: e^{G_r} (the queries' decay), computed once per row
    float  row_kend[kC];  // step 3d: e^{G_last - G_r} (the keys decayed to the chunk's end)
};
// 99,584 bytes unpadded, 103,680 padded: two CTAs fit on an sm_90 SM (2 x (size + 1,024 reserved) <= 233,472). g is
// staged in pinv's first row before the solve writes it; the sabotage factor f is recomputed where it is used.
static_assert(sizeof(PrepShared<kPadBanks>) <= 115456, "the prep pass must keep two CTAs per SM on sm_90");

// f of the sabotage switch: 1 / (1 + beta_r |k_r|^2) (the causal mask taking the diagonal, as in step 1), else 1.
template <int Pad> __device__ inline float sabotage_factor(const PrepShared<Pad> & sh, int r, int sabotage) {
    if (sabotage != fusekit_gdn::kSabotageMaskDiagonal) {
        return 1.0f;
    }
    float kk = 0.0f;
    for (int i = 0; i < kS; ++i) {
        kk += sh.k[r * Rows<Pad>::S + i] * sh.k[r * Rows<Pad>::S + i];
    }
    return 1.0f / (1.0f + sh.beta[r] * kk);
}

// The prep passes' first step: keys and queries staged (rows past the chunk's end are zero), g (in pinv's first row,
// until the solve writes P) and beta; kStageBatch rows of each per thread loaded before any is stored, so that their
// loads are in flight together.
template <int Pad>
__device__ inline void stage_prep_inputs(const GdnParams & p, PrepShared<Pad> & sh, int b, int h, int t0, int L) {
    constexpr int LS = Rows<Pad>::S;
    const int     tid = int(threadIdx.x), nthr = int(blockDim.x);
    const float * k0 = key_row(p, b, h, t0);  // row r of the chunk: k0 + r * p.k_s2
    const float * q0 = query_row(p, b, h, t0);
    for (int idx0 = tid; idx0 < kC * kS; idx0 += kStageBatch * nthr) {
        float kv[kStageBatch], qv[kStageBatch];
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
            const int  idx = idx0 + u * nthr, r = idx / kS, i = idx % kS;
            const bool real = idx < kC * kS && r < L;
            kv[u] = real ? read_input(k0 + r * p.k_s2 + i) : 0.0f;
            qv[u] = real ? read_input(q0 + r * p.q_s2 + i) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
            const int idx = idx0 + u * nthr, r = idx / kS, i = idx % kS;
            if (idx < kC * kS) {
                sh.k[r * LS + i]  = kv[u];
                sh.qb[r * LS + i] = qv[u];
            }
        }
    }
    for (int r = tid; r < kC; r += nthr) {  // every thread its own gate loads (one thread's 64 in a row took ~13 us)
        sh.pinv[r] = r < L ? read_input(&p.g[gate_index(p, b, h, t0 + r)]) : 0.0f;
        sh.beta[r] = r < L ? read_input(&p.beta[gate_index(p, b, h, t0 + r)]) : 0.0f;
    }
}

// G = the inclusive prefix sum of g (staged in pinv's first row) in float64, two tokens per lane; warp 0 only.
template <int Pad> __device__ inline void scan_gates(PrepShared<Pad> & sh, int lane) {
    const double first = double(sh.pinv[2 * lane]), pair = first + double(sh.pinv[2 * lane + 1]);
    double       scan  = pair;
    for (int offset = 1; offset < 32; offset *= 2) {
        const double below = __shfl_up_sync(0xffffffffu, scan, offset);
        scan += lane >= offset ? below : 0.0;
    }
    sh.G[2 * lane]     = scan - pair + first;
    sh.G[2 * lane + 1] = scan;
}

// The values scaled by beta f into qb (the U0 product's B operand), batched as the keys in stage_prep_inputs;
// RoundTf32: stored rounded to TF32, the form in which that product reads them (step 3i).
template <int Pad, bool RoundTf32 = false>
__device__ inline void stage_scaled_values(const GdnParams & p, PrepShared<Pad> & sh, int b, int h, int t0, int L,
                                           int sabotage) {
    constexpr int LS = Rows<Pad>::S;
    const float * v0 = value_row(p, b, h, t0);
    const int     tid = int(threadIdx.x), nthr = int(blockDim.x);
    for (int idx0 = tid; idx0 < kC * kS; idx0 += kStageBatch * nthr) {
        float vv[kStageBatch];
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
            const int idx = idx0 + u * nthr, r = idx / kS, j = idx % kS;
            vv[u]         = idx < kC * kS && r < L ? read_input(v0 + r * p.v_s2 + j) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kStageBatch; ++u) {
            const int idx = idx0 + u * nthr, r = idx / kS, j = idx % kS;
            if (idx < kC * kS) {
                const float x     = r < L ? sh.beta[r] * sabotage_factor(sh, r, sabotage) * vv[u] : 0.0f;
                sh.qb[r * LS + j] = RoundTf32 ? tf32(x) : x;
            }
        }
    }
}

template <int Pad>
__global__ void __launch_bounds__(kPrepThreads) chunked_gdn_tc_prep(GdnParams p, float * records, int sabotage) {
    constexpr int LS = Rows<Pad>::S, LC = Rows<Pad>::C;
    extern __shared__ __align__(128) unsigned char shared_prep[];
    PrepShared<Pad> & sh = *reinterpret_cast<PrepShared<Pad> *>(shared_prep);
    const int         c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
    const int         tid = int(threadIdx.x), nthr = int(blockDim.x);
    const int         t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    float *           rec = records + record_index(p, b, h, c) * Record::floats;

    stage_prep_inputs(p, sh, b, h, t0, L);
    __syncthreads();
    if (tid < 32) {  // read after the products
        scan_gates(sh, tid);
    }

    // A_raw = K K^T into shared memory, QK_raw = Q K^T into the record (K^T: the key rows read as a column-major matrix)
    tile_products<FragA, FragBt>(
        4, 4, kS / 8, [&](int tm, int kk) { return sh.k + tm * 16 * LS + kk * 8; }, LS,
        [&](int kk, int tn) { return sh.k + tn * 16 * LS + kk * 8; }, LS,
        [&](int tm, int tn, FragAcc & acc) { wmma::store_matrix_sync(sh.a + tm * 16 * LC + tn * 16, acc, LC, wmma::mem_row_major); });
    tile_products<FragA, FragBt>(
        4, 4, kS / 8, [&](int tm, int kk) { return sh.qb + tm * 16 * LS + kk * 8; }, LS,
        [&](int kk, int tn) { return sh.k + tn * 16 * LS + kk * 8; }, LS,
        [&](int tm, int tn, FragAcc & acc) { wmma::store_matrix_sync(rec + Record::QKm + tm * 16 * kC + tn * 16, acc, kC, wmma::mem_row_major); });
    __syncthreads();  // the CTA's global writes (QK_raw) are visible to all its threads after the barrier

    // masks and decays; the record's QKm (in place), Qe, Kend, eG, G
    for (int r = tid; r < kC; r += nthr) {
        reinterpret_cast<double *>(rec + Record::G)[r] = sh.G[r];
        rec[Record::eG + r] = r < L ? float(exp(sh.G[r])) : 0.0f;
    }
    // QKm in place, four elements per thread at a time: a generic store may alias the next generic load, so without
    // the batch each element's L2 round trip would wait for the one before
    for (int idx0 = tid; idx0 < kC * kC; idx0 += 4 * nthr) {
        float raw[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            raw[u] = idx0 + u * nthr < kC * kC ? rec[Record::QKm + idx0 + u * nthr] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int   idx = idx0 + u * nthr, r = idx / kC, s = idx % kC;
            const float decay = s <= r && r < L ? expf(float(sh.G[r] - sh.G[s])) : 0.0f;
            if (idx < kC * kC) {
                rec[Record::QKm + idx] = decay * raw[u];
            }
        }
    }
    for (int idx = tid; idx < kC * kS; idx += nthr) {
        const int  r = idx / kS, i = idx % kS;
        const bool real_row = r < L;
        rec[Record::Qe + idx]   = real_row ? expf(float(sh.G[r])) * sh.qb[r * LS + i] : 0.0f;
        // Kend and W (below) are only ever A operands of TF32 products: stored rounded, so that the state passes
        // load them without converting every fragment (step 3b; the products' values are unchanged)
        rec[Record::Kend + idx] = real_row ? tf32(expf(float(sh.G[L - 1] - sh.G[r])) * sh.k[r * LS + i]) : 0.0f;
    }
    for (int idx = tid; idx < kC * kC; idx += nthr) {
        const int s = idx / kC, m = idx % kC;
        sh.a[s * LC + m] = m < s && s < L ? sh.beta[s] * expf(float(sh.G[s] - sh.G[m])) * sh.a[s * LC + m] : 0.0f;
    }
    __syncthreads();  // the queries are read (qb is free: the solve's scratch) and A is masked

    // P = (I + A)^-1 by 16 x 16 blocks, then the keys scaled into qb
    invert_unit_lower_blocked(sh.a, sh.pinv, sh.qb, tid, nthr, fusekit_gdn::CtaBarrier{}, 0, LC);
    for (int idx = tid; idx < kC * kS; idx += nthr) {
        const int r = idx / kS, i = idx % kS;
        sh.qb[r * LS + i] = r < L ? sh.beta[r] * expf(float(sh.G[r])) * sabotage_factor(sh, r, sabotage) * sh.k[r * LS + i] : 0.0f;
    }
    __syncthreads();

    // W = P (diag(beta e^G f) K)
    tile_products<FragA, FragB>(
        4, kS / 16, kC / 8, [&](int tm, int kk) { return sh.pinv + tm * 16 * LC + kk * 8; }, LC,
        [&](int kk, int tn) { return sh.qb + kk * 8 * LS + tn * 16; }, LS,
        [&](int tm, int tn, FragAcc & acc) {
            to_tf32(acc);
            wmma::store_matrix_sync(rec + Record::W + tm * 16 * kS + tn * 16, acc, kS, wmma::mem_row_major);
        });
    __syncthreads();
    stage_scaled_values(p, sh, b, h, t0, L, sabotage);
    __syncthreads();
    // U0 = P (diag(beta f) V)
    tile_products<FragA, FragB>(
        4, kS / 16, kC / 8, [&](int tm, int kk) { return sh.pinv + tm * 16 * LC + kk * 8; }, LC,
        [&](int kk, int tn) { return sh.qb + kk * 8 * LS + tn * 16; }, LS,
        [&](int tm, int tn, FragAcc & acc) { wmma::store_matrix_sync(rec + Record::U0 + tm * 16 * kS + tn * 16, acc, kS, wmma::mem_row_major); });
}

// ---- Step 3d: the prep pass's products on mma.sync, operands read from shared memory with plain loads -------------
// wmma::load_matrix_sync takes a generic pointer: every fragment load of chunked_gdn_tc_prep is a generic LD.E with
// 64-bit address arithmetic (session 17's SASS: 55% of its instructions address arithmetic, 3.4% HMMA). Here each
// lane loads its own elements of the PTX m16n8k8 TF32 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32:
// lane = 4 group + t; A (16 x 8, row) holds (group, t), (group + 8, t), (group, t + 4), (group + 8, t + 4); B (8 x 8,
// col) holds (t, group), (t + 4, group); C holds (group, 2t), (group, 2t + 1), (group + 8, 2t), (group + 8, 2t + 1)),
// at offsets the compiler folds into immediates, from pointers it keeps in the shared window (LDS).

// d += a b for one m16n8k8 block; a and b hold TF32 bit patterns
__device__ inline void mma_16x8x8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// acc (a 16 x 16 tile as two m16n8 C fragments) += a b over K = 8 KSteps, a(r, k) = at[r ARow + k ACol] and
// b(k, n) = bt[k BRow + n BCol] in shared memory, at and bt already offset to the lane's first element (row group of
// a, column group of b, k = t). RoundA / RoundB false: that operand is stored in TF32 already (rounding is
// idempotent: the same values). Every element's sum runs over k in 8-wide blocks in order, as wmma's m16n16k8 does.
template <int KSteps, int ARow, int ACol, int BRow, int BCol, bool RoundA = true, bool RoundB = true>
__device__ inline void mma_tile_16x16(const float * at, const float * bt, float (&acc)[2][4]) {
    auto bits = [](float x, bool round) { return __float_as_uint(round ? tf32(x) : x); };
#pragma unroll
    for (int kk = 0; kk < KSteps; ++kk) {
        const uint32_t af[4] = {bits(at[kk * 8 * ACol], RoundA), bits(at[8 * ARow + kk * 8 * ACol], RoundA),
                                bits(at[(kk * 8 + 4) * ACol], RoundA), bits(at[8 * ARow + (kk * 8 + 4) * ACol], RoundA)};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const uint32_t bf[2] = {bits(bt[kk * 8 * BRow + half * 8 * BCol], RoundB),
                                    bits(bt[(kk * 8 + 4) * BRow + half * 8 * BCol], RoundB)};
            mma_16x8x8_tf32(acc[half], af, bf);
        }
    }
}

// out = a b over a TilesM x TilesN grid of 16 x 16 tiles and K = 8 KSteps, a(r, k) = a[r ARow + k ACol] and
// b(k, n) = b[k BRow + n BCol] in shared memory, the tiles dealt to the CTA's warps in turn (as tile_products).
// store(r, c, x0, x1) takes the elements (r, c) and (r, c + 1) of the product, c even. RoundA / RoundB: as
// mma_tile_16x16's.
template <int TilesM, int TilesN, int KSteps, int ARow, int ACol, int BRow, int BCol, bool RoundA = true,
          bool RoundB = true, typename Store>
__device__ inline void shared_tile_products(const float * a, const float * b, Store store) {
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32;
    const int group = lane / 4, t = lane % 4;
    for (int tile = warp; tile < TilesM * TilesN; tile += warps) {
        const int tm = tile / TilesN, tn = tile % TilesN;
        float     acc[2][4] = {};
        mma_tile_16x16<KSteps, ARow, ACol, BRow, BCol, RoundA, RoundB>(a + (tm * 16 + group) * ARow + t * ACol,
                                                                       b + t * BRow + (tn * 16 + group) * BCol, acc);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = tm * 16 + group, col = tn * 16 + half * 8 + 2 * t;
            store(r, col, acc[half][0], acc[half][1]);
            store(r + 8, col, acc[half][2], acc[half][3]);
        }
    }
}

// Step 3d's prep pass: the record of chunked_gdn_tc_prep, value for value (the same expressions in the same order),
// with the products of shared_tile_products, the causal masks and decays applied where K K^T and Q K^T are stored
// (no second pass over A and no read-back of QKm from the record), and e^{G_r}, e^{G_last - G_r} computed once per row.
// RoundOnce (step 3i): what is only ever a TF32 product's operand stored rounded to TF32, the form in which the
// products read it, and read as stored: the record's Qe and QKm (chunked_gdn_tc_output<..., RoundedA = true> then
// skips its rounding), and this pass's P (after the inversion, which needs it in fp32) and scaled keys and values (the
// W and U0 products' operands). The same products.
template <int Pad, bool RoundOnce = false>
__global__ void __launch_bounds__(kPrepThreads) chunked_gdn_tc_prep_mma(GdnParams p, float * records, int sabotage) {
    constexpr int LS = Rows<Pad>::S, LC = Rows<Pad>::C;
    extern __shared__ __align__(128) unsigned char shared_prep[];
    PrepShared<Pad> & sh = *reinterpret_cast<PrepShared<Pad> *>(shared_prep);
    const int         c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
    const int         tid = int(threadIdx.x), nthr = int(blockDim.x);
    const int         t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    float *           rec = records + record_index(p, b, h, c) * Record::floats;

    stage_prep_inputs(p, sh, b, h, t0, L);
    __syncthreads();
    if (tid < 32) {
        scan_gates(sh, tid);
        __syncwarp();
        for (int r = tid; r < kC; r += 32) {
            sh.row_q[r]    = expf(float(sh.G[r]));
            sh.row_kend[r] = expf(float(sh.G[L - 1] - sh.G[r]));
        }
    }
    __syncthreads();  // G and the row factors, read where the products are stored

    // A = beta_s e^{G_s - G_m} (K K^T)_sm for m < s < L, else 0, into shared memory
    shared_tile_products<4, 4, kS / 8, LS, 1, 1, LS>(sh.k, sh.k, [&](int s, int m, float x0, float x1) {
        const float a0 = m < s && s < L ? sh.beta[s] * expf(float(sh.G[s] - sh.G[m])) * x0 : 0.0f;
        const float a1 = m + 1 < s && s < L ? sh.beta[s] * expf(float(sh.G[s] - sh.G[m + 1])) * x1 : 0.0f;
        *reinterpret_cast<float2 *>(&sh.a[s * LC + m]) = make_float2(a0, a1);
    });
    // QKm = e^{G_r - G_s} (Q K^T)_rs for s <= r < L, else 0, into the record
    shared_tile_products<4, 4, kS / 8, LS, 1, 1, LS>(sh.qb, sh.k, [&](int r, int s, float x0, float x1) {
        const float d0 = s <= r && r < L ? expf(float(sh.G[r] - sh.G[s])) : 0.0f;
        const float d1 = s + 1 <= r && r < L ? expf(float(sh.G[r] - sh.G[s + 1])) : 0.0f;
        const float2 qkm = RoundOnce ? make_float2(tf32(d0 * x0), tf32(d1 * x1)) : make_float2(d0 * x0, d1 * x1);
        *reinterpret_cast<float2 *>(rec + Record::QKm + r * kC + s) = qkm;
    });
    for (int r = tid; r < kC; r += nthr) {
        reinterpret_cast<double *>(rec + Record::G)[r] = sh.G[r];
        rec[Record::eG + r] = r < L ? float(exp(sh.G[r])) : 0.0f;
    }
    for (int idx = tid; idx < kC * kS; idx += nthr) {
        const int   r = idx / kS, i = idx % kS;
        const bool  real_row = r < L;
        const float qe       = real_row ? sh.row_q[r] * sh.qb[r * LS + i] : 0.0f;
        rec[Record::Qe + idx]   = RoundOnce ? tf32(qe) : qe;
        rec[Record::Kend + idx] = real_row ? tf32(sh.row_kend[r] * sh.k[r * LS + i]) : 0.0f;  // rounded, as step 3b
    }
    __syncthreads();  // the queries are read (qb is free: the solve's scratch) and A is stored

    // P = (I + A)^-1 by 16 x 16 blocks, then the keys scaled into qb
    invert_unit_lower_blocked(sh.a, sh.pinv, sh.qb, tid, nthr, fusekit_gdn::CtaBarrier{}, 0, LC);
    for (int idx = tid; idx < kC * kS; idx += nthr) {
        const int   r = idx / kS, i = idx % kS;
        const float x = r < L ? sh.beta[r] * sh.row_q[r] * sabotage_factor(sh, r, sabotage) * sh.k[r * LS + i] : 0.0f;
        sh.qb[r * LS + i] = RoundOnce ? tf32(x) : x;
    }
    if constexpr (RoundOnce) {  // P is final (the inversion ends at a barrier) and from here on only an A operand
        for (int idx = tid; idx < kC * kC; idx += nthr) {
            sh.pinv[(idx / kC) * LC + idx % kC] = tf32(sh.pinv[(idx / kC) * LC + idx % kC]);
        }
    }
    __syncthreads();

    // W = P (diag(beta e^G f) K), stored in TF32 (as step 3b)
    shared_tile_products<4, kS / 16, kC / 8, LC, 1, LS, 1, !RoundOnce, !RoundOnce>(
        sh.pinv, sh.qb, [&](int r, int col, float x0, float x1) {
            *reinterpret_cast<float2 *>(rec + Record::W + r * kS + col) = make_float2(tf32(x0), tf32(x1));
        });
    __syncthreads();
    stage_scaled_values<Pad, RoundOnce>(p, sh, b, h, t0, L, sabotage);
    __syncthreads();
    // U0 = P (diag(beta f) V)
    shared_tile_products<4, kS / 16, kC / 8, LC, 1, LS, 1, !RoundOnce, !RoundOnce>(
        sh.pinv, sh.qb, [&](int r, int col, float x0, float x1) {
            *reinterpret_cast<float2 *>(rec + Record::U0 + r * kS + col) = make_float2(x0, x1);
        });
}

// Pieces both state kernels share (step 2a's state pass and step 2b's chain), for a slice of N value columns.
template <int N> __host__ __device__ constexpr int state_tiles_per_warp() {
    return ((kS / 16) * (N / 16) + 7) / 8;
}

// The new state's tiles e^{G_last} S0 + Kend^T U into next (the warp's tiles, dealt in turn); kend: the chunk's Kend
// rows (ld_kend floats apart), in the record or staged; s0 [kS][N] and u [kC][N] in shared memory, rows ld apart.
template <int N>
__device__ inline void next_state_tiles(const float * kend, int ld_kend, const float * s0, const float * u, int ld,
                                        float decay, FragAcc * next) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32;
    for (int n = 0, tile = warp; tile < (kS / 16) * (N / 16); tile += warps, ++n) {
        const int tm = tile / (N / 16), tn = tile % (N / 16);
        wmma::load_matrix_sync(next[n], s0 + tm * 16 * ld + tn * 16, ld, wmma::mem_row_major);
        for (int e = 0; e < next[n].num_elements; ++e) {
            next[n].x[e] *= decay;
        }
        for (int kk = 0; kk < kC / 8; ++kk) {
            FragAt a;  // Kend^T: Kend's rows read as a column-major [kS][kC], stored in TF32 by the prep pass
            FragB  bf;
            wmma::load_matrix_sync(a, kend + kk * 8 * ld_kend + tm * 16, ld_kend);
            wmma::load_matrix_sync(bf, u + kk * 8 * ld + tn * 16, ld);
            to_tf32(bf);
            wmma::mma_sync(next[n], a, bf, next[n]);
        }
    }
#endif
}

// next_state_tiles' tiles into s0, rows ld apart (after the barrier that ends every read of S0 and U)
template <int N> __device__ inline void store_state_tiles(float * s0, int ld, const FragAcc * next) {
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32;
    for (int n = 0, tile = warp; tile < (kS / 16) * (N / 16); tile += warps, ++n) {
        const int tm = tile / (N / 16), tn = tile % (N / 16);
        wmma::store_matrix_sync(s0 + tm * 16 * ld + tn * 16, next[n], ld, wmma::mem_row_major);
    }
}

// Step 3e: next_state_tiles and store_state_tiles on mma.sync from shared memory (rows LS apart for Kend, LN for S0
// and U): each of the warp's tiles as two m16n8 C fragments, started from e^{G_last} S0 and accumulated over the
// chunk's tokens in order, as next_state_tiles does. RoundU false: u is stored in TF32 already (step 3h).
template <int N, int LS, int LN, bool RoundU = true>
__device__ inline void next_state_tiles_mma(const float * kend, const float * s0, const float * u, float decay,
                                            float (*next)[2][4]) {
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32, group = int(threadIdx.x) % 32 / 4;
    const int t = int(threadIdx.x) % 4;
#pragma unroll
    for (int n = 0; n < state_tiles_per_warp<N>(); ++n) {
        const int tile = warp + n * warps;
        if (tile >= (kS / 16) * (N / 16)) {
            break;
        }
        const int tm = tile / (N / 16), tn = tile % (N / 16), r = tm * 16 + group, col = tn * 16 + 2 * t;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const float2 top = *reinterpret_cast<const float2 *>(&s0[r * LN + col + half * 8]);
            const float2 low = *reinterpret_cast<const float2 *>(&s0[(r + 8) * LN + col + half * 8]);
            next[n][half][0] = top.x * decay;
            next[n][half][1] = top.y * decay;
            next[n][half][2] = low.x * decay;
            next[n][half][3] = low.y * decay;
        }
        // A = Kend^T (Kend's rows read as columns, stored in TF32 by the prep pass), B = U
        mma_tile_16x16<kC / 8, 1, LS, LN, 1, false, RoundU>(kend + r + t * LS, u + t * LN + tn * 16 + group, next[n]);
    }
}

// s0_tf32 (step 3h, else null): the same tiles rounded to TF32 there too, W S0's B operand in the next chunk.
template <int N, int LN>
__device__ inline void store_state_tiles_mma(float * s0, const float (*next)[2][4], float * s0_tf32 = nullptr) {
    const int warp = int(threadIdx.x) / 32, warps = int(blockDim.x) / 32, group = int(threadIdx.x) % 32 / 4;
    const int t = int(threadIdx.x) % 4;
#pragma unroll
    for (int n = 0; n < state_tiles_per_warp<N>(); ++n) {
        const int tile = warp + n * warps;
        if (tile >= (kS / 16) * (N / 16)) {
            break;
        }
        const int tm = tile / (N / 16), tn = tile % (N / 16), r = tm * 16 + group, col = tn * 16 + 2 * t;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            *reinterpret_cast<float2 *>(&s0[r * LN + col + half * 8])       = make_float2(next[n][half][0], next[n][half][1]);
            *reinterpret_cast<float2 *>(&s0[(r + 8) * LN + col + half * 8]) = make_float2(next[n][half][2], next[n][half][3]);
            if (s0_tf32 != nullptr) {
                *reinterpret_cast<float2 *>(&s0_tf32[r * LN + col + half * 8]) =
                    make_float2(tf32(next[n][half][0]), tf32(next[n][half][1]));
                *reinterpret_cast<float2 *>(&s0_tf32[(r + 8) * LN + col + half * 8]) =
                    make_float2(tf32(next[n][half][2]), tf32(next[n][half][3]));
            }
        }
    }
}

// The snapshot slots among the chunk's first rows tokens (the sequence's last K), from S0 and U (rows ld apart) in
// fp32, 64 terms per element at most; G: the record's. Each of the Threads threads (the block's size) holds its
// N kS / Threads elements in registers and walks the terms s once for all of them: the decay e^{G_r - G_s} and the
// key row's element are loaded once per term, not once per element, and each element's sum keeps its order.
template <int N, int Threads>
__device__ inline void write_snapshot_slices(const GdnParams & p, int b, int h, int j0, int t0, int rows,
                                             const double * G, const float * s0, const float * u, int ld) {
    static_assert(N * kS % Threads == 0 && Threads % kS == 0, "whole elements per thread, one key column each");
    constexpr int kPerThread = N * kS / Threads;
    const int     tid = int(threadIdx.x), i = tid % kS;  // element e: idx = tid + e Threads, jj = idx / kS
    const float * k0  = key_row(p, b, h, t0);
    // from the first row among the sequence's last K tokens: a loop over all rows that skipped the others took a
    // quarter of the chain's stall samples (session 16b), one branch per row and chunk
    const int     first = p.T - t0 - p.K;
    for (int r = first > 0 ? first : 0; r < rows; ++r) {
        const int   slot = p.T - 1 - (t0 + r);  // < p.K
        float *     out = p.state_out + slot * p.state_slot_stride + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0) * kS;
        const float e_r = float(exp(G[r]));
        float       x[kPerThread];
#pragma unroll
        for (int e = 0; e < kPerThread; ++e) {
            x[e] = e_r * s0[i * ld + (tid + e * Threads) / kS];
        }
        for (int s = 0; s <= r; ++s) {
            const float decay_key = expf(float(G[r] - G[s])) * read_input(k0 + s * p.k_s2 + i);
#pragma unroll
            for (int e = 0; e < kPerThread; ++e) {
                x[e] += decay_key * u[s * ld + (tid + e * Threads) / kS];
            }
        }
#pragma unroll
        for (int e = 0; e < kPerThread; ++e) {
            out[tid + e * Threads] = x[e];
        }
    }
}

// Snapshot slot `slot` (< p.K) of the slice's N value columns from a state S[i][jj] in shared memory (rows ld apart):
// the chain's copy of the state after a chunk's last token, which it has just computed as the next chunk's S0.
template <int N>
__device__ inline void write_state_snapshot(const GdnParams & p, int b, int h, int j0, int slot, const float * s,
                                            int ld) {
    float * out = p.state_out + slot * p.state_slot_stride + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0) * kS;
    for (int idx = int(threadIdx.x); idx < N * kS; idx += int(blockDim.x)) {
        const int jj = idx / kS, i = idx % kS;
        out[idx]     = s[i * ld + jj];
    }
}

// Shared memory of the state pass for a slice of N value columns.
template <int N> struct StateShared {
    float s0[kS * N];   // S0[i][jj], row-major, ld N
    float u[kC * N];    // U[s][jj]
    float qs[kC * N];   // (Qe S0)[r][jj]
    float qku[kC * N];  // (QKm U)[r][jj]
};

template <int N>
__global__ void __launch_bounds__(kStateThreads) chunked_gdn_tc_state(GdnParams p, const float * records) {
    extern __shared__ __align__(128) unsigned char shared_state[];
    StateShared<N> & sh  = *reinterpret_cast<StateShared<N> *>(shared_state);
    const int        j0 = int(blockIdx.x) * N, h = int(blockIdx.y), b = int(blockIdx.z);
    const int        tid = int(threadIdx.x), nthr = int(blockDim.x);
    const float *    s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS;
    for (int idx = tid; idx < kS * N; idx += nthr) {
        const int i = idx / N, jj = idx % N;
        sh.s0[idx]  = s_in[int64_t(j0 + jj) * kS + i];
    }
    __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int chunks = (p.T + kC - 1) / kC;
    for (int c = 0; c < chunks; ++c) {
        const float *  rec = records + record_index(p, b, h, c) * Record::floats;
        const double * G   = reinterpret_cast<const double *>(rec + Record::G);
        const int      t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;

        // U = U0 - W S0 and Qe S0 (the same B operand, S0)
        tile_products<FragA, FragB, false>(
            4, N / 16, kS / 8, [&](int tm, int kk) { return rec + Record::W + tm * 16 * kS + kk * 8; }, kS,
            [&](int kk, int tn) { return sh.s0 + kk * 8 * N + tn * 16; }, N, [&](int tm, int tn, FragAcc & ws) {
                FragAcc u0;
                wmma::load_matrix_sync(u0, rec + Record::U0 + tm * 16 * kS + j0 + tn * 16, kS, wmma::mem_row_major);
                for (int e = 0; e < u0.num_elements; ++e) {
                    u0.x[e] -= ws.x[e];
                }
                wmma::store_matrix_sync(sh.u + tm * 16 * N + tn * 16, u0, N, wmma::mem_row_major);
            });
        tile_products<FragA, FragB>(
            4, N / 16, kS / 8, [&](int tm, int kk) { return rec + Record::Qe + tm * 16 * kS + kk * 8; }, kS,
            [&](int kk, int tn) { return sh.s0 + kk * 8 * N + tn * 16; }, N,
            [&](int tm, int tn, FragAcc & acc) { wmma::store_matrix_sync(sh.qs + tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major); });
        __syncthreads();

        // QKm U; the new state's tiles (held in registers until every warp is done reading S0 and U)
        tile_products<FragA, FragB>(
            4, N / 16, kC / 8, [&](int tm, int kk) { return rec + Record::QKm + tm * 16 * kC + kk * 8; }, kC,
            [&](int kk, int tn) { return sh.u + kk * 8 * N + tn * 16; }, N,
            [&](int tm, int tn, FragAcc & acc) { wmma::store_matrix_sync(sh.qku + tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major); });
        FragAcc next[state_tiles_per_warp<N>()];
        next_state_tiles<N>(rec + Record::Kend, kS, sh.s0, sh.u, N, float(exp(G[L - 1])), next);
        __syncthreads();

        // outputs of the real tokens; snapshots (the last K tokens of the sequence) from S0 and U, in fp32
        for (int idx = tid; idx < L * N; idx += nthr) {
            const int r = idx / N, jj = idx % N;
            const float o = sh.qs[idx] + sh.qku[idx];
            p.dst[((int64_t(b) * p.T + t0 + r) * p.H_v + h) * kS + j0 + jj] = o * p.scale;
        }
        write_snapshot_slices<N, kStateThreads>(p, b, h, j0, t0, L, G, sh.s0, sh.u, N);
        __syncthreads();  // S0 and U are read above; now the new state replaces S0
        store_state_tiles<N>(sh.s0, N, next);
        __syncthreads();
    }
#endif
}

// ---- Step 2b's chain and output pass (device); their specification is chain_host and output_host above ----------
// Shared memory of the chain for N value columns: with two buffers the next chunk's W, Kend and U0 slice arrive by
// cp.async while this chunk's products run, with one each chunk's arrive at its start; the state slice and U of this
// chunk (168 KB at N = 32 unpadded, 177 KB padded; 86 KB at N = 16, one buffer, padded: two CTAs per SM).
template <int N, int Pad, int Buffers = 2> struct ChainShared {
    static constexpr int LN = N + Pad;       // rows of the slice's N columns
    float w[Buffers][kC * Rows<Pad>::S];     // W of chunk c (buffer c % Buffers)
    float kend[Buffers][kC * Rows<Pad>::S];  // Kend of chunk c
    float u0[Buffers][kC * LN];              // the slice's columns of U0, [s][jj]
    float s0[kS * LN];                       // S0[i][jj]
    float u[kC * LN];                        // U[s][jj]
};
// Step 3h: S0 and U also kept rounded to TF32, the form in which the products read them (W S0's and Kend^T U's B
// operands): rounded once where they are written, not in every fragment load (sm_90 has no TF32 conversion
// instruction; each rounding is three instructions). 27 KB more (204 KB at N = 32, padded).
template <int N, int Pad, int Buffers = 2> struct ChainSharedRounded : ChainShared<N, Pad, Buffers> {
    float s0_tf32[kS * ChainShared<N, Pad, Buffers>::LN];
    float u_tf32[kC * ChainShared<N, Pad, Buffers>::LN];
};
template <int N, int Pad, int Buffers, bool Rounded>
using ChainSharedOf = std::conditional_t<Rounded, ChainSharedRounded<N, Pad, Buffers>, ChainShared<N, Pad, Buffers>>;

// Threads: 256 (8 warps, step 2c) or 512 (16 warps: the tiles of the new state spread over twice the warps). Mma: the
// two products on mma.sync from shared memory (step 3e, as step 3d's prep pass), the new state's accumulators held in
// m16n8 C fragments; the same values in the same order. Rounded (with Mma; step 3h): the products' B operands S0 and U
// read from TF32 copies written beside them (ChainSharedRounded): the same values. The defaults are step 2c's chain;
// the glue launches step 3e's; the standalone program times the others (steps 2d, 3e, 3h).
template <int N, int Pad, int Buffers = 2, int Threads = kStateThreads, bool Mma = false, bool Rounded = false>
__global__ void __launch_bounds__(Threads) chunked_gdn_tc_chain(GdnParams p, float * records, float * states) {
    static_assert(Buffers == 1 || Buffers == 2, "one buffer, or two for the next chunk's operands");
    static_assert(Mma || !Rounded, "the TF32 copies are read by the mma.sync products only");
    using Shared = ChainSharedOf<N, Pad, Buffers, Rounded>;
    constexpr int LS = Rows<Pad>::S, LN = Shared::LN;
    extern __shared__ __align__(128) unsigned char shared_chain[];
    Shared &  sh = *reinterpret_cast<Shared *>(shared_chain);
    const int j0 = int(blockIdx.x) * N, h = int(blockIdx.y), b = int(blockIdx.z);
    const int tid = int(threadIdx.x), nthr = int(blockDim.x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int chunks = (p.T + kC - 1) / kC;
    // the record operands of chunk c into buffer buf, 16 bytes per copy (records are 32-byte aligned, j0 a multiple of
    // 16, padded rows a multiple of 4 floats)
    auto stage = [&](int c, int buf) {
        const float * rec = records + record_index(p, b, h, c) * Record::floats;
        for (int idx = tid; idx < kC * kS / 4; idx += nthr) {
            const int r = idx / (kS / 4), q4 = idx % (kS / 4);
            __pipeline_memcpy_async(sh.w[buf] + r * LS + 4 * q4, rec + Record::W + 4 * idx, 16);
            __pipeline_memcpy_async(sh.kend[buf] + r * LS + 4 * q4, rec + Record::Kend + 4 * idx, 16);
        }
        for (int idx = tid; idx < kC * N / 4; idx += nthr) {
            const int s = idx / (N / 4), q4 = idx % (N / 4);
            __pipeline_memcpy_async(sh.u0[buf] + s * LN + 4 * q4, rec + Record::U0 + s * kS + j0 + 4 * q4, 16);
        }
        __pipeline_commit();
    };
    if constexpr (Buffers == 2) {
        stage(0, 0);
    }
    // the slice's initial state, transposed (state[j kS + i] = S[i][j]): consecutive threads read consecutive i
    // (coalesced), kStageBatch elements each in flight before any is stored (step 3b; the chain's first chunk waits
    // for it)
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0) * kS;
    for (int idx0 = tid; idx0 < kS * N; idx0 += kStageBatch * nthr) {
        float s[kStageBatch];
#pragma unroll
        for (int e = 0; e < kStageBatch; ++e) {
            const int idx = idx0 + e * nthr;
            s[e]          = idx < kS * N ? read_input(s_in + idx) : 0.0f;  // idx = jj kS + i
        }
#pragma unroll
        for (int e = 0; e < kStageBatch; ++e) {
            const int idx = idx0 + e * nthr;
            if (idx < kS * N) {
                sh.s0[(idx % kS) * LN + idx / kS] = s[e];
                if constexpr (Rounded) {
                    sh.s0_tf32[(idx % kS) * LN + idx / kS] = tf32(s[e]);
                }
            }
        }
    }
    for (int c = 0; c < chunks; ++c) {
        const int buf = c % Buffers;
        if constexpr (Buffers == 1) {
            stage(c, 0);  // buffer 0 was last read in chunk c - 1, before its closing barrier
            __pipeline_wait_prior(0);
        } else if (c + 1 < chunks) {
            stage(c + 1, buf ^ 1);  // buffer buf ^ 1 was last read in chunk c - 1, before its closing barrier
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads();  // chunk c's operands and S0 are in place for every warp
        float *        rec = records + record_index(p, b, h, c) * Record::floats;
        const double * G   = reinterpret_cast<const double *>(rec + Record::G);
        const int      t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        const float    decay = rec[Record::eG + L - 1];  // float(e^{G_last}) from the prep pass, loaded early

        // the chunk-start state for the output pass; U = U0 - W S0
        float * st = states + record_index(p, b, h, c) * kS * kS + j0;
        for (int idx = tid; idx < kS * N; idx += nthr) {
            const int i = idx / N, jj = idx % N;
            st[i * kS + jj] = sh.s0[i * LN + jj];
        }
        if constexpr (Mma) {
            const float * s0_b = sh.s0;  // W S0's B operand: S0, or its TF32 copy
            if constexpr (Rounded) {
                s0_b = sh.s0_tf32;
            }
            shared_tile_products<4, N / 16, kS / 8, LS, 1, LN, 1, false, !Rounded>(
                sh.w[buf], s0_b, [&](int r, int col, float x0, float x1) {
                    const float2 u0 = *reinterpret_cast<const float2 *>(&sh.u0[buf][r * LN + col]);
                    const float2 u  = make_float2(u0.x - x0, u0.y - x1);
                    *reinterpret_cast<float2 *>(&sh.u[r * LN + col]) = u;
                    if constexpr (Rounded) {
                        *reinterpret_cast<float2 *>(&sh.u_tf32[r * LN + col]) = make_float2(tf32(u.x), tf32(u.y));
                    }
                });
        } else {
            tile_products<FragA, FragB, false>(
                4, N / 16, kS / 8, [&](int tm, int kk) { return sh.w[buf] + tm * 16 * LS + kk * 8; }, LS,
                [&](int kk, int tn) { return sh.s0 + kk * 8 * LN + tn * 16; }, LN, [&](int tm, int tn, FragAcc & ws) {
                    FragAcc u0;
                    wmma::load_matrix_sync(u0, sh.u0[buf] + tm * 16 * LN + tn * 16, LN, wmma::mem_row_major);
                    for (int e = 0; e < u0.num_elements; ++e) {
                        u0.x[e] -= ws.x[e];
                    }
                    wmma::store_matrix_sync(sh.u + tm * 16 * LN + tn * 16, u0, LN, wmma::mem_row_major);
                });
        }
        __syncthreads();

        // the new state's tiles, held in registers until every warp is done reading S0 and U
        constexpr int kTiles = state_tiles_per_warp<N>();
        std::conditional_t<Mma, float[kTiles][2][4], FragAcc[kTiles]> next;  // m16n8 C fragments, or wmma's
        if constexpr (Rounded) {
            next_state_tiles_mma<N, LS, LN, false>(sh.kend[buf], sh.s0, sh.u_tf32, decay, next);
        } else if constexpr (Mma) {
            next_state_tiles_mma<N, LS, LN>(sh.kend[buf], sh.s0, sh.u, decay, next);
        } else {
            next_state_tiles<N>(sh.kend[buf], LS, sh.s0, sh.u, LN, decay, next);
        }
        // U over the record's U0 (this slice's columns), and the snapshot slots of the sequence's last K tokens but
        // the chunk's last, which is the new state (copied below)
        for (int idx = tid; idx < kC * N; idx += nthr) {
            const int s = idx / N, jj = idx % N;
            rec[Record::U0 + s * kS + j0 + jj] = sh.u[s * LN + jj];
        }
        write_snapshot_slices<N, Threads>(p, b, h, j0, t0, L - 1, G, sh.s0, sh.u, LN);
        __syncthreads();  // S0, U and buffer buf are read; the new state replaces S0
        if constexpr (Rounded) {
            store_state_tiles_mma<N, LN>(sh.s0, next, sh.s0_tf32);
        } else if constexpr (Mma) {
            store_state_tiles_mma<N, LN>(sh.s0, next);
        } else {
            store_state_tiles<N>(sh.s0, LN, next);
        }
        if (const int last_slot = p.T - t0 - L; last_slot < p.K) {  // the same for every thread of the CTA
            __syncthreads();
            write_state_snapshot<N>(p, b, h, j0, last_slot, sh.s0, LN);
        }
    }
#endif
}

// Rows x Cols floats (rows src_ld floats apart) from global memory (written by an earlier launch, read-only in this
// one) into shared rows of ld floats: explicit 16-byte global loads (coherent, as read_input's), kStageBatch of them in
// flight per thread before it stores any. (Step 3b: the output pass copied one generic 16-byte load at a time, which
// the compiler may not move past a shared store, and waited on each: 51-57% of its stall samples were long scoreboard.)
// RoundTf32: stored rounded to TF32, for a matrix used only as a TF32 product's operand (the same products).
template <int Rows, int Cols = kS, bool RoundTf32 = false>
__device__ inline void stage_rows(float * dst, int ld, const float * src, int src_ld = kS) {
    static_assert(Cols % 4 == 0, "rows are copied in 16-byte quads");
    constexpr int kRowQuads = Cols / 4;
    constexpr int kQuads    = Rows * kRowQuads;
    const int     tid = int(threadIdx.x), nthr = int(blockDim.x);
    for (int idx0 = tid; idx0 < kQuads; idx0 += kStageBatch * nthr) {
        float4 v[kStageBatch];
#pragma unroll
        for (int e = 0; e < kStageBatch; ++e) {
            const int idx = idx0 + e * nthr;
            v[e] = idx < kQuads ? __ldca(reinterpret_cast<const float4 *>(src + (idx / kRowQuads) * src_ld) + idx % kRowQuads)
                                : make_float4(0, 0, 0, 0);
        }
#pragma unroll
        for (int e = 0; e < kStageBatch; ++e) {
            const int idx = idx0 + e * nthr;
            if (idx < kQuads) {
                if constexpr (RoundTf32) {
                    v[e] = make_float4(tf32(v[e].x), tf32(v[e].y), tf32(v[e].z), tf32(v[e].w));
                }
                *reinterpret_cast<float4 *>(dst + (idx / kRowQuads) * ld + 4 * (idx % kRowQuads)) = v[e];
            }
        }
    }
}

// Shared memory of the output pass: Cols value columns of the chunk's state and of U (all 128: 96 KB unpadded, 99 KB
// padded, two CTAs per SM; 64: 52 KB padded); the result tiles reuse s0.
template <int Pad, int Cols = kS> struct OutputShared {
    static constexpr int LD = Cols + Pad;
    float s0[kS * LD];  // S0[i][j0 + j]
    float u[kC * LD];   // U[s][j0 + j]
};

// Step 3f: acc (Tiles 16 x 16 tiles side by side, each two m16n8 C fragments) += A B over K = 8 KSteps, A's 16 rows
// read from global memory (written by an earlier launch) with plain loads, rows LDA floats apart, B in shared memory
// in TF32 already, rows LDB floats apart; a and b offset to the lane's first element (row group of A, k = t; k = t,
// column group of B's first tile). All A elements of the lane are loaded before the products, so their latencies
// overlap. RoundA false: A is stored in TF32 already (step 3i).
template <int KSteps, int LDA, int LDB, int Tiles, bool RoundA = true>
__device__ inline void mma_global_rows_shared(const float * a, const float * b, float (&acc)[Tiles][2][4]) {
    uint32_t af[KSteps][4];
#pragma unroll
    for (int kk = 0; kk < KSteps; ++kk) {
        af[kk][0] = __float_as_uint(a[kk * 8]);
        af[kk][1] = __float_as_uint(a[8 * LDA + kk * 8]);
        af[kk][2] = __float_as_uint(a[kk * 8 + 4]);
        af[kk][3] = __float_as_uint(a[8 * LDA + kk * 8 + 4]);
    }
#pragma unroll
    for (int kk = 0; kk < KSteps; ++kk) {
        if constexpr (RoundA) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                af[kk][e] = __float_as_uint(tf32(__uint_as_float(af[kk][e])));
            }
        }
#pragma unroll
        for (int tile = 0; tile < Tiles; ++tile) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const float *  bt    = b + kk * 8 * LDB + tile * 16 + half * 8;
                const uint32_t bf[2] = {__float_as_uint(bt[0]), __float_as_uint(bt[4 * LDB])};
                mma_16x8x8_tf32(acc[tile][half], af[kk], bf);
            }
        }
    }
}

// The output pass: O = Qe S0 + QKm U per chunk. Cols value columns per CTA (kS / Cols CTAs per chunk; step 3c after
// session 17, which measured the pass of all 128 at 2 CTAs per SM, one wave at T = 512, 24% of DRAM bandwidth) and the
// A operands (Qe, QKm, read from the record in L2) loaded ABatch fragments at a time before their products (with
// ABatch = 1 each fragment's L2 latency is waited on in turn: 24 times per warp). Mma: step 3f, the products on
// mma.sync (mma_global_rows_shared: every A element loaded up front, B by plain shared loads; ABatch unused), the same
// values in the same order. RoundedA (with Mma; step 3i): the record's Qe and QKm are in TF32 already
// (chunked_gdn_tc_prep_mma<Pad, RoundOnce = true>), not rounded again. The defaults are step 2c's pass.
template <int Pad, int Cols = kS, int ABatch = 1, bool Mma = false, bool RoundedA = false>
__global__ void __launch_bounds__(kStateThreads) chunked_gdn_tc_output(GdnParams p, const float * records,
                                                                        const float * states) {
    static_assert(Cols % 32 == 0 && kS % Cols == 0, "8 warps cover 4 row tiles and Cols / 16 column tiles");
    static_assert(ABatch >= 1 && (kC / 8) % ABatch == 0, "fragment batches divide both products' k steps");
    static_assert(Mma || !RoundedA, "only the mma.sync products skip the rounding");
    constexpr int LS           = OutputShared<Pad, Cols>::LD;
    constexpr int kSlices      = kS / Cols;
    constexpr int kWarpTiles   = Cols / 32;  // column tiles per warp: two warps per row tile
    extern __shared__ __align__(128) unsigned char shared_output[];
    OutputShared<Pad, Cols> & sh = *reinterpret_cast<OutputShared<Pad, Cols> *>(shared_output);
    const int     c = int(blockIdx.x) / kSlices, j0 = (int(blockIdx.x) % kSlices) * Cols;
    const int     h = int(blockIdx.y), b = int(blockIdx.z);
    const int     tid = int(threadIdx.x), nthr = int(blockDim.x);
    const float * rec = records + record_index(p, b, h, c) * Record::floats;
    const float * st  = states + record_index(p, b, h, c) * kS * kS;
    const int     t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    // the chunk's state, columns j0 .., and U, which the chain wrote over U0 (in TF32 for step 3f's products)
    stage_rows<kS, Cols, Mma>(sh.s0, LS, st + j0);
    stage_rows<kC, Cols, Mma>(sh.u, LS, rec + Record::U0 + j0);
    __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // warp w: row tile w / 2 of the 4, column tiles kWarpTiles (w % 2) .. of the Cols / 16; each Qe / QKm fragment is
    // loaded once per warp (from the record, in L2 since the prep pass) and used for its kWarpTiles column tiles
    const int tm = (tid / 32) / 2, tn0 = kWarpTiles * ((tid / 32) % 2);
    if constexpr (Mma) {
        const int group = (tid % 32) / 4, t = tid % 4;
        float     acc[kWarpTiles][2][4] = {};
        mma_global_rows_shared<kS / 8, kS, LS, kWarpTiles, !RoundedA>(rec + Record::Qe + (tm * 16 + group) * kS + t,
                                                                     sh.s0 + t * LS + tn0 * 16 + group, acc);  // Qe S0
        mma_global_rows_shared<kC / 8, kC, LS, kWarpTiles, !RoundedA>(rec + Record::QKm + (tm * 16 + group) * kC + t,
                                                                     sh.u + t * LS + tn0 * 16 + group, acc);  // QKm U
        __syncthreads();  // every warp is done with S0: its buffer takes the result tiles
#pragma unroll
        for (int tile = 0; tile < kWarpTiles; ++tile) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int r = tm * 16 + group, col = (tn0 + tile) * 16 + half * 8 + 2 * t;
                *reinterpret_cast<float2 *>(&sh.s0[r * LS + col]) = make_float2(acc[tile][half][0], acc[tile][half][1]);
                *reinterpret_cast<float2 *>(&sh.s0[(r + 8) * LS + col]) =
                    make_float2(acc[tile][half][2], acc[tile][half][3]);
            }
        }
    } else {
        FragAcc acc[kWarpTiles];
        for (FragAcc & a : acc) {
            wmma::fill_fragment(a, 0.0f);
        }
        // acc += A (the warp's 16 rows, lda, k columns) times B (k rows of the shared matrix, ld LS)
        auto accumulate = [&](const float * a_rows, int lda, int k, const float * bm) {
            for (int kk0 = 0; kk0 < k / 8; kk0 += ABatch) {
                FragA a[ABatch];
#pragma unroll
                for (int e = 0; e < ABatch; ++e) {
                    wmma::load_matrix_sync(a[e], a_rows + (kk0 + e) * 8, lda);
                }
#pragma unroll
                for (int e = 0; e < ABatch; ++e) {
                    to_tf32(a[e]);
#pragma unroll
                    for (int t = 0; t < kWarpTiles; ++t) {
                        FragB bf;
                        wmma::load_matrix_sync(bf, bm + (kk0 + e) * 8 * LS + (tn0 + t) * 16, LS);
                        to_tf32(bf);
                        wmma::mma_sync(acc[t], a[e], bf, acc[t]);
                    }
                }
            }
        };
        accumulate(rec + Record::Qe + tm * 16 * kS, kS, kS, sh.s0);   // Qe S0
        accumulate(rec + Record::QKm + tm * 16 * kC, kC, kC, sh.u);   // QKm U
        __syncthreads();  // every warp is done with S0: its buffer takes the result tiles
        for (int t = 0; t < kWarpTiles; ++t) {
            wmma::store_matrix_sync(sh.s0 + tm * 16 * LS + (tn0 + t) * 16, acc[t], LS, wmma::mem_row_major);
        }
    }
    __syncthreads();
    for (int idx = tid; idx < L * Cols; idx += nthr) {
        const int r = idx / Cols, j = idx % Cols;
        p.dst[((int64_t(b) * p.T + t0 + r) * p.H_v + h) * kS + j0 + j] = sh.s0[r * LS + j] * p.scale;
    }
#endif
}

template <int N, int Pad, int Buffers = 2, bool Rounded = false> inline size_t chain_shared_bytes() {
    return sizeof(ChainSharedOf<N, Pad, Buffers, Rounded>);
}
template <int Pad, int Cols = kS> inline size_t output_shared_bytes() {
    return sizeof(OutputShared<Pad, Cols>);
}
template <int Pad> inline size_t prep_shared_bytes() {
    return sizeof(PrepShared<Pad>);
}
template <int N> inline size_t state_shared_bytes() {
    return sizeof(StateShared<N>);
}

#endif  // __CUDACC__

}  // namespace fusekit_gdn_tc
