// Standalone experiment for issue #11 (session 55): can a one-token Q8_0 product beat ggml's node (a quantize launch,
// then MMVQ) on the short tables by quantizing its own f32 input, when each CTA takes several rows so the quantize is
// paid once for all of them and the rows' weight loads are already in flight while it runs?
// The short tables are where fusion-5's stack still hands the product to MMVQ (fusion-5-stream-zzzz-mmvq-short-tables:
// 512 x 2048, 640 x 2560, 2048 x 4096, 2048 x 6144), level with stock; session 40's reader (one row a CTA, each CTA
// quantizing all of x before its first weight load) lost by 2-6 us (kernels/reader_quantize_check.cu).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ikernels -o q8_rows_reader_check kernels/q8_rows_reader_check.cu
//   ./q8_rows_reader_check [--sabotage] [--json FILE] [--once]
//
// Variants, on the same data, each evaluation one graph node per launch, kReps evaluations a graph, replayed:
//   separate    ggml's way: quantize_q8_1 (fusion-1's store_q8_1, its bytes), then MMVQ's one-token product
//   alone       the same product reading a q8_1 copy made beforehand: what the quantize launch costs
//   reader Rn   n rows a CTA of 4 warps: each thread first loads its weights for all n rows into registers, then the
//               CTA quantizes x into shared memory (one thread a 32-value block), then the n rows' sums
//   reader R4 late  R4 with its weight loads after the quantize: what the overlap is worth
// The product is MMVQ's for Q8_0 at one token (mmvq.cu, ncols_dst = 1, 4 warps, vdr 2): a thread takes 2 ints of a
// 32-value block (16-bit loads: the 34-byte blocks are 2-byte aligned), dp4a, then (d_w d_x) sumi added in its K
// order; warps 1-3 leave their partials in shared memory, warp 0 adds them lane by lane in warp order, then the xor
// butterfly, lane 0's value. So a reader's y is the separate product's bit for bit, as the same bytes give.
// Checks per shape: each variant's y against float64 of the same quantized data (relative 1e-5); the separate
// launch's q8_1 bytes and the first reader's (CTA 0's copy, dumped in the check run) against the host's quantize;
// every reader's y bit for bit the separate one's.
// --sabotage: every product drops its last block, the separate quantize zeroes block 1 and each reader block 0, so
// every check fails.
// Timing: the variants take turns, kRounds rounds; in each round every variant replays its graphs over weight copies
// past 4x the L2 (launch cost included, no PDL); per variant the median round, its range, and the time over the
// separate node.
#include "fusekit-norm-quantize.cuh"
#include "q8-0-one-token-data.cuh"  // block_q8_0_t, q8_0_int, the data, its float64 reference, the device copies
#include "q8-rows-reader.cuh"       // quantize_block_serial: one thread a block, quantize_q8_1's bytes
#include "standalone.cuh"

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using fusekit_nq::block_q8_1_t;
using fusekit_q8_data::block_q8_0_t;
using fusekit_q8_data::q8_0_int;
using fusekit_q8_data::quantize_kernel;
using fusekit_q8_data::Shape;

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps, kMaxBlocks = 192;
constexpr int kReps = 20, kRounds = 15;

// The four tables fusion-5's stack gives to MMVQ, and 4096 x 2048 (the same bytes as 2048 x 4096, twice the rows),
// which the stack's stream kernel takes.
constexpr Shape kShapes[] = {
    {"512 x 2048 (short table)", 512, 2048},
    {"640 x 2560 (short table)", 640, 2560},
    {"2048 x 4096 (35B ssm_out, attn output)", 2048, 4096},
    {"2048 x 6144 (short table)", 2048, 6144},
    {"4096 x 2048 (stream table)", 4096, 2048},
};

// One block's term as ggml's vec_dot_q8_0_q8_1_impl<float, 2>: (d_w d_x) times the integer dot product.
__device__ __forceinline__ float block_term(int w0, int w1, float d_w, const block_q8_1_t & xb, int iqs) {
    const int * xi   = reinterpret_cast<const int *>(xb.qs);
    int         sumi = __dp4a(w0, xi[iqs], 0);
    sumi             = __dp4a(w1, xi[iqs + 1], sumi);
    return d_w * __low2float(xb.ds) * float(sumi);
}

// MMVQ's end of a row: warps 1-3 leave their partials in part[row slot], warp 0 adds them in warp order, then the
// xor butterfly; lane 0's sum is the row's. Every thread of the CTA calls it (it holds a barrier).
template <int R>
__device__ __forceinline__ void finish_rows(const float (&acc)[R], float (*part)[R][32], float * y, int row0,
                                            int rows) {
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    if (warp > 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            part[warp - 1][r][lane] = acc[r];
        }
    }
    __syncthreads();
    if (warp > 0) {
        return;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
        float sum = acc[r];
#pragma unroll
        for (int l = 0; l < kWarps - 1; ++l) {
            sum += part[l][r][lane];
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            sum += __shfl_xor_sync(0xffffffff, sum, offset, 32);
        }
        if (lane == 0 && row0 + r < rows) {
            y[row0 + r] = sum;
        }
    }
}


// MMVQ's one-token product: one row a CTA, reading the q8_1 copy xq. drop_last: skip the last block (sabotage).
__global__ void __launch_bounds__(kThreads)
    mmvq_row(const block_q8_0_t * w, const block_q8_1_t * xq, float * y, int k, int rows, bool drop_last) {
    __shared__ float     part[kWarps - 1][1][32];
    const int            tid = int(threadIdx.x), blocks = k / 32, row = int(blockIdx.x);
    const block_q8_0_t * wr  = w + int64_t(row) * blocks;
    const int            iqs = 2 * (tid % 4);
    float                acc[1] = {0.0f};
    for (int kb = tid / 4; kb < blocks - (drop_last ? 1 : 0); kb += kThreads / 4) {
        acc[0] += block_term(q8_0_int(wr[kb], iqs), q8_0_int(wr[kb], iqs + 1), __half2float(wr[kb].d), xq[kb], iqs);
    }
    finish_rows<1>(acc, part, y, row, rows);
}

// R rows a CTA; ITERS >= the K loop's trips (blocks / 32, rounded up). The weights of all R rows go into registers
// first, then x is quantized into shared memory, then the sums: the quantize runs while the weights are in flight.
// LATE (the control for that overlap): the same kernel with the weight loads after the quantize and its barrier.
template <int R, int ITERS, bool LATE = false>
__global__ void __launch_bounds__(kThreads) rows_reader(const block_q8_0_t * w, const float * x, float * y, int k,
                                                        int rows, bool drop_last, int wipe_block, block_q8_1_t * dump) {
    __shared__ block_q8_1_t xs[kMaxBlocks];
    __shared__ float        part[kWarps - 1][R][32];
    const int               tid = int(threadIdx.x), blocks = k / 32, used = blocks - (drop_last ? 1 : 0);
    const int               row0 = int(blockIdx.x) * R, iqs = 2 * (tid % 4);

    int   w0[R][ITERS], w1[R][ITERS];
    float dw[R][ITERS];
    auto  load_weights = [&] {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const block_q8_0_t * wr = w + int64_t(min(row0 + r, rows - 1)) * blocks;
#pragma unroll
            for (int i = 0; i < ITERS; ++i) {
                const int kb = tid / 4 + i * (kThreads / 4);
                w0[r][i] = kb < used ? q8_0_int(wr[kb], iqs) : 0;
                w1[r][i] = kb < used ? q8_0_int(wr[kb], iqs + 1) : 0;
                dw[r][i] = kb < used ? __half2float(wr[kb].d) : 0.0f;
            }
        }
    };
    if constexpr (!LATE) {
        load_weights();
        asm volatile("" ::: "memory");  // the weight loads are issued before the quantize, not sunk below it
    }

    for (int b = tid; b < blocks; b += kThreads) {
        fusekit_rr::quantize_block_serial(x + 32 * b, xs[b], b == wipe_block);
    }
    __syncthreads();
    if (dump != nullptr && blockIdx.x == 0) {
        for (int i = tid; i < blocks * int(sizeof(block_q8_1_t)) / 4; i += kThreads) {
            reinterpret_cast<int *>(dump)[i] = reinterpret_cast<const int *>(xs)[i];
        }
    }
    if constexpr (LATE) {
        load_weights();
    }

    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        acc[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < ITERS; ++i) {
            const int kb = tid / 4 + i * (kThreads / 4);
            if (kb < used) {
                acc[r] += block_term(w0[r][i], w1[r][i], dw[r][i], xs[kb], iqs);
            }
        }
    }
    finish_rows<R>(acc, part, y, row0, rows);
}

// The K loop's trips a thread makes at K (32 blocks a trip for the 4 warps).
int iters_of(int k) {
    return (k / 32 + kThreads / 4 - 1) / (kThreads / 4);
}

using ReaderKernel = void (*)(const block_q8_0_t *, const float *, float *, int, int, bool, int, block_q8_1_t *);

// The reader for R rows a CTA at K's trip count; nullptr where no instance covers it.
template <int R, bool LATE = false>
ReaderKernel reader_for(int k) {
    switch (iters_of(k)) {
        case 2: return rows_reader<R, 2, LATE>;
        case 3: return rows_reader<R, 3, LATE>;
        case 4: return rows_reader<R, 4, LATE>;
        case 6: return rows_reader<R, 6, LATE>;
        default: return nullptr;
    }
}

struct Variant {
    std::string  name;
    int          rows_per_cta;  // 0: the separate quantize and product; -1: the product alone
    ReaderKernel reader;
};

std::string json_bool(bool b) {
    return b ? "true" : "false";
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    const bool                        sab     = options.sabotage;
    cudaDeviceProp                    prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s (sm_%d%d, %d SMs, L2 %d MB)\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, prop.l2CacheSize >> 20);
    std::string json = std::string("{\"device\": \"") + prop.name + "\", \"sm_count\": " +
                       std::to_string(prop.multiProcessorCount) + ", \"sabotage\": " + json_bool(sab) +
                       ", \"reps_per_graph\": " + std::to_string(kReps) + ", \"rounds\": " + std::to_string(kRounds) +
                       ", \"cases\": [";
    int          checks = 0, failures = 0;
    std::mt19937 rng(55);
    const size_t rotate_bytes = size_t(4) * size_t(prop.l2CacheSize);  // weight copies past 4x the L2

    for (const Shape & s : kShapes) {
        const int    blocks = s.k / 32, k_padded = int(fusekit_nq::padded_cols(s.k));
        const size_t wbytes = size_t(s.rows) * blocks * sizeof(block_q8_0_t);
        const int    copies = int((rotate_bytes + wbytes - 1) / wbytes);
        std::vector<Variant> variants = {{"separate", 0, nullptr}, {"alone", -1, nullptr}};
        for (const auto & [r, kernel] : {std::pair<int, ReaderKernel>{2, reader_for<2>(s.k)},
                                         std::pair<int, ReaderKernel>{4, reader_for<4>(s.k)},
                                         std::pair<int, ReaderKernel>{8, reader_for<8>(s.k)}}) {
            if (kernel != nullptr) {
                variants.push_back({"reader R" + std::to_string(r), r, kernel});
            }
        }
        if (ReaderKernel late = reader_for<4, true>(s.k)) {
            variants.push_back({"reader R4 late", 4, late});
        }
        if (blocks > kMaxBlocks || variants.size() < 3) {
            std::fprintf(stderr, "%s: K %d has no reader instance (at most %d blocks, trips 2, 3, 4 or 6)\n", s.what,
                         s.k, kMaxBlocks);
            return 2;
        }

        const fusekit_q8_data::OneToken data = fusekit_q8_data::make_one_token(s.rows, s.k, rng);
        fusekit_q8_data::DeviceData     dev(data, copies);

        const int quantize_ctas = k_padded / fusekit_q8_data::kQuantizeThreads;
        auto      evaluate = [&](const Variant & v, int c, cudaStream_t st, block_q8_1_t * dump) {
            const block_q8_0_t * wc = dev.weights(c);
            if (v.rows_per_cta < 0) {
                mmvq_row<<<s.rows, kThreads, 0, st>>>(wc, dev.pre, dev.y, s.k, s.rows, sab);
            } else if (v.rows_per_cta == 0) {
                quantize_kernel<<<quantize_ctas, fusekit_q8_data::kQuantizeThreads, 0, st>>>(dev.x, dev.xq, s.k,
                                                                                     sab ? 1 : -1);
                mmvq_row<<<s.rows, kThreads, 0, st>>>(wc, dev.xq, dev.y, s.k, s.rows, sab);
            } else {
                const int ctas = (s.rows + v.rows_per_cta - 1) / v.rows_per_cta;
                v.reader<<<ctas, kThreads, 0, st>>>(wc, dev.x, dev.y, s.k, s.rows, sab, sab ? 0 : -1, dump);
            }
        };

        // checks: y of each variant; the separate copy's and the first reader's dumped bytes (the later readers dump
        // nothing, and only the separate variant writes xq); reader y == separate y
        std::vector<std::vector<float>> ys(variants.size());
        CHECK(cudaMemset(dev.dump, 0, sizeof(block_q8_1_t) * blocks));
        for (size_t v = 0; v < variants.size(); ++v) {
            CHECK(cudaMemset(dev.y, 0xff, sizeof(float) * s.rows));
            evaluate(variants[v], 0, nullptr, v == 2 ? dev.dump : nullptr);  // variants[2]: the first reader
            CHECK(cudaDeviceSynchronize());
            ys[v].resize(s.rows);
            CHECK(cudaMemcpy(ys[v].data(), dev.y, sizeof(float) * s.rows, cudaMemcpyDeviceToHost));
        }
        std::vector<block_q8_1_t> sep_bytes(blocks), reader_bytes(blocks);
        CHECK(cudaMemcpy(sep_bytes.data(), dev.xq, sizeof(block_q8_1_t) * blocks, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(reader_bytes.data(), dev.dump, sizeof(block_q8_1_t) * blocks, cudaMemcpyDeviceToHost));
        const size_t      qbytes = sizeof(block_q8_1_t) * blocks;
        const bool        sep_ok = std::memcmp(sep_bytes.data(), data.xq.data(), qbytes) == 0;
        const bool        rdr_ok = std::memcmp(reader_bytes.data(), data.xq.data(), qbytes) == 0;
        std::vector<double> err(variants.size());
        std::vector<bool>   ok(variants.size()), same(variants.size(), true);
        for (size_t v = 0; v < variants.size(); ++v) {
            err[v] = fusekit_q8_data::max_rel_err(ys[v], data.ref);
            ok[v]  = err[v] < 1e-5;
            ++checks;
            failures += ok[v] ? 0 : 1;
            if (variants[v].rows_per_cta > 0) {
                same[v] = std::memcmp(ys[v].data(), ys[0].data(), sizeof(float) * s.rows) == 0;
                ++checks;
                failures += same[v] ? 0 : 1;
            }
        }
        checks += 2;
        failures += (sep_ok ? 0 : 1) + (rdr_ok ? 0 : 1);

        // timing: graphs of kReps evaluations, each on the next weight copy; the variants take turns each round
        cudaStream_t st;
        CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        std::vector<std::vector<cudaGraphExec_t>> execs;
        for (const Variant & v : variants) {
            execs.push_back(fusekit_q8_data::rotating_graphs(
                st, copies, kReps, [&](int c, cudaStream_t stream) { evaluate(v, c, stream, nullptr); }));
        }
        const int graphs = int(execs[0].size());
        std::vector<std::vector<double>> rounds_us(variants.size());
        for (int round = 0; round < (fusekit_standalone::g_launch_once ? 1 : kRounds); ++round) {
            for (size_t v = 0; v < variants.size(); ++v) {
                // replayed on the legacy stream that launch_us_batches records its events on (session 40)
                const double per_graph = fusekit_standalone::median_launch_us(
                    [&](int i) { CHECK(cudaGraphLaunch(execs[v][i % graphs], cudaStreamLegacy)); }, graphs,
                    2 * graphs, 3);
                rounds_us[v].push_back(per_graph / kReps);
            }
        }
        for (const auto & per_variant : execs) {
            fusekit_q8_data::destroy_graphs(per_variant);
        }
        CHECK(cudaStreamDestroy(st));

        const double sep_us = fusekit_standalone::median(rounds_us[0]);
        std::printf("%s: %d x %d, %.1f MB, %d weight copies; q8_1 bytes: separate %s, reader %s\n", s.what, s.rows,
                    s.k, wbytes / 1e6, copies, sep_ok ? "ok" : "FAIL", rdr_ok ? "ok" : "FAIL");
        std::string entries;
        for (size_t v = 0; v < variants.size(); ++v) {
            const double us = fusekit_standalone::median(rounds_us[v]);
            const double lo = *std::min_element(rounds_us[v].begin(), rounds_us[v].end());
            const double hi = *std::max_element(rounds_us[v].begin(), rounds_us[v].end());
            if (fusekit_q8_data::timing_fault(us, wbytes)) {
                std::fprintf(stderr, "timing fault: %s %s took %.3f us for %zu bytes of weights\n", s.what,
                             variants[v].name.c_str(), us, wbytes);
                return 2;
            }
            std::printf("  %-10s %s (%.1e)%s  %6.2f us [%.2f, %.2f]  x separate %.3f\n", variants[v].name.c_str(),
                        ok[v] ? "ok  " : "FAIL", err[v],
                        variants[v].rows_per_cta > 0 ? (same[v] ? "  y = separate's" : "  y DIFFERS") : "", us, lo, hi,
                        sep_us / us);
            char entry[512];
            std::snprintf(entry, sizeof(entry),
                          "%s{\"name\": \"%s\", \"rows_per_cta\": %d, \"err\": %.3e, \"ok\": %s, "
                          "\"same_y_as_separate\": "
                          "%s, \"median_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f}",
                          v == 0 ? "" : ", ", variants[v].name.c_str(), variants[v].rows_per_cta, err[v],
                          json_bool(ok[v]).c_str(), json_bool(same[v]).c_str(), us, lo, hi);
            entries += entry;
        }
        char head[512];
        std::snprintf(head, sizeof(head),
                      "%s{\"what\": \"%s\", \"rows\": %d, \"k\": %d, \"bytes\": %zu, \"weight_copies\": %d, "
                      "\"tolerance\": 1e-5, \"separate_bytes_ok\": %s, \"reader_bytes_ok\": %s, \"variants\": [",
                      &s == kShapes ? "" : ", ", s.what, s.rows, s.k, wbytes, copies, json_bool(sep_ok).c_str(),
                      json_bool(rdr_ok).c_str());
        json += head + entries + "]}";

    }
    json += "], \"checks\": " + std::to_string(checks) + ", \"failures\": " + std::to_string(failures) + "}\n";
    return fusekit_standalone::finish(options, json, checks, failures);
}
