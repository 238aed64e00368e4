// fusion-4 step 5a (session 41, written without a GPU: not yet run): the chain computes the chunk outputs itself, so
// the op takes two passes (prep, chain) instead of three (prep, chain, output). For the standalone program
// (kernels/chunked_gdn_check.cu) only until a GPU has checked and timed it.
//
// Why: on the H100 at T = 512 the three passes of the fastest op measured (session 40: step 4e's prep, step 4c's
// chain of 2 warps, step 3f's output) take about 44.6 + 30.5 + 30 us. The output pass spends its time moving data the
// chain had in registers: the chain stores every chunk's start state (64 KB a chunk and head) and U for it, and the
// output pass reads them back with Qe and QKm. In the chain's own orientation (a warp holds S^T and U^T of its 16 value
// columns as m16n8 C fragments, value columns as M), the output's transpose is
//     O^T = S0^T Qe^T + U^T QKm^T    (16 value columns x 64 tokens a warp),
// and the chain's A fragments of its two products are already the A operands of these two: -S0^T (product 1 rounds
// -S0^T to TF32 for U = U0 - W S0) and U^T (product 2 rounds it for S += Kend^T U). Qe^T and QKm^T are B operands
// read from shared memory as W^T is (Qe[8n + g][8kk + 2t .. + 1], one float2: the same k-step permutation as W's, see
// fusekit-chunked-gdn-regs.cuh), so each k step of product 1 adds 8 mma.sync on the A fragment it has, and each of
// product 2 adds one per token tile at or below the diagonal (QKm is causal: 36 of 64). The output accumulates
// -O^T = (-S0^T) Qe^T + (-U^T) QKm^T and is stored negated, times scale, from the fragments.
//
// What changes against step 4c's chain (2 warps, 32 value columns a CTA, 128 CTAs at the 35B shapes):
//   - no chunk-start states and no U are written (no output pass reads them); the outputs are written instead;
//   - the chunk's Qe and QKm are staged too (48 KB a chunk). Shared memory: W, U0 and Qe are double-buffered (read by
//     product 1, staged a chunk ahead), Kend and QKm single-buffered (read by product 2: staged when the chunk's
//     product 2 is done, waited for after the next chunk's product 1); the snapshot scratch lives in the chunk's W
//     buffer once product 1 is done. 210,176 bytes with 2 warps (step 4c's: 181,248);
//   - two cp.async groups a chunk, one more barrier (before product 2) and one after it;
//   - the prep pass stores Qe and QKm rounded to TF32 (chunked_gdn_tc_prep_rounded<Pad, true>), since they are B
//     operands here (step 3f rounds them as A operands in every load).
// The state and the snapshots are step 4c's arithmetic (the same bits); the outputs sum the same terms in another
// order than step 3f's (within the same TF32 error).
// Prediction (before any run): about 1.25x step 4c's warp instructions a chunk (about 420 HMMA instead of 256, the
// staging 120 copies a thread instead of 72, 32 output stores instead of 96 state and U stores); the chain alone at
// T = 512 on the H100 36-42 us (step 4c 30.5), and the op, step 4f's prep pass and this chain, 76-86 us (three passes:
// 105.3), below #10's 93 if the prep pass lands as predicted.
#pragma once

#include "fusekit-chunked-gdn-lean.cuh"

namespace fusekit_gdn_tc {

#if defined(__CUDACC__)

template <int Warps> struct ChainOutputShared {
    static constexpr int N   = 16 * Warps;  // value columns of the CTA
    static constexpr int LU  = N + 4;       // as ChainRegsShared
    static constexpr int LX  = N + 1;       // snapshot scratch rows
    static constexpr int LQ  = kRegsLW;     // Qe rows: the same float2 B loads as W's
    static constexpr int LQK = kC + 8;      // QKm rows: the same, 64 wide
    float w[2][kC * kRegsLW];               // W of chunk c (buffer c % 2); then the chunk's snapshot scratch
    float qe[2][kC * LQ];                   // Qe of chunk c, in TF32
    float u0[2][kC * LU];                   // the CTA's columns of U0
    float kend[kC * kRegsLK];               // Kend of the chunk in hand, in TF32
    float qkm[kC * LQK];                    // QKm of the chunk in hand, in TF32
    float coef[kC];                         // write_snapshot_rows's decays
};
// Warps 2 only: with 4 the snapshot scratch (S0 and U of 64 columns) outgrows a W buffer.
static_assert(sizeof(ChainOutputShared<2>) <= 232448, "at most 227 KB of shared memory per CTA (sm_80, sm_90)");
static_assert((kS + kC) * ChainOutputShared<2>::LX <= kC * kRegsLW, "the snapshot scratch fits in a W buffer");

template <int Warps> inline size_t chain_output_shared_bytes() {
    return sizeof(ChainOutputShared<Warps>);
}

// Grid (kS / (16 Warps), H_v, B), Warps warps, ChainOutputShared<Warps> of shared memory; records from
// chunked_gdn_tc_prep_rounded<Pad, true>. Writes the outputs and the state snapshots into p.dst; reads the records only.
template <int Warps>
__global__ void __launch_bounds__(Warps * 32) chunked_gdn_tc_chain_output(GdnParams p, const float * records) {
    using Shared = ChainOutputShared<Warps>;
    using S      = LeanStaging<Warps>;
    constexpr int N = Shared::N, LU = Shared::LU, LX = Shared::LX, LQ = Shared::LQ, LQK = Shared::LQK;
    constexpr int QKPieces = kC / 4, QKCopies = kC * QKPieces / S::Threads, QKRowStep = S::Threads / QKPieces;
    static_assert(S::Threads % QKPieces == 0 && QKCopies * S::Threads == kC * QKPieces, "whole rounds of QKm");
    static_assert(kS % N == 0, "the CTAs' slices cover the value columns");
    static_assert((kS + kC) * LX <= kC * kRegsLW, "the snapshot scratch fits in a W buffer");
    extern __shared__ __align__(128) unsigned char shared_chain_output[];
    Shared &  sh = *reinterpret_cast<Shared *>(shared_chain_output);
    const int j0 = int(blockIdx.x) * N, h = int(blockIdx.y), b = int(blockIdx.z);
    const int tid = int(threadIdx.x);
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int jw = warp * 16;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int     chunks = (p.T + kC - 1) / kC;
    const int     w_row = tid / S::RowPieces, w_col = 4 * (tid % S::RowPieces);
    const int     u_row = tid / S::UPieces, u_col = 4 * (tid % S::UPieces);
    const int     q_row = tid / QKPieces, q_col = 4 * (tid % QKPieces);
    const float * first_rec = records + record_index(p, b, h, 0) * Record::floats;
    // product 1's operands of chunk c (W, Qe, the U0 slice) into buffer buf, one cp.async group
    auto stage_first = [&](int c, int buf) {
        const float * rec = first_rec + int64_t(c) * Record::floats;
        const float * gw = rec + Record::W + 4 * tid, *gq = rec + Record::Qe + 4 * tid;
        const float * gu = rec + Record::U0 + u_row * kS + j0 + u_col;
        float *       sw = sh.w[buf] + w_row * kRegsLW + w_col, *sq = sh.qe[buf] + w_row * LQ + w_col;
        float *       su = sh.u0[buf] + u_row * LU + u_col;
#pragma unroll
        for (int i = 0; i < S::WCopies; ++i) {
            __pipeline_memcpy_async(sw + i * S::WRowStep * kRegsLW, gw + i * 4 * S::Threads, 16);
            __pipeline_memcpy_async(sq + i * S::WRowStep * LQ, gq + i * 4 * S::Threads, 16);
        }
#pragma unroll
        for (int i = 0; i < S::UCopies; ++i) {
            __pipeline_memcpy_async(su + i * S::URowStep * LU, gu + i * S::URowStep * kS, 16);
        }
        __pipeline_commit();
    };
    // product 2's operands of chunk c (Kend, QKm), one cp.async group
    auto stage_second = [&](int c) {
        const float * rec = first_rec + int64_t(c) * Record::floats;
        const float * gk = rec + Record::Kend + 4 * tid, *gq = rec + Record::QKm + 4 * tid;
        float *       sk = sh.kend + w_row * kRegsLK + w_col, *sq = sh.qkm + q_row * LQK + q_col;
#pragma unroll
        for (int i = 0; i < S::WCopies; ++i) {
            __pipeline_memcpy_async(sk + i * S::WRowStep * kRegsLK, gk + i * 4 * S::Threads, 16);
        }
#pragma unroll
        for (int i = 0; i < QKCopies; ++i) {
            __pipeline_memcpy_async(sq + i * QKRowStep * LQK, gq + i * 4 * S::Threads, 16);
        }
        __pipeline_commit();
    };
    stage_first(0, 0);
    stage_second(0);

    float         st[kS / 8][4];
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0 + jw) * kS;
#pragma unroll
    for (int n = 0; n < kS / 8; ++n) {
        st[n][0] = read_input(s_in + g * kS + 8 * n + 2 * t);
        st[n][1] = read_input(s_in + g * kS + 8 * n + 2 * t + 1);
        st[n][2] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t);
        st[n][3] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t + 1);
    }
    const int64_t token_stride = int64_t(p.H_v) * kS;  // floats from a token's output row to the next token's

    for (int c = 0; c < chunks; ++c) {
        const int buf = c % 2;
        __pipeline_wait_prior(1);  // product 1's operands of chunk c (product 2's may still be in flight)
        __syncthreads();
        if (c + 1 < chunks) {
            stage_first(c + 1, buf ^ 1);
        } else {
            __pipeline_commit();  // an empty group: the waits below count groups the same way in every chunk
        }
        const float *  rec = first_rec + int64_t(c) * Record::floats;
        const double * G   = reinterpret_cast<const double *>(rec + Record::G);
        const int      t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        const float    decay = rec[Record::eG + L - 1];

        // product 1: U^T = U0^T - S0^T W^T, and -O^T = (-S0^T) Qe^T on the same A fragments
        float u[kC / 8][4], o[kC / 8][4] = {};
        load_fragment_rows(sh.u0[buf] + jw, LU, u);
        const float * w = sh.w[buf], *qe = sh.qe[buf];
#pragma unroll
        for (int kk = 0; kk < kS / 8; ++kk) {
            const uint32_t a[4] = {__float_as_uint(tf32(-st[kk][0])), __float_as_uint(tf32(-st[kk][2])),
                                   __float_as_uint(tf32(-st[kk][1])), __float_as_uint(tf32(-st[kk][3]))};
#pragma unroll
            for (int m = 0; m < kC / 8; ++m) {
                const float2   wb    = *reinterpret_cast<const float2 *>(&w[(8 * m + g) * kRegsLW + 8 * kk + 2 * t]);
                const uint32_t bf[2] = {__float_as_uint(wb.x), __float_as_uint(wb.y)};
                mma_16x8x8_tf32(u[m], a, bf);
            }
#pragma unroll
            for (int n = 0; n < kC / 8; ++n) {
                const float2   qb    = *reinterpret_cast<const float2 *>(&qe[(8 * n + g) * LQ + 8 * kk + 2 * t]);
                const uint32_t bf[2] = {__float_as_uint(qb.x), __float_as_uint(qb.y)};
                mma_16x8x8_tf32(o[n], a, bf);
            }
        }

        __pipeline_wait_prior(1);  // product 2's operands of chunk c (only the next chunk's first group may be open)
        __syncthreads();           // ... visible to every thread; and product 1 done: W[buf] free for the scratch
        float *    s0 = sh.w[buf], *us = s0 + kS * LX;
        const bool snapshots = p.T - t0 - p.K < L - 1;
        if (snapshots) {
            store_fragment_rows(s0 + jw, LX, st);
            store_fragment_rows(us + jw, LX, u);
            __syncthreads();
            write_snapshot_rows<N>(p, b, h, j0, t0, L - 1, G, s0, us, LX, sh.coef);
            __syncthreads();
        }

#pragma unroll
        for (int n = 0; n < kS / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                st[n][e] *= decay;
            }
        }
        // product 2: S^T += U^T Kend (step 4c's), and -O^T += (-U^T) QKm^T over the token tiles at or below each one
#pragma unroll
        for (int kk = 0; kk < kC / 8; ++kk) {
            const uint32_t a[4] = {__float_as_uint(tf32(u[kk][0])), __float_as_uint(tf32(u[kk][2])),
                                   __float_as_uint(tf32(u[kk][1])), __float_as_uint(tf32(u[kk][3]))};
#pragma unroll
            for (int n = 0; n < kS / 8; ++n) {
                const uint32_t bf[2] = {__float_as_uint(sh.kend[(8 * kk + 2 * t) * kRegsLK + 8 * n + g]),
                                        __float_as_uint(sh.kend[(8 * kk + 2 * t + 1) * kRegsLK + 8 * n + g])};
                mma_16x8x8_tf32(st[n], a, bf);
            }
            const uint32_t negated[4] = {a[0] ^ 0x80000000u, a[1] ^ 0x80000000u, a[2] ^ 0x80000000u, a[3] ^ 0x80000000u};
#pragma unroll
            for (int n = kk; n < kC / 8; ++n) {
                const float2   qb    = *reinterpret_cast<const float2 *>(&sh.qkm[(8 * n + g) * LQK + 8 * kk + 2 * t]);
                const uint32_t bf[2] = {__float_as_uint(qb.x), __float_as_uint(qb.y)};
                mma_16x8x8_tf32(o[n], negated, bf);
            }
        }
        __syncthreads();  // every warp is done with Kend and QKm: the next chunk's go in
        if (c + 1 < chunks) {
            stage_second(c + 1);
        } else {
            __pipeline_commit();
        }

        // the outputs: o[n] holds -O^T of columns jw + g (elements 0, 1) and jw + g + 8 (2, 3), tokens 8n + 2t (+1)
        float * out = p.dst + ((int64_t(b) * p.T + t0 + 2 * t) * p.H_v + h) * kS + j0 + jw + g;
#pragma unroll
        for (int n = 0; n < kC / 8; ++n) {
            const int r  = 8 * n + 2 * t;
            float *   at = out + 8 * n * token_stride;
            if (r < L) {
                at[0] = -o[n][0] * p.scale;
                at[8] = -o[n][2] * p.scale;
            }
            if (r + 1 < L) {
                at[token_stride]     = -o[n][1] * p.scale;
                at[token_stride + 8] = -o[n][3] * p.scale;
            }
        }

        if (const int last_slot = p.T - t0 - L; last_slot < p.K) {
            store_fragment_rows(s0 + jw, LX, st);
            __syncthreads();
            write_state_snapshot<N>(p, b, h, j0, last_slot, s0, LX);
            __syncthreads();
        }
    }
    __pipeline_wait_prior(0);
#endif
}

#endif  // __CUDACC__

}  // namespace fusekit_gdn_tc
