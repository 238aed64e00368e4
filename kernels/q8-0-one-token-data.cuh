// What the one-token Q8_0 standalone programs (kernels/reader_quantize_check.cu, kernels/q8_rows_reader_check.cu)
// share: a table's shape, ggml's block_q8_0 and its 16-bit int load, ggml's quantize launch, random weights and
// activations with the host's q8_1 copy, the float64 reference of each row from the same quantized data, the relative
// error against it, the device copies (the weights repeated so that evaluations can rotate past the L2), the CUDA
// graphs that rotate over them, and the timing-fault bound.
#pragma once

#include "fusekit-norm-quantize.cuh"  // block_q8_1_t, padded_cols
#include "q8-1-host.cuh"              // quantize_block: the host's quantize_q8_1
#include "standalone.cuh"             // CHECK

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace fusekit_q8_data {

using fusekit_nq::block_q8_1_t;

// ggml's block_q8_0: a half scale, then 32 int8 (34 bytes, 2-byte aligned).
struct block_q8_0_t {
    half   d;
    int8_t qs[32];
};
static_assert(sizeof(block_q8_0_t) == 34, "q8_0 block must be 34 bytes like ggml's");

// An int of a q8_0 block's quants from two 16-bit loads (the block is only 2-byte aligned), as ggml's get_int_b2.
__device__ __forceinline__ int q8_0_int(const block_q8_0_t & b, int i) {
    const uint16_t * q = reinterpret_cast<const uint16_t *>(b.qs);
    return int(q[2 * i]) | (int(q[2 * i + 1]) << 16);
}

// A table of the experiment: what it is, its rows and K.
struct Shape {
    const char * what;
    int          rows, k;
};

constexpr int kQuantizeThreads = 256;

// ggml's quantize_q8_1 at one token: value i in lane i % 32; past k, 0. wipe_block: a block to zero (-1: none).
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_kernel(const float * x, block_q8_1_t * xq, int k, int wipe_block) {
    const int i = int(blockIdx.x) * kQuantizeThreads + int(threadIdx.x);
    fusekit_nq::store_q8_1(xq, i, i < k ? x[i] : 0.0f, i / 32 == wipe_block);
}

// One table and its input: random quants and scales, normal activations, their q8_1 copy as the host quantizes
// it, and each row's float64 reference from those quantized data.
struct OneToken {
    int                       rows, k, blocks;
    std::vector<block_q8_0_t> w;
    std::vector<float>        x;
    std::vector<block_q8_1_t> xq;
    std::vector<double>       ref;
};

// y_r in float64 from the quantized data: sum over blocks of d_w d_x sum(q_w q_x).
inline double reference_row(const block_q8_0_t * wr, const std::vector<block_q8_1_t> & xq, int blocks) {
    double y = 0.0;
    for (int b = 0; b < blocks; ++b) {
        long sumi = 0;
        for (int l = 0; l < 32; ++l) {
            sumi += long(wr[b].qs[l]) * long(xq[b].qs[l]);
        }
        y += double(__half2float(wr[b].d)) * double(__low2float(xq[b].ds)) * double(sumi);
    }
    return y;
}

inline OneToken make_one_token(int rows, int k, std::mt19937 & rng) {
    OneToken t{rows, k, k / 32, std::vector<block_q8_0_t>(size_t(rows) * (k / 32)), std::vector<float>(k), {}, {}};
    std::uniform_int_distribution<int>    q(-127, 127);
    std::uniform_real_distribution<float> scale(0.001f, 0.02f);
    std::normal_distribution<float>       normal(0.0f, 1.0f);
    for (block_q8_0_t & b : t.w) {
        b.d = __float2half(scale(rng));
        for (int8_t & v : b.qs) {
            v = int8_t(q(rng));
        }
    }
    for (float & v : t.x) {
        v = normal(rng);
    }
    t.xq.resize(t.blocks);
    for (int b = 0; b < t.blocks; ++b) {
        t.xq[b] = fusekit_q8_host::quantize_block(&t.x[32 * b]);
    }
    t.ref.resize(rows);
    for (int r = 0; r < rows; ++r) {
        t.ref[r] = reference_row(&t.w[size_t(r) * t.blocks], t.xq, t.blocks);
    }
    return t;
}

// The largest |y - ref| over the largest |ref|.
inline double max_rel_err(const std::vector<float> & y, const std::vector<double> & ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
        num = std::fmax(num, std::fabs(double(y[i]) - ref[i]));
        den = std::fmax(den, std::fabs(ref[i]));
    }
    return den > 0.0 ? num / den : num;
}

// The device side of a OneToken: `copies` back-to-back copies of the weights, x, y, a q8_1 buffer for a quantize
// launch (xq), the host's q8_1 copy made once (pre), and a buffer a kernel may dump its own q8_1 copy into.
struct DeviceData {
    block_q8_0_t * w    = nullptr;
    float *        x    = nullptr;
    float *        y    = nullptr;
    block_q8_1_t * xq   = nullptr;
    block_q8_1_t * pre  = nullptr;
    block_q8_1_t * dump = nullptr;
    size_t         wbytes = 0;

    DeviceData(const OneToken & t, int copies) : wbytes(t.w.size() * sizeof(block_q8_0_t)) {
        const size_t q8_bytes = sizeof(block_q8_1_t) * size_t(fusekit_nq::padded_cols(t.k) / 32);
        CHECK(cudaMalloc(&w, wbytes * copies));
        for (int c = 0; c < copies; ++c) {
            CHECK(cudaMemcpy(reinterpret_cast<char *>(w) + wbytes * c, t.w.data(), wbytes, cudaMemcpyHostToDevice));
        }
        CHECK(cudaMalloc(&x, sizeof(float) * t.k));
        CHECK(cudaMemcpy(x, t.x.data(), sizeof(float) * t.k, cudaMemcpyHostToDevice));
        CHECK(cudaMalloc(&y, sizeof(float) * t.rows));
        CHECK(cudaMalloc(&xq, q8_bytes));
        CHECK(cudaMalloc(&pre, q8_bytes));
        CHECK(cudaMalloc(&dump, sizeof(block_q8_1_t) * t.blocks));
        CHECK(cudaMemcpy(pre, t.xq.data(), sizeof(block_q8_1_t) * t.blocks, cudaMemcpyHostToDevice));
    }
    DeviceData(const DeviceData &)             = delete;
    DeviceData & operator=(const DeviceData &) = delete;
    ~DeviceData() {
        for (void * p : {static_cast<void *>(w), static_cast<void *>(x), static_cast<void *>(y),
                         static_cast<void *>(xq), static_cast<void *>(pre), static_cast<void *>(dump)}) {
            CHECK(cudaFree(p));
        }
    }

    // Copy c of the weights.
    const block_q8_0_t * weights(int c) const {
        return reinterpret_cast<const block_q8_0_t *>(reinterpret_cast<const char *>(w) + wbytes * c);
    }
};

// CUDA graphs of `reps` evaluations each, evaluate(c, stream) on weight copy c, the copies in turn: together they pass
// every copy once (at least), so replaying them all back to back reads the weights past the L2.
template <class Evaluate>
std::vector<cudaGraphExec_t> rotating_graphs(cudaStream_t st, int copies, int reps, Evaluate evaluate) {
    std::vector<cudaGraphExec_t> execs((copies + reps - 1) / reps);
    for (size_t g = 0; g < execs.size(); ++g) {
        cudaGraph_t graph;
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int r = 0; r < reps; ++r) {
            evaluate((int(g) * reps + r) % copies, st);
        }
        CHECK(cudaStreamEndCapture(st, &graph));
        CHECK(cudaGraphInstantiate(&execs[g], graph, 0));
        CHECK(cudaGraphDestroy(graph));
    }
    return execs;
}

inline void destroy_graphs(const std::vector<cudaGraphExec_t> & execs) {
    for (cudaGraphExec_t e : execs) {
        CHECK(cudaGraphExecDestroy(e));
    }
}

// No product reads its weights faster than 5 TB/s (the H200 copies at 4.3): a faster time per evaluation is a fault
// of the timing, not a result (session 40: graphs replayed on another stream than the events timed 0.11 us).
inline bool timing_fault(double us, size_t weight_bytes) {
    return !fusekit_standalone::g_launch_once && us < double(weight_bytes) / 5e6;
}

}  // namespace fusekit_q8_data
