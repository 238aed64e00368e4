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

#endif  // __CUDACC__

}  // namespace fusekit_gdn_tc
