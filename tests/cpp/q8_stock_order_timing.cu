// Timing of the experiment fusion-5-stock-order's kernels against the kernels they replace, without ggml, on the 35B
// preset's one-token shapes: the tile body (q8_gemv_rows_by_tile, the stack's order), the MMVQ-order body
// (q8_gemv_rows), and for short rows the packed kernel the stack used. Both bodies come from one header (the
// experiment keeps the tile body for splits above 4), so one process times them interleaved: every round launches
// each kernel `launches` times back to back over weight copies that together exceed the L2, timed with events.
// Reported: per kernel and shape, the median time per launch over rounds with its spread, and new / old.
//
//   nvcc -O3 -std=c++17 -use_fast_math -arch=sm_90 -I<tree>/ggml/src/ggml-cuda -I kernels -o timing \
//        tests/cpp/q8_stock_order_timing.cu
//   ./timing [--rounds N] [--json FILE] [--only TEXT] [--launches N]
// --only times the shapes whose name contains TEXT (or one of TEXT's comma-separated parts); --launches N launches each kernel N times per round instead of
// enough to pass 4x the L2 (with --rounds 0, one warm-up round: how Nsight Compute profiles each kernel once).

#include "fusekit-q8-gemv.cuh"
#include "q8_stock_order_data.h"
#include "standalone.cuh"  // kernels/: CHECK

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace fusekit_q8;

namespace {

// ggml's glue asks for registers that fit 4 CTAs per SM (Q8_0), 2 with a gate, no bound for Q4_0.
template <bool GATE, Weights W>
constexpr int kMinCtas = W == Weights::q4_0 ? 0 : GATE ? 2 : 4;

// The bodies timed against each other: the stack's tile body, as the row kernel ran it before the experiment (ggml's
// glue: UNROLL 2, Y_LATE); the MMVQ-order body q8_gemv_rows takes; and, with fusion-5-stock-whole-blocks, the segment
// body as it was before that experiment (a lane takes a part of each of its stood-in warps' blocks).
enum class Body { tile, order, segments };

template <Body B, int SPLIT, bool GATE, Weights W>
__global__ void __launch_bounds__(kWarp * kWarpsPerCta, kMinCtas<GATE, W>) body_kernel(const Problem p) {
    if constexpr (B == Body::tile) {
        q8_gemv_rows_by_tile<SPLIT, 2, GATE, PlainHooks, true, W>(p, blockIdx.x, 0, 0);
    } else if constexpr (B == Body::order) {
        q8_gemv_rows<SPLIT, 2, GATE, PlainHooks, true, W>(p, blockIdx.x, 0, 0);
    } else {
#ifdef FUSEKIT_STOCK_WHOLE_BLOCKS
        q8_gemv_rows_mmvq_order<SPLIT, 2, GATE, PlainHooks, W, false>(p, blockIdx.x, 0, 0);
#endif
    }
}

using Kernel = void (*)(Problem);

// The floor: a plain 16-byte streaming read of the table's bytes (grid-stride, the loads kept alive), launched like
// the others, so its time per launch includes what a launch costs.
__global__ void stream_read_kernel(const Problem p) {
    const size_t  n   = size_t(p.nrows) * p.nblocks * block_bytes_of(p.weights) / 16;
    const uint4 * src = reinterpret_cast<const uint4 *>(p.x);
    const size_t  tid = (size_t(blockIdx.x) * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (size_t i = tid; i < n; i += size_t(gridDim.x) * blockDim.x * blockDim.y) {
        const uint4 v = __ldcs(src + i);
        acc.x ^= v.x;
        acc.y ^= v.y;
        acc.z ^= v.z;
        acc.w ^= v.w;
    }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) {
        p.dst[0] = float(acc.x);
    }
}

struct Shape {
    const char * name;
    Weights      w;
    int          nrows;
    int          nblocks;
    bool         gate;
};

template <Body B, bool GATE, Weights W>
Kernel with_split(int split) {
    return split == 1 ? body_kernel<B, 1, GATE, W> : split == 2 ? body_kernel<B, 2, GATE, W> : body_kernel<B, 4, GATE, W>;
}

// Body B's kernel for a shape's format and gate at `split` warps per row (1, 2 or 4).
template <Body B>
Kernel kernel_for(const Shape & s, int split) {
    return s.w == Weights::q4_0 ? (s.gate ? with_split<B, true, Weights::q4_0>(split) : with_split<B, false, Weights::q4_0>(split))
                                : (s.gate ? with_split<B, true, Weights::q8_0>(split) : with_split<B, false, Weights::q8_0>(split));
}

// Whether `name` contains one of the comma-separated parts of `list` (--only).
bool names_match(const char * name, const char * list) {
    const std::string all(list);
    for (size_t start = 0; start <= all.size();) {
        const size_t end = std::min(all.find(',', start), all.size());
        if (end > start && std::strstr(name, all.substr(start, end - start).c_str())) {
            return true;
        }
        start = end + 1;
    }
    return false;
}

struct Contender {
    std::string name;
    Kernel      kernel;
    dim3        grid;
};

}  // namespace

int main(int argc, char ** argv) {
    int rounds = 7;
    int launches_asked = 0;
    const char * json_path = nullptr;
    const char * only      = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
            json_path = argv[++i];
        } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (std::strcmp(argv[i], "--launches") == 0 && i + 1 < argc) {
            launches_asked = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "unknown argument %s (--rounds N, --json FILE, --only TEXT, --launches N)\n", argv[i]);
            return 2;
        }
    }
    int sm_count = 0;
    CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const size_t l2 = size_t(prop.l2CacheSize);

    // the 35B preset's one-token products (experts as 8 experts' rows back to back, no ids)
    const Shape shapes[] = {
        {"gdn wqkv 8192x2048", Weights::q8_0, 8192, 64, false},
        {"gdn wqkv_gate 4096x2048", Weights::q8_0, 4096, 64, false},
        {"attn wk 512x2048", Weights::q8_0, 512, 64, false},
        {"ssm_out 2048x4096", Weights::q8_0, 2048, 128, false},
        {"shexp gate/up 512x2048", Weights::q8_0, 512, 64, true},
        {"shexp down 2048x512", Weights::q8_0, 2048, 16, false},
        {"experts gate/up q4_0 4096x2048", Weights::q4_0, 4096, 64, true},
        {"experts down q4_0 16384x512", Weights::q4_0, 16384, 16, false},
        {"output 248320x2048", Weights::q8_0, 248320, 64, false},
#ifdef FUSEKIT_STOCK_ORDERED_STREAM
        // issue #11's tables of 50 MB and more (Llama-3-8B's MLP and output head, a 28672-row MLP), and two where
        // fusion-5 was slower than stock MMVQ in session 6's race (Llama-3-8B attention q/o and fused qkv)
        {"llama attn q/o 4096x4096", Weights::q8_0, 4096, 128, false},
        {"llama qkv 6144x4096", Weights::q8_0, 6144, 128, false},
        {"llama mlp down 4096x14336", Weights::q8_0, 4096, 448, false},
        {"llama gate/up 14336x4096", Weights::q8_0, 14336, 128, false},
        {"mlp 28672x4096", Weights::q8_0, 28672, 128, false},
        {"llama output 128256x4096", Weights::q8_0, 128256, 128, false},
        // the shape table's one other plain table of 2^19 blocks and more (fusion-5-stream-zzz-medium-tables streams it)
        {"v100 attn qkv 12288x2560", Weights::q8_0, 12288, 80, false},
#endif
    };
    std::mt19937 rng(7);
    std::string json;
    std::printf("%-32s %-22s %10s %10s %8s %6s\n", "shape", "kernel", "us/launch", "spread", "vs tile", "TB/s");
    for (const Shape & s : shapes) {
        if (only && !names_match(s.name, only)) {
            continue;
        }
        const size_t bytes  = size_t(s.nrows) * s.nblocks * block_bytes_of(s.w);
        const int    copies = int(std::max<size_t>(1, (4 * l2 + bytes - 1) / bytes));
        const int    launches = launches_asked > 0 ? launches_asked : std::max(copies, 20);
        std::vector<uint8_t> host(bytes);
        for (size_t i = 0; i < bytes; ++i) {
            host[i] = uint8_t(rng());
        }
        for (size_t b = 0; b < bytes / block_bytes_of(s.w); ++b) {  // finite fp16 scales
            const __half d = __float2half(1e-3f);
            std::memcpy(&host[b * block_bytes_of(s.w)], &d, 2);
        }
        std::vector<uint8_t *> xs(copies), gs(copies);
        for (int c = 0; c < copies; ++c) {
            CHECK(cudaMalloc(&xs[c], bytes + 64));
            CHECK(cudaMemcpy(xs[c], host.data(), bytes, cudaMemcpyHostToDevice));
            gs[c] = nullptr;
            if (s.gate) {
                CHECK(cudaMalloc(&gs[c], bytes + 64));
                CHECK(cudaMemcpy(gs[c], host.data(), bytes, cudaMemcpyHostToDevice));
            }
        }
        std::vector<uint8_t> yhost(s.nblocks * kYBlockBytes, 1);
        uint8_t * y = nullptr;
        float *   dst = nullptr;
        CHECK(cudaMalloc(&y, yhost.size()));
        CHECK(cudaMemcpy(y, yhost.data(), yhost.size(), cudaMemcpyHostToDevice));
        CHECK(cudaMalloc(&dst, size_t(s.nrows) * 4));

        Problem p = q8_stock_order::one_token_problem(s.w, s.nrows, s.nblocks, y, dst, 0);

        const int split_new = choose_split(s.nrows, 1, 1, s.nblocks, sm_count);  // capped at 4 by the experiment
        std::vector<Contender> contenders;
        const auto grid_of = [&](int split) { return dim3((s.nrows + kWarpsPerCta / split - 1) / (kWarpsPerCta / split)); };
        const bool short_rows = s.nblocks == 16 || s.nblocks == 8;
        if (short_rows) {  // the stack took the packed kernel for these
            const int pack = kTileBlocks / s.nblocks;
            Kernel k = s.w == Weights::q4_0 ? (pack == 4 ? q8_gemv_packed_kernel<4, false, PlainHooks, Weights::q4_0>
                                                         : q8_gemv_packed_kernel<2, false, PlainHooks, Weights::q4_0>)
                                            : (pack == 4 ? q8_gemv_packed_kernel<4, false, PlainHooks, Weights::q8_0>
                                                         : q8_gemv_packed_kernel<2, false, PlainHooks, Weights::q8_0>);
            contenders.push_back({"packed (stack)", k, dim3((s.nrows + kWarpsPerCta * pack - 1) / (kWarpsPerCta * pack))});
        } else {
            const int split_old = split_new;  // the same for every shape here (none needs 8)
            contenders.push_back({"tile (stack) split " + std::to_string(split_old), kernel_for<Body::tile>(s, split_old),
                                  grid_of(split_old)});
        }
        contenders.push_back({"mmvq order split " + std::to_string(split_new), kernel_for<Body::order>(s, split_new),
                              grid_of(split_new)});
#ifdef FUSEKIT_STOCK_WHOLE_BLOCKS
        if (split_new == 2 || split_new == 4) {
            contenders.push_back({"mmvq segments split " + std::to_string(split_new),
                                  kernel_for<Body::segments>(s, split_new), grid_of(split_new)});
        }
#endif
#ifdef FUSEKIT_STOCK_ORDERED_TILES
        if (!s.gate && s.nblocks == (s.w == Weights::q4_0 ? MmvqOrder<Weights::q4_0>::warp_blocks
                                                          : MmvqOrder<Weights::q8_0>::warp_blocks)) {
            const int parts = s.w == Weights::q4_0 ? MmvqOrder<Weights::q4_0>::parts : MmvqOrder<Weights::q8_0>::parts;
            Kernel packed = s.w == Weights::q4_0 ? q8_gemv_packed_mmvq_kernel<false, PlainHooks, Weights::q4_0>
                                                 : q8_gemv_packed_mmvq_kernel<false, PlainHooks, Weights::q8_0>;
            contenders.push_back({"mmvq order packed", packed,
                                  dim3((s.nrows + kWarpsPerCta * parts - 1) / (kWarpsPerCta * parts))});
        }
#endif
#ifdef FUSEKIT_STOCK_ORDERED_STREAM
        // fusion-5-stock-streamed: the persistent stream kernel at three ring depths on every plain shape (plan
        // takes it from kStreamMinRows rows; the smaller tables say where that threshold should be)
        if (!s.gate) {
#if defined(FUSEKIT_STREAM_LEAN_ISSUE)
            // fusion-5-stream-lean-issue: the kernel before it (y in shared memory, addresses made per copy) and the
            // one before that (y from global memory) at depth 3, against the lean one; depth 4 as before; then the
            // lean issue without the copy of y at depths 3 and 4; with fusion-5-stream-rows-in-turn, every one of
            // them with contiguous runs of rows per warp (the kernels before it), then the lean ones with rows dealt
            // to the warps in turn; with fusion-5-stream-slot-addresses, the interleaved lean ones with their ring's
            // addresses in registers; with fusion-5-stream-tma-copies, those with each other copy instruction. Every
            // contender at 4 CTAs per SM (session 28 measured 5 slower and removed that experiment).
            // the contender's name for fusion-5-stream-tma-copies' StreamCopy K (and fusion-5-stream-with-l2-hints')
            const auto copy_name = [](int K) -> std::string {
                static const char * const names[] = {"", " plain copies", " l1 copies", " bulk copies",
                                                     " l1 hinted copies", " l1 l2-128 copies", " l1 l2-256 copies"};
                return names[K];
            };
            const auto add_stream = [&](auto tag, auto y_tag, auto lean_tag, auto interleave_tag, auto pairs_tag,
                                        auto slots_tag, auto copy_tag) {
                constexpr int  D = decltype(tag)::value;
                constexpr bool Y = decltype(y_tag)::value;
                constexpr bool L = decltype(lean_tag)::value;
                constexpr bool I = decltype(interleave_tag)::value;
                constexpr bool P = decltype(pairs_tag)::value != 0;  // fusion-5-stream-y-pairs' layout of y's copy
                constexpr bool R = decltype(pairs_tag)::value >= 2;  // ... and fusion-5-stream-zy-y-registers (Q8_0)
                constexpr bool F = decltype(pairs_tag)::value == 3;  // ... and -zz-y-registers-first's longer rows
                constexpr bool S = decltype(slots_tag)::value;
                constexpr int  K = decltype(copy_tag)::value;  // fusion-5-stream-tma-copies' StreamCopy, 0: hinted
                if (Y && s.nblocks > kStreamYBlocks) {
                    return;
                }
#if defined(FUSEKIT_STREAM_Y_REGISTERS_FIRST)
                if (R && !F && !stream_y_in_registers(s.w, s.nblocks)) {
                    return;  // the two-tile kernel runs rows of at most two tiles
                }
                if (F && (s.w != Weights::q8_0 || stream_y_in_registers(s.w, s.nblocks))) {
                    return;  // the first tiles' y in registers: Q8_0 rows of more than two tiles
                }
                constexpr StreamCopy copy = static_cast<StreamCopy>(K);
                const Launch l = s.w == Weights::q4_0
                                     ? plan_stream<PlainHooks, Weights::q4_0, D, Y, L, I, S, copy, P, false, false>(p, sm_count)
                                     : plan_stream<PlainHooks, Weights::q8_0, D, Y, L, I, S, copy, P, R, F>(p, sm_count);
#elif defined(FUSEKIT_STREAM_Y_REGISTERS)
                static_assert(!F, "the first tiles' y in registers needs fusion-5-stream-zz-y-registers-first");
                if (R && !stream_y_in_registers(s.w, s.nblocks)) {
                    return;  // plan keeps y in shared memory there: the contender without R is that kernel
                }
                constexpr StreamCopy copy = static_cast<StreamCopy>(K);
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D, Y, L, I, S, copy, P, false>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D, Y, L, I, S, copy, P, R>(p, sm_count);
#elif defined(FUSEKIT_STREAM_Y_PAIRS)
                static_assert(!R, "y in registers needs fusion-5-stream-zy-y-registers");
                constexpr StreamCopy copy = static_cast<StreamCopy>(K);
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D, Y, L, I, S, copy, P>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D, Y, L, I, S, copy, P>(p, sm_count);
#elif defined(FUSEKIT_STREAM_TMA_COPIES)
                static_assert(!P, "the pair layout of y needs fusion-5-stream-y-pairs");
                constexpr StreamCopy copy = static_cast<StreamCopy>(K);
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D, Y, L, I, S, copy>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D, Y, L, I, S, copy>(p, sm_count);
#elif defined(FUSEKIT_STREAM_SLOT_ADDRESSES)
                static_assert(K == 0, "other copies need fusion-5-stream-tma-copies");
                static_assert(!P, "the pair layout of y needs fusion-5-stream-y-pairs");
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D, Y, L, I, S>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D, Y, L, I, S>(p, sm_count);
#elif defined(FUSEKIT_STREAM_INTERLEAVED)
                static_assert(!S, "slot addresses need fusion-5-stream-slot-addresses");
                static_assert(!P, "the pair layout of y needs fusion-5-stream-y-pairs");
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D, Y, L, I>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D, Y, L, I>(p, sm_count);
#else
                static_assert(!S, "slot addresses need fusion-5-stream-slot-addresses");
                static_assert(!I, "rows dealt in turn need fusion-5-stream-rows-in-turn");
                static_assert(!P, "the pair layout of y needs fusion-5-stream-y-pairs");
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D, Y, L>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D, Y, L>(p, sm_count);
#endif
                contenders.push_back({"mmvq order stream d" + std::to_string(D) + (Y ? " y-shared" : "") +
                                          (L ? " lean" : "") + (I ? " interleaved" : "") +
                                          (S ? " slots" : "") + copy_name(K) + (P ? " y-pairs" : "") + (R ? " y-regs" : "") + (F ? " first" : ""),
                                      l.kernel, l.grid});
            };
            const std::false_type                            runs{};  // contiguous runs of rows per warp
            const std::false_type                            no_slots{};  // addresses made per issue, as before
            const std::integral_constant<int, 0>             hinted{};    // cp.async.cg with the L2 hint, as before
            const std::false_type                            no_pairs{};  // y's copy as ggml lays it out, as before
            add_stream(std::integral_constant<int, 3>{}, std::false_type{}, std::false_type{}, runs, no_pairs, no_slots, hinted);
            add_stream(std::integral_constant<int, 3>{}, std::true_type{}, std::false_type{}, runs, no_pairs, no_slots, hinted);
            add_stream(std::integral_constant<int, 3>{}, std::true_type{}, std::true_type{}, runs, no_pairs, no_slots, hinted);
            add_stream(std::integral_constant<int, 4>{}, std::false_type{}, std::false_type{}, runs, no_pairs, no_slots, hinted);
            // after session 26: the lean issue with y read from global memory, at depths 3 and 4 (depth 4 and the copy
            // of y do not fit 48 KB), to tell y's copy from the ring's depth now that the kernel waits on memory again
            add_stream(std::integral_constant<int, 3>{}, std::false_type{}, std::true_type{}, runs, no_pairs, no_slots, hinted);
            add_stream(std::integral_constant<int, 4>{}, std::false_type{}, std::true_type{}, runs, no_pairs, no_slots, hinted);
#if defined(FUSEKIT_STREAM_INTERLEAVED)
            // after session 27: rows dealt to the warps in turn, with and without the copy of y
            add_stream(std::integral_constant<int, 3>{}, std::true_type{}, std::true_type{}, std::true_type{}, no_pairs, no_slots, hinted);
            add_stream(std::integral_constant<int, 3>{}, std::false_type{}, std::true_type{}, std::true_type{}, no_pairs, no_slots, hinted);
#endif
#if defined(FUSEKIT_STREAM_SLOT_ADDRESSES)
            // the interleaved lean kernel with its ring's addresses in registers, at depth D, with or without y's copy,
            // copying with fusion-5-stream-tma-copies' StreamCopy (hinted before it)
            const auto add_slots = [&](auto depth_tag, auto y_tag, auto copy_tag, auto pairs_tag) {
                add_stream(depth_tag, y_tag, std::true_type{}, std::true_type{}, pairs_tag, std::true_type{}, copy_tag);
            };
            const std::integral_constant<int, 3> d3{};
            const std::true_type                 y_copied{};
            const std::false_type                y_global{};
            // after session 28: the interleaved lean kernel with its ring's shared addresses kept in registers
            add_slots(d3, y_copied, hinted, no_pairs);
            add_slots(d3, y_global, hinted, no_pairs);
#endif
#if defined(FUSEKIT_STREAM_TMA_COPIES)
            // after session 28's L2 traffic (1.5x the table's sectors from L2 to L1 with cp.async.cg and the hint): the
            // same kernel without the hint, through L1, and with one bulk copy per tile (plan's on sm_90)
            add_slots(d3, y_copied, std::integral_constant<int, 1>{}, no_pairs);
            add_slots(d3, y_copied, std::integral_constant<int, 2>{}, no_pairs);
            add_slots(d3, y_copied, std::integral_constant<int, 3>{}, no_pairs);
            add_slots(d3, y_global, std::integral_constant<int, 3>{}, no_pairs);
#endif
#if defined(FUSEKIT_STREAM_VIA_L1)
            // after session 29 (cp.async.ca moves the table's sectors once): the l1 copies with y read from global
            // memory, at depths 3 and 4 (depth 4 and the copy of y do not fit 48 KB)
            add_slots(d3, y_global, std::integral_constant<int, 2>{}, no_pairs);
            add_slots(std::integral_constant<int, 4>{}, y_global, std::integral_constant<int, 2>{}, no_pairs);
#endif
#if defined(FUSEKIT_STREAM_WITH_L2_HINTS)
            // after session 29: the l1 copies (with y's copy) with the evict-first policy, and asking L2 for 128 or 256
            // bytes per request
            add_slots(d3, y_copied, std::integral_constant<int, 4>{}, no_pairs);
            add_slots(d3, y_copied, std::integral_constant<int, 5>{}, no_pairs);
            add_slots(d3, y_copied, std::integral_constant<int, 6>{}, no_pairs);
#endif
#if defined(FUSEKIT_STREAM_Y_PAIRS)
            // after session 29's stalls (the l1 kernel waits on the shared-memory queue): the l1 copies with y's copy
            // laid out for 8-byte loads (plan's)
            add_slots(d3, y_copied, std::integral_constant<int, 2>{}, std::true_type{});
#endif
#if defined(FUSEKIT_STREAM_Y_REGISTERS)
            // after session 32: the kernel of stack-1-5-stock-order-l1 (l1 hinted copies, y's pair layout), and the
            // same with a lane's blocks of y in registers where a row has at most two tiles (plan's)
            add_slots(d3, y_copied, std::integral_constant<int, 4>{}, std::true_type{});
            add_slots(d3, y_copied, std::integral_constant<int, 4>{}, std::integral_constant<int, 2>{});
#endif
#if defined(FUSEKIT_STREAM_Y_REGISTERS_FIRST)
            // after session 34: Q8_0 rows of more than two tiles with their first two tiles' y in registers (plan's)
            add_slots(d3, y_copied, std::integral_constant<int, 4>{}, std::integral_constant<int, 3>{});
#endif
#elif defined(FUSEKIT_STREAM_Y_SHARED)
            // fusion-5-stock-y-shared: the kernel before it (y read from global memory per part) at depths 3 and 4,
            // against the one that reads the CTA's copy in shared memory (depth 3: the ring and the copy fit 48 KB)
            const auto add_stream = [&](auto tag, auto y_tag) {
                constexpr int  D = decltype(tag)::value;
                constexpr bool Y = decltype(y_tag)::value;
                if (Y && s.nblocks > kStreamYBlocks) {
                    return;
                }
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D, Y>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D, Y>(p, sm_count);
                contenders.push_back({"mmvq order stream d" + std::to_string(D) + (Y ? " y-shared" : ""), l.kernel, l.grid});
            };
            add_stream(std::integral_constant<int, 3>{}, std::false_type{});
            add_stream(std::integral_constant<int, 3>{}, std::true_type{});
            add_stream(std::integral_constant<int, 4>{}, std::false_type{});
#else
            const auto add_stream = [&](auto tag) {
                constexpr int D = decltype(tag)::value;
                const Launch l = s.w == Weights::q4_0 ? plan_stream<PlainHooks, Weights::q4_0, D>(p, sm_count)
                                                      : plan_stream<PlainHooks, Weights::q8_0, D>(p, sm_count);
                contenders.push_back({"mmvq order stream d" + std::to_string(D), l.kernel, l.grid});
            };
            add_stream(std::integral_constant<int, 3>{});
            add_stream(std::integral_constant<int, 4>{});
            add_stream(std::integral_constant<int, 5>{});
#endif
        }
#endif
        if (!s.gate) {  // the floor reads x's bytes alone
            contenders.push_back({"floor (16-byte read)", stream_read_kernel, dim3(sm_count * 8)});
        }

        cudaEvent_t start, stop;
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&stop));
        std::vector<std::vector<float>> times(contenders.size());
        for (int r = -1; r < rounds; ++r) {  // round -1 warms up
            for (size_t c = 0; c < contenders.size(); ++c) {
                CHECK(cudaEventRecord(start));
                for (int i = 0; i < launches; ++i) {
                    p.x = xs[i % copies];
                    p.gate = gs[i % copies];
                    contenders[c].kernel<<<contenders[c].grid, dim3(kWarp, kWarpsPerCta)>>>(p);
                }
                CHECK(cudaEventRecord(stop));
                CHECK(cudaEventSynchronize(stop));
                CHECK(cudaGetLastError());
                float ms = 0.0f;
                CHECK(cudaEventElapsedTime(&ms, start, stop));
                if (r >= 0) {
                    times[c].push_back(1000.0f * ms / float(launches));
                }
            }
        }
        const size_t touched = s.gate ? 2 * bytes : bytes;  // the weights a launch reads (x and the gate)
        float median_old = 0.0f;
        for (size_t c = 0; c < contenders.size(); ++c) {
            std::vector<float> t = times[c];
            if (t.empty()) {  // --rounds 0: the warm-up round alone, nothing to report
                continue;
            }
            std::sort(t.begin(), t.end());
            const float median = t[t.size() / 2];
            const float spread = (t.back() - t.front()) / median;
            if (c == 0) {
                median_old = median;
            }
            std::printf("%-32s %-22s %10.2f %9.1f%% %8.3f %6.2f\n", s.name, contenders[c].name.c_str(), median,
                        100.0f * spread, median / median_old,
                        double(touched) / (1e6 * median));
            json += std::string(json.empty() ? "" : ",") + "{\"shape\": \"" + s.name + "\", \"bytes\": " +
                    std::to_string(touched) + ", \"kernel\": \"" +
                    contenders[c].name + "\", \"median_us\": " + std::to_string(median) + ", \"min_us\": " +
                    std::to_string(t.front()) + ", \"max_us\": " + std::to_string(t.back()) + ", \"launches\": " +
                    std::to_string(launches) + ", \"copies\": " + std::to_string(copies) + ", \"rounds\": " +
                    std::to_string(rounds) + "}";
        }
        for (int c = 0; c < copies; ++c) {
            CHECK(cudaFree(xs[c]));
            if (gs[c]) {
                CHECK(cudaFree(gs[c]));
            }
        }
        CHECK(cudaFree(y));
        CHECK(cudaFree(dst));
        CHECK(cudaEventDestroy(start));
        CHECK(cudaEventDestroy(stop));
    }
    if (json_path) {
        if (FILE * f = std::fopen(json_path, "w")) {
            std::fprintf(f, "{\"device\": \"%s\", \"sm_count\": %d, \"l2_bytes\": %zu, \"results\": [%s]}\n", prop.name,
                         sm_count, l2, json.c_str());
            std::fclose(f);
        }
    }
    return 0;
}
