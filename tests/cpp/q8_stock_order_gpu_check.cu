// The experiment fusion-5-stock-order on a GPU, without ggml: the kernels of fusekit-q8-gemv.cuh as the experiment
// leaves it (the row kernel at splits 1, 2 and 4, with and without a gate, Q8_0 and Q4_0, and the group launch)
// against a reference kernel written here from ggml's description of mul_mat_vec_q at one token: a CTA of 4 warps
// per row, thread t adds part t % P of block t / P and of every blocks_per_iter-th block after it, lane l adds
// warps 1, 2, 3 to warp 0 in order, xor butterfly; a gate's sum the same way, then a zero bias and the product, as
// MMVQ's fused epilogue. Both take the part dot products from PlainHooks and are compiled with the same flags, so
// they agree bit for bit exactly when the experiment's device code adds the same terms in the same order. Every row
// is also held to a float64 reference of the same quantized data.
//
//   nvcc -O3 -std=c++17 -use_fast_math -arch=sm_90 -I<tree>/ggml/src/ggml-cuda -I kernels -o check \
//        tests/cpp/q8_stock_order_gpu_check.cu
//   ./check [--sabotage] [--json FILE]   (--sabotage: exit 0 only if no case is bit for bit the reference's)

#include "fusekit-q8-gemv.cuh"
#include "q8_stock_order_data.h"
#include "standalone.cuh"  // kernels/: CHECK

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace fusekit_q8;
using q8_stock_order::random_blocks;
using q8_stock_order::random_y;
using q8_stock_order::reference64;

namespace {

__device__ int word_at(const uint8_t * p) {  // 2-byte aligned, as get_int_b2 reads it
    const uint16_t * h = reinterpret_cast<const uint16_t *>(p);
    return int(uint32_t(h[0]) | (uint32_t(h[1]) << 16));
}

template <Weights W>
__device__ float reference_part(const uint8_t * x, const uint8_t * y, int b, int part) {
    const uint8_t * xb = x + (int64_t) b * block_bytes_of(W);
    const uint8_t * yb = y + (int64_t) b * kYBlockBytes;
    const float     dx = __half2float(*reinterpret_cast<const __half *>(xb));
    const half2     ds = *reinterpret_cast<const half2 *>(yb);
    const int       v[2] = {word_at(xb + 2 + 8 * part), word_at(xb + 2 + 8 * part + 4)};
    const int *     yq = reinterpret_cast<const int *>(yb + 4);
    if constexpr (W == Weights::q4_0) {
        const int u[4] = {yq[2 * part], yq[2 * part + 4], yq[2 * part + 1], yq[2 * part + 5]};
        return PlainHooks::dot_q4_0(v, u, dx, ds);
    } else {
        const int u[2] = {yq[2 * part], yq[2 * part + 1]};
        return PlainHooks::dot_q8_0(v, u, dx, __low2float(ds));
    }
}

// mul_mat_vec_q at one token: grid (nrows), block (32, 4).
template <Weights W, bool GATE>
__global__ void reference_kernel(const uint8_t * x, const uint8_t * gate, const uint8_t * y, float * dst, int nblocks) {
    constexpr int parts = W == Weights::q4_0 ? 2 : 4;
    constexpr int pass  = 4 * kWarp / parts;
    const int      tid  = threadIdx.y * kWarp + threadIdx.x;
    const int64_t  row  = blockIdx.x;
    const uint8_t * xr  = x + row * nblocks * block_bytes_of(W);
    const uint8_t * gr  = GATE ? gate + row * nblocks * block_bytes_of(W) : nullptr;
    float tmp = 0.0f, tmp_gate = 0.0f;
    for (int kbx = tid / parts; kbx < nblocks; kbx += pass) {
        tmp += reference_part<W>(xr, y, kbx, tid % parts);
        if constexpr (GATE) {
            tmp_gate += reference_part<W>(gr, y, kbx, tid % parts);
        }
    }
    __shared__ float shared[2][3][kWarp];
    if (threadIdx.y > 0) {
        shared[0][threadIdx.y - 1][threadIdx.x] = tmp;
        shared[1][threadIdx.y - 1][threadIdx.x] = tmp_gate;
    }
    __syncthreads();
    if (threadIdx.y > 0) {
        return;
    }
    for (int l = 0; l < 3; ++l) {
        tmp += shared[0][l][threadIdx.x];
        if constexpr (GATE) {
            tmp_gate += shared[1][l][threadIdx.x];
        }
    }
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
        tmp += __shfl_xor_sync(0xffffffff, tmp, offset, kWarp);
        if constexpr (GATE) {
            tmp_gate += __shfl_xor_sync(0xffffffff, tmp_gate, offset, kWarp);
        }
    }
    if (threadIdx.x == 0) {
        float result = tmp;
        if constexpr (GATE) {
            result += 0.0f;
            result = PlainHooks::apply(Glu::mul, result, tmp_gate + 0.0f, 0.0f);
        }
        dst[row] = result;
    }
}

struct Shape {
    Weights w;
    int     nrows;
    int     nblocks;
    int     split;  // 0: choose_split's
    bool    gate;
    bool    packed = false;  // plan's short-row path (fusion-5-stock-ordered-tiles packs one MMVQ warp's rows)
    int     depth  = 0;      // fusion-5-stock-streamed: the stream kernel at this ring depth (0: plan's)
    int     ctas   = 0;      // ... on a grid of this many CTAs (0: plan_stream's)
};

#ifdef FUSEKIT_STOCK_ORDERED_STREAM
template <int DEPTH, Weights W>
void launch_stream_at(const Problem & p, int ctas, int sm_count) {
#ifdef FUSEKIT_STREAM_Y_SHARED
    // fusion-5-stock-y-shared: depths up to plan's read y from the CTA's copy as plan's kernel does; deeper rings
    // (whose slots and the copy would not fit 48 KB) check the kernel that reads y from global memory
    Launch l = plan_stream<PlainHooks, W, DEPTH, DEPTH <= kStreamDepth && kStreamYShared>(p, sm_count);
#else
    Launch l = plan_stream<PlainHooks, W, DEPTH>(p, sm_count);
#endif
    if (ctas > 0) {
        l.grid = dim3(ctas);
    }
    l.kernel<<<l.grid, l.block>>>(p);
}

// The stream kernel at a chosen depth and grid (plan takes it with its own depth and grid).
void launch_stream(const Problem & p, int depth, int ctas, int sm_count) {
    const bool q4 = p.weights == Weights::q4_0;
    switch (depth) {
        case 2:  q4 ? launch_stream_at<2, Weights::q4_0>(p, ctas, sm_count) : launch_stream_at<2, Weights::q8_0>(p, ctas, sm_count); break;
        case 3:  q4 ? launch_stream_at<3, Weights::q4_0>(p, ctas, sm_count) : launch_stream_at<3, Weights::q8_0>(p, ctas, sm_count); break;
        case 5:  q4 ? launch_stream_at<5, Weights::q4_0>(p, ctas, sm_count) : launch_stream_at<5, Weights::q8_0>(p, ctas, sm_count); break;
        default: q4 ? launch_stream_at<kStreamDepth, Weights::q4_0>(p, ctas, sm_count)
                    : launch_stream_at<kStreamDepth, Weights::q8_0>(p, ctas, sm_count);
    }
}
#endif

template <class T>
T * to_device(const std::vector<T> & host) {
    T * dev = nullptr;
    CHECK(cudaMalloc(&dev, host.size() * sizeof(T) + 64));
    CHECK(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return dev;
}

Problem problem_of(const Shape & s, const uint8_t * x, const uint8_t * gate, const uint8_t * y, float * dst,
                   int sabotage) {
    Problem p = q8_stock_order::one_token_problem(s.w, s.nrows, s.nblocks, y, dst, sabotage);
    p.x       = x;
    p.gate    = gate;
    return p;
}

struct Tally {
    int cases = 0, cases_equal = 0, rows = 0, rows_equal = 0, rows_near = 0;
    std::string json;
};

void compare(Tally & t, const char * what, const std::vector<float> & ours, const std::vector<float> & ref,
             const std::vector<double> & ref64, const std::vector<double> & scale, bool gate) {
    int equal = 0, near = 0;
    for (size_t r = 0; r < ours.size(); ++r) {
        equal += std::memcmp(&ours[r], &ref[r], 4) == 0;
        near += gate || std::fabs(double(ours[r]) - ref64[r]) <= 1e-5 * scale[r];
    }
    const bool all = equal == int(ours.size());
    ++t.cases;
    t.cases_equal += all;
    t.rows += int(ours.size());
    t.rows_equal += equal;
    t.rows_near += near;
    std::printf("%-44s rows %6zu: %6d bit for bit the reference's, %6d within 1e-5 of float64 %s\n", what, ours.size(),
                equal, near, all ? "" : "DIFFERENT");
    t.json += std::string(t.json.empty() ? "" : ",") + "{\"case\": \"" + what + "\", \"rows\": " +
              std::to_string(ours.size()) + ", \"equal\": " + std::to_string(equal) + ", \"near\": " +
              std::to_string(near) + "}";
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options   = fusekit_standalone::parse_options(argc, argv);
    const bool                        sabotage  = options.sabotage;
    const char *                      json_path = options.json_path;
    int sm_count = 0;
    CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::mt19937 rng(20261203);
    Tally tally;

    // the row kernel: splits forced, gates, both formats, K from 256 (shorter than one of MMVQ's passes) up
    std::vector<Shape> shapes;
    for (int split : {1, 2, 4}) {
        for (bool gate : {false, true}) {
            for (int nblocks : {8, 16, 64, 128, 160}) {
                shapes.push_back({Weights::q8_0, 512, nblocks, split, gate});
            }
            for (int nblocks : {16, 64, 128}) {
                shapes.push_back({Weights::q4_0, 512, nblocks, split, gate});
            }
        }
    }
    shapes.push_back({Weights::q8_0, 8192, 64, 0, false});  // the 35B preset's gdn qkv, split chosen
    shapes.push_back({Weights::q8_0, 2048, 128, 0, false});  // ssm_out / attention out
    // tables plan gives split 2 or 4 (fusion-5-stock-wider-stream sends them to the stream kernel, at one row per warp)
    shapes.push_back({Weights::q8_0, 1000, 64, 0, false});
    shapes.push_back({Weights::q8_0, 300, 256, 0, false});
    shapes.push_back({Weights::q4_0, 2048, 64, 0, false});
    for (bool gate : {false, true}) {  // short rows through plan's packed path: the experts' down projections
        shapes.push_back({Weights::q4_0, 16384, 16, 0, gate, true});
        shapes.push_back({Weights::q8_0, 2048, 8, 0, gate, true});
        shapes.push_back({Weights::q8_0, 2048, 16, 0, gate, true});
    }
#ifdef FUSEKIT_STOCK_ORDERED_STREAM
    // fusion-5-stock-streamed: tables of kStreamMinRows rows and more take the stream kernel through plan
    // (the output head, partial tiles, Q4_0 passes of two tiles, a row count no grid divides), then other ring
    // depths and grids of a few CTAs, whose warps walk hundreds of rows through their rings
    shapes.push_back({Weights::q8_0, 248320, 64, 0, false});
    shapes.push_back({Weights::q8_0, 16384, 128, 0, false});
    shapes.push_back({Weights::q8_0, 20011, 40, 0, false});
    shapes.push_back({Weights::q4_0, 16384, 128, 0, false});
    shapes.push_back({Weights::q4_0, 17003, 48, 0, false});
    for (int depth : {2, 3, 5}) {
        shapes.push_back({Weights::q8_0, 4099, 72, 0, false, false, depth});
        shapes.push_back({Weights::q4_0, 4099, 96, 0, false, false, depth});
    }
    shapes.push_back({Weights::q8_0, 5000, 64, 0, false, false, kStreamDepth, 3});
    shapes.push_back({Weights::q4_0, 3001, 160, 0, false, false, kStreamDepth, 5});
#endif
#ifdef FUSEKIT_STREAM_MEDIUM_TABLES
    // fusion-5-stream-zzz-medium-tables: plain Q8_0 tables of 2^19 blocks and more under kStreamMinRows rows take the
    // stream kernel through plan (besides the gdn qkv above): Llama-3-8B's q/o, a partial last tile (12288 x 2560)
    shapes.push_back({Weights::q8_0, 4096, 128, 0, false});
    shapes.push_back({Weights::q8_0, 12288, 80, 0, false});
#endif

    for (const Shape & s : shapes) {
        const std::vector<uint8_t> x  = random_blocks(rng, s.w, int64_t(s.nrows) * s.nblocks);
        const std::vector<uint8_t> g  = s.gate ? random_blocks(rng, s.w, int64_t(s.nrows) * s.nblocks) : std::vector<uint8_t>();
        const std::vector<uint8_t> y  = random_y(rng, s.nblocks);
        uint8_t * dx = to_device(x);
        uint8_t * dg = s.gate ? to_device(g) : nullptr;
        uint8_t * dy = to_device(y);
        float * dours = nullptr;
        float * dref  = nullptr;
        CHECK(cudaMalloc(&dours, s.nrows * sizeof(float)));
        CHECK(cudaMalloc(&dref, s.nrows * sizeof(float)));
        const Problem p = problem_of(s, dx, dg, dy, dours, sabotage ? 1 : 0);
        if (s.packed) {
            CHECK((launch<PlainHooks, 2, true, 0, true>(p, 1, 1, sm_count, nullptr, s.split)));
#ifdef FUSEKIT_STOCK_ORDERED_STREAM
        } else if (s.depth > 0) {
            launch_stream(p, s.depth, s.ctas, sm_count);
            CHECK(cudaGetLastError());
#endif
        } else {
            CHECK((launch<PlainHooks, 2, true, 0>(p, 1, 1, sm_count, nullptr, s.split)));
        }
        const dim3 block(kWarp, 4);
        if (s.w == Weights::q4_0) {
            s.gate ? reference_kernel<Weights::q4_0, true><<<s.nrows, block>>>(dx, dg, dy, dref, s.nblocks)
                   : reference_kernel<Weights::q4_0, false><<<s.nrows, block>>>(dx, dg, dy, dref, s.nblocks);
        } else {
            s.gate ? reference_kernel<Weights::q8_0, true><<<s.nrows, block>>>(dx, dg, dy, dref, s.nblocks)
                   : reference_kernel<Weights::q8_0, false><<<s.nrows, block>>>(dx, dg, dy, dref, s.nblocks);
        }
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        std::vector<float> ours(s.nrows), ref(s.nrows);
        CHECK(cudaMemcpy(ours.data(), dours, s.nrows * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(ref.data(), dref, s.nrows * 4, cudaMemcpyDeviceToHost));
        std::vector<double> r64(s.nrows), sc(s.nrows);
        const int bb = block_bytes_of(s.w);
        for (int r = 0; r < s.nrows; ++r) {
            r64[r] = reference64(s.w, x.data() + int64_t(r) * s.nblocks * bb, y.data(), s.nblocks, sc[r]);
        }
        char what[96];
        std::snprintf(what, sizeof what, "%s K=%d rows %d split %d%s%s", s.w == Weights::q4_0 ? "q4_0" : "q8_0",
                      s.nblocks * 32, s.nrows, s.split, s.gate ? " gate" : "", s.packed ? " packed path" : "");
#ifdef FUSEKIT_STOCK_ORDERED_STREAM
#ifdef FUSEKIT_STREAM_SHORT_SPLITS
        const bool planned_stream = s.split <= 0 && !s.packed && stream_fits(p, 1, 1, sm_count);
#else
        const bool planned_stream = s.split <= 0 && !s.packed && stream_fits(p, 1, 1);
#endif
        if (s.depth > 0 || planned_stream) {
            char more[48];
            std::snprintf(more, sizeof more, " stream depth %d grid %d", s.depth > 0 ? s.depth : kStreamDepth, s.ctas);
            std::strncat(what, more, sizeof what - std::strlen(what) - 1);
        }
#endif
        compare(tally, what, ours, ref, r64, sc, s.gate);
        CHECK(cudaFree(dx));
        CHECK(cudaFree(dy));
        CHECK(cudaFree(dours));
        CHECK(cudaFree(dref));
        if (dg) {
            CHECK(cudaFree(dg));
        }
    }

    // the group launch: a gated-delta-net layer's two Q8_0 members and an attention layer's small ones
    {
        const int nblocks = 64;
        const int nrows[3] = {8192, 4096, 512};
        const std::vector<uint8_t> y = random_y(rng, nblocks);
        uint8_t * dy = to_device(y);
        GroupProblem gp{};
        gp.base = problem_of({Weights::q8_0, 0, nblocks, 0, false}, nullptr, nullptr, dy, nullptr, sabotage ? 1 : 0);
        gp.count = 3;
        std::vector<std::vector<uint8_t>> xs;
        std::vector<float *> refs;
        for (int m = 0; m < 3; ++m) {
            xs.push_back(random_blocks(rng, Weights::q8_0, int64_t(nrows[m]) * nblocks));
            gp.x[m]     = to_device(xs[m]);
            gp.nrows[m] = nrows[m];
            gp.row_x[m] = nblocks;
            CHECK(cudaMalloc(&gp.dst[m], nrows[m] * sizeof(float)));
            float * dref = nullptr;
            CHECK(cudaMalloc(&dref, nrows[m] * sizeof(float)));
            refs.push_back(dref);
            reference_kernel<Weights::q8_0, false><<<nrows[m], dim3(kWarp, 4)>>>(gp.x[m], nullptr, dy, dref, nblocks);
        }
        const GroupLaunch l = plan_group<PlainHooks, 2, true, 4>(gp, sm_count);
        l.kernel<<<l.grid, l.block>>>(gp);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        for (int m = 0; m < 3; ++m) {
            std::vector<float> ours(nrows[m]), ref(nrows[m]);
            CHECK(cudaMemcpy(ours.data(), gp.dst[m], nrows[m] * 4, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(ref.data(), refs[m], nrows[m] * 4, cudaMemcpyDeviceToHost));
            std::vector<double> r64(nrows[m]), sc(nrows[m]);
            for (int r = 0; r < nrows[m]; ++r) {
                r64[r] = reference64(Weights::q8_0, xs[m].data() + int64_t(r) * nblocks * 34, y.data(), nblocks, sc[r]);
            }
            char what[96];
            std::snprintf(what, sizeof what, "group member %d: q8_0 K=%d rows %d split %d", m, nblocks * 32, nrows[m],
                          gp.split[m]);
            compare(tally, what, ours, ref, r64, sc, false);
        }
    }

    std::printf("%d cases, %d bit for bit the reference's; rows %d: %d equal, %d within 1e-5 (%s, %d SMs)\n",
                tally.cases, tally.cases_equal, tally.rows, tally.rows_equal, tally.rows_near, prop.name, sm_count);
    if (json_path) {
        if (FILE * f = std::fopen(json_path, "w")) {
            std::fprintf(f, "{\"device\": \"%s\", \"sabotage\": %s, \"cases\": [%s]}\n", prop.name,
                         sabotage ? "true" : "false", tally.json.c_str());
            std::fclose(f);
        }
    }
    if (sabotage) {
        std::printf("sabotage: %d of %d cases equal (all must differ)\n", tally.cases_equal, tally.cases);
        return tally.cases_equal == 0 ? 0 : 1;
    }
    const bool ok = tally.cases_equal == tally.cases && tally.rows_near == tally.rows;
    std::printf(ok ? "gpu order checks passed\n" : "gpu order checks FAILED\n");
    return ok ? 0 : 1;
}
