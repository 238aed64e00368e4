// Does the stream kernel read what a buffer holds now, or what L1 kept of it? Session 30's test-backend-ops run of the
// lean stack with fusion-5-stream-via-l1 (the stream kernel's weight tiles copied through L1 by cp.async.ca) failed
// one MUL_MAT case of 1334: q4_0 m=1 n=1 k=256, NMSE 61, right after q4_0 m=4096 k=14336, whose 33 MB the stream
// kernel had just read through L1. test-backend-ops gives every case fresh buffers (cudaMalloc hands back the same
// addresses), writes them with cudaMemcpy and runs the product under programmatic dependent launch. This program
// repeats that sequence: a large product read through the stream kernel, new weights written over its first bytes,
// then a one-row product of those bytes, with each copy kind, with and without programmatic dependent launch, with
// and without freeing and allocating the buffer between; every one-row result is held to the float64 value of the
// bytes written last. A result read from stale lines is wrong by far more than fp32 rounding.
//
//   nvcc -O3 -std=c++17 -use_fast_math -arch=sm_90 -I<tree>/ggml/src/ggml-cuda -I kernels -I tests/cpp \
//        -o reuse tests/cpp/q8_stream_reuse_check.cu
//   ./reuse [--sabotage] [--json FILE]   (--sabotage: exit 0 only if every one-row result is wrong)

#include "fusekit-q8-gemv.cuh"
#include "q8_stock_order_data.h"
#include "standalone.cuh"  // kernels/: CHECK, parse_options

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace fusekit_q8;
using q8_stock_order::random_blocks;
using q8_stock_order::random_y;
using q8_stock_order::reference64;

namespace {

#ifndef FUSEKIT_STREAM_TMA_COPIES
#error "needs fusekit-q8-gemv.cuh with fusion-5-stream-tma-copies (StreamCopy) or later"
#endif

// The stream kernel waits for the kernel before as ggml's does under programmatic dependent launch.
struct PdlHooks : PlainHooks {
    __device__ static void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    }
};

// Stands in for quantize_q8_1: lets the next kernel start, then writes the activations (a copy of `from`).
__global__ void write_activations(const uint32_t * from, uint32_t * to, int nwords) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += gridDim.x * blockDim.x) {
        to[i] = from[i];
    }
}

struct Config {
    Weights    w;
    StreamCopy copy;
    bool       pdl;      // launches as ggml's: programmatic stream serialization, the kernel waits in resolve_channels
    bool       realloc;  // cudaFree and cudaMalloc of the weights between the large product and the one-row one
};

const char * copy_name(StreamCopy c) {
    switch (c) {
        case StreamCopy::hinted: return "hinted";
        case StreamCopy::plain:  return "plain";
        case StreamCopy::l1:     return "l1";
        default:                 return "bulk";
    }
}

template <class Hooks, Weights W, StreamCopy COPY>
void launch_kind(const Problem & p, int sm_count, bool pdl, cudaStream_t stream) {
    const Launch l = plan_stream<Hooks, W, kStreamDepth, kStreamYShared, true, true, true, COPY>(p, sm_count);
    cudaLaunchAttribute attr{};
    attr.id                                         = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim  = l.grid;
    cfg.blockDim = l.block;
    cfg.stream   = stream;
    cfg.attrs    = pdl ? &attr : nullptr;
    cfg.numAttrs = pdl ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&cfg, l.kernel, p));
}

template <Weights W>
void launch_stream(const Config & c, const Problem & p, int sm_count, cudaStream_t stream) {
    switch (c.copy) {
        case StreamCopy::hinted:
            c.pdl ? launch_kind<PdlHooks, W, StreamCopy::hinted>(p, sm_count, true, stream)
                  : launch_kind<PlainHooks, W, StreamCopy::hinted>(p, sm_count, false, stream);
            break;
        case StreamCopy::plain:
            c.pdl ? launch_kind<PdlHooks, W, StreamCopy::plain>(p, sm_count, true, stream)
                  : launch_kind<PlainHooks, W, StreamCopy::plain>(p, sm_count, false, stream);
            break;
        default:
            c.pdl ? launch_kind<PdlHooks, W, StreamCopy::l1>(p, sm_count, true, stream)
                  : launch_kind<PlainHooks, W, StreamCopy::l1>(p, sm_count, false, stream);
    }
}

void launch_stream(const Config & c, const Problem & p, int sm_count, cudaStream_t stream) {
    c.w == Weights::q4_0 ? launch_stream<Weights::q4_0>(c, p, sm_count, stream)
                         : launch_stream<Weights::q8_0>(c, p, sm_count, stream);
}

struct Outcome {
    int iterations = 0, right = 0, moved = 0;  // moved: cudaMalloc gave another address than before
};

// One configuration: `iterations` times the large product (big_rows x nblocks_big, the stream kernel over the
// buffer's first 33 MB), new one-row weights of `nblocks` blocks over its first bytes, the one-row product.
Outcome run_config(const Config & c, int iterations, bool sabotage, int sm_count, std::mt19937 & rng) {
    const int     nblocks = 8;                    // K = 256, the case that failed
    const int     big_rows = 4096, nblocks_big = 448;  // q4_0 m=4096 k=14336, the case before it
    const int     bb       = block_bytes_of(c.w);
    const size_t  big_bytes = size_t(big_rows) * nblocks_big * bb + 64;
    const std::vector<uint8_t> big_x = random_blocks(rng, c.w, int64_t(big_rows) * nblocks_big);
    const std::vector<uint8_t> big_y = random_y(rng, nblocks_big);
    cudaStream_t stream = nullptr;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint8_t * x = nullptr;
    uint8_t * y = nullptr;
    uint8_t * y_staged = nullptr;
    float *   dst = nullptr;
    CHECK(cudaMalloc(&x, big_bytes));
    CHECK(cudaMalloc(&y, nblocks_big * kYBlockBytes));
    CHECK(cudaMalloc(&y_staged, nblocks_big * kYBlockBytes));
    CHECK(cudaMalloc(&dst, big_rows * sizeof(float)));
    Outcome out;
    for (int it = 0; it < iterations; ++it) {
        // the case before: its weights (all of them once, then the first 4 KB the one-row case overwrote; what a
        // fresh allocation holds past them does not matter) and activations written, then its product through the
        // stream kernel
        const size_t restore = it == 0 ? big_x.size() : 4096;
        CHECK(cudaMemcpyAsync(x, big_x.data(), restore, cudaMemcpyHostToDevice, stream));
        CHECK(cudaMemcpyAsync(y_staged, big_y.data(), big_y.size(), cudaMemcpyHostToDevice, stream));
        write_activations<<<8, 256, 0, stream>>>(reinterpret_cast<const uint32_t *>(y_staged),
                                                 reinterpret_cast<uint32_t *>(y), nblocks_big * kYBlockBytes / 4);
        Problem big = q8_stock_order::one_token_problem(c.w, big_rows, nblocks_big, y, dst, 0);
        big.x           = x;
        big.x_is_weight = 0;
        launch_stream(c, big, sm_count, stream);
        CHECK(cudaStreamSynchronize(stream));
        if (c.realloc) {  // test-backend-ops frees the case's buffers and allocates the next case's
            uint8_t * before = x;
            CHECK(cudaFree(x));
            CHECK(cudaMalloc(&x, big_bytes));
            out.moved += x != before;
        }
        // this case: one row of new weights where the large table began, new activations
        const std::vector<uint8_t> row = random_blocks(rng, c.w, nblocks);
        const std::vector<uint8_t> act = random_y(rng, nblocks);
        CHECK(cudaMemcpyAsync(x, row.data(), row.size(), cudaMemcpyHostToDevice, stream));
        CHECK(cudaMemcpyAsync(y_staged, act.data(), act.size(), cudaMemcpyHostToDevice, stream));
        CHECK(cudaStreamSynchronize(stream));  // test-backend-ops' tensor_set returns when the bytes are there
        write_activations<<<1, 64, 0, stream>>>(reinterpret_cast<const uint32_t *>(y_staged),
                                                reinterpret_cast<uint32_t *>(y), nblocks * kYBlockBytes / 4);
        Problem one = q8_stock_order::one_token_problem(c.w, 1, nblocks, y, dst, sabotage ? 1 : 0);
        one.x           = x;
        one.x_is_weight = 0;
        launch_stream(c, one, sm_count, stream);
        float got = 0.0f;
        CHECK(cudaMemcpyAsync(&got, dst, sizeof got, cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));
        double scale = 0.0;
        const double want = reference64(c.w, row.data(), act.data(), nblocks, scale);
        out.right += std::fabs(double(got) - want) <= 1e-5 * scale;
        ++out.iterations;
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(y_staged));
    CHECK(cudaFree(dst));
    CHECK(cudaStreamDestroy(stream));
    return out;
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    int sm_count = 0;
    CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::mt19937 rng(20261204);
    const int iterations = options.sabotage ? 20 : 500;  // sabotage: enough to see every result wrong
    std::string json;
    int configs = 0, all_right = 0, none_right = 0;
    for (Weights w : {Weights::q4_0, Weights::q8_0}) {
        for (StreamCopy copy : {StreamCopy::hinted, StreamCopy::plain, StreamCopy::l1}) {
            for (bool pdl : {true, false}) {
                for (bool realloc : {true, false}) {
                    const Config  c{w, copy, pdl, realloc};
                    const Outcome o = run_config(c, iterations, options.sabotage, sm_count, rng);
                    ++configs;
                    all_right += o.right == o.iterations;
                    none_right += o.right == 0;
                    std::printf("%s K=256 1 row after 4096 x 14336, copies %-6s %-9s %-12s %4d of %4d right%s%s\n",
                                w == Weights::q4_0 ? "q4_0" : "q8_0", copy_name(copy), pdl ? "pdl" : "plain launch",
                                realloc ? "realloc" : "same buffer", o.right, o.iterations,
                                realloc ? (" (address moved " + std::to_string(o.moved) + "x)").c_str() : "",
                                o.right == o.iterations ? "" : "  WRONG");
                    json += std::string(json.empty() ? "" : ",") + "{\"weights\": \"" +
                            (w == Weights::q4_0 ? "q4_0" : "q8_0") + "\", \"copy\": \"" + copy_name(copy) +
                            "\", \"pdl\": " + (pdl ? "true" : "false") + ", \"realloc\": " +
                            (realloc ? "true" : "false") + ", \"iterations\": " + std::to_string(o.iterations) +
                            ", \"right\": " + std::to_string(o.right) + ", \"address_moved\": " +
                            std::to_string(o.moved) + "}";
                }
            }
        }
    }
    std::printf("%d configurations: %d always right, %d never right (%s, %d SMs)\n", configs, all_right, none_right,
                prop.name, sm_count);
    if (options.json_path) {
        if (FILE * f = std::fopen(options.json_path, "w")) {
            std::fprintf(f, "{\"device\": \"%s\", \"sabotage\": %s, \"configs\": [%s]}\n", prop.name,
                         options.sabotage ? "true" : "false", json.c_str());
            std::fclose(f);
        }
    }
    if (options.sabotage) {
        std::printf("sabotage: %d of %d configurations ever right (none may be)\n", configs - none_right, configs);
        return none_right == configs ? 0 : 1;
    }
    const bool ok = all_right == configs;
    std::printf(ok ? "reuse checks passed\n" : "reuse checks FAILED\n");
    return ok ? 0 : 1;
}
