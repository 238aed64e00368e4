// fusion-4 step 4a (session 38): the chain with the state in registers across chunks, for the standalone program
// (kernels/chunked_gdn_check.cu) only until a GPU has checked and timed it. It lives beside fusekit-chunked-gdn-tc.cuh,
// not in it: that header is one of fusion-4's sources, and the named stacks are pinned to their sources' hashes
// (tests/test_named_stacks.py), so an untried kernel must not change it. kernels/NOTES-chunked-gdn.md, "Step 4a".
#pragma once

#include "fusekit-chunked-gdn-tc.cuh"

namespace fusekit_gdn_tc {

#if defined(__CUDACC__)

// A chain's record operands of one chunk (rec) into shared memory by cp.async, 16 bytes per copy, committed as one
// group: W and Kend (rows lw and lk floats apart) and the columns j0 .. j0 + N of U0 (rows lu apart). Records are
// 32-byte aligned, j0 a multiple of 16 and every row length a multiple of 4 floats.
template <int N>
__device__ inline void stage_chain_operands(const float * rec, int j0, float * w, int lw, float * kend, int lk, float * u0,
                                            int lu) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int tid = int(threadIdx.x), nthr = int(blockDim.x);
    for (int idx = tid; idx < kC * kS / 4; idx += nthr) {
        const int r = idx / (kS / 4), q4 = idx % (kS / 4);
        __pipeline_memcpy_async(w + r * lw + 4 * q4, rec + Record::W + 4 * idx, 16);
        __pipeline_memcpy_async(kend + r * lk + 4 * q4, rec + Record::Kend + 4 * idx, 16);
    }
    for (int idx = tid; idx < kC * N / 4; idx += nthr) {
        const int s = idx / (N / 4), q4 = idx % (N / 4);
        __pipeline_memcpy_async(u0 + s * lu + 4 * q4, rec + Record::U0 + s * kS + j0 + 4 * q4, 16);
    }
    __pipeline_commit();
#endif
}

// The columns of the state do not talk to each other inside a chunk: U[:, J] = U0[:, J] - W S0[:, J] and
// S0[:, J] <- e^{G_last} S0[:, J] + Kend^T U[:, J] need only the slice J and the chunk's record. So each warp owns 16
// value columns for the whole sequence and keeps S^T (16 x kS) in m16n8 C fragments (16 tiles of 8 keys, 64
// registers); no barrier separates its two products. Both products take their A operand straight from C fragments:
//   U^T = U0^T - S0^T W^T      (M 16 value columns, N kC tokens, K kS keys)
//   S^T <- e^{G_last} S^T + U^T Kend   (M 16 value columns, N kS keys, K kC tokens)
// An m16n8k8 A fragment holds k = t and t + 4 of its 8-wide k step; a C fragment holds columns 2t and 2t + 1. The sum
// over a k step does not depend on the order of its 8 terms, so the k step's element t is read as column 2t and
// t + 4 as 2t + 1, in A and B alike: W^T's B fragment is W[8n + g][8kk + 2t .. + 1] (one float2), Kend's is
// Kend[8kk + 2t][8n + g] and Kend[8kk + 2t + 1][8n + g]. The CTA's warps share the chunk's W and Kend (and their
// slices of U0), staged by cp.async one chunk ahead; one barrier per chunk, off the products' dependence chain.
// The values differ from step 3e's chain by the order of the sums (U0 is the accumulator's start, not subtracted
// after), within the same TF32 error.
constexpr int kRegsLW = kS + 8;  // W rows: the float2 B loads of 16 lanes (8 rows, 8 columns) on distinct banks
constexpr int kRegsLK = kS + 4;  // Kend rows: the B loads (4 rows 2t, 8 columns g) on distinct banks

// A warp's m16n8 C fragments of a transposed product, x[n] holding rows 8n + 2t, 8n + 2t + 1 and columns g, g + 8 of
// the untransposed matrix, to and from memory at m[row ld + column] (m offset to the warp's first column).
template <int Tiles> __device__ inline void store_fragment_rows(float * m, int ld, const float (&x)[Tiles][4]) {
    const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < Tiles; ++n) {
        m[(8 * n + 2 * t) * ld + g]         = x[n][0];
        m[(8 * n + 2 * t + 1) * ld + g]     = x[n][1];
        m[(8 * n + 2 * t) * ld + g + 8]     = x[n][2];
        m[(8 * n + 2 * t + 1) * ld + g + 8] = x[n][3];
    }
}
template <int Tiles> __device__ inline void load_fragment_rows(const float * m, int ld, float (&x)[Tiles][4]) {
    const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int n = 0; n < Tiles; ++n) {
        x[n][0] = m[(8 * n + 2 * t) * ld + g];
        x[n][1] = m[(8 * n + 2 * t + 1) * ld + g];
        x[n][2] = m[(8 * n + 2 * t) * ld + g + 8];
        x[n][3] = m[(8 * n + 2 * t + 1) * ld + g + 8];
    }
}

template <int Warps> struct ChainRegsShared {
    static constexpr int N  = 16 * Warps;  // value columns of the CTA
    static constexpr int LU = N + 4;       // U0 slice rows: the lanes' loads (rows 2t, columns g) on distinct banks
    static constexpr int LX = N + 1;       // scratch rows (snapshot chunks only)
    float w[2][kC * kRegsLW];              // W of chunk c (buffer c % 2), in TF32 as the prep pass stores it
    float kend[2][kC * kRegsLK];           // Kend of chunk c, in TF32
    float u0[2][kC * LU];                  // the CTA's columns of U0, [s][jj]
    float s0[kS * LX];                     // scratch for the snapshot slots: S0[i][jj] (or the new state)
    float u[kC * LX];                      // and U[s][jj]
    float coef[kC];                        // a snapshot row's decays e^{G_r - G_s}, s <= r
};

// The snapshot slots among the chunk's first rows tokens (the sequence's last K), from S0 and U (rows ld apart, N
// columns) in shared memory: write_snapshot_slices's sums, the same expressions in the same order, for any block size.
// A thread takes one key i and kSnapshotGroup value columns at a time: the decay-weighted key of token s is the same
// for the group, so one key load serves kSnapshotGroup independent sums; a row's decays e^{G_r - G_s} are computed
// once into coef (the same float expf gives) and the key loads of two tokens issued together (four made ptxas spill
// and slowed the chain's main loop by a quarter). Every thread of the CTA calls it (barriers inside). Session 39, the
// K = 3 case on an H100 with 4 warps: one element a thread (as step 3e does it, with 256 threads) 621 us, groups of
// 16 with an expf and a key load a term 172, this 111 (step 3e 150); kernels/NOTES-chunked-gdn.md, "Step 4a".
constexpr int kSnapshotGroup = 16;
template <int N>
__device__ inline void write_snapshot_rows(const GdnParams & p, int b, int h, int j0, int t0, int rows, const double * G,
                                           const float * s0, const float * u, int ld, float * coef) {
    static_assert(N % kSnapshotGroup == 0, "whole groups of value columns");
    const float * k0    = key_row(p, b, h, t0);
    const int     first = p.T - t0 - p.K;
    for (int r = first > 0 ? first : 0; r < rows; ++r) {
        const int   slot = p.T - 1 - (t0 + r);
        float *     out = p.state_out + slot * p.state_slot_stride + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0) * kS;
        const float e_r = float(exp(G[r]));
        for (int s = int(threadIdx.x); s <= r; s += int(blockDim.x)) {
            coef[s] = expf(float(G[r] - G[s]));
        }
        __syncthreads();
        for (int item = int(threadIdx.x); item < (N / kSnapshotGroup) * kS; item += int(blockDim.x)) {
            const int i = item % kS, jg = (item / kS) * kSnapshotGroup;
            float     x[kSnapshotGroup];
#pragma unroll
            for (int q = 0; q < kSnapshotGroup; ++q) {
                x[q] = e_r * s0[i * ld + jg + q];
            }
#pragma unroll 2
            for (int s = 0; s <= r; ++s) {
                const float decay_key = coef[s] * read_input(k0 + s * p.k_s2 + i);
#pragma unroll
                for (int q = 0; q < kSnapshotGroup; ++q) {
                    x[q] += decay_key * u[s * ld + jg + q];
                }
            }
#pragma unroll
            for (int q = 0; q < kSnapshotGroup; ++q) {
                out[(jg + q) * kS + i] = x[q];
            }
        }
        __syncthreads();  // coef is rewritten for the next row
    }
}

// Grid (kS / (16 Warps), H_v, B), Warps warps: warp w of CTA x owns value columns (x Warps + w) 16 .. + 16. Writes
// what step 3e's chain writes: every chunk's start state into states, U over the record's U0, the snapshot slots.
template <int Warps>
__global__ void __launch_bounds__(Warps * 32) chunked_gdn_tc_chain_regs(GdnParams p, float * records, float * states) {
    using Shared = ChainRegsShared<Warps>;
    constexpr int N = Shared::N, LU = Shared::LU, LX = Shared::LX;
    static_assert(kS % N == 0, "the CTAs' slices cover the value columns");
    static_assert(sizeof(Shared) <= 232448, "at most 227 KB of shared memory per CTA (sm_80, sm_90): Warps 2 or 4");
    extern __shared__ __align__(128) unsigned char shared_chain_regs[];
    Shared &  sh = *reinterpret_cast<Shared *>(shared_chain_regs);
    const int j0 = int(blockIdx.x) * N, h = int(blockIdx.y), b = int(blockIdx.z);
    const int tid = int(threadIdx.x);
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int jw = warp * 16;  // the warp's first column within the CTA's N
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int chunks = (p.T + kC - 1) / kC;
    auto stage = [&](int c, int buf) {  // chunk c's W, Kend and U0 slice into buffer buf
        stage_chain_operands<N>(records + record_index(p, b, h, c) * Record::floats, j0, sh.w[buf], kRegsLW, sh.kend[buf],
                                kRegsLK, sh.u0[buf], LU);
    };
    stage(0, 0);

    // S^T in C fragments: st[n] holds S[8n + 2t (+1)][col] for col = j0 + jw + g (elements 0, 1) and + 8 (2, 3);
    // the op's state is stored transposed (state[j kS + i] = S[i][j]), so each pair is one float2
    float         st[kS / 8][4];
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0 + jw) * kS;
#pragma unroll
    for (int n = 0; n < kS / 8; ++n) {
        st[n][0] = read_input(s_in + g * kS + 8 * n + 2 * t);
        st[n][1] = read_input(s_in + g * kS + 8 * n + 2 * t + 1);
        st[n][2] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t);
        st[n][3] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t + 1);
    }

    for (int c = 0; c < chunks; ++c) {
        const int buf = c % 2;
        __pipeline_wait_prior(0);  // this thread's copies of chunk c
        __syncthreads();           // everyone's; and every warp is done with chunk c - 1's buffer, buf ^ 1
        if (c + 1 < chunks) {
            stage(c + 1, buf ^ 1);
        }
        float *        rec = records + record_index(p, b, h, c) * Record::floats;
        const double * G   = reinterpret_cast<const double *>(rec + Record::G);
        const int      t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        const float    decay = rec[Record::eG + L - 1];

        // the chunk-start state for the output pass (states: S0[i][j] row-major per chunk)
        store_fragment_rows(states + record_index(p, b, h, c) * kS * kS + j0 + jw, kS, st);

        // U^T = U0^T - S0^T W^T: u[m] holds U[8m + 2t (+1)][col], col = jw + g (+ 8), started from U0
        float u[kC / 8][4];
        load_fragment_rows(sh.u0[buf] + jw, LU, u);
        const float * w = sh.w[buf];
#pragma unroll
        for (int kk = 0; kk < kS / 8; ++kk) {
            // A = -S0^T (exact negation): k step element t is column 2t, t + 4 is 2t + 1
            const uint32_t a[4] = {__float_as_uint(tf32(-st[kk][0])), __float_as_uint(tf32(-st[kk][2])),
                                   __float_as_uint(tf32(-st[kk][1])), __float_as_uint(tf32(-st[kk][3]))};
#pragma unroll
            for (int m = 0; m < kC / 8; ++m) {
                const float2   wb   = *reinterpret_cast<const float2 *>(&w[(8 * m + g) * kRegsLW + 8 * kk + 2 * t]);
                const uint32_t bf[2] = {__float_as_uint(wb.x), __float_as_uint(wb.y)};
                mma_16x8x8_tf32(u[m], a, bf);
            }
        }

        // U over the record's U0 (this warp's columns; no other warp reads them)
        store_fragment_rows(rec + Record::U0 + j0 + jw, kS, u);
        // the snapshot slots of the sequence's last K tokens but the chunk's last (the same for every thread)
        const bool snapshots = p.T - t0 - p.K < L - 1;
        if (snapshots) {
            store_fragment_rows(sh.s0 + jw, LX, st);  // the scratch: S[i][jj], rows LX apart
            store_fragment_rows(sh.u + jw, LX, u);
            __syncthreads();
            write_snapshot_rows<N>(p, b, h, j0, t0, L - 1, G, sh.s0, sh.u, LX, sh.coef);
            __syncthreads();  // the scratch is read before the new state may go there
        }

        // S^T <- e^{G_last} S^T + U^T Kend
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

        // the snapshot slot of the chunk's last token: the new state
        if (const int last_slot = p.T - t0 - L; last_slot < p.K) {
            store_fragment_rows(sh.s0 + jw, LX, st);  // the scratch: S[i][jj], rows LX apart
            __syncthreads();
            write_state_snapshot<N>(p, b, h, j0, last_slot, sh.s0, LX);
            __syncthreads();
        }
    }
    __pipeline_wait_prior(0);
#endif
}

// Step 4b (session 39): step 4a with each 16-column slice on a pair of warps. Step 4a's warp runs 256 mma.sync a chunk
// one after another (session 39 on an H100: about 27 cycles each, with 4 warps on an SM and 256 warps on the GPU at
// B = 1, under half of its SM sub-partitions). Here warp h (0, 1) of a pair keeps the keys 64 h .. 64 h + 63 of S^T
// (8 tiles, 32 registers): its share of U^T = U0^T - S0^T W^T is a sum over its 64 keys (warp 0 starts from U0, warp
// 1 from zero); the pair swaps the two partial sums through shared memory and each adds them, partner's to own, which
// is the same float either way (addition commutes), so both hold the same U for their halves of
// S^T <- e^{G_last} S^T + U^T Kend. 128 mma.sync a warp a chunk, two dependent chains of 8, plus one 64-thread
// barrier; twice the warps. Warp 0 of a pair writes U over U0; the snapshot slots as step 4a's. Measured in session
// 39 (H100): 12-21% slower than step 4a, so the chain is not bound by its mma chains (NOTES-chunked-gdn.md, "Step 4b
// as measured"). It repeats step 4a's code for its own ranges on purpose: both are kept byte for byte as measured (a
// refactor into shared helpers changed step 4a's machine code), step 4b as that measurement's contrast.
constexpr int kPairKeys = kS / 2;  // keys per warp of a pair

template <int Slices> struct ChainPairsShared {
    static constexpr int N  = 16 * Slices;  // value columns of the CTA
    static constexpr int LU = N + 4;
    static constexpr int LX = N + 1;
    float w[2][kC * kRegsLW];
    float kend[2][kC * kRegsLK];
    float u0[2][kC * LU];
    float s0[kS * LX];
    float u[kC * LX];
    float coef[kC];
    float partial[Slices][2][kC / 8 * 4 * 32];  // each warp's U fragments, [tile][element][lane]
};

// Grid (kS / (16 Slices), H_v, B), 64 Slices threads: warps s and s + Slices of CTA x own value columns
// (x Slices + s) 16 .. + 16, the first keys 0 .. 63, the second 64 .. 127. Writes what step 4a's chain writes.
template <int Slices>
__global__ void __launch_bounds__(Slices * 64) chunked_gdn_tc_chain_pairs(GdnParams p, float * records, float * states) {
    using Shared = ChainPairsShared<Slices>;
    constexpr int N = Shared::N, LU = Shared::LU, LX = Shared::LX, Tiles = kPairKeys / 8;
    static_assert(kS % N == 0, "the CTAs' slices cover the value columns");
    static_assert(Slices <= 15, "one named barrier a pair, ids 1 .. 15");
    static_assert(sizeof(Shared) <= 232448, "at most 227 KB of shared memory per CTA (sm_80, sm_90)");
    extern __shared__ __align__(128) unsigned char shared_chain_pairs[];
    Shared &  sh = *reinterpret_cast<Shared *>(shared_chain_pairs);
    const int j0 = int(blockIdx.x) * N, h = int(blockIdx.y), b = int(blockIdx.z);
    const int tid = int(threadIdx.x);
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int slice = warp % Slices, half = warp / Slices;
    const int jw = slice * 16, k0 = half * kPairKeys;  // the warp's first column within N, its first key
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const int chunks = (p.T + kC - 1) / kC;
    auto stage = [&](int c, int buf) {
        stage_chain_operands<N>(records + record_index(p, b, h, c) * Record::floats, j0, sh.w[buf], kRegsLW, sh.kend[buf],
                                kRegsLK, sh.u0[buf], LU);
    };
    auto pair_barrier = [&] { asm volatile("bar.sync %0, 64;" ::"r"(1 + slice) : "memory"); };
    stage(0, 0);

    // the warp's half of S^T in C fragments: st[n] holds S[k0 + 8n + 2t (+1)][col], col = j0 + jw + g (+ 8)
    float         st[Tiles][4];
    const float * s_in = p.state + (int64_t(b) * p.H_v + h) * kS * kS + int64_t(j0 + jw) * kS + k0;
#pragma unroll
    for (int n = 0; n < Tiles; ++n) {
        st[n][0] = read_input(s_in + g * kS + 8 * n + 2 * t);
        st[n][1] = read_input(s_in + g * kS + 8 * n + 2 * t + 1);
        st[n][2] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t);
        st[n][3] = read_input(s_in + (g + 8) * kS + 8 * n + 2 * t + 1);
    }
    float * mine    = sh.partial[slice][half];
    float * partner = sh.partial[slice][half ^ 1];

    for (int c = 0; c < chunks; ++c) {
        const int buf = c % 2;
        __pipeline_wait_prior(0);
        __syncthreads();  // chunk c's operands are in; every warp is done with buf ^ 1 and with the partial sums
        if (c + 1 < chunks) {
            stage(c + 1, buf ^ 1);
        }
        float *        rec = records + record_index(p, b, h, c) * Record::floats;
        const double * G   = reinterpret_cast<const double *>(rec + Record::G);
        const int      t0 = c * kC, L = p.T - t0 < kC ? p.T - t0 : kC;
        const float    decay = rec[Record::eG + L - 1];

        store_fragment_rows(states + record_index(p, b, h, c) * kS * kS + int64_t(k0) * kS + j0 + jw, kS, st);

        // this warp's share of U^T: warp 0 from U0, warp 1 from zero
        float u[kC / 8][4];
        if (half == 0) {
            load_fragment_rows(sh.u0[buf] + jw, LU, u);
        } else {
#pragma unroll
            for (int m = 0; m < kC / 8; ++m) {
                u[m][0] = u[m][1] = u[m][2] = u[m][3] = 0.0f;
            }
        }
        const float * w = sh.w[buf] + k0;
#pragma unroll
        for (int kk = 0; kk < Tiles; ++kk) {
            const uint32_t a[4] = {__float_as_uint(tf32(-st[kk][0])), __float_as_uint(tf32(-st[kk][2])),
                                   __float_as_uint(tf32(-st[kk][1])), __float_as_uint(tf32(-st[kk][3]))};
#pragma unroll
            for (int m = 0; m < kC / 8; ++m) {
                const float2   wb    = *reinterpret_cast<const float2 *>(&w[(8 * m + g) * kRegsLW + 8 * kk + 2 * t]);
                const uint32_t bf[2] = {__float_as_uint(wb.x), __float_as_uint(wb.y)};
                mma_16x8x8_tf32(u[m], a, bf);
            }
        }
        // swap the partial sums; each adds the partner's to its own (the same float in both warps)
#pragma unroll
        for (int m = 0; m < kC / 8; ++m) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                mine[(m * 4 + e) * 32 + lane] = u[m][e];
            }
        }
        pair_barrier();
#pragma unroll
        for (int m = 0; m < kC / 8; ++m) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                u[m][e] += partner[(m * 4 + e) * 32 + lane];
            }
        }

        if (half == 0) {
            store_fragment_rows(rec + Record::U0 + j0 + jw, kS, u);
        }
        const bool snapshots = p.T - t0 - p.K < L - 1;
        if (snapshots) {
            store_fragment_rows(sh.s0 + k0 * LX + jw, LX, st);
            if (half == 0) {
                store_fragment_rows(sh.u + jw, LX, u);
            }
            __syncthreads();
            write_snapshot_rows<N>(p, b, h, j0, t0, L - 1, G, sh.s0, sh.u, LX, sh.coef);
            __syncthreads();
        }

#pragma unroll
        for (int n = 0; n < Tiles; ++n) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                st[n][e] *= decay;
            }
        }
        const float * kend = sh.kend[buf] + k0;
#pragma unroll
        for (int kk = 0; kk < kC / 8; ++kk) {
            const uint32_t a[4] = {__float_as_uint(tf32(u[kk][0])), __float_as_uint(tf32(u[kk][2])),
                                   __float_as_uint(tf32(u[kk][1])), __float_as_uint(tf32(u[kk][3]))};
#pragma unroll
            for (int n = 0; n < Tiles; ++n) {
                const uint32_t bf[2] = {__float_as_uint(kend[(8 * kk + 2 * t) * kRegsLK + 8 * n + g]),
                                        __float_as_uint(kend[(8 * kk + 2 * t + 1) * kRegsLK + 8 * n + g])};
                mma_16x8x8_tf32(st[n], a, bf);
            }
        }

        if (const int last_slot = p.T - t0 - L; last_slot < p.K) {
            store_fragment_rows(sh.s0 + k0 * LX + jw, LX, st);
            __syncthreads();
            write_state_snapshot<N>(p, b, h, j0, last_slot, sh.s0, LX);
            __syncthreads();
        }
    }
    __pipeline_wait_prior(0);
#endif
}

template <int Slices> inline size_t chain_pairs_shared_bytes() {
    return sizeof(ChainPairsShared<Slices>);
}

template <int Warps> inline size_t chain_regs_shared_bytes() {
    return sizeof(ChainRegsShared<Warps>);
}

#endif  // __CUDACC__

}  // namespace fusekit_gdn_tc
