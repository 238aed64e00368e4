// Standalone check and timing of fusion-4's chunked gated-delta-rule CUDA kernels, before ggml: step 1 (plain
// fp32, the phases of fusekit-chunked-gdn.cuh run by one CTA per (value-column slice, head, sequence)) and step 2a
// (fusekit-chunked-gdn-tc.cuh: a prep pass over every chunk and a state pass, TF32 tensor cores), each checked
// against the same float64 reference on the same inputs. Not wired into ggml: no manifest, no patch yet.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels -o chunked_gdn_check kernels/chunked_gdn_check.cu
//   ./chunked_gdn_check [--sabotage] [--json FILE]
//
// Shapes: the 35B preset's GATED_DELTA_NET (32 value heads, 16 key heads tiled, 128 x 128 state) at
// T = 512 and T = 4096 with one sequence, plus a T = 512 two-sequence case with K = 3 snapshots and
// q/k broadcast over sequences. Inputs come from chunked-gdn-reference.h (L2-normalized q/k in padded
// buffers, v in a packed strided view, beta in (0, 1), g <= 0), the same generator as the host check.
// Check: the whole dst (attention output, then every snapshot slot; unwritten slots keep a sentinel)
// against the float64 serial recurrence of ggml-cpu/ops.cpp, max |x - ref| / max |ref| per region
// below 5e-6: the host check runs these very phases in float at <= 4.3e-7 (limit 2e-6); the device
// adds FMA contraction and expf's own rounding, and T = 4096 is longer than the host's 1000, so the
// first GPU run gets 2.5x more room; tighten it to the measured value x 5 after that run.
// Timing: CUDA events around 10 back-to-back launches, median of 11 batches, after a warm-up.
// --sabotage runs the kernel with the phases' sabotage switch: exits 0 only if every check fails.
//
// Where the next step goes (NOTES-chunked-gdn.md): every phase below is a small matrix product done
// with scalar FMAs from shared memory (K K^T, Q K^T, K S0, Q S0, P R, (QK) U, K^T U): mma.sync tf32 /
// bf16 (sm_80) or wgmma (sm_90), the state slice in registers, the triangular inverse by 16 x 16
// diagonal blocks instead of one column per thread.
#include "chunked-gdn-reference.h"
#include "fusekit-chunked-gdn.cuh"
#include "fusekit-chunked-gdn-tc.cuh"
#include "fusekit-chunked-gdn-regs.cuh"  // step 4a
#include "fusekit-chunked-gdn-lean.cuh"  // steps 4c-4g
#include "fusekit-chunked-gdn-fused.cuh"  // step 5a
#include "standalone.cuh"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace fusekit_gdn;
using namespace fusekit_gdn_ref;

constexpr int kThreads = 256;  // 8 warps per CTA
constexpr int kChunk   = 64;   // tokens per chunk
constexpr int kCols    = 32;   // value columns per CTA: 4 CTAs per head at S = 128, ~130 KB shared

__global__ void __launch_bounds__(kThreads) chunked_gdn_kernel(GdnParams p, int chunk, int n_cols, int sabotage) {
    extern __shared__ double shared[];  // double: the workspace starts with float64 G
    const Workspace<float> w = carve_workspace<float>(shared, p.S, chunk, n_cols);
    chunked_gdn_slice(p, w, int(blockIdx.z), int(blockIdx.y), int(blockIdx.x) * n_cols, n_cols, chunk, sabotage,
                      int(threadIdx.x), int(blockDim.x), CtaBarrier{});
}

// Bytes every implementation must move (fp32 q, k, v, g, beta, state in; output and snapshots out) and
// the chunked form's FLOPs (2 per multiply-add; see NOTES-chunked-gdn.md for the count).
double min_bytes(const Case & c) {
    const double S = c.S, T = c.T;
    return 4.0 * (2 * S * c.H_k * T * c.Bq + S * c.H_v * T * c.B + 2.0 * c.H_v * T * c.B + S * S * c.H_v * c.B +
                  S * c.H_v * T * c.B + double(c.K) * S * S * c.H_v * c.B);
}

// µs per call of each of 11 batches of 10 back-to-back calls, after 3 warm-up calls.
template <typename Launch> std::vector<double> time_launches(Launch launch) {
    return fusekit_standalone::launch_us_batches([&](int) { launch(); }, 3, 10, 11);
}

// Step 2a (fusekit-chunked-gdn-tc.cuh): the prep pass over every chunk, then the state pass with N value columns
// per CTA; records is the workspace (fusekit_gdn_tc::workspace_floats floats).
template <int Pad> void launch_prep(const GdnParams & p, float * records, int sabotage) {
    using namespace fusekit_gdn_tc;
    const dim3 prep_grid(unsigned(chunk_count(p.T)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_prep<Pad><<<prep_grid, kPrepThreads, prep_shared_bytes<Pad>()>>>(p, records, sabotage);
}
// Step 3d's prep pass (mma.sync from shared memory, the masks applied where the products are stored); RoundOnce:
// step 3i's (what is only a TF32 product's operand stored in TF32 and read so).
template <int Pad, bool RoundOnce = false> void launch_prep_mma(const GdnParams & p, float * records, int sabotage) {
    using namespace fusekit_gdn_tc;
    const dim3 prep_grid(unsigned(chunk_count(p.T)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_prep_mma<Pad, RoundOnce><<<prep_grid, kPrepThreads, prep_shared_bytes<Pad>()>>>(p, records, sabotage);
}
template <int N> void launch_two_pass(const GdnParams & p, float * records, int sabotage) {
    using namespace fusekit_gdn_tc;
    launch_prep<kPadNone>(p, records, sabotage);
    const dim3 state_grid(unsigned(kS / N), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_state<N><<<state_grid, kStateThreads, state_shared_bytes<N>()>>>(p, records);
}

// Step 2b: the same prep pass, then the chain with N value columns per CTA (the chunk states and U), then the output
// pass over every chunk; states holds fusekit_gdn_tc::states_floats floats. Pad: the shared rows' padding of all
// three (kPadNone as measured in session 14; kPadBanks, step 2c, against bank conflicts).
// Buffers and Threads: step 2d's chain variants (1 or 2 operand buffers, 8 or 16 warps); the defaults are step 2c's.
// Mma: step 3e's chain (its products on mma.sync from shared memory); Rounded: step 3h's (their B operands from TF32
// copies).
template <int N, int Pad, int Buffers = 2, int Threads = fusekit_gdn_tc::kStateThreads, bool Mma = false,
          bool Rounded = false>
void launch_chain(const GdnParams & p, float * records, float * states) {
    using namespace fusekit_gdn_tc;
    const dim3 chain_grid(unsigned(kS / N), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_chain<N, Pad, Buffers, Threads, Mma, Rounded>
        <<<chain_grid, Threads, chain_shared_bytes<N, Pad, Buffers, Rounded>()>>>(p, records, states);
}
// The output pass with Cols value columns per CTA and its A fragments loaded ABatch at a time (step 3c; the defaults
// are step 2c's pass); Mma: step 3f's products on mma.sync; RoundedA: step 3i's (Qe and QKm read as stored, in TF32).
template <int Pad, int Cols = fusekit_gdn_tc::kS, int ABatch = 1, bool Mma = false, bool RoundedA = false>
void launch_output(const GdnParams & p, const float * records, const float * states) {
    using namespace fusekit_gdn_tc;
    const dim3 grid(unsigned(chunk_count(p.T) * (kS / Cols)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_output<Pad, Cols, ABatch, Mma, RoundedA>
        <<<grid, kStateThreads, output_shared_bytes<Pad, Cols>()>>>(p, records, states);
}
// The three passes, the chain with N columns, Buffers and Threads (step 2b/2c: 32 columns, step 2c's defaults).
template <int Pad, int N = 32, int Buffers = 2, int Threads = fusekit_gdn_tc::kStateThreads>
void launch_split(const GdnParams & p, float * records, float * states, int sabotage) {
    launch_prep<Pad>(p, records, sabotage);
    launch_chain<N, Pad, Buffers, Threads>(p, records, states);
    launch_output<Pad>(p, records, states);
}

// A chain's shared memory above the default 48 KB.
template <int N, int Pad, int Buffers = 2, int Threads = fusekit_gdn_tc::kStateThreads, bool Mma = false,
          bool Rounded = false>
void allow_chain_shared_memory() {
    using namespace fusekit_gdn_tc;
    CHECK(cudaFuncSetAttribute(chunked_gdn_tc_chain<N, Pad, Buffers, Threads, Mma, Rounded>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(chain_shared_bytes<N, Pad, Buffers, Rounded>())));
}

// The device passes' shared memory above the default 48 KB, for one padding of the rows.
template <int Pad> void allow_shared_memory() {
    using namespace fusekit_gdn_tc;
    CHECK(cudaFuncSetAttribute(chunked_gdn_tc_prep<Pad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(prep_shared_bytes<Pad>())));
    allow_chain_shared_memory<32, Pad>();
    CHECK(cudaFuncSetAttribute(chunked_gdn_tc_output<Pad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(output_shared_bytes<Pad>())));
}

// Step 2d: the padded prep and output passes around one chain variant; step 3e: around step 2c's chain with its
// products on mma.sync (Mma); step 3h: the same with the products' B operands read from TF32 copies (Rounded).
template <int N, int Buffers, int Threads, bool Mma = false, bool Rounded = false> struct ChainVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = Rounded ? "step 3h" : Mma ? "step 3e" : "step 2d";
    static constexpr const char * kPass = "chain";
    static constexpr const char * kKey  = "chain_median_us";
    static void allow() { allow_chain_shared_memory<N, Pad, Buffers, Threads, Mma, Rounded>(); }
    static int  ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &ctas, chunked_gdn_tc_chain<N, Pad, Buffers, Threads, Mma, Rounded>, Threads,
            chain_shared_bytes<N, Pad, Buffers, Rounded>()));
        return ctas;
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        launch_chain<N, Pad, Buffers, Threads, Mma, Rounded>(p, records, states);
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep<Pad>(p, records, sabotage);
        launch_chain<N, Pad, Buffers, Threads, Mma, Rounded>(p, records, states);
        launch_output<Pad>(p, records, states);
    }
};
using Chain16Warps   = ChainVariant<32, 2, 512>;  // the new state's 16 tiles one per warp
using Chain16Columns = ChainVariant<16, 1, 256>;  // 16 columns, one buffer: 86 KB, two CTAs per SM, 256 CTAs
using Chain16Both    = ChainVariant<16, 1, 512>;
using ChainMma       = ChainVariant<32, 2, fusekit_gdn_tc::kStateThreads, true>;  // step 2c's shape on mma.sync
using ChainRounded   = ChainVariant<32, 2, fusekit_gdn_tc::kStateThreads, true, true>;  // step 3h

// Step 4a: the chain with the state in registers (Warps warps of 16 value columns per CTA) between step 2c's padded
// prep and output passes, as ChainVariant's chains.
template <int Warps> void launch_chain_regs(const GdnParams & p, float * records, float * states) {
    using namespace fusekit_gdn_tc;
    const dim3 grid(unsigned(kS / (16 * Warps)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_chain_regs<Warps><<<grid, Warps * 32, chain_regs_shared_bytes<Warps>()>>>(p, records, states);
}
template <int Warps> struct ChainRegsVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = "step 4a";
    static constexpr const char * kPass = "chain";
    static constexpr const char * kKey  = "chain_median_us";
    static void allow() {
        using namespace fusekit_gdn_tc;
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_chain_regs<Warps>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(chain_regs_shared_bytes<Warps>())));
    }
    static int ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, chunked_gdn_tc_chain_regs<Warps>, Warps * 32,
                                                            chain_regs_shared_bytes<Warps>()));
        return ctas;
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        launch_chain_regs<Warps>(p, records, states);
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep<Pad>(p, records, sabotage);
        launch_chain_regs<Warps>(p, records, states);
        launch_output<Pad>(p, records, states);
    }
};
using ChainRegs2 = ChainRegsVariant<2>;  // 32 columns a CTA: 128 CTAs for 32 heads
using ChainRegs4 = ChainRegsVariant<4>;  // 64 columns a CTA: 64 CTAs

// Step 4c: step 4a's chain with its staging and stores at compile-time offsets (the same arithmetic, the same bits);
// step 4d (Spread): step 4c with its copies and stores spread through the two products.
template <int Warps, bool Spread> auto chain_lean_kernel() {
    if constexpr (Spread) {
        return fusekit_gdn_tc::chunked_gdn_tc_chain_spread<Warps>;
    } else {
        return fusekit_gdn_tc::chunked_gdn_tc_chain_lean<Warps>;
    }
}
template <int Warps, bool Spread> void launch_chain_lean(const GdnParams & p, float * records, float * states) {
    using namespace fusekit_gdn_tc;
    const dim3 grid(unsigned(kS / (16 * Warps)), unsigned(p.H_v), unsigned(p.B));
    chain_lean_kernel<Warps, Spread>()<<<grid, Warps * 32, chain_regs_shared_bytes<Warps>()>>>(p, records, states);
}
template <int Warps, bool Spread> struct ChainLeanVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = Spread ? "step 4d" : "step 4c";
    static constexpr const char * kPass = "chain";
    static constexpr const char * kKey  = "chain_median_us";
    static void allow() {
        using namespace fusekit_gdn_tc;
        CHECK(cudaFuncSetAttribute(chain_lean_kernel<Warps, Spread>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(chain_regs_shared_bytes<Warps>())));
    }
    static int ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, chain_lean_kernel<Warps, Spread>(), Warps * 32,
                                                            chain_regs_shared_bytes<Warps>()));
        return ctas;
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        launch_chain_lean<Warps, Spread>(p, records, states);
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep<Pad>(p, records, sabotage);
        launch_chain_lean<Warps, Spread>(p, records, states);
        launch_output<Pad>(p, records, states);
    }
};
using ChainLean2   = ChainLeanVariant<2, false>;
using ChainLean4   = ChainLeanVariant<4, false>;
using ChainSpread2 = ChainLeanVariant<2, true>;
using ChainSpread4 = ChainLeanVariant<4, true>;

// Step 4b: step 4a's chain with each 16-column slice on a pair of warps (Slices slices a CTA, 64 Slices threads).
template <int Slices> void launch_chain_pairs(const GdnParams & p, float * records, float * states) {
    using namespace fusekit_gdn_tc;
    const dim3 grid(unsigned(kS / (16 * Slices)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_chain_pairs<Slices><<<grid, Slices * 64, chain_pairs_shared_bytes<Slices>()>>>(p, records, states);
}
template <int Slices> struct ChainPairsVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = "step 4b";
    static constexpr const char * kPass = "chain";
    static constexpr const char * kKey  = "chain_median_us";
    static void allow() {
        using namespace fusekit_gdn_tc;
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_chain_pairs<Slices>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(chain_pairs_shared_bytes<Slices>())));
    }
    static int ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, chunked_gdn_tc_chain_pairs<Slices>, Slices * 64,
                                                            chain_pairs_shared_bytes<Slices>()));
        return ctas;
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        launch_chain_pairs<Slices>(p, records, states);
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep<Pad>(p, records, sabotage);
        launch_chain_pairs<Slices>(p, records, states);
        launch_output<Pad>(p, records, states);
    }
};
using ChainPairs2 = ChainPairsVariant<2>;  // 32 columns a CTA of 4 warps: 128 CTAs

// Step 3c: step 2c's prep pass and chain, then an output pass with Cols value columns per CTA, its A fragments loaded
// ABatch at a time; step 3f (Mma): the output pass's products on mma.sync.
template <int Cols, int ABatch, bool Mma = false> struct OutputVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = Mma ? "step 3f" : "step 3c";
    static constexpr const char * kPass = "output pass";
    static constexpr const char * kKey  = "output_median_us";
    static void allow() {
        using namespace fusekit_gdn_tc;
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_output<Pad, Cols, ABatch, Mma>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(output_shared_bytes<Pad, Cols>())));
    }
    static int ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, chunked_gdn_tc_output<Pad, Cols, ABatch, Mma>,
                                                            kStateThreads, output_shared_bytes<Pad, Cols>()));
        return ctas;
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        launch_output<Pad, Cols, ABatch, Mma>(p, records, states);
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep<Pad>(p, records, sabotage);
        launch_chain<32, Pad>(p, records, states);
        launch_output<Pad, Cols, ABatch, Mma>(p, records, states);
    }
};
using OutputBatched   = OutputVariant<128, 4>;  // all columns, 4 A fragments in flight per warp
using Output64Columns = OutputVariant<64, 4>;   // 52 KB: up to 4 CTAs per SM, twice the CTAs
using Output32Columns = OutputVariant<32, 4>;   // 28 KB, four times the CTAs, each Qe / QKm fragment read 4 times
using OutputMma       = OutputVariant<128, 1, true>;  // step 3f: all columns, every A element in flight at once
using OutputMma64     = OutputVariant<64, 1, true>;   // step 3f with 64 columns

// Step 3d: step 3d's prep pass, a chain (step 2c's, or with Whole step 3e's), then the output pass with Cols columns
// and ABatch (step 2c's by default; OutputMma: step 3f's); timed: the prep pass alone, or with Whole the three passes
// (PrepMmaOutput64: what fusion-4's glue ran in session 18; PrepMmaOutputMma: what it runs since session 19 when the
// 128-column grid has at least one CTA per SM, as with the 35B layer's 32 heads; RoundedChain: with step 3h's chain;
// RoundedRecord: step 3i, the prep pass's TF32-only operands, and the record's Qe and QKm, stored in TF32 and read so).
template <int Cols, int ABatch, bool Whole, bool OutputMma = false, bool RoundedChain = false, bool RoundedRecord = false>
struct PrepVariant {
    static_assert(OutputMma || !RoundedRecord, "only step 3f's output pass reads the record's TF32 as stored");
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = RoundedRecord ? "step 3i" : "step 3d";
    static constexpr const char * kPass = Whole ? "whole" : "prep pass";
    static constexpr const char * kKey  = Whole ? "median_us" : "prep_median_us";
    static void allow() {
        using namespace fusekit_gdn_tc;
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_prep_mma<Pad, RoundedRecord>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(prep_shared_bytes<Pad>())));
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_output<Pad, Cols, ABatch, OutputMma, RoundedRecord>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(output_shared_bytes<Pad, Cols>())));
        allow_chain_shared_memory<32, Pad, 2, kStateThreads, Whole, RoundedChain>();
    }
    static int ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, chunked_gdn_tc_prep_mma<Pad, RoundedRecord>, kPrepThreads,
                                                            prep_shared_bytes<Pad>()));
        return ctas;
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep_mma<Pad, RoundedRecord>(p, records, sabotage);
        launch_chain<32, Pad, 2, fusekit_gdn_tc::kStateThreads, Whole, RoundedChain>(p, records, states);
        launch_output<Pad, Cols, ABatch, OutputMma, RoundedRecord>(p, records, states);
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        if constexpr (Whole) {
            split(p, records, states, 0);
        } else {
            launch_prep_mma<Pad, RoundedRecord>(p, records, 0);
        }
    }
};
using PrepMma          = PrepVariant<fusekit_gdn_tc::kS, 1, false>;  // the prep pass alone, step 2c's output pass
using PrepMmaOutput64  = PrepVariant<64, 4, true>;                     // what the glue runs: whole
using PrepMmaOutputMma = PrepVariant<fusekit_gdn_tc::kS, 1, true, true>;  // what the glue runs (32 heads)
using PrepMmaRounded   = PrepVariant<fusekit_gdn_tc::kS, 1, true, true, true>;  // the same with step 3h's chain
using PrepRoundOnce  = PrepVariant<fusekit_gdn_tc::kS, 1, false, true, false, true>;  // step 3i's prep pass alone
using PrepRoundedAll   = PrepVariant<fusekit_gdn_tc::kS, 1, true, true, true, true>;    // steps 3h and 3i whole

// Step 4a whole: step 3d's prep pass, step 4a's chain (Warps warps of 16 columns a CTA) and step 3f's output pass of
// 128 columns: what fusion-4's glue would run with step 4a in place of step 3e's chain (PrepMmaOutputMma's passes
// otherwise), timed as the three passes.
template <int Warps> struct WholeRegsVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = "step 4a";
    static constexpr const char * kPass = "whole";
    static constexpr const char * kKey  = "median_us";
    static void allow() {
        PrepMmaOutputMma::allow();
        ChainRegsVariant<Warps>::allow();
    }
    static int ctas_per_sm() { return PrepMmaOutputMma::ctas_per_sm(); }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep_mma<Pad, false>(p, records, sabotage);
        launch_chain_regs<Warps>(p, records, states);
        launch_output<Pad, fusekit_gdn_tc::kS, 1, true, false>(p, records, states);
    }
    static void timed(const GdnParams & p, float * records, float * states) { split(p, records, states, 0); }
};
using WholeRegs4 = WholeRegsVariant<4>;

// Steps 4c and 4d whole: WholeRegsVariant's passes with step 4c's or 4d's chain.
template <int Warps, bool Spread> struct WholeLeanVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = Spread ? "step 4d" : "step 4c";
    static constexpr const char * kPass = "whole";
    static constexpr const char * kKey  = "median_us";
    static void allow() {
        PrepMmaOutputMma::allow();
        ChainLeanVariant<Warps, Spread>::allow();
    }
    static int ctas_per_sm() { return PrepMmaOutputMma::ctas_per_sm(); }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep_mma<Pad, false>(p, records, sabotage);
        launch_chain_lean<Warps, Spread>(p, records, states);
        launch_output<Pad, fusekit_gdn_tc::kS, 1, true, false>(p, records, states);
    }
    static void timed(const GdnParams & p, float * records, float * states) { split(p, records, states, 0); }
};
using WholeLean2   = WholeLeanVariant<2, false>;
using WholeLean4   = WholeLeanVariant<4, false>;
using WholeSpread2 = WholeLeanVariant<2, true>;
using WholeSpread4 = WholeLeanVariant<4, true>;

// Step 4e: step 3d's prep pass with its address arithmetic taken out (the same record); checked whole with step 4c's
// chain of Warps warps and step 3f's output pass, timed alone or (Whole) as the three passes.
template <int Pad> void launch_prep_lean(const GdnParams & p, float * records, int sabotage) {
    using namespace fusekit_gdn_tc;
    const dim3 prep_grid(unsigned(chunk_count(p.T)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_prep_lean<Pad><<<prep_grid, kPrepThreads, prep_shared_bytes<Pad>()>>>(p, records, sabotage);
}
// Step 4f: step 4e's record with the operands rounded once where staged, tiles sharing their A fragment and the zero
// blocks skipped; checked whole with step 4c's chain of Warps warps and step 3f's output pass, timed alone or whole.
// Step 4h (Prefetch): step 4f with the chunk's values asked into the L2 once the keys and queries are staged (session
// 43, H100: refuted, about 1 us slower at T = 512; kept as the measured contrast, kernels/NOTES-chunked-gdn.md).
// Step 4i (Bulk, session 44): step 4f with the record's W and U0 sent out of shared memory by the bulk copy; step 4j
// (BulkQ): step 4i with QKm sent out that way too.
template <int Pad, bool RoundQe = false, bool Prefetch = false, bool Bulk = false, bool BulkQ = false>
void launch_prep_rounded(const GdnParams & p, float * records, int sabotage) {
    using namespace fusekit_gdn_tc;
    const dim3 prep_grid(unsigned(chunk_count(p.T)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_prep_rounded<Pad, RoundQe, Prefetch, Bulk, BulkQ>
        <<<prep_grid, kPrepThreads, prep_rounded_shared_bytes<Pad>()>>>(p, records, sabotage);
}
// Rounded: step 4f's prep pass in step 4e's place; Prefetch: step 4h's in step 4f's; Bulk: step 4i's; BulkQ too: 4j's.
template <bool Whole, int Warps, bool Rounded = false, bool Prefetch = false, bool Bulk = false, bool BulkQ = false>
struct PrepLeanVariant {
    static_assert(Rounded || !(Prefetch || Bulk), "steps 4h and 4i are step 4f's prep pass changed");
    static_assert(!(Prefetch && Bulk) && (Bulk || !BulkQ), "one change at a time; step 4j is step 4i's changed");
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep =
        BulkQ ? "step 4j" : Bulk ? "step 4i" : Prefetch ? "step 4h" : Rounded ? "step 4f" : "step 4e";
    static constexpr const char * kPass = Whole ? "whole" : "prep pass";
    static constexpr const char * kKey  = Whole ? "median_us" : "prep_median_us";
    static constexpr auto         kernel() {
        return Rounded ? fusekit_gdn_tc::chunked_gdn_tc_prep_rounded<Pad, false, Prefetch, Bulk, BulkQ> :
                         fusekit_gdn_tc::chunked_gdn_tc_prep_lean<Pad>;
    }
    static size_t shared_bytes() {
        return Rounded ? fusekit_gdn_tc::prep_rounded_shared_bytes<Pad>() : fusekit_gdn_tc::prep_shared_bytes<Pad>();
    }
    static void prep(const GdnParams & p, float * records, int sabotage) {
        if constexpr (Rounded) {
            launch_prep_rounded<Pad, false, Prefetch, Bulk, BulkQ>(p, records, sabotage);
        } else {
            launch_prep_lean<Pad>(p, records, sabotage);
        }
    }
    static void allow() {
        CHECK(cudaFuncSetAttribute(kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared_bytes())));
        PrepMmaOutputMma::allow();
        ChainLeanVariant<Warps, false>::allow();
    }
    static int ctas_per_sm() {
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel(), fusekit_gdn_tc::kPrepThreads, shared_bytes()));
        return ctas;
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        prep(p, records, sabotage);
        launch_chain_lean<Warps, false>(p, records, states);
        launch_output<Pad, fusekit_gdn_tc::kS, 1, true, false>(p, records, states);
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        if constexpr (Whole) {
            split(p, records, states, 0);
        } else {
            prep(p, records, 0);
        }
    }
};
using PrepLean       = PrepLeanVariant<false, 2>;
using WholeLeanPrep2 = PrepLeanVariant<true, 2>;

using PrepRounded       = PrepLeanVariant<false, 2, true>;
using WholeRoundedPrep2 = PrepLeanVariant<true, 2, true>;
using PrepPrefetch      = PrepLeanVariant<false, 2, true, true>;
using PrepBulk          = PrepLeanVariant<false, 2, true, false, true>;
using PrepBulkQKm       = PrepLeanVariant<false, 2, true, false, true, true>;

// Step 4g: step 3f's output pass (128 columns) with its staging at compile-time offsets and its result stored from
// the fragments; checked whole after step 4f's prep pass and step 4c's chain of 2 warps, timed alone (the output pass)
// or whole (the three passes).
void launch_output_lean(const GdnParams & p, const float * records, const float * states) {
    using namespace fusekit_gdn_tc;
    const dim3 grid(unsigned(chunk_count(p.T)), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_output_lean<kPadBanks><<<grid, kStateThreads, output_shared_bytes<kPadBanks, kS>()>>>(p, records, states);
}
template <bool Whole> struct OutputLeanVariant {
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = "step 4g";
    static constexpr const char * kPass = Whole ? "whole" : "output pass";
    static constexpr const char * kKey  = Whole ? "median_us" : "output_median_us";
    static void allow() {
        using namespace fusekit_gdn_tc;
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_output_lean<Pad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(output_shared_bytes<Pad, kS>())));
        WholeRoundedPrep2::allow();
    }
    static int ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, chunked_gdn_tc_output_lean<Pad>, kStateThreads,
                                                            output_shared_bytes<Pad, kS>()));
        return ctas;
    }
    static void split(const GdnParams & p, float * records, float * states, int sabotage) {
        launch_prep_rounded<Pad>(p, records, sabotage);
        launch_chain_lean<2, false>(p, records, states);
        launch_output_lean(p, records, states);
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        if constexpr (Whole) {
            split(p, records, states, 0);
        } else {
            launch_output_lean(p, records, states);
        }
    }
};
using OutputLean      = OutputLeanVariant<false>;
using WholeOutputLean = OutputLeanVariant<true>;

// Step 5a: two passes, step 4f's prep pass storing Qe and QKm in TF32 and a chain of 2 warps that computes the outputs
// too; checked whole, timed as the chain alone (it reads the records only, so every call is the same) or whole.
// Prefetch: step 4h's prep pass in step 4f's place, Bulk: step 4i's, BulkQ too: step 4j's (each checked and timed
// whole).
void launch_chain_output(const GdnParams & p, const float * records) {
    using namespace fusekit_gdn_tc;
    const dim3 grid(unsigned(kS / 32), unsigned(p.H_v), unsigned(p.B));
    chunked_gdn_tc_chain_output<2><<<grid, 64, chain_output_shared_bytes<2>()>>>(p, records);
}
template <bool Whole, bool Prefetch = false, bool Bulk = false, bool BulkQ = false> struct FusedVariant {
    static_assert(!(Prefetch && Bulk) && (Bulk || !BulkQ), "one change at a time; step 4j is step 4i's changed");
    static constexpr int          Pad   = fusekit_gdn_tc::kPadBanks;
    static constexpr const char * kStep = BulkQ ? "step 4j" : Bulk ? "step 4i" : Prefetch ? "step 4h" : "step 5a";
    static constexpr const char * kPass = Whole ? "whole" : "chain";
    static constexpr const char * kKey  = Whole ? "median_us" : "chain_median_us";
    static void allow() {
        using namespace fusekit_gdn_tc;
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_prep_rounded<Pad, true, Prefetch, Bulk, BulkQ>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(prep_rounded_shared_bytes<Pad>())));
        CHECK(cudaFuncSetAttribute(chunked_gdn_tc_chain_output<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(chain_output_shared_bytes<2>())));
    }
    static int ctas_per_sm() {
        using namespace fusekit_gdn_tc;
        int ctas = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, chunked_gdn_tc_chain_output<2>, 64,
                                                            chain_output_shared_bytes<2>()));
        return ctas;
    }
    static void split(const GdnParams & p, float * records, float *, int sabotage) {
        launch_prep_rounded<Pad, true, Prefetch, Bulk, BulkQ>(p, records, sabotage);
        launch_chain_output(p, records);
    }
    static void timed(const GdnParams & p, float * records, float * states) {
        if constexpr (Whole) {
            split(p, records, states, 0);
        } else {
            launch_chain_output(p, records);
        }
    }
};
using FusedChain         = FusedVariant<false>;
using FusedWhole         = FusedVariant<true>;
using FusedWholePrefetch = FusedVariant<true, true>;
using FusedWholeBulk     = FusedVariant<true, false, true>;
using FusedWholeBulkQKm  = FusedVariant<true, false, true, true>;

// Two runs of the same buffer compared element by element as floats (equal values, a signed zero aside): how many
// differ, how many of those only one run wrote, and the largest difference of the others. Each run writes into the
// buffer poisoned with NaN first, so a float neither writes compares equal (NaN against NaN).
struct RunComparison {
    long long differing = 0, one_sided = 0;
    double    max_abs   = 0;
};
template <typename First, typename Second>
RunComparison compare_runs(float * buffer, size_t floats, First first, Second second) {
    std::vector<float> one(floats), two(floats);
    auto run = [&](auto launch, std::vector<float> & host) {
        CHECK(cudaMemset(buffer, 0xff, floats * sizeof(float)));
        launch();
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(host.data(), buffer, floats * sizeof(float), cudaMemcpyDeviceToHost));
    };
    run(first, one);
    run(second, two);
    RunComparison cmp;
    for (size_t i = 0; i < floats; ++i) {
        const float a = one[i], b = two[i];
        if (a == b || (std::isnan(a) && std::isnan(b))) {
            continue;
        }
        ++cmp.differing;
        if (std::isnan(a) || std::isnan(b)) {
            ++cmp.one_sided;
        } else {
            cmp.max_abs = std::max(cmp.max_abs, std::fabs(double(a) - double(b)));
        }
    }
    return cmp;
}

// How many prep CTAs share an SM (session 13's first prep pass: one; the blocked solve's version is sized for two).
template <int Pad> int prep_ctas_per_sm() {
    int ctas = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, fusekit_gdn_tc::chunked_gdn_tc_prep<Pad>,
                                                        fusekit_gdn_tc::kPrepThreads, fusekit_gdn_tc::prep_shared_bytes<Pad>()));
    return ctas;
}

double chunked_flops(const Case & c) {
    const double S = c.S, C = kChunk, chunks = double((c.T + kChunk - 1) / kChunk);
    // per chunk and value head: K S0, Q S0, K^T U (C S S each); K K^T, Q K^T, P R, (QK) U (C C S / 2 each)
    return 2.0 * chunks * c.H_v * c.B * (3 * C * S * S + 4 * C * C * S / 2);
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options  = fusekit_standalone::parse_options(argc, argv);
    const bool                        sabotage = options.sabotage;
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s (sm_%d%d, %d SMs)%s\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                sabotage ? "  [sabotage]" : "");

    const Case cases[] = {
        {128, 16, 32, 512, 1, 1, 1, kChunk, kCols, "35B GDN layer, T=512"},
        {128, 16, 32, 4096, 1, 1, 1, kChunk, kCols, "35B GDN layer, T=4096"},
        {128, 16, 32, 512, 2, 1, 3, kChunk, kCols, "T=512, 2 sequences, q/k broadcast, K=3 snapshots"},
    };
    const double kTol    = 5e-6;
    const int    threads = int(std::max(1u, std::thread::hardware_concurrency()));
    std::mt19937 rng(20261130u);

    const size_t smem = size_t(workspace_bytes<float>(128, kChunk, kCols));
    if (smem > prop.sharedMemPerBlockOptin) {
        std::fprintf(stderr, "needs %zu bytes of shared memory per block, the device allows %zu\n", smem,
                     size_t(prop.sharedMemPerBlockOptin));
        return 2;
    }
    CHECK(cudaFuncSetAttribute(chunked_gdn_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    CHECK(cudaFuncSetAttribute(fusekit_gdn_tc::chunked_gdn_tc_state<32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(fusekit_gdn_tc::state_shared_bytes<32>())));
    CHECK(cudaFuncSetAttribute(fusekit_gdn_tc::chunked_gdn_tc_state<16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(fusekit_gdn_tc::state_shared_bytes<16>())));
    allow_shared_memory<fusekit_gdn_tc::kPadNone>();
    allow_shared_memory<fusekit_gdn_tc::kPadBanks>();
    Chain16Warps::allow();
    Chain16Columns::allow();
    Chain16Both::allow();
    std::printf("step 2d chains: 32 columns, 16 warps: %d CTA(s) per SM; 16 columns, one buffer: %d; the same, 16 warps: %d\n",
                Chain16Warps::ctas_per_sm(), Chain16Columns::ctas_per_sm(), Chain16Both::ctas_per_sm());
    ChainMma::allow();
    ChainRegs2::allow();
    ChainRegs4::allow();
    ChainPairs2::allow();
    std::printf("step 4a chains (state in registers): 2 warps: %d CTA(s) per SM; 4 warps: %d\n",
                ChainRegs2::ctas_per_sm(), ChainRegs4::ctas_per_sm());
    std::printf("step 4b chain (slices on pairs of warps): 2 slices: %d CTA(s) per SM\n", ChainPairs2::ctas_per_sm());
    ChainLean2::allow();
    ChainLean4::allow();
    ChainSpread2::allow();
    ChainSpread4::allow();
    std::printf("step 4c chains (4a, lean addressing): 2 warps: %d CTA(s) per SM; 4 warps: %d; step 4d (spread): %d, %d\n",
                ChainLean2::ctas_per_sm(), ChainLean4::ctas_per_sm(), ChainSpread2::ctas_per_sm(),
                ChainSpread4::ctas_per_sm());
    ChainRounded::allow();
    OutputBatched::allow();
    Output64Columns::allow();
    Output32Columns::allow();
    OutputMma::allow();
    OutputMma64::allow();
    std::printf("step 3c output passes: 128 columns: %d CTA(s) per SM; 64 columns: %d; 32 columns: %d\n",
                OutputBatched::ctas_per_sm(), Output64Columns::ctas_per_sm(), Output32Columns::ctas_per_sm());
    PrepMma::allow();
    PrepMmaOutput64::allow();
    PrepMmaOutputMma::allow();
    PrepMmaRounded::allow();
    PrepRoundOnce::allow();
    PrepRoundedAll::allow();
    WholeRegs4::allow();
    WholeLean2::allow();
    WholeLean4::allow();
    WholeSpread2::allow();
    WholeSpread4::allow();
    PrepLean::allow();
    WholeLeanPrep2::allow();
    PrepRounded::allow();
    WholeRoundedPrep2::allow();
    OutputLean::allow();
    WholeOutputLean::allow();
    FusedChain::allow();
    FusedWhole::allow();
    PrepPrefetch::allow();
    FusedWholePrefetch::allow();
    PrepBulk::allow();
    FusedWholeBulk::allow();
    PrepBulkQKm::allow();
    FusedWholeBulkQKm::allow();
    std::printf("step 3d prep pass: %d CTA(s) per SM; step 3f output passes: 128 columns: %d, 64 columns: %d\n",
                PrepMma::ctas_per_sm(), OutputMma::ctas_per_sm(), OutputMma64::ctas_per_sm());
    const int prep_ctas = prep_ctas_per_sm<fusekit_gdn_tc::kPadNone>();
    const int prep_ctas_padded = prep_ctas_per_sm<fusekit_gdn_tc::kPadBanks>();
    std::printf("prep pass: %zu bytes of shared memory, %d CTAs per SM (padded rows: %zu bytes, %d CTAs per SM)\n",
                fusekit_gdn_tc::prep_shared_bytes<fusekit_gdn_tc::kPadNone>(), prep_ctas,
                fusekit_gdn_tc::prep_shared_bytes<fusekit_gdn_tc::kPadBanks>(), prep_ctas_padded);
    // TF32 keeps 10 of fp32's 23 mantissa bits (unit roundoff 4.9e-4): every chunk product of the two passes rounds
    // its inputs to that, and the state carries it from chunk to chunk (damped by the decays). A first limit of 1e-2
    // (20 roundoffs) separates it from a wrong result (the sabotage scores 4e-2 to 5e-1 on the host); it is to be
    // tightened to 5x the first measurement, and the model's KL (issue #10: mean KLD <= 1e-4) is the real judge.
    const double kTolTc = 1e-2;

    std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"sabotage\": " + (sabotage ? "true" : "false") +
                       ", \"chunk\": " + std::to_string(kChunk) + ", \"cols_per_cta\": " + std::to_string(kCols) +
                       ", \"threads\": " + std::to_string(kThreads) + ", \"shared_bytes\": " + std::to_string(smem) +
                       ", \"prep_ctas_per_sm\": " + std::to_string(prep_ctas) +
                       ", \"prep_ctas_per_sm_padded\": " + std::to_string(prep_ctas_padded) +
                       ", \"cases\": [";  // stock's time: test-backend-ops perf in the same session (tbo-perf-gdn-stock.txt)
    int checks = 0, failures = 0;
    for (const Case & c : cases) {
        if (options.once && &c != cases) {
            break;  // --once (under a profiler): the first case only
        }
        Inputs in = make_inputs(c, rng);
        // Device copies of the host buffers, padding and all, so the strides of the views stay the same.
        auto upload = [](const std::vector<float> & h) {
            float * d = nullptr;
            CHECK(cudaMalloc(&d, h.size() * sizeof(float)));
            CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
            return d;
        };
        GdnParams p = in.p;
        p.q = upload(in.qbuf);
        p.k = upload(in.kbuf);
        p.v = upload(in.vbuf);
        p.g = upload(in.g);
        p.beta = upload(in.beta);
        p.state = upload(in.state);
        std::vector<float> out(in.dst_elems, float(kSentinel));
        float * d_dst = upload(out);
        point_output_at_dst(p, d_dst);

        const dim3 grid(unsigned(c.S / c.n_cols), unsigned(c.H_v), unsigned(c.B));
        chunked_gdn_kernel<<<grid, kThreads, smem>>>(p, c.C, c.n_cols, sabotage ? kSabotageMaskDiagonal : kSabotageNone);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(out.data(), d_dst, out.size() * sizeof(float), cudaMemcpyDeviceToHost));

        const std::vector<double> ref = serial_reference(in.p, threads);
        const double err_out   = rel_error(out, ref, 0, in.attn_elems);
        const double err_state = rel_error(out, ref, in.attn_elems, in.dst_elems);
        const bool   ok_out = err_out < kTol, ok_state = err_state < kTol;
        checks += 2;
        failures += (ok_out ? 0 : 1) + (ok_state ? 0 : 1);

        // Timing: the kernel rewrites the same dst each launch (it reads only the inputs).
        const std::vector<double> us = time_launches([&] { chunked_gdn_kernel<<<grid, kThreads, smem>>>(p, c.C, c.n_cols, 0); });
        const double med = fusekit_standalone::median(us), bytes = min_bytes(c), flops = chunked_flops(c);
        std::printf("%-52s out err %.2e %s, state err %.2e %s, %9.1f us (%.0f GB/s of %.0f MB, %.1f TFLOP/s chunked)\n",
                    c.what, err_out, ok_out ? "ok" : "FAIL", err_state, ok_state ? "ok" : "FAIL", med, bytes / med / 1e3,
                    bytes / 1e6, flops / med / 1e6);
        char row[768];
        std::snprintf(row, sizeof(row),
                      "%s{\"what\": \"%s\", \"S\": %d, \"H_k\": %d, \"H_v\": %d, \"T\": %d, \"B\": %d, \"K\": %d, "
                      "\"err_out\": %.3e, \"err_state\": %.3e, \"tolerance\": %.0e, \"ok\": %s, \"median_us\": %.2f, "
                      "\"batches_us\": [%.2f, %.2f], \"min_bytes\": %.0f, \"chunked_flops\": %.0f}",
                      &c == cases ? "" : ", ", c.what, c.S, c.H_k, c.H_v, c.T, c.B, c.K, err_out, err_state, kTol,
                      ok_out && ok_state ? "true" : "false", med, *std::min_element(us.begin(), us.end()),
                      *std::max_element(us.begin(), us.end()), bytes, flops);
        json += row;

        // step 2a: the two passes on tensor cores, checked against the same reference, then timed (32 and 16 columns)
        // one tensor-core run into a poisoned dst, its output and state errors against the reference, counted
        auto checked_run = [&](auto launch, double & err_out, double & err_state) {
            std::fill(out.begin(), out.end(), float(kSentinel));
            CHECK(cudaMemcpy(d_dst, out.data(), out.size() * sizeof(float), cudaMemcpyHostToDevice));
            launch(sabotage ? kSabotageMaskDiagonal : kSabotageNone);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(out.data(), d_dst, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
            err_out   = rel_error(out, ref, 0, in.attn_elems);
            err_state = rel_error(out, ref, in.attn_elems, in.dst_elems);
            checks += 2;
            failures += (err_out < kTolTc ? 0 : 1) + (err_state < kTolTc ? 0 : 1);
        };
        float * d_records = nullptr;
        CHECK(cudaMalloc(&d_records, size_t(fusekit_gdn_tc::workspace_floats(p)) * sizeof(float)));
        double tc_out = 0, tc_state = 0;
        checked_run([&](int sab) { launch_two_pass<32>(p, d_records, sab); }, tc_out, tc_state);
        const bool tc_ok_out = tc_out < kTolTc, tc_ok_state = tc_state < kTolTc;
        const double tc32 = fusekit_standalone::median(time_launches([&] { launch_two_pass<32>(p, d_records, 0); }));
        const double tc16 = fusekit_standalone::median(time_launches([&] { launch_two_pass<16>(p, d_records, 0); }));
        const double prep = fusekit_standalone::median(time_launches([&] { launch_prep<fusekit_gdn_tc::kPadNone>(p, d_records, 0); }));
        std::printf("  step 2a, TF32 two passes: out err %.2e %s, state err %.2e %s, %.1f us (16 columns per CTA: %.1f us; "
                    "prep pass alone %.1f us)\n",
                    tc_out, tc_ok_out ? "ok" : "FAIL", tc_state, tc_ok_state ? "ok" : "FAIL", tc32, tc16, prep);
        std::snprintf(row, sizeof(row),
                      ", {\"what\": \"%s (step 2a, TF32 two passes)\", \"T\": %d, \"B\": %d, \"K\": %d, "
                      "\"err_out\": %.3e, \"err_state\": %.3e, \"tolerance\": %.0e, \"ok\": %s, \"median_us\": %.2f, "
                      "\"median_us_16_columns\": %.2f, \"prep_median_us\": %.2f, \"workspace_bytes\": %lld}",
                      c.what, c.T, c.B, c.K, tc_out, tc_state, kTolTc, tc_ok_out && tc_ok_state ? "true" : "false", tc32, tc16,
                      prep, (long long) (fusekit_gdn_tc::workspace_floats(p) * 4));
        json += row;

        // step 2b (unpadded shared rows) and step 2c (padded): the chain and the output pass after the same prep pass,
        // checked against the same reference, timed whole and by pass (the chain alone rewrites U over U0 on every
        // call: its values drift, its time does not; each whole run first rewrites the records)
        float * d_states = nullptr;
        CHECK(cudaMalloc(&d_states, size_t(fusekit_gdn_tc::states_floats(p)) * sizeof(float)));
        auto three_passes = [&](auto pad, const char * step, const char * what) {
            constexpr int Pad = decltype(pad)::value;
            double sp_out = 0, sp_state = 0;
            checked_run([&](int sab) { launch_split<Pad>(p, d_records, d_states, sab); }, sp_out, sp_state);
            const bool   sp_ok = sp_out < kTolTc && sp_state < kTolTc;
            const double split = fusekit_standalone::median(time_launches([&] { launch_split<Pad>(p, d_records, d_states, 0); }));
            const double prep_alone = Pad == fusekit_gdn_tc::kPadNone  // step 2a's prep pass, timed above
                                          ? prep
                                          : fusekit_standalone::median(time_launches([&] { launch_prep<Pad>(p, d_records, 0); }));
            const double output = fusekit_standalone::median(time_launches([&] { launch_output<Pad>(p, d_records, d_states); }));
            const double chain  = fusekit_standalone::median(time_launches([&] { launch_chain<32, Pad>(p, d_records, d_states); }));
            std::printf("  %s, %s: out err %.2e %s, state err %.2e %s, %.1f us (prep pass alone %.1f us, chain alone %.1f us, "
                        "output pass alone %.1f us)\n",
                        step, what, sp_out, sp_out < kTolTc ? "ok" : "FAIL", sp_state, sp_state < kTolTc ? "ok" : "FAIL", split,
                        prep_alone, chain, output);
            std::snprintf(row, sizeof(row),
                          ", {\"what\": \"%s (%s, %s)\", \"T\": %d, \"B\": %d, \"K\": %d, \"pad\": %d, "
                          "\"err_out\": %.3e, \"err_state\": %.3e, \"tolerance\": %.0e, \"ok\": %s, \"median_us\": %.2f, "
                          "\"prep_median_us\": %.2f, \"chain_median_us\": %.2f, \"output_median_us\": %.2f, \"states_bytes\": %lld}",
                          c.what, step, what, c.T, c.B, c.K, Pad, sp_out, sp_state, kTolTc, sp_ok ? "true" : "false", split,
                          prep_alone, chain, output, (long long) (fusekit_gdn_tc::states_floats(p) * 4));
            json += row;
        };
        three_passes(std::integral_constant<int, fusekit_gdn_tc::kPadNone>{}, "step 2b", "three passes");
        three_passes(std::integral_constant<int, fusekit_gdn_tc::kPadBanks>{}, "step 2c", "padded shared rows");

        // steps 2d and 3c: step 2c with another chain or output pass (V::kStep), each checked whole and the pass it
        // replaces timed alone (V::timed)
        auto pass_variant = [&](auto variant, const char * what) {
            using V = decltype(variant);
            double v_out = 0, v_state = 0;
            checked_run([&](int sab) { V::split(p, d_records, d_states, sab); }, v_out, v_state);
            const bool   v_ok  = v_out < kTolTc && v_state < kTolTc;
            const double alone = fusekit_standalone::median(time_launches([&] { V::timed(p, d_records, d_states); }));
            std::printf("  %s, %s: out err %.2e %s, state err %.2e %s, %s alone %.1f us\n", V::kStep, what, v_out,
                        v_out < kTolTc ? "ok" : "FAIL", v_state, v_state < kTolTc ? "ok" : "FAIL", V::kPass, alone);
            std::snprintf(row, sizeof(row),
                          ", {\"what\": \"%s (%s, %s)\", \"T\": %d, \"B\": %d, \"K\": %d, \"err_out\": %.3e, "
                          "\"err_state\": %.3e, \"tolerance\": %.0e, \"ok\": %s, \"%s\": %.2f, \"ctas_per_sm\": %d}",
                          c.what, V::kStep, what, c.T, c.B, c.K, v_out, v_state, kTolTc, v_ok ? "true" : "false",
                          V::kKey, alone, V::ctas_per_sm());
            json += row;
        };
        pass_variant(Chain16Warps{}, "chain of 16 warps");
        pass_variant(Chain16Columns{}, "chain of 16 columns, one buffer");
        pass_variant(Chain16Both{}, "chain of 16 columns, one buffer, 16 warps");
        pass_variant(ChainMma{}, "chain on mma.sync from shared memory");
        pass_variant(ChainRounded{}, "chain on mma.sync, its B operands from TF32 copies");
        pass_variant(ChainRegs2{}, "chain with the state in registers, 2 warps of 16 columns a CTA");
        pass_variant(ChainRegs4{}, "chain with the state in registers, 4 warps of 16 columns a CTA");
        pass_variant(ChainPairs2{}, "chain with each slice on a pair of warps, 2 slices a CTA");
        pass_variant(ChainLean2{}, "step 4a's chain with lean addressing, 2 warps of 16 columns a CTA");
        pass_variant(ChainLean4{}, "step 4a's chain with lean addressing, 4 warps of 16 columns a CTA");
        pass_variant(ChainSpread2{}, "step 4c's chain with its copies and stores spread, 2 warps of 16 columns a CTA");
        pass_variant(ChainSpread4{}, "step 4c's chain with its copies and stores spread, 4 warps of 16 columns a CTA");
        pass_variant(OutputBatched{}, "output of 128 columns, A in batches of 4");
        pass_variant(Output64Columns{}, "output of 64 columns, A in batches of 4");
        pass_variant(Output32Columns{}, "output of 32 columns, A in batches of 4");
        pass_variant(OutputMma{}, "output of 128 columns on mma.sync");
        pass_variant(OutputMma64{}, "output of 64 columns on mma.sync");
        pass_variant(PrepMma{}, "prep pass alone, on mma.sync from shared memory");
        pass_variant(PrepMmaOutput64{}, "whole, with step 3e's chain and the output of 64 columns, A in batches of 4");
        pass_variant(PrepMmaOutputMma{}, "whole, with step 3e's chain and step 3f's output of 128 columns");
        pass_variant(PrepMmaRounded{}, "whole, with step 3h's chain and step 3f's output of 128 columns");
        pass_variant(PrepRoundOnce{}, "prep pass alone, TF32-only operands stored rounded");
        pass_variant(PrepRoundedAll{}, "whole, with step 3h's chain and the output of 128 columns reading Qe and QKm as stored");
        pass_variant(WholeRegs4{}, "whole, with step 4a's chain of 4 warps and step 3f's output of 128 columns");
        pass_variant(WholeLean2{}, "whole, with step 4c's chain of 2 warps and step 3f's output of 128 columns");
        pass_variant(WholeLean4{}, "whole, with step 4c's chain of 4 warps and step 3f's output of 128 columns");
        pass_variant(WholeSpread2{}, "whole, with step 4d's chain of 2 warps and step 3f's output of 128 columns");
        pass_variant(WholeSpread4{}, "whole, with step 4d's chain of 4 warps and step 3f's output of 128 columns");
        pass_variant(PrepMma{}, "prep pass alone, on mma.sync from shared memory, again beside step 4e");
        pass_variant(PrepLean{}, "prep pass alone, lean addressing");
        pass_variant(WholeLeanPrep2{}, "whole, with step 4c's chain of 2 warps and step 3f's output of 128 columns");
        pass_variant(PrepRounded{}, "prep pass alone, operands rounded once, zero blocks skipped");
        pass_variant(WholeRoundedPrep2{}, "whole, with step 4c's chain of 2 warps and step 3f's output of 128 columns");
        pass_variant(OutputLean{}, "output of 128 columns, lean staging, stored from the fragments");
        pass_variant(WholeOutputLean{}, "whole, with step 4f's prep pass and step 4c's chain of 2 warps");
        pass_variant(FusedChain{}, "the chain computing the outputs, 2 warps of 16 columns a CTA");
        pass_variant(FusedWhole{}, "whole in two passes, with step 4f's prep pass storing Qe and QKm in TF32");
        pass_variant(PrepRounded{}, "prep pass alone, operands rounded once, zero blocks skipped, again beside step 4h");
        pass_variant(PrepPrefetch{}, "prep pass alone, step 4f's with the values asked into the L2 early");
        pass_variant(FusedWhole{}, "whole in two passes, with step 4f's prep pass storing Qe and QKm in TF32, again");
        pass_variant(FusedWholePrefetch{}, "whole in two passes, with step 4h's prep pass storing Qe and QKm in TF32");
        pass_variant(PrepRounded{}, "prep pass alone, operands rounded once, zero blocks skipped, again beside step 4i");
        pass_variant(PrepBulk{}, "prep pass alone, step 4f's with W and U0 leaving by bulk copy");
        pass_variant(FusedWhole{}, "whole in two passes, with step 4f's prep pass storing Qe and QKm in TF32, beside step 4i");
        pass_variant(FusedWholeBulk{}, "whole in two passes, with step 4i's prep pass storing Qe and QKm in TF32");
        pass_variant(PrepBulk{}, "prep pass alone, step 4f's with W and U0 leaving by bulk copy, again beside step 4j");
        pass_variant(PrepBulkQKm{}, "prep pass alone, step 4i's with QKm leaving by bulk copy too");
        pass_variant(FusedWholeBulk{}, "whole in two passes, with step 4i's prep pass storing Qe and QKm in TF32, beside step 4j");
        pass_variant(FusedWholeBulkQKm{}, "whole in two passes, with step 4j's prep pass storing Qe and QKm in TF32");
        // steps 4f and 4g against the passes they replace, float for float (under --sabotage: the sabotaged run
        // against the clean one)
        auto compared = [&](const char * what, const RunComparison & cmp) {
            std::printf("  %s: %lld floats differ (%lld written by one run only), largest difference %.3e\n", what,
                        cmp.differing, cmp.one_sided, cmp.max_abs);
            std::snprintf(row, sizeof(row),
                          ", {\"what\": \"%s (%s)\", \"T\": %d, \"B\": %d, \"K\": %d, \"differing_floats\": %lld, "
                          "\"one_sided_floats\": %lld, \"max_abs_difference\": %.3e}",
                          c.what, what, c.T, c.B, c.K, cmp.differing, cmp.one_sided, cmp.max_abs);
            json += row;
        };
        {
            using namespace fusekit_gdn_tc;
            const int sab = sabotage ? kSabotageMaskDiagonal : kSabotageNone;
            compared("step 4f record against step 4e's",
                     compare_runs(d_records, size_t(workspace_floats(p)), [&] { launch_prep_lean<kPadBanks>(p, d_records, 0); },
                                  [&] { launch_prep_rounded<kPadBanks>(p, d_records, sab); }));
            compared("step 4h record against step 4f's",
                     compare_runs(d_records, size_t(workspace_floats(p)),
                                  [&] { launch_prep_rounded<kPadBanks>(p, d_records, 0); },
                                  [&] { launch_prep_rounded<kPadBanks, false, true>(p, d_records, sab); }));
            compared("step 4i record against step 4f's",
                     compare_runs(d_records, size_t(workspace_floats(p)),
                                  [&] { launch_prep_rounded<kPadBanks>(p, d_records, 0); },
                                  [&] { launch_prep_rounded<kPadBanks, false, false, true>(p, d_records, sab); }));
            compared("step 4j record against step 4f's",
                     compare_runs(d_records, size_t(workspace_floats(p)),
                                  [&] { launch_prep_rounded<kPadBanks>(p, d_records, 0); },
                                  [&] { launch_prep_rounded<kPadBanks, false, false, true, true>(p, d_records, sab); }));
            compared("step 4g output against step 3f's",
                     compare_runs(d_dst, out.size(), [&] { PrepLean::split(p, d_records, d_states, 0); },
                                  [&] {
                                      launch_prep_lean<kPadBanks>(p, d_records, sab);
                                      launch_chain_lean<2, false>(p, d_records, d_states);
                                      launch_output_lean(p, d_records, d_states);
                                  }));
        }
        CHECK(cudaFree(d_states));
        CHECK(cudaFree(d_records));
        for (const float * d : {p.q, p.k, p.v, p.g, p.beta, p.state}) {
            CHECK(cudaFree(const_cast<float *>(d)));
        }
        CHECK(cudaFree(d_dst));
    }
    json += "], \"checks\": " + std::to_string(checks) + ", \"failures\": " + std::to_string(failures) + "}\n";
    if (options.json_path) {
        FILE * f = std::fopen(options.json_path, "w");
        if (!f) {
            std::perror(options.json_path);
            return 2;
        }
        std::fputs(json.c_str(), f);
        std::fclose(f);
    }
    if (sabotage) {
        std::printf("sabotage: %d of %d checks wrong (all must be)\n", failures, checks);
        return failures == checks ? 0 : 1;
    }
    std::printf("%d of %d checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}
