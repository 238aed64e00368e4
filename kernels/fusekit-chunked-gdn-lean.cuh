// fusion-4 step 4c (session 40): step 4a's chain with its address arithmetic taken out, for the standalone program
// (kernels/chunked_gdn_check.cu) only until a GPU has checked and timed it. Beside fusekit-chunked-gdn-regs.cuh, not
// in it: step 4a stays byte for byte as measured (a helper changed there changes its machine code).
//
// Why (results/h100-2026-12-05-session40-standalone/first, Nsight Compute on step 4a at T = 512, H100): the chain
// issues one instruction every 2.5-3 cycles on one warp per scheduler, stalled on fixed-latency dependences, and its
// warp runs 19,200 (4 warps a CTA) to 22,600 (2 warps) instructions, of which HMMA are 9-11%. Over a quarter of them
// are the cp.async staging loop (27 instructions a 2-copy iteration: the division of a runtime thread index by the
// row length, 64-bit global and 32-bit shared addresses, from blockDim.x unknown to the compiler), and the stores of
// the chunk-start state and of U recompute a 64-bit address every 1-4 stores (IADD3, IMAD.X, LEA, LEA.HI.X). Here:
//   - the staging loop is unrolled over a thread count known at compile time: a thread's copies of one chunk sit at
//     fixed offsets from two pointers it computes once (the global one steps by a record a chunk), so each cp.async
//     is one LDGSTS with immediate offsets;
//   - the state and U stores go through one pointer per thread (its first element), every other element at a fixed
//     offset from it;
//   - the arithmetic is step 4a's, in the same order: the same mma.sync on the same operands, so the same bits.
// Prediction (written before its first run): instructions per warp 0.6-0.7x step 4a's, so the chain at T = 512 in
// 21-27 us (4a: 34.5), at T = 4096 in 140-185 (229), K = 3 in 90-105 (110.8, its snapshot rows unchanged); step 4c
// whole (step 3d's prep, this chain, step 3f's output) 99-104 us at T = 512 (4a whole 111.3).
// Measured (session 40, H200, results/h200-2026-12-05-session40-lean/): 0.53x (2 warps) and 0.62x (4 warps) the
// instructions, but the chain 28.0 us with 2 warps and 33.6 with 4 at T = 512 (step 4a 33.8, 34.9), 186.1 at T = 4096
// (234.6), K = 3 118.1 (105.2), whole 105.5 (112.4): the issue rate fell with a full global-memory queue.
#pragma once

#include "fusekit-chunked-gdn-regs.cuh"

namespace fusekit_gdn_tc {

#if defined(__CUDACC__)

// Chunk operands staged by the CTA's Threads threads with every offset known at compile time: thread tid copies the
// 16-byte pieces tid, tid + Threads, ... of W and Kend (32 pieces a row of kS floats) and of the CTA's N columns of
// U0 (N / 4 pieces a row). Offsets are relative to the thread's own first piece, in floats.
template <int Warps> struct LeanStaging {
    static constexpr int Threads = 32 * Warps, N = 16 * Warps;
    static constexpr int RowPieces = kS / 4, UPieces = N / 4;
    static constexpr int WCopies = kC * RowPieces / Threads, UCopies = kC * UPieces / Threads;
    static_assert(Threads % RowPieces == 0 && Threads % UPieces == 0, "a thread keeps its column in every row");
    static_assert(WCopies * Threads == kC * RowPieces && UCopies * Threads == kC * UPieces, "whole rounds");
    static constexpr int WRowStep = Threads / RowPieces, URowStep = Threads / UPieces;  // rows between a thread's pieces
};

// One chunk's W, Kend and U0 slice from the record at rec into the buffers at w, kend, u0 (the thread's first pieces
// already added to all six pointers: see chunked_gdn_tc_chain_lean), committed as one group.
template <int Warps, int LU>
__device__ __forceinline__ void stage_lean(const float * rec_w, const float * rec_kend, const float * rec_u0, float * w,
                                           float * kend, float * u0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    using S = LeanStaging<Warps>;
#pragma unroll
    for (int i = 0; i < S::WCopies; ++i) {
        __pipeline_memcpy_async(w + i * S::WRowStep * kRegsLW, rec_w + i * 4 * S::Threads, 16);
        __pipeline_memcpy_async(kend + i * S::WRowStep * kRegsLK, rec_kend + i * 4 * S::Threads, 16);
    }
#pragma unroll
    for (int i = 0; i < S::UCopies; ++i) {
        __pipeline_memcpy_async(u0 + i * S::URowStep * LU, rec_u0 + i * S::URowStep * kS, 16);
    }
    __pipeline_commit();
#endif
}

// A warp's C fragments (x[n]: rows 8n + 2t, 8n + 2t + 1, columns g, g + 8) to memory rows LD apart, from the pointer
// to the thread's first element (row 2t, column g): every store at a fixed offset from it.
template <int LD, int Tiles> __device__ __forceinline__ void store_fragments_at(float * first, const float (&x)[Tiles][4]) {
#pragma unroll
    for (int n = 0; n < Tiles; ++n) {
        first[8 * n * LD]          = x[n][0];
        first[(8 * n + 1) * LD]    = x[n][1];
        first[8 * n * LD + 8]      = x[n][2];
        first[(8 * n + 1) * LD + 8] = x[n][3];
    }
}

// Grid (kS / (16 Warps), H_v, B), Warps warps, ChainRegsShared<Warps> of shared memory: step 4a's chain
// (chunked_gdn_tc_chain_regs), its writes and its arithmetic, with the addressing above.
template <int Warps>
__global__ void __launch_bounds__(Warps * 32) chunked_gdn_tc_chain_lean(GdnParams p, float * records, float * states) {
    using Shared = ChainRegsShared<Warps>;
    using S      = LeanStaging<Warps>;
    constexpr int N = Shared::N, LU = Shared::LU, LX = Shared::LX;
    static_assert(kS % N == 0, "the CTAs' slices cover the value columns");
    extern __shared__ __align__(128) unsigned char shared_chain_lean[];
    Shared &  sh = *reinterpret_cast<Shared *>(shared_chain_lean);
    const int j0 = int(blockIdx.x) * N, h = int(blockIdx.y), b = int(blockIdx.z);
    const int tid = int(threadIdx.x);
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int jw = warp * 16;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int chunks = (p.T + kC - 1) / kC;
    // the thread's first staged pieces: W and Kend row tid / 32, column 4 (tid % 32); U0 row tid / (N / 4)
    const int w_row = tid / S::RowPieces, w_col = 4 * (tid % S::RowPieces);
    const int u_row = tid / S::UPieces, u_col = 4 * (tid % S::UPieces);
    float *   first_rec = records + record_index(p, b, h, 0) * Record::floats;  // a sequence's chunks follow each other
    auto      stage     = [&](int c, int buf) {
        const float * rec = first_rec + int64_t(c) * Record::floats;
        stage_lean<Warps, LU>(rec + Record::W + 4 * tid, rec + Record::Kend + 4 * tid,
                                       rec + Record::U0 + u_row * kS + j0 + u_col, sh.w[buf] + w_row * kRegsLW + w_col,
                                       sh.kend[buf] + w_row * kRegsLK + w_col, sh.u0[buf] + u_row * LU + u_col);
    };
    stage(0, 0);

    float         st[kS / 8][4];
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0 + jw) * kS;
#pragma unroll
    for (int n = 0; n < kS / 8; ++n) {
        st[n][0] = read_input(s_in + g * kS + 8 * n + 2 * t);
        st[n][1] = read_input(s_in + g * kS + 8 * n + 2 * t + 1);
        st[n][2] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t);
        st[n][3] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t + 1);
    }

    // the thread's first element of the chunk-start state (row 2t, column j0 + jw + g) and of U over U0
    float * state_first = states + record_index(p, b, h, 0) * kS * kS + (2 * t) * kS + j0 + jw + g;
    float * u_first     = first_rec + Record::U0 + (2 * t) * kS + j0 + jw + g;
    for (int c = 0; c < chunks; ++c) {
        const int buf = c % 2;
        __pipeline_wait_prior(0);
        __syncthreads();
        if (c + 1 < chunks) {
            stage(c + 1, buf ^ 1);
        }
        float *        rec = first_rec + int64_t(c) * Record::floats;
        const double * G   = reinterpret_cast<const double *>(rec + Record::G);
        const int      t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        const float    decay = rec[Record::eG + L - 1];

        store_fragments_at<kS>(state_first + int64_t(c) * kS * kS, st);

        float u[kC / 8][4];
        load_fragment_rows(sh.u0[buf] + jw, LU, u);
        const float * w = sh.w[buf];
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
        }

        store_fragments_at<kS>(u_first + int64_t(c) * Record::floats, u);
        const bool snapshots = p.T - t0 - p.K < L - 1;
        if (snapshots) {
            store_fragment_rows(sh.s0 + jw, LX, st);
            store_fragment_rows(sh.u + jw, LX, u);
            __syncthreads();
            write_snapshot_rows<N>(p, b, h, j0, t0, L - 1, G, sh.s0, sh.u, LX, sh.coef);
            __syncthreads();
        }

#pragma unroll
        for (int n = 0; n < kS / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                st[n][e] *= decay;
            }
        }
        const float * kend = sh.kend[buf];
#pragma unroll
        for (int kk = 0; kk < kC / 8; ++kk) {
            const uint32_t a[4] = {__float_as_uint(tf32(u[kk][0])), __float_as_uint(tf32(u[kk][2])),
                                   __float_as_uint(tf32(u[kk][1])), __float_as_uint(tf32(u[kk][3]))};
#pragma unroll
            for (int n = 0; n < kS / 8; ++n) {
                const uint32_t bf[2] = {__float_as_uint(kend[(8 * kk + 2 * t) * kRegsLK + 8 * n + g]),
                                        __float_as_uint(kend[(8 * kk + 2 * t + 1) * kRegsLK + 8 * n + g])};
                mma_16x8x8_tf32(st[n], a, bf);
            }
        }

        if (const int last_slot = p.T - t0 - L; last_slot < p.K) {
            store_fragment_rows(sh.s0 + jw, LX, st);
            __syncthreads();
            write_state_snapshot<N>(p, b, h, j0, last_slot, sh.s0, LX);
            __syncthreads();
        }
    }
    __pipeline_wait_prior(0);
#endif
}

// Step 4d (session 40, written after step 4c's first run): step 4c with its global-memory instructions spread through
// the two products instead of issued in bursts. Nsight Compute on step 4c (H200, T = 512,
// results/h200-2026-12-05-session40-lean/): its warps run 0.53x (2 warps a CTA) and 0.61x (4 warps) step 4a's
// instructions but take 0.83x and 0.96x its time, stalled 0.6 and 1.2 cycles an issue on a full global-memory
// instruction queue (lg_throttle, none in step 4a), most samples on the 40 (4 warps) to 72 (2 warps) cp.async copies
// issued back to back after the barrier and the 64 + 32 state and U stores in two runs. Here, per k step of the first
// product (16 of them) a warp stores the state tile it has just read as its A operand (4 stores) and issues a
// sixteenth of the next chunk's W and Kend copies; per k step of the second product (8) it stores the U tile it has
// just read (4 stores) and an eighth of the U0 copies; one commit after both. The same arithmetic in the same order:
// the same bits as steps 4a and 4c.
// Prediction: lg_throttle under 0.3 cycles an issue, the chain at T = 512 in 24-27 us with 2 warps (step 4c 28.0) and
// 26-29 with 4 (33.6), T = 4096 0.85-0.9x step 4c.
// Measured (session 40, H100, results/h100-2026-12-05-session40-spread/): lg_throttle 0, but 31.4 and 33.7 us at
// T = 512 (step 4c 30.5, 33.6 in the same process) and 1.13x / 1.03x step 4c at T = 4096: refuted, kept as the contrast.
template <int Warps>
__global__ void __launch_bounds__(Warps * 32) chunked_gdn_tc_chain_spread(GdnParams p, float * records, float * states) {
    using Shared = ChainRegsShared<Warps>;
    using S      = LeanStaging<Warps>;
    constexpr int N = Shared::N, LU = Shared::LU, LX = Shared::LX;
    constexpr int WPerStep = S::WCopies / (kS / 8), UPerStep = S::UCopies / (kC / 8);
    static_assert(WPerStep * (kS / 8) == S::WCopies && UPerStep * (kC / 8) == S::UCopies, "whole copies a k step");
    static_assert(kS % N == 0, "the CTAs' slices cover the value columns");
    extern __shared__ __align__(128) unsigned char shared_chain_spread[];
    Shared &  sh = *reinterpret_cast<Shared *>(shared_chain_spread);
    const int j0 = int(blockIdx.x) * N, h = int(blockIdx.y), b = int(blockIdx.z);
    const int tid = int(threadIdx.x);
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int jw = warp * 16;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int chunks = (p.T + kC - 1) / kC;
    const int w_row = tid / S::RowPieces, w_col = 4 * (tid % S::RowPieces);
    const int u_row = tid / S::UPieces, u_col = 4 * (tid % S::UPieces);
    float *   first_rec = records + record_index(p, b, h, 0) * Record::floats;
    // the thread's first staged piece of each operand, in the record of chunk c and in buffer buf
    auto rec_w    = [&](int c) { return first_rec + int64_t(c) * Record::floats + Record::W + 4 * tid; };
    auto rec_kend = [&](int c) { return first_rec + int64_t(c) * Record::floats + Record::Kend + 4 * tid; };
    auto rec_u0   = [&](int c) { return first_rec + int64_t(c) * Record::floats + Record::U0 + u_row * kS + j0 + u_col; };
    stage_lean<Warps, LU>(rec_w(0), rec_kend(0), rec_u0(0), sh.w[0] + w_row * kRegsLW + w_col,
                          sh.kend[0] + w_row * kRegsLK + w_col, sh.u0[0] + u_row * LU + u_col);

    float         st[kS / 8][4];
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0 + jw) * kS;
#pragma unroll
    for (int n = 0; n < kS / 8; ++n) {
        st[n][0] = read_input(s_in + g * kS + 8 * n + 2 * t);
        st[n][1] = read_input(s_in + g * kS + 8 * n + 2 * t + 1);
        st[n][2] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t);
        st[n][3] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t + 1);
    }

    float * state_first = states + record_index(p, b, h, 0) * kS * kS + (2 * t) * kS + j0 + jw + g;
    float * u_first     = first_rec + Record::U0 + (2 * t) * kS + j0 + jw + g;
    for (int c = 0; c < chunks; ++c) {
        const int buf = c % 2;
        __pipeline_wait_prior(0);
        __syncthreads();
        const bool     next = c + 1 < chunks;  // the same for every thread
        float *        rec  = first_rec + int64_t(c) * Record::floats;
        const double * G    = reinterpret_cast<const double *>(rec + Record::G);
        const int      t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        const float    decay = rec[Record::eG + L - 1];
        // next chunk's copies: the thread's first pieces (a dead pointer past the last chunk is never used)
        const float *  nw = rec_w(c + 1), *nk = rec_kend(c + 1), *nu = rec_u0(c + 1);
        float *        sw = sh.w[buf ^ 1] + w_row * kRegsLW + w_col;
        float *        sk = sh.kend[buf ^ 1] + w_row * kRegsLK + w_col;
        float *        su = sh.u0[buf ^ 1] + u_row * LU + u_col;
        float *        s_out = state_first + int64_t(c) * kS * kS;

        float u[kC / 8][4];
        load_fragment_rows(sh.u0[buf] + jw, LU, u);
        const float * w = sh.w[buf];
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
            // the chunk-start state's tile kk (rows 8 kk + 2t (+1), columns g, g + 8) and a share of the copies
            s_out[8 * kk * kS]           = st[kk][0];
            s_out[(8 * kk + 1) * kS]     = st[kk][1];
            s_out[8 * kk * kS + 8]       = st[kk][2];
            s_out[(8 * kk + 1) * kS + 8] = st[kk][3];
            if (next) {
#pragma unroll
                for (int q = 0; q < WPerStep; ++q) {
                    const int i = kk * WPerStep + q;
                    __pipeline_memcpy_async(sw + i * S::WRowStep * kRegsLW, nw + i * 4 * S::Threads, 16);
                    __pipeline_memcpy_async(sk + i * S::WRowStep * kRegsLK, nk + i * 4 * S::Threads, 16);
                }
            }
        }

        const bool snapshots = p.T - t0 - p.K < L - 1;
        if (snapshots) {
            store_fragment_rows(sh.s0 + jw, LX, st);
            store_fragment_rows(sh.u + jw, LX, u);
            __syncthreads();
            write_snapshot_rows<N>(p, b, h, j0, t0, L - 1, G, sh.s0, sh.u, LX, sh.coef);
            __syncthreads();
        }

#pragma unroll
        for (int n = 0; n < kS / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                st[n][e] *= decay;
            }
        }
        const float * kend  = sh.kend[buf];
        float *       u_out = u_first + int64_t(c) * Record::floats;
#pragma unroll
        for (int kk = 0; kk < kC / 8; ++kk) {
            const uint32_t a[4] = {__float_as_uint(tf32(u[kk][0])), __float_as_uint(tf32(u[kk][2])),
                                   __float_as_uint(tf32(u[kk][1])), __float_as_uint(tf32(u[kk][3]))};
#pragma unroll
            for (int n = 0; n < kS / 8; ++n) {
                const uint32_t bf[2] = {__float_as_uint(kend[(8 * kk + 2 * t) * kRegsLK + 8 * n + g]),
                                        __float_as_uint(kend[(8 * kk + 2 * t + 1) * kRegsLK + 8 * n + g])};
                mma_16x8x8_tf32(st[n], a, bf);
            }
            // U's tile kk over U0 (this warp's columns) and a share of the U0 copies
            u_out[8 * kk * kS]           = u[kk][0];
            u_out[(8 * kk + 1) * kS]     = u[kk][1];
            u_out[8 * kk * kS + 8]       = u[kk][2];
            u_out[(8 * kk + 1) * kS + 8] = u[kk][3];
            if (next) {
#pragma unroll
                for (int q = 0; q < UPerStep; ++q) {
                    const int i = kk * UPerStep + q;
                    __pipeline_memcpy_async(su + i * S::URowStep * LU, nu + i * S::URowStep * kS, 16);
                }
            }
        }
        __pipeline_commit();

        if (const int last_slot = p.T - t0 - L; last_slot < p.K) {
            store_fragment_rows(sh.s0 + jw, LX, st);
            __syncthreads();
            write_state_snapshot<N>(p, b, h, j0, last_slot, sh.s0, LX);
            __syncthreads();
        }
    }
    __pipeline_wait_prior(0);
#endif
}

// Step 4e (session 40, written after step 4c's Nsight Compute pass): step 3d's prep pass (chunked_gdn_tc_prep_mma,
// RoundOnce false) with its address arithmetic taken out, the same record value for value. Nsight Compute on it (H200,
// T = 512, results/h200-2026-12-05-session40-lean/ncu-sass-mix.md, launch 8): 21.7 M warp instructions, HMMA 2.4%,
// and 46% of them at one loop level: the staging of the keys and queries, a scalar load a value, each with its own
// 64-bit address from the runtime row strides (about 15 instructions a value). Here:
//   - keys, queries and values are staged 16 bytes a load: thread tid takes the 4 columns 4 (tid % 32) of rows
//     tid / 32 + 8 u, eight rows of each operand in flight before any is stored (when every row starts 16-byte
//     aligned: the row pointer and stride; else stage_prep_inputs' and stage_scaled_values' scalar loops);
//   - the element-wise passes (Qe and Kend into the record, the scaled keys) take the same 4 columns a thread, 16 bytes
//     a load and a store, their row factors loaded once a row;
//   - the tile products deal their tiles over the compile-time warp count (kPrepThreads / 32), unrolled, and the
//     solve gets the thread count as a constant.
// Every expression is step 3d's in its order (the row factor products associate as there), so the record's bits are
// step 3d's. Prediction: 0.6-0.75x the instructions; the prep pass alone 35-42 us at T = 512 on the H100 (step 3d
// about 50); whole with step 4c's chain of 2 warps 92-99 us (step 4c whole 106.5 on the H100).
// Measured (session 40, H100, results/h100-2026-12-05-session40-prep-lean/): 0.67x the instructions (14.6 M), the
// prep pass 44.6 us at T = 512 (step 3d 50.4 in the same process), 334.5 at T = 4096 (367.4), whole with step 4c's
// chain 105.3 (step 4c whole 107.2): latency-bound between its barriers now (wait, scoreboards, barrier stalls).
constexpr int kPrepWarps = kPrepThreads / 32;
constexpr int kLeanRowPieces = kS / 4;                         // 16-byte pieces a row of kS floats
constexpr int kLeanRowsAPass = kPrepThreads / kLeanRowPieces;  // rows a pass of the CTA covers
constexpr int kLeanPasses    = kC / kLeanRowsAPass;            // passes over a chunk's rows
static_assert(kLeanPasses * kLeanRowsAPass == kC, "whole passes over the chunk's rows");

// Whether rows stride floats apart from row0 on can be read 16 bytes at a time.
__device__ __forceinline__ bool rows_of_float4(const float * row0, int64_t stride) {
    return reinterpret_cast<uintptr_t>(row0) % 16 == 0 && stride % 4 == 0;
}

// The rows of one operand (row0, stride floats apart; rows from L on are zero) at the thread's 4 columns, all passes
// loaded before any is used.
__device__ __forceinline__ void load_rows_of_float4(const float * row0, int64_t stride, int L, float4 (&x)[kLeanPasses]) {
    const int     tid = int(threadIdx.x), row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);
    const float * at  = row0 + int64_t(row) * stride + col;
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        x[u] = row + u * kLeanRowsAPass < L
                   ? __ldca(reinterpret_cast<const float4 *>(at + int64_t(u) * kLeanRowsAPass * stride))
                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

// stage_prep_inputs, 16 bytes a load where the rows allow it.
template <int Pad>
__device__ inline void stage_prep_inputs_lean(const GdnParams & p, PrepShared<Pad> & sh, int b, int h, int t0, int L) {
    constexpr int LS = Rows<Pad>::S;
    static_assert(LS % 4 == 0, "16-byte shared rows");
    const float * k0 = key_row(p, b, h, t0);
    const float * q0 = query_row(p, b, h, t0);
    if (!rows_of_float4(k0, p.k_s2) || !rows_of_float4(q0, p.q_s2)) {
        stage_prep_inputs(p, sh, b, h, t0, L);
        return;
    }
    const int tid = int(threadIdx.x), row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);
    float4    kv[kLeanPasses], qv[kLeanPasses];
    load_rows_of_float4(k0, p.k_s2, L, kv);
    load_rows_of_float4(q0, p.q_s2, L, qv);
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        *reinterpret_cast<float4 *>(&sh.k[(row + u * kLeanRowsAPass) * LS + col])  = kv[u];
        *reinterpret_cast<float4 *>(&sh.qb[(row + u * kLeanRowsAPass) * LS + col]) = qv[u];
    }
    if (tid < kC) {  // every thread its own gate loads, as stage_prep_inputs
        sh.pinv[tid] = tid < L ? read_input(&p.g[gate_index(p, b, h, t0 + tid)]) : 0.0f;
        sh.beta[tid] = tid < L ? read_input(&p.beta[gate_index(p, b, h, t0 + tid)]) : 0.0f;
    }
}

// stage_scaled_values (RoundTf32 false), 16 bytes a load where the rows allow it: beta_r f_r v, associated as there.
template <int Pad>
__device__ inline void stage_scaled_values_lean(const GdnParams & p, PrepShared<Pad> & sh, int b, int h, int t0, int L,
                                                int sabotage) {
    constexpr int LS = Rows<Pad>::S;
    const float * v0 = value_row(p, b, h, t0);
    if (!rows_of_float4(v0, p.v_s2)) {
        stage_scaled_values<Pad, false>(p, sh, b, h, t0, L, sabotage);
        return;
    }
    const int tid = int(threadIdx.x), row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);
    float4    vv[kLeanPasses];
    load_rows_of_float4(v0, p.v_s2, L, vv);
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        const int   r     = row + u * kLeanRowsAPass;
        const float scale = r < L ? sh.beta[r] * sabotage_factor(sh, r, sabotage) : 0.0f;
        const bool  real  = r < L;
        *reinterpret_cast<float4 *>(&sh.qb[r * LS + col]) =
            make_float4(real ? scale * vv[u].x : 0.0f, real ? scale * vv[u].y : 0.0f, real ? scale * vv[u].z : 0.0f,
                        real ? scale * vv[u].w : 0.0f);
    }
}

// shared_tile_products with the tiles dealt over the compile-time warp count, unrolled.
template <int TilesM, int TilesN, int KSteps, int ARow, int ACol, int BRow, int BCol, typename Store>
__device__ __forceinline__ void shared_tile_products_lean(const float * a, const float * b, Store store) {
    static_assert(TilesM * TilesN % kPrepWarps == 0, "whole tiles a warp");
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    const int group = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < TilesM * TilesN / kPrepWarps; ++n) {
        const int tile = warp + n * kPrepWarps;
        const int tm = tile / TilesN, tn = tile % TilesN;
        float     acc[2][4] = {};
        mma_tile_16x16<KSteps, ARow, ACol, BRow, BCol, true, true>(a + (tm * 16 + group) * ARow + t * ACol,
                                                                   b + t * BRow + (tn * 16 + group) * BCol, acc);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = tm * 16 + group, col = tn * 16 + half * 8 + 2 * t;
            store(r, col, acc[half][0], acc[half][1]);
            store(r + 8, col, acc[half][2], acc[half][3]);
        }
    }
}

template <int Pad>
__global__ void __launch_bounds__(kPrepThreads) chunked_gdn_tc_prep_lean(GdnParams p, float * records, int sabotage) {
    constexpr int LS = Rows<Pad>::S, LC = Rows<Pad>::C;
    extern __shared__ __align__(128) unsigned char shared_prep_lean[];
    PrepShared<Pad> & sh = *reinterpret_cast<PrepShared<Pad> *>(shared_prep_lean);
    const int         c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
    const int         tid = int(threadIdx.x);
    const int         t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    float *           rec = records + record_index(p, b, h, c) * Record::floats;
    const int         row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);  // the element-wise passes' share

    stage_prep_inputs_lean(p, sh, b, h, t0, L);
    __syncthreads();
    if (tid < 32) {
        scan_gates(sh, tid);
        __syncwarp();
        for (int r = tid; r < kC; r += 32) {
            sh.row_q[r]    = expf(float(sh.G[r]));
            sh.row_kend[r] = expf(float(sh.G[L - 1] - sh.G[r]));
        }
    }
    __syncthreads();

    shared_tile_products_lean<4, 4, kS / 8, LS, 1, 1, LS>(sh.k, sh.k, [&](int s, int m, float x0, float x1) {
        const float a0 = m < s && s < L ? sh.beta[s] * expf(float(sh.G[s] - sh.G[m])) * x0 : 0.0f;
        const float a1 = m + 1 < s && s < L ? sh.beta[s] * expf(float(sh.G[s] - sh.G[m + 1])) * x1 : 0.0f;
        *reinterpret_cast<float2 *>(&sh.a[s * LC + m]) = make_float2(a0, a1);
    });
    shared_tile_products_lean<4, 4, kS / 8, LS, 1, 1, LS>(sh.qb, sh.k, [&](int r, int s, float x0, float x1) {
        const float d0 = s <= r && r < L ? expf(float(sh.G[r] - sh.G[s])) : 0.0f;
        const float d1 = s + 1 <= r && r < L ? expf(float(sh.G[r] - sh.G[s + 1])) : 0.0f;
        *reinterpret_cast<float2 *>(rec + Record::QKm + r * kC + s) = make_float2(d0 * x0, d1 * x1);
    });
    if (tid < kC) {
        reinterpret_cast<double *>(rec + Record::G)[tid] = sh.G[tid];
        rec[Record::eG + tid] = tid < L ? float(exp(sh.G[tid])) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        const int    r = row + u * kLeanRowsAPass;
        const bool   real = r < L;
        const float  fq = sh.row_q[r], fk = sh.row_kend[r];
        const float4 q4 = *reinterpret_cast<const float4 *>(&sh.qb[r * LS + col]);
        const float4 k4 = *reinterpret_cast<const float4 *>(&sh.k[r * LS + col]);
        *reinterpret_cast<float4 *>(rec + Record::Qe + r * kS + col) =
            make_float4(real ? fq * q4.x : 0.0f, real ? fq * q4.y : 0.0f, real ? fq * q4.z : 0.0f, real ? fq * q4.w : 0.0f);
        *reinterpret_cast<float4 *>(rec + Record::Kend + r * kS + col) =
            make_float4(real ? tf32(fk * k4.x) : 0.0f, real ? tf32(fk * k4.y) : 0.0f, real ? tf32(fk * k4.z) : 0.0f,
                        real ? tf32(fk * k4.w) : 0.0f);
    }
    __syncthreads();

    invert_unit_lower_blocked(sh.a, sh.pinv, sh.qb, tid, kPrepThreads, fusekit_gdn::CtaBarrier{}, 0, LC);
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        const int    r = row + u * kLeanRowsAPass;
        const float  scale = r < L ? sh.beta[r] * sh.row_q[r] * sabotage_factor(sh, r, sabotage) : 0.0f;
        const bool   real = r < L;
        const float4 k4 = *reinterpret_cast<const float4 *>(&sh.k[r * LS + col]);
        *reinterpret_cast<float4 *>(&sh.qb[r * LS + col]) = make_float4(
            real ? scale * k4.x : 0.0f, real ? scale * k4.y : 0.0f, real ? scale * k4.z : 0.0f, real ? scale * k4.w : 0.0f);
    }
    __syncthreads();

    shared_tile_products_lean<4, kS / 16, kC / 8, LC, 1, LS, 1>(sh.pinv, sh.qb, [&](int r, int col2, float x0, float x1) {
        *reinterpret_cast<float2 *>(rec + Record::W + r * kS + col2) = make_float2(tf32(x0), tf32(x1));
    });
    __syncthreads();
    stage_scaled_values_lean(p, sh, b, h, t0, L, sabotage);
    __syncthreads();
    shared_tile_products_lean<4, kS / 16, kC / 8, LC, 1, LS, 1>(sh.pinv, sh.qb, [&](int r, int col2, float x0, float x1) {
        *reinterpret_cast<float2 *>(rec + Record::U0 + r * kS + col2) = make_float2(x0, x1);
    });
}

// Step 4f (session 41, written without a GPU: not yet run): step 4e's record from fewer instructions between the same
// barriers. Read from step 4e's static SASS (nvcc 13.0, sm_90, cuobjdump of the standalone program): what session
// 40's Nsight Compute pass called "a LEA per LDS" is the TF32 rounding itself: each cvt.rna.tf32 is an FSETP (|x| <
// inf) and a predicated LEA adding the rounding bit, two instructions an operand element, and step 4e rounds every
// element of both operands in every fragment load: in its four tile products a warp issues about 26 instructions a
// k step and tile (8 LDS, 16 for the rounding, 2 HMMA), about 3,300 of its about 7,100. Here, the same values into the
// same mma.sync in the same order:
//   - keys and queries are rounded once where they are staged (their fp32 values stay in the staging thread's
//     registers for Qe, Kend and the scaled keys, which step 4e computes from the unrounded values); the scaled keys
//     and values are stored rounded (step 4e rounds them in every load: the same values);
//   - each warp's tiles share their A fragment: pairs of 16-column tiles (4 A loads, 8 B loads, 4 HMMA a k step);
//   - tiles that their masks zero are not computed: K K^T and Q K^T above the block diagonal (the solve never reads
//     A there; Q K^T's are stored as zeros), and in W and U0 the k steps over P's zero blocks (row tile tm needs
//     2 (tm + 1) of 8), the row tiles paired 0 with 3 and 1 with 2 so that every warp runs 10 k steps;
//   - the solve takes the keys' buffer as its scratch (the keys are read by then) and keeps the queries' buffer,
//     which holds the scaled keys through it; the sabotage factor of each row is computed once, from the rounded keys.
// The record should be step 4e's value for value (the check program compares the two; a signed zero may differ where
// step 4e added the skipped blocks' +0 products). Prediction (before any run): about 0.7x step 4e's instructions
// (about 2,000 fewer a warp: the rounding and the A reloads), the prep pass 38-42 us at T = 512 on the H100 (step 4e
// 44.6) and 290-320 at T = 4096 (334.5); whole with step 4c's chain of 2 warps 99-103 us (step 4e whole 105.3).
template <int Pad> struct PrepRoundedShared : PrepShared<Pad> {
    float factor[kC];  // the sabotage factor f of each row (1 unless sabotaged)
};
static_assert(sizeof(PrepRoundedShared<kPadBanks>) <= 115456, "step 4f keeps two CTAs per SM on sm_90");

template <int Pad> inline size_t prep_rounded_shared_bytes() {
    return sizeof(PrepRoundedShared<Pad>);
}

// acc[2 j + half] += a b for Tiles 16-column tiles side by side that share their A fragment: mma_tile_16x16's
// operands and order for each tile (at, bt: the lane's first elements of a and of the first tile of b).
template <int KSteps, int Tiles, int ARow, int ACol, int BRow, int BCol, bool RoundA>
__device__ __forceinline__ void mma_tile_row(const float * at, const float * bt, float (&acc)[2 * Tiles][4]) {
    auto bits = [](float x, bool round) { return __float_as_uint(round ? tf32(x) : x); };
#pragma unroll
    for (int kk = 0; kk < KSteps; ++kk) {
        const uint32_t af[4] = {bits(at[kk * 8 * ACol], RoundA), bits(at[8 * ARow + kk * 8 * ACol], RoundA),
                                bits(at[(kk * 8 + 4) * ACol], RoundA), bits(at[8 * ARow + (kk * 8 + 4) * ACol], RoundA)};
#pragma unroll
        for (int j = 0; j < Tiles; ++j) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const float *  b     = bt + (j * 16 + half * 8) * BCol;
                const uint32_t bf[2] = {__float_as_uint(b[kk * 8 * BRow]), __float_as_uint(b[(kk * 8 + 4) * BRow])};
                mma_16x8x8_tf32(acc[2 * j + half], af, bf);
            }
        }
    }
}

// Row tile tm, column tiles tn0 and tn0 + 1 of a b over KSteps k steps (B stored in TF32), each element pair handed
// to store(r, c, x0, x1) as shared_tile_products does.
template <int KSteps, int ARow, int ACol, int BRow, int BCol, bool RoundA, typename Store>
__device__ __forceinline__ void tile_pair_product(const float * a, const float * b, int tm, int tn0, Store store) {
    const int lane = int(threadIdx.x) % 32, group = lane / 4, t = lane % 4;
    float     acc[4][4] = {};
    mma_tile_row<KSteps, 2, ARow, ACol, BRow, BCol, RoundA>(a + (tm * 16 + group) * ARow + t * ACol,
                                                            b + t * BRow + (tn0 * 16 + group) * BCol, acc);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = tm * 16 + group, col = (tn0 + j) * 16 + half * 8 + 2 * t;
            store(r, col, acc[2 * j + half][0], acc[2 * j + half][1]);
            store(r + 8, col, acc[2 * j + half][2], acc[2 * j + half][3]);
        }
    }
}

// The six tile pairs of a 64 x 64 product on or below the block diagonal: row tile, first column tile.
__device__ __forceinline__ void lower_tile_pair(int job, int & tm, int & tn0) {
    tm  = job < 2 ? job : 2 + (job - 2) / 2;
    tn0 = job < 2 ? 0 : 2 * ((job - 2) % 2);
}

// P (lower triangular by 16 x 16 blocks) times a 64 x kS operand in TF32: the warp's pair of column tiles in row
// tiles 0 and 3 (warps 0-3) or 1 and 2 (warps 4-7), each over the k steps where P is not zero.
template <int LC, int LS, typename Store>
__device__ __forceinline__ void lower_times_rounded(const float * pinv, const float * b, Store store) {
    static_assert(kC == 64 && kS == 128 && kPrepWarps == 8, "the warps' row tiles are laid out for 64 x 128");
    const int warp = int(threadIdx.x) / 32, tn0 = 2 * (warp % 4);
    if (warp < 4) {
        tile_pair_product<2, LC, 1, LS, 1, true>(pinv, b, 0, tn0, store);
        tile_pair_product<8, LC, 1, LS, 1, true>(pinv, b, 3, tn0, store);
    } else {
        tile_pair_product<4, LC, 1, LS, 1, true>(pinv, b, 1, tn0, store);
        tile_pair_product<6, LC, 1, LS, 1, true>(pinv, b, 2, tn0, store);
    }
}

// The thread's 4 columns of its kLeanPasses rows of keys and queries in fp32 (x), staged rounded to TF32 into sh.k
// and sh.qb; rows from L on are zero. Unaligned rows go through stage_prep_inputs and are read back from shared memory.
template <int Pad>
__device__ inline void stage_prep_inputs_rounded(const GdnParams & p, PrepRoundedShared<Pad> & sh, int b, int h, int t0,
                                                 int L, float4 (&kv)[kLeanPasses], float4 (&qv)[kLeanPasses]) {
    constexpr int LS = Rows<Pad>::S;
    const int     tid = int(threadIdx.x), row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);
    const float * k0 = key_row(p, b, h, t0);
    const float * q0 = query_row(p, b, h, t0);
    if (rows_of_float4(k0, p.k_s2) && rows_of_float4(q0, p.q_s2)) {
        load_rows_of_float4(k0, p.k_s2, L, kv);
        load_rows_of_float4(q0, p.q_s2, L, qv);
        if (tid < kC) {
            sh.pinv[tid] = tid < L ? read_input(&p.g[gate_index(p, b, h, t0 + tid)]) : 0.0f;
            sh.beta[tid] = tid < L ? read_input(&p.beta[gate_index(p, b, h, t0 + tid)]) : 0.0f;
        }
    } else {
        stage_prep_inputs(p, sh, b, h, t0, L);
        __syncthreads();
#pragma unroll
        for (int u = 0; u < kLeanPasses; ++u) {
            kv[u] = *reinterpret_cast<const float4 *>(&sh.k[(row + u * kLeanRowsAPass) * LS + col]);
            qv[u] = *reinterpret_cast<const float4 *>(&sh.qb[(row + u * kLeanRowsAPass) * LS + col]);
        }
        __syncthreads();
    }
    auto rounded = [](float4 x) { return make_float4(tf32(x.x), tf32(x.y), tf32(x.z), tf32(x.w)); };
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        *reinterpret_cast<float4 *>(&sh.k[(row + u * kLeanRowsAPass) * LS + col])  = rounded(kv[u]);
        *reinterpret_cast<float4 *>(&sh.qb[(row + u * kLeanRowsAPass) * LS + col]) = rounded(qv[u]);
    }
}

// The values scaled by beta f into qb, rounded to TF32 (step 4e's stage_scaled_values_lean, the same products).
template <int Pad>
__device__ inline void stage_scaled_values_rounded(const GdnParams & p, PrepRoundedShared<Pad> & sh, int b, int h, int t0,
                                                   int L) {
    constexpr int LS = Rows<Pad>::S;
    const float * v0 = value_row(p, b, h, t0);
    const int     tid = int(threadIdx.x);
    if (!rows_of_float4(v0, p.v_s2)) {
        for (int idx = tid; idx < kC * kS; idx += kPrepThreads) {
            const int r = idx / kS, j = idx % kS;
            const float x = r < L ? sh.beta[r] * sh.factor[r] * read_input(v0 + r * p.v_s2 + j) : 0.0f;
            sh.qb[r * LS + j] = tf32(x);
        }
        return;
    }
    const int row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);
    float4    vv[kLeanPasses];
    load_rows_of_float4(v0, p.v_s2, L, vv);
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        const int   r     = row + u * kLeanRowsAPass;
        const bool  real  = r < L;
        const float scale = real ? sh.beta[r] * sh.factor[r] : 0.0f;
        *reinterpret_cast<float4 *>(&sh.qb[r * LS + col]) =
            make_float4(real ? tf32(scale * vv[u].x) : 0.0f, real ? tf32(scale * vv[u].y) : 0.0f,
                        real ? tf32(scale * vv[u].z) : 0.0f, real ? tf32(scale * vv[u].w) : 0.0f);
    }
}

// Step 4h (session 43, written before its first GPU run): the chunk's values asked into the L2 while the keys' products
// run. Session 42's Nsight Compute samples of step 4f at T = 512 (H100), split at the CTA barriers
// (scripts/ncu_sass_mix.py --phases): the segment that loads the values, scales and stores them took 20.9% of the
// kernel's stall samples, waiting on those loads (long scoreboard) and on the shared loads queued behind them; at
// T = 512 the pass is one wave whose CTAs all reach that load together, after the products and the solve, with the
// DRAM idle until then. Each thread of the CTA asks one 128-byte line of the chunk's values (64 rows of 512 bytes:
// thread tid the line tid % 4 of row tid / 4; rows past the chunk's end none) into the L2 with prefetch.global.L2
// once its keys and queries are staged; nothing else changes, so the record is step 4f's bit for bit.
__device__ __forceinline__ void prefetch_values_l2(const GdnParams & p, int b, int h, int t0, int L) {
    static_assert(kPrepThreads == kC * 4 && kS * sizeof(float) == 4 * 128, "a thread a 128-byte line of the values");
    const int tid = int(threadIdx.x), r = tid / 4, line = tid % 4;
    if (r < L) {
        const float * at = value_row(p, b, h, t0) + int64_t(r) * p.v_s2 + line * 32;
        asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
    }
}

// Step 4i (session 44, written before its first GPU run): the record's W and U0 leave through Hopper's bulk copy.
// Session 43's Nsight Compute phases of step 4f (results/h100-2026-12-06-session43b-step4h/ncu/phases-step4f.md) and
// step 4h's refutation: the prep pass is bound by its memory pipeline along its whole length, not by one exposed load.
// Its last two products store W and U0 from their fragments: each warp 32 8-byte stores a product, every store
// touching 8 rows (8 sectors in 8 lines); the last phase's top stalls are the global queue's (lg_throttle) and the
// drain before the CTA exits. Here each product's fragments go to shared memory instead (the keys' buffer, the
// solve's scratch until then, rows Pad floats apart), and 64 threads each send one 512-byte row to the record with
// cp.async.bulk (sm_90; one instruction a row, written by the copy engine in whole lines). U0 waits until W's rows
// have been read out of that buffer; the CTA waits for U0's before it exits. The values stored are step 4f's, so the
// record is step 4f's bit for bit (the check program compares them). Elsewhere than sm_90 the stores are step 4f's.
// Prediction (before any run), H100: the prep pass alone 38.5-40 us at T = 512 (step 4f 41.0-41.5 in three
// processes), 272-283 at T = 4096 (290.6-290.7); two passes whole 76.5-78 / 530-542 (step 5a 79.0-79.8 / 548.7-551.3).
// Refuted if the prep pass is not under 40.5 us at T = 512.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr bool kBulkCopyToGlobal = true;
#else
constexpr bool kBulkCopyToGlobal = false;
#endif

// Make this thread's shared-memory writes visible to the bulk copy (the async proxy) before the barrier that hands
// them over.
__device__ __forceinline__ void fence_shared_for_bulk_copy() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// bytes (a multiple of 16) from shared src to global dst (both 16-byte aligned), as one bulk-copy group of this thread.
__device__ __forceinline__ void bulk_copy_to_global(float * dst, const float * src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const auto from = static_cast<uint32_t>(__cvta_generic_to_shared(src));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n\t"
                 "cp.async.bulk.commit_group;" ::"l"(dst),
                 "r"(from), "r"(bytes)
                 : "memory");
#endif
}

// Wait until this thread's bulk copies have read their shared source (the buffer may then be written again).
__device__ __forceinline__ void wait_bulk_copies_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}

// Step 4j (session 44, written after step 4i's run and before its own): QKm leaves by the bulk copy too. Step 4i's
// profile (results/h100-2026-12-06-session44b-step4i/ncu-4i/phases-step4i.md): the products' phase (4), where QKm's
// 8-byte pairs are stored from the fragments (48,128 STG with the zero blocks' 16-byte stores, three quarters of W's),
// is now the largest, 897 of 3,746 samples (wait 244, mio 155). Its pairs go to the solve's matrix buffer pinv instead
// (free from the gate scan until the solve writes it; rows LC floats apart), the zero blocks too, and threads 0-63
// each send one 256-byte row to the record after the barrier that ends the phase; they wait for the copy to have read
// pinv, and one more barrier, before the solve writes it. The values are step 4i's, so the record is step 4f's bit for
// bit. Prediction (before any run), H100: the prep pass alone 35.5-36.8 us at T = 512 (step 4i 37.2-37.7), 266-274 at
// T = 4096 (275.3-278.2); two passes whole 72.5-74 / 520-532 (step 4i 74.4-75.3 / 530.6-538.9). Less than step 4i's
// gain: fewer stores, and the wait before the solve is exposed (about 16 KB read out of shared memory). Refuted if the
// prep pass is not under step 4i's beside it in the same process by 0.5 us or more at T = 512.

// RoundQe (step 5a's prep pass): the record's Qe and QKm stored rounded to TF32 too, for a chain that reads them as
// B operands without rounding (the output passes round them again: the same values). PrefetchValues: step 4h.
// BulkStores: step 4i. BulkQKm (with BulkStores): step 4j.
template <int Pad, bool RoundQe = false, bool PrefetchValues = false, bool BulkStores = false, bool BulkQKm = false>
__global__ void __launch_bounds__(kPrepThreads) chunked_gdn_tc_prep_rounded(GdnParams p, float * records, int sabotage) {
    static_assert(BulkStores || !BulkQKm, "step 4j is step 4i with QKm by bulk copy too");
    constexpr int  LS = Rows<Pad>::S, LC = Rows<Pad>::C;
    constexpr bool Bulk = BulkStores && kBulkCopyToGlobal, BulkQ = BulkQKm && Bulk;
    extern __shared__ __align__(128) unsigned char shared_prep_rounded[];
    PrepRoundedShared<Pad> & sh = *reinterpret_cast<PrepRoundedShared<Pad> *>(shared_prep_rounded);
    const int c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
    const int tid = int(threadIdx.x), warp = tid / 32;
    const int t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    float *   rec = records + record_index(p, b, h, c) * Record::floats;
    const int row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);  // the element-wise passes' share

    float4 kv[kLeanPasses], qv[kLeanPasses];
    stage_prep_inputs_rounded(p, sh, b, h, t0, L, kv, qv);
    if constexpr (PrefetchValues) {
        prefetch_values_l2(p, b, h, t0, L);
    }
    __syncthreads();
    if (tid < 32) {
        scan_gates(sh, tid);
        __syncwarp();
        for (int r = tid; r < kC; r += 32) {
            sh.row_q[r]    = expf(float(sh.G[r]));
            sh.row_kend[r] = expf(float(sh.G[L - 1] - sh.G[r]));
        }
    } else if (tid >= 64 && tid < 64 + kC) {  // (from the rounded keys: only the sabotage reads them)
        sh.factor[tid - 64] = sabotage_factor(sh, tid - 64, sabotage);
    }
    __syncthreads();

    // G, e^G, Qe and Kend into the record, from the fp32 values in registers; the scaled keys kept there, rounded
    if (tid < kC) {
        reinterpret_cast<double *>(rec + Record::G)[tid] = sh.G[tid];
        rec[Record::eG + tid] = tid < L ? float(exp(sh.G[tid])) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        const int    r = row + u * kLeanRowsAPass;
        const bool   real = r < L;
        const float  fq = sh.row_q[r], fk = sh.row_kend[r];
        const float  scale = real ? sh.beta[r] * sh.row_q[r] * sh.factor[r] : 0.0f;
        const float4 q4 = qv[u], k4 = kv[u];
        auto qe = [&](float x) { return RoundQe ? tf32(fq * x) : fq * x; };
        *reinterpret_cast<float4 *>(rec + Record::Qe + r * kS + col) =
            make_float4(real ? qe(q4.x) : 0.0f, real ? qe(q4.y) : 0.0f, real ? qe(q4.z) : 0.0f, real ? qe(q4.w) : 0.0f);
        *reinterpret_cast<float4 *>(rec + Record::Kend + r * kS + col) =
            make_float4(real ? tf32(fk * k4.x) : 0.0f, real ? tf32(fk * k4.y) : 0.0f, real ? tf32(fk * k4.z) : 0.0f,
                        real ? tf32(fk * k4.w) : 0.0f);
        kv[u] = make_float4(real ? tf32(scale * k4.x) : 0.0f, real ? tf32(scale * k4.y) : 0.0f,
                            real ? tf32(scale * k4.z) : 0.0f, real ? tf32(scale * k4.w) : 0.0f);
    }

    // K K^T (into A) and Q K^T (into the record) on and below the block diagonal: 12 tile pairs over the 8 warps
    auto store_a = [&](int s, int m, float x0, float x1) {
        const float a0 = m < s && s < L ? sh.beta[s] * expf(float(sh.G[s] - sh.G[m])) * x0 : 0.0f;
        const float a1 = m + 1 < s && s < L ? sh.beta[s] * expf(float(sh.G[s] - sh.G[m + 1])) * x1 : 0.0f;
        *reinterpret_cast<float2 *>(&sh.a[s * LC + m]) = make_float2(a0, a1);
    };
    // QKm's row r, column s: in the record, or (step 4j) in pinv until the bulk copy sends it
    float * const qkm_staged = sh.pinv;
    auto          qkm_at     = [&](int r, int s) { return BulkQ ? qkm_staged + r * LC + s : rec + Record::QKm + r * kC + s; };
    auto          store_qkm  = [&](int r, int s, float x0, float x1) {
        const float d0 = s <= r && r < L ? expf(float(sh.G[r] - sh.G[s])) : 0.0f;
        const float d1 = s + 1 <= r && r < L ? expf(float(sh.G[r] - sh.G[s + 1])) : 0.0f;
        *reinterpret_cast<float2 *>(qkm_at(r, s)) =
            RoundQe ? make_float2(tf32(d0 * x0), tf32(d1 * x1)) : make_float2(d0 * x0, d1 * x1);
    };
    for (int job = warp; job < 12; job += kPrepWarps) {
        int tm = 0, tn0 = 0;
        lower_tile_pair(job % 6, tm, tn0);
        if (job < 6) {
            tile_pair_product<kS / 8, LS, 1, 1, LS, false>(sh.k, sh.k, tm, tn0, store_a);
        } else {
            tile_pair_product<kS / 8, LS, 1, 1, LS, false>(sh.qb, sh.k, tm, tn0, store_qkm);
        }
    }
    if (warp >= 4) {  // the warps with one pair: Q K^T's zero blocks (rows 0-31, columns 32-63), where QKm goes
        const int i = tid - 128, r = i / 4, s = 32 + 8 * (i % 4);
        *reinterpret_cast<float4 *>(qkm_at(r, s))     = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        *reinterpret_cast<float4 *>(qkm_at(r, s + 4)) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    if constexpr (BulkQ) {
        fence_shared_for_bulk_copy();
    }
    __syncthreads();  // the keys and queries are read: the scaled keys into qb, the keys' buffer the solve's scratch
    if constexpr (BulkQ) {
        if (tid < kC) {
            bulk_copy_to_global(rec + Record::QKm + tid * kC, qkm_staged + tid * LC, kC * int(sizeof(float)));
        }
    }

#pragma unroll
    for (int u = 0; u < kLeanPasses; ++u) {
        *reinterpret_cast<float4 *>(&sh.qb[(row + u * kLeanRowsAPass) * LS + col]) = kv[u];
    }
    if constexpr (BulkQ) {
        if (tid < kC) {
            wait_bulk_copies_read();  // QKm's rows out of pinv before the solve writes it
        }
        __syncthreads();
    }
    invert_unit_lower_blocked(sh.a, sh.pinv, sh.k, tid, kPrepThreads, fusekit_gdn::CtaBarrier{}, 0, LC);

    // W and U0: straight from the fragments into the record, or (step 4i) into the keys' buffer and out a row a thread
    float * const staged = sh.k;
    auto record_rows_out = [&](int64_t at) {
        fence_shared_for_bulk_copy();
        __syncthreads();
        if (tid < kC) {
            bulk_copy_to_global(rec + at + tid * kS, staged + tid * LS, kS * int(sizeof(float)));
        }
    };
    lower_times_rounded<LC, LS>(sh.pinv, sh.qb, [&](int r, int col2, float x0, float x1) {
        float * to = Bulk ? staged + r * LS + col2 : rec + Record::W + r * kS + col2;
        *reinterpret_cast<float2 *>(to) = make_float2(tf32(x0), tf32(x1));
    });
    if constexpr (Bulk) {
        record_rows_out(Record::W);  // (its barrier is also the one before qb is written)
    } else {
        __syncthreads();
    }
    stage_scaled_values_rounded(p, sh, b, h, t0, L);
    if constexpr (Bulk) {
        if (tid < kC) {
            wait_bulk_copies_read();  // W's rows out of the keys' buffer before U0 goes into it
        }
    }
    __syncthreads();
    lower_times_rounded<LC, LS>(sh.pinv, sh.qb, [&](int r, int col2, float x0, float x1) {
        float * to = Bulk ? staged + r * LS + col2 : rec + Record::U0 + r * kS + col2;
        *reinterpret_cast<float2 *>(to) = make_float2(x0, x1);
    });
    if constexpr (Bulk) {
        record_rows_out(Record::U0);
        if (tid < kC) {
            wait_bulk_copies_read();  // the shared memory stays the CTA's until the copy has read it
        }
    }
}

// Step 4g (session 41, written without a GPU: not yet run): step 3f's output pass of 128 columns
// (chunked_gdn_tc_output<Pad, kS, 1, true, false>, what fusion-4's glue runs) with its staging at compile-time offsets
// and its result stored from the fragments. Static SASS of step 3f (results/cpu-2026-12-05-session41-static-sass/):
// of its 1,904 instructions, about 540 are the staging loops' index arithmetic (a runtime blockDim.x: the division of
// each quad's index into row and column, 64-bit addresses) and its last loop runs 32 times a thread, each store with
// its own 64-bit index into dst, after a round trip of the result tiles through shared memory behind two barriers.
// Here:
//   - S0 and U are staged as step 4e stages its rows: thread tid takes the 16-byte quad tid % 32 of rows tid / 32 +
//     8 u, all of an operand's loads in flight before any store, rounded to TF32 where stored (as step 3f);
//   - the products are step 3f's (mma_global_rows_shared, the same operands in the same order: the same sums);
//   - each lane stores its C fragments' element pairs times scale straight to dst (8-byte stores; a quad of lanes
//     writes 32 contiguous bytes of a row), rows past the chunk's end skipped: no result tiles in shared memory, one
//     barrier instead of three.
// The outputs should be step 3f's bit for bit (the check program compares them). Prediction (before any run): 0.7-0.8x
// step 3f's warp instructions; the output pass alone at T = 512 on the H100 26-28 us (step 3f about 30), T = 4096
// 0.85-0.95x step 3f's; whole with step 4f's prep and step 4c's chain 95-100 us at T = 512.
constexpr int kOutRowsAPass = kStateThreads / kLeanRowPieces;  // rows of 128 floats a pass of the CTA covers

// Rows rows of kS floats from src (rows kS apart) into shared rows LS apart, rounded to TF32, every load in flight
// before the first store; thread tid's share: quad tid % 32 of rows tid / 32 + 8 u.
template <int Rows, int LS> __device__ __forceinline__ void stage_rows_rounded(float * dst, const float * src) {
    static_assert(Rows % kOutRowsAPass == 0, "whole passes");
    constexpr int Passes = Rows / kOutRowsAPass;
    const int     tid = int(threadIdx.x), row = tid / kLeanRowPieces, col = 4 * (tid % kLeanRowPieces);
    const float * from = src + row * kS + col;
    float *       to   = dst + row * LS + col;
    float4        v[Passes];
#pragma unroll
    for (int u = 0; u < Passes; ++u) {
        v[u] = __ldca(reinterpret_cast<const float4 *>(from + u * kOutRowsAPass * kS));
    }
#pragma unroll
    for (int u = 0; u < Passes; ++u) {
        *reinterpret_cast<float4 *>(to + u * kOutRowsAPass * LS) =
            make_float4(tf32(v[u].x), tf32(v[u].y), tf32(v[u].z), tf32(v[u].w));
    }
}

template <int Pad>
__global__ void __launch_bounds__(kStateThreads) chunked_gdn_tc_output_lean(GdnParams p, const float * records,
                                                                             const float * states) {
    constexpr int LS         = OutputShared<Pad, kS>::LD;
    constexpr int kWarpTiles = kS / 32;  // two warps a row tile, 4 column tiles each
    static_assert(kStateThreads == 256, "8 warps: 4 row tiles, 2 halves of the columns");
    extern __shared__ __align__(128) unsigned char shared_output_lean[];
    OutputShared<Pad, kS> & sh = *reinterpret_cast<OutputShared<Pad, kS> *>(shared_output_lean);
    const int     c = int(blockIdx.x), h = int(blockIdx.y), b = int(blockIdx.z);
    const int     tid = int(threadIdx.x);
    const float * rec = records + record_index(p, b, h, c) * Record::floats;
    const float * st  = states + record_index(p, b, h, c) * kS * kS;
    const int     t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
    stage_rows_rounded<kS, LS>(sh.s0, st);
    stage_rows_rounded<kC, LS>(sh.u, rec + Record::U0);
    __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int tm = (tid / 32) / 2, tn0 = kWarpTiles * ((tid / 32) % 2);
    const int group = (tid % 32) / 4, t = tid % 4;
    float     acc[kWarpTiles][2][4] = {};
    mma_global_rows_shared<kS / 8, kS, LS, kWarpTiles, true>(rec + Record::Qe + (tm * 16 + group) * kS + t,
                                                             sh.s0 + t * LS + tn0 * 16 + group, acc);  // Qe S0
    mma_global_rows_shared<kC / 8, kC, LS, kWarpTiles, true>(rec + Record::QKm + (tm * 16 + group) * kC + t,
                                                             sh.u + t * LS + tn0 * 16 + group, acc);  // QKm U
    // rows r and r + 8 of the lane, its first column; every other element at a fixed offset from these
    const int     r      = tm * 16 + group;
    const int64_t stride = int64_t(p.H_v) * kS;  // floats from a token's output row to the next token's
    float *       row0   = p.dst + ((int64_t(b) * p.T + t0 + r) * p.H_v + h) * kS + tn0 * 16 + 2 * t;
    float *       row8   = row0 + 8 * stride;
    const bool    pairs  = reinterpret_cast<uintptr_t>(p.dst) % 8 == 0;  // every pair then 8-byte aligned
#pragma unroll
    for (int tile = 0; tile < kWarpTiles; ++tile) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int    at = tile * 16 + half * 8;
            const float * x = acc[tile][half];
            if (r < L) {
                if (pairs) {
                    *reinterpret_cast<float2 *>(row0 + at) = make_float2(x[0] * p.scale, x[1] * p.scale);
                } else {
                    row0[at]     = x[0] * p.scale;
                    row0[at + 1] = x[1] * p.scale;
                }
            }
            if (r + 8 < L) {
                if (pairs) {
                    *reinterpret_cast<float2 *>(row8 + at) = make_float2(x[2] * p.scale, x[3] * p.scale);
                } else {
                    row8[at]     = x[2] * p.scale;
                    row8[at + 1] = x[3] * p.scale;
                }
            }
        }
    }
#endif
}

#endif  // __CUDACC__

}  // namespace fusekit_gdn_tc
