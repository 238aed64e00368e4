// Standalone experiment for issue #7 (session 39): can a one-token Q8_0 product quantize its own f32 input, per CTA,
// instead of reading the q8_1 copy a separate quantize launch made? In the 35B-A3B decode token 40 such launches are
// left with fusion-1's stack (the shared expert's GLU output, read only by its down product: 2,048 rows of K = 512),
// 1.3 us each under the profiler (results/h100-2026-12-05-session39-small-grids). Three ways on the same data:
//   alone     the product reading a q8_1 copy made beforehand: the floor
//   separate  a quantize launch (ggml's quantize_q8_1: one thread a value, 256 a CTA), then the product: ggml's way
//   reader    the product alone, each CTA first quantizing the 32-value blocks of x into shared memory
// Each evaluation is one CUDA graph node per launch, kReps evaluations a graph, replayed (what a captured ggml graph
// pays); the weight copies rotate over more than the L2.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ikernels -o reader_quantize_check kernels/reader_quantize_check.cu
//   ./reader_quantize_check [--sabotage] [--json FILE] [--once]
//
// The product is ggml's one-token MMVQ for Q8_0 (mmvq.cu, ncols_dst = 1): one row a CTA of 4 warps; a thread takes
// 2 ints (8 values) of a 32-value block, the integer dot product by dp4a, then d_w d_x sumi, its sum over the blocks
// it visits, the warps' xor butterflies and their sum in warp order. The q8_1 bytes are fusion-1's store_q8_1
// (fusekit-norm-quantize.cuh), quantize_q8_1's bytes.
// Checks per shape: each variant's y against float64 of the same quantized data (relative 1e-5); the q8_1 bytes of
// the separate launch and of the reader's CTA 0 (dumped in the check run) against the host's quantize of x (the
// butterfly's order of the sum); the reader's y bit for bit the separate one's (the same bytes, the same sums).
// --sabotage: every product drops its last block, the separate quantize zeroes block 1 and the reader block 0, so
// every check fails.
// Measured (session 40, H100, results/h100-2026-12-05-session40-standalone/second/): alone 2.55, separate 3.71,
// reader 5.75 us at 2,048 x 512: the reader loses (each one-row CTA quantizes all of x first); no ggml patch.
#include "fusekit-norm-quantize.cuh"
#include "q8-0-one-token-data.cuh"  // block_q8_0_t, q8_0_int, the data, its float64 reference, the device copies
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

constexpr int kWarps = 4, kThreads = 32 * kWarps, kMaxBlocks = 64;
constexpr int kReps = 20, kBatches = 15, kL2Bytes = 64 << 20;  // graphs of 20 evaluations; copies past the 50 MB L2

constexpr Shape kShapes[] = {
    {"35B-A3B shared expert down, one token", 2048, 512},
    {"SmolLM2-135M FFN down, one token", 576, 1536},
    {"K = 2048, 512 rows", 512, 2048},
};


// One row a CTA. Reader: first quantize x into shared memory (warp w takes the blocks w, w + 4, ...), dump CTA 0's
// copy where asked; else read xq. drop_last: skip the last block (sabotage).
template <bool Reader>
__global__ void __launch_bounds__(kThreads) gemv_q8_0(const block_q8_0_t * w, const float * x, const block_q8_1_t * xq,
                                                      float * y, int k, bool drop_last, int wipe_block,
                                                      block_q8_1_t * dump) {
    __shared__ block_q8_1_t xs[kMaxBlocks];
    __shared__ float        warp_sums[kWarps];
    const int               tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int               blocks = k / 32, row = int(blockIdx.x);
    const block_q8_1_t *    xb = xq;
    if constexpr (Reader) {
        for (int b = warp; b < blocks; b += kWarps) {
            fusekit_nq::store_q8_1(xs, 32 * b + lane, x[32 * b + lane], b == wipe_block);
        }
        __syncthreads();
        if (dump != nullptr && row == 0) {
            for (int i = tid; i < blocks * int(sizeof(block_q8_1_t)) / 4; i += kThreads) {
                reinterpret_cast<int *>(dump)[i] = reinterpret_cast<const int *>(xs)[i];
            }
        }
        xb = xs;
    }
    const block_q8_0_t * wr  = w + int64_t(row) * blocks;
    const int            iqs = 2 * (tid % 4);  // the thread's first int of its block
    float                acc = 0.0f;
    for (int kb = tid / 4; kb < blocks - (drop_last ? 1 : 0); kb += kThreads / 4) {
        const int * xi   = reinterpret_cast<const int *>(xb[kb].qs);
        int         sumi = __dp4a(q8_0_int(wr[kb], iqs), xi[iqs], 0);
        sumi             = __dp4a(q8_0_int(wr[kb], iqs + 1), xi[iqs + 1], sumi);
        acc += __half2float(wr[kb].d) * __low2float(xb[kb].ds) * float(sumi);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        acc += __shfl_xor_sync(0xffffffff, acc, offset, 32);
    }
    if (lane == 0) {
        warp_sums[warp] = acc;
    }
    __syncthreads();
    if (tid == 0) {
        float sum = 0.0f;
        for (int i = 0; i < kWarps; ++i) {
            sum += warp_sums[i];
        }
        y[row] = sum;
    }
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    const bool                        sab     = options.sabotage;
    cudaDeviceProp                    prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    std::string json = std::string("{\"device\": \"") + prop.name + "\", \"sabotage\": " + (sab ? "true" : "false") +
                       ", \"reps_per_graph\": " + std::to_string(kReps) + ", \"cases\": [";
    int checks = 0, failures = 0;
    std::mt19937 rng(39);

    for (const Shape & s : kShapes) {
        const int    blocks = s.k / 32, k_padded = int(fusekit_nq::padded_cols(s.k));
        const size_t wbytes = size_t(s.rows) * blocks * sizeof(block_q8_0_t);
        const int    copies = int((kL2Bytes + wbytes - 1) / wbytes);
        if (blocks > kMaxBlocks) {
            std::fprintf(stderr, "%s: K %d over the %d blocks of shared memory\n", s.what, s.k, kMaxBlocks);
            return 2;
        }

        const fusekit_q8_data::OneToken data = fusekit_q8_data::make_one_token(s.rows, s.k, rng);
        fusekit_q8_data::DeviceData     dev(data, copies);

        const int quantize_ctas = k_padded / fusekit_q8_data::kQuantizeThreads;
        // variant 0 alone, 1 separate, 2 reader; evaluation on weight copy c
        auto evaluate = [&](int variant, int c, cudaStream_t st, block_q8_1_t * dump) {
            const block_q8_0_t * wc = dev.weights(c);
            if (variant == 0) {
                gemv_q8_0<false><<<s.rows, kThreads, 0, st>>>(wc, nullptr, dev.pre, dev.y, s.k, sab, -1, nullptr);
            } else if (variant == 1) {
                quantize_kernel<<<quantize_ctas, fusekit_q8_data::kQuantizeThreads, 0, st>>>(dev.x, dev.xq, s.k,
                                                                                     sab ? 1 : -1);
                gemv_q8_0<false><<<s.rows, kThreads, 0, st>>>(wc, nullptr, dev.xq, dev.y, s.k, sab, -1, nullptr);
            } else {
                gemv_q8_0<true><<<s.rows, kThreads, 0, st>>>(wc, dev.x, nullptr, dev.y, s.k, sab, sab ? 0 : -1, dump);
            }
        };

        // checks: y of each variant; the separate copy's and the reader's dumped bytes; reader y == separate y
        std::vector<float> ys[3];
        for (int v = 0; v < 3; ++v) {
            CHECK(cudaMemset(dev.y, 0xff, sizeof(float) * s.rows));
            evaluate(v, 0, nullptr, dev.dump);
            CHECK(cudaDeviceSynchronize());
            ys[v].resize(s.rows);
            CHECK(cudaMemcpy(ys[v].data(), dev.y, sizeof(float) * s.rows, cudaMemcpyDeviceToHost));
        }
        double       err[3];
        bool         ok[3];
        for (int v = 0; v < 3; ++v) {
            err[v] = fusekit_q8_data::max_rel_err(ys[v], data.ref);
            ok[v]  = err[v] < 1e-5;
        }
        std::vector<block_q8_1_t> sep_bytes(blocks), reader_bytes(blocks);
        CHECK(cudaMemcpy(sep_bytes.data(), dev.xq, sizeof(block_q8_1_t) * blocks, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(reader_bytes.data(), dev.dump, sizeof(block_q8_1_t) * blocks, cudaMemcpyDeviceToHost));
        const size_t qbytes   = sizeof(block_q8_1_t) * blocks;
        const bool   sep_ok   = std::memcmp(sep_bytes.data(), data.xq.data(), qbytes) == 0;
        const bool   rdr_ok   = std::memcmp(reader_bytes.data(), data.xq.data(), qbytes) == 0;
        const bool   same_ok  = std::memcmp(ys[1].data(), ys[2].data(), sizeof(float) * s.rows) == 0;
        const bool   results[] = {ok[0], ok[1], ok[2], sep_ok, rdr_ok, same_ok};
        for (bool r : results) {
            ++checks;
            failures += r ? 0 : 1;
        }

        // timing: graphs of kReps evaluations, each on the next weight copy
        double us[3] = {0, 0, 0};
        cudaStream_t st;
        CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        for (int v = 0; v < 3; ++v) {
            const std::vector<cudaGraphExec_t> execs = fusekit_q8_data::rotating_graphs(
                st, copies, kReps, [&](int c, cudaStream_t stream) { evaluate(v, c, stream, nullptr); });
            const int graphs = int(execs.size());
            // replayed on the legacy stream: launch_us_batches records its events there (session 40: replays on
            // the capture stream, a non-blocking one, put nothing between the events and timed 0.11 us)
            const double per_graph = fusekit_standalone::median_launch_us(
                [&](int i) { CHECK(cudaGraphLaunch(execs[i % graphs], cudaStreamLegacy)); }, 2 * graphs, 2 * graphs,
                kBatches);
            us[v] = per_graph / kReps;
            if (fusekit_q8_data::timing_fault(us[v], wbytes)) {
                std::fprintf(stderr, "timing fault: %s variant %d took %.3f us for %zu bytes of weights\n", s.what, v,
                             us[v], wbytes);
                return 2;
            }
            fusekit_q8_data::destroy_graphs(execs);
        }
        CHECK(cudaStreamDestroy(st));

        std::printf("%-40s %5d x %-5d alone %s (%.1e) %.2f us  separate %s (%.1e) %.2f us  reader %s (%.1e) %.2f us  "
                    "q8_1 bytes: separate %s, reader %s; reader y = separate y: %s\n",
                    s.what, s.rows, s.k, ok[0] ? "ok" : "FAIL", err[0], us[0], ok[1] ? "ok" : "FAIL", err[1], us[1],
                    ok[2] ? "ok" : "FAIL", err[2], us[2], sep_ok ? "ok" : "FAIL", rdr_ok ? "ok" : "FAIL",
                    same_ok ? "ok" : "FAIL");
        char row[1024];
        std::snprintf(row, sizeof(row),
                      "%s{\"what\": \"%s\", \"rows\": %d, \"k\": %d, \"weight_copies\": %d, \"tolerance\": 1e-5, "
                      "\"alone\": {\"err\": %.3e, \"ok\": %s, \"us\": %.3f}, "
                      "\"separate\": {\"err\": %.3e, \"ok\": %s, \"us\": %.3f, \"bytes_ok\": %s}, "
                      "\"reader\": {\"err\": %.3e, \"ok\": %s, \"us\": %.3f, \"bytes_ok\": %s, \"same_y_as_separate\": %s}}",
                      &s == kShapes ? "" : ", ", s.what, s.rows, s.k, copies, err[0], ok[0] ? "true" : "false", us[0],
                      err[1], ok[1] ? "true" : "false", us[1], sep_ok ? "true" : "false", err[2],
                      ok[2] ? "true" : "false", us[2], rdr_ok ? "true" : "false", same_ok ? "true" : "false");
        json += row;

    }
    json += "], \"checks\": " + std::to_string(checks) + ", \"failures\": " + std::to_string(failures) + "}\n";
    return fusekit_standalone::finish(options, json, checks, failures);
}
