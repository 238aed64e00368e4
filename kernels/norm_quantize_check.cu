// Standalone check and timing of fusion-1's fused RMS_NORM+MUL -> q8_1 epilogue (fusekit-norm-quantize.cuh),
// before ggml. Compile it the way ggml compiles its CUDA sources, and once without fast math:
//
//   nvcc -O3 -std=c++17 -use_fast_math -arch=sm_90 -I kernels -o nq_check kernels/norm_quantize_check.cu
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels -o nq_check_ieee kernels/norm_quantize_check.cu
//   ./nq_check [--sabotage] [--json FILE]
//
// For every shape (row length, rows) on random inputs (fresh per shape; every output buffer poisoned with
// 0xA5 bytes first, the q8_1 padding included):
//   A (bit-exact)  the fused kernel's q8_1 bytes == the bytes of a separate quantize kernel that mirrors
//                  ggml's quantize_q8_1 line for line, run on the fused kernel's own f32 output. This is
//                  the property fusion-1 needs: MMVQ reads the same bytes with or without the fusion.
//   B (bit-exact)  the fused kernel's f32 output == the f32 output of the same norm without the epilogue.
//   C (tolerance)  f32 output vs a float64 RMS norm: |out - ref| <= 1e-5 * max|ref| of the row.
//   D (tolerance)  q8_1 vs a CPU quantize (ggml-cuda's formula: d = amax/127, q = round(x/d), s = sum x,
//                  fp16 d and s) of the GPU's f32 output: q equal, or off by one only where x/d lies within
//                  1e-4 of a .5 tie (GPU division may be approximate under -use_fast_math); d equal up to
//                  one fp16 ulp; s within one fp16 ulp + 1e-6 * sum|x| (the GPU sums in butterfly order);
//                  padding blocks all zero bytes.
//   E (tolerance)  q8_1 vs the CPU quantize of the float64 norm rounded to float: |q diff| <= 1.
// --sabotage runs the epilogue with its wipe switch (zeroes the block holding each row's last value): the
// program exits 0 only if check A then FAILS on every shape. Timing: CUDA events around 200 back-to-back
// iterations, median of 11 batches: norm + separate quantize (two launches, as stock) vs the fused kernel.
#include "fusekit-norm-quantize.cuh"
#include "standalone.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>


namespace {

using fusekit_nq::block_q8_1_t;

struct Shape {
    int ncols, nrows;
    const char * what;
};

const Shape kShapes[] = {
    {2048, 1, "35B-A3B norm, one token"},
    {2048, 8, "35B-A3B norm, 8 tokens (MMVQ limit)"},
    {4096, 1, "Llama-3-8B norm"},
    {576, 1, "SmolLM2-135M norm"},
    {512, 1, "exactly one padding unit, 256 threads"},
    {544, 3, "partial padding unit"},
    {1056, 2, "1024 threads, partial padding unit"},
    {300, 1, "row not a multiple of 32"},
    {96, 1, "tiny row"},
    {8192, 4, "wide row"},
};

__device__ float block_sum(float v, float * shared) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffff, v, offset, 32);
    }
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (lane == 0) {
        shared[warp] = v;
    }
    __syncthreads();
    v = lane < blockDim.x / 32 ? shared[lane] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffff, v, offset, 32);
    }
    return v;
}

// RMS_NORM+MUL like ggml's rms_norm_f32<block_size, true> (one CTA per row); with q8 != nullptr it also
// writes the q8_1 copy through fusekit_nq::store_q8_1, looping over the padded row exactly as norm.cu does.
template <int block_size>
__global__ void norm_mul(const float * x, const float * w, float * dst, void * q8, int ncols, int ncols_padded,
                         float eps, bool wipe_last) {
    __shared__ float shared[32];
    const int row = blockIdx.x;
    const int tid = threadIdx.x;
    x += int64_t(row) * ncols;
    dst += int64_t(row) * ncols;

    float tmp = 0.0f;
    for (int col = tid; col < ncols; col += block_size) {
        tmp += x[col] * x[col];
    }
    tmp = block_sum(tmp, shared);
    const float scale = rsqrtf(tmp / ncols + eps);

    if (q8 != nullptr) {
        char * row_q8 = (char *) q8 + int64_t(row) * (ncols_padded / 32) * 36;
        for (int col = tid; col < ncols_padded; col += block_size) {
            float v = 0.0f;
            if (col < ncols) {
                v = scale * x[col] * w[col];
                dst[col] = v;
            }
            fusekit_nq::store_q8_1(row_q8, col, v, wipe_last && col / 32 == (ncols - 1) / 32);
        }
        return;
    }
    for (int col = tid; col < ncols; col += block_size) {
        dst[col] = scale * x[col] * w[col];
    }
}

// ggml's quantize_q8_1 (ggml-cuda/quantize.cu), contiguous rows: 256 threads, lane i % 32, the same
// reductions and expressions.
__global__ void quantize_q8_1_mirror(const float * x, void * vy, int ne00, int ne0) {
    const int64_t i0 = int64_t(blockDim.x) * blockIdx.x + threadIdx.x;
    if (i0 >= ne0) {
        return;
    }
    const int64_t i1 = blockIdx.y;
    const int64_t i_cont = i1 * ne0 + i0;
    block_q8_1_t * y = (block_q8_1_t *) vy;
    const int64_t ib = i_cont / 32;
    const int64_t iqs = i_cont % 32;

    const float xi = i0 < ne00 ? x[i1 * ne00 + i0] : 0.0f;
    float amax = fabsf(xi);
    float sum = xi;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, offset, 32));
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        sum += __shfl_xor_sync(0xffffffff, sum, offset, 32);
    }
    const float d = amax / 127.0f;
    const int8_t q = amax == 0.0f ? 0 : roundf(xi / d);
    y[ib].qs[iqs] = q;
    if (iqs > 0) {
        return;
    }
    y[ib].ds = make_half2(d, sum);
}

void launch_norm(const float * x, const float * w, float * dst, void * q8, const Shape & s, bool wipe) {
    const int padded = int(fusekit_nq::padded_cols(s.ncols));
    if (s.ncols < 1024) {
        norm_mul<256><<<s.nrows, 256>>>(x, w, dst, q8, s.ncols, padded, 1e-6f, wipe);
    } else {
        norm_mul<1024><<<s.nrows, 1024>>>(x, w, dst, q8, s.ncols, padded, 1e-6f, wipe);
    }
}

void launch_quantize(const float * x, void * q8, const Shape & s) {
    const int padded = int(fusekit_nq::padded_cols(s.ncols));
    quantize_q8_1_mirror<<<dim3((padded + 255) / 256, s.nrows), 256>>>(x, q8, s.ncols, padded);
}

float half_bits_to_float(uint16_t bits) {
    __half h;
    std::memcpy(&h, &bits, 2);
    return __half2float(h);
}

uint16_t float_to_half_bits(float f) {
    const __half h = __float2half(f);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
}

float half_ulp(float v) {  // spacing of fp16 values near v
    const float a = std::fabs(v);
    if (a < 6.1035156e-05f) {
        return 5.9604645e-08f;
    }
    return std::ldexp(1.0f, std::ilogb(a) - 10);
}

struct CpuBlock {
    uint16_t d, s;
    int q[32];
    double ratio[32];  // x / d in float64, to recognise .5 ties
    double abs_sum;
};

// ggml-cuda's q8_1 formula on the CPU (IEEE float arithmetic, sequential sum).
CpuBlock cpu_quantize(const float * x32) {
    CpuBlock b{};
    float amax = 0.0f, sum = 0.0f;
    for (int i = 0; i < 32; ++i) {
        amax = std::max(amax, std::fabs(x32[i]));
        sum += x32[i];
        b.abs_sum += std::fabs(x32[i]);
    }
    const float d = amax / 127.0f;
    for (int i = 0; i < 32; ++i) {
        b.q[i] = amax == 0.0f ? 0 : int(std::round(x32[i] / d));
        b.ratio[i] = amax == 0.0f ? 0.0 : double(x32[i]) / double(d);
    }
    b.d = float_to_half_bits(d);
    b.s = float_to_half_bits(sum);
    return b;
}

// nvcc defines __USE_FAST_MATH__ in the device pass only: ask the device how this program was built.
__global__ void fast_math_probe(int * out) {
#if defined(__USE_FAST_MATH__)
    *out = 1;
#else
    *out = 0;
#endif
}

bool built_with_fast_math() {
    int * flag = nullptr;
    int host = 0;
    CHECK(cudaMalloc(&flag, sizeof(int)));
    fast_math_probe<<<1, 1>>>(flag);
    CHECK(cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(flag));
    return host != 0;
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    const bool sabotage = options.sabotage;
    const char * json_path = options.json_path;

    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"sabotage\": " + (sabotage ? "true" : "false") +
                       ", \"fast_math\": " + (built_with_fast_math() ? "true" : "false") + ", \"shapes\": [";
    std::mt19937 rng(1234);
    int failures_a = 0, failures_other = 0;

    for (size_t si = 0; si < sizeof(kShapes) / sizeof(kShapes[0]); ++si) {
        const Shape & s = kShapes[si];
        const int padded = int(fusekit_nq::padded_cols(s.ncols));
        const size_t n = size_t(s.ncols) * s.nrows;
        const size_t q8_bytes = size_t(s.nrows) * (padded / 32) * sizeof(block_q8_1_t);

        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::uniform_real_distribution<float> uni(0.5f, 1.5f);
        std::vector<float> hx(n), hw(s.ncols);
        for (float & v : hx) v = normal(rng) * (1.0f + 4.0f * (rng() % 16 == 0));  // a few outliers
        for (float & v : hw) v = uni(rng);

        float *dx, *dw, *d_fused, *d_plain;
        void *d_q8_fused, *d_q8_sep;
        CHECK(cudaMalloc(&dx, n * 4));
        CHECK(cudaMalloc(&dw, s.ncols * 4));
        CHECK(cudaMalloc(&d_fused, n * 4));
        CHECK(cudaMalloc(&d_plain, n * 4));
        CHECK(cudaMalloc(&d_q8_fused, q8_bytes));
        CHECK(cudaMalloc(&d_q8_sep, q8_bytes));
        CHECK(cudaMemcpy(dx, hx.data(), n * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dw, hw.data(), s.ncols * 4, cudaMemcpyHostToDevice));
        for (void * p : {(void *) d_fused, (void *) d_plain}) CHECK(cudaMemset(p, 0xA5, n * 4));
        for (void * p : {d_q8_fused, d_q8_sep}) CHECK(cudaMemset(p, 0xA5, q8_bytes));

        launch_norm(dx, dw, d_fused, d_q8_fused, s, sabotage);
        launch_norm(dx, dw, d_plain, nullptr, s, false);
        launch_quantize(d_fused, d_q8_sep, s);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());

        std::vector<float> out(n), plain(n);
        std::vector<uint8_t> q8f(q8_bytes), q8s(q8_bytes);
        CHECK(cudaMemcpy(out.data(), d_fused, n * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(plain.data(), d_plain, n * 4, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(q8f.data(), d_q8_fused, q8_bytes, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(q8s.data(), d_q8_sep, q8_bytes, cudaMemcpyDeviceToHost));

        // A, B: bit-exact
        size_t a_diff_bytes = 0;
        for (size_t i = 0; i < q8_bytes; ++i) a_diff_bytes += q8f[i] != q8s[i];
        const bool ok_a = a_diff_bytes == 0;
        const bool ok_b = std::memcmp(out.data(), plain.data(), n * 4) == 0;

        // C: float64 norm
        double c_worst = 0.0;
        std::vector<float> ref32(n);
        for (int r = 0; r < s.nrows; ++r) {
            double ss = 0.0, rmax = 0.0;
            for (int c = 0; c < s.ncols; ++c) ss += double(hx[r * s.ncols + c]) * hx[r * s.ncols + c];
            const double scale = 1.0 / std::sqrt(ss / s.ncols + 1e-6);
            std::vector<double> ref(s.ncols);
            for (int c = 0; c < s.ncols; ++c) {
                ref[c] = scale * hx[r * s.ncols + c] * hw[c];
                rmax = std::max(rmax, std::fabs(ref[c]));
                ref32[r * s.ncols + c] = float(ref[c]);
            }
            for (int c = 0; c < s.ncols; ++c) {
                c_worst = std::max(c_worst, std::fabs(out[r * s.ncols + c] - ref[c]) / rmax);
            }
        }
        const bool ok_c = c_worst <= 1e-5;

        // D, E: CPU quantize of the GPU's f32 output and of the float64 norm
        int d_q_mismatch = 0, d_tie_steps = 0, d_scale_bad = 0, d_sum_bad = 0, pad_bad = 0, e_worst = 0;
        for (int r = 0; r < s.nrows; ++r) {
            for (int b = 0; b < padded / 32; ++b) {
                const uint8_t * raw = q8f.data() + (size_t(r) * (padded / 32) + b) * 36;
                uint16_t gd, gs;
                std::memcpy(&gd, raw, 2);
                std::memcpy(&gs, raw + 2, 2);
                const int8_t * gq = (const int8_t *) (raw + 4);
                float x32[32], r32[32];
                for (int i = 0; i < 32; ++i) {
                    const int c = b * 32 + i;
                    x32[i] = c < s.ncols ? out[r * s.ncols + c] : 0.0f;
                    r32[i] = c < s.ncols ? ref32[r * s.ncols + c] : 0.0f;
                }
                if (b * 32 >= s.ncols) {  // padding block: all zero bytes
                    for (int i = 0; i < 36; ++i) pad_bad += raw[i] != 0;
                    continue;
                }
                const CpuBlock cb = cpu_quantize(x32);
                const CpuBlock eb = cpu_quantize(r32);
                for (int i = 0; i < 32; ++i) {
                    const int diff = std::abs(int(gq[i]) - cb.q[i]);
                    const double frac = std::fabs(std::fabs(cb.ratio[i]) - std::floor(std::fabs(cb.ratio[i])) - 0.5);
                    if (diff == 1 && frac < 1e-4) d_tie_steps++;
                    else if (diff != 0) d_q_mismatch++;
                    e_worst = std::max(e_worst, std::abs(int(gq[i]) - eb.q[i]));
                }
                const float gdf = half_bits_to_float(gd), cdf = half_bits_to_float(cb.d);
                if (std::fabs(gdf - cdf) > half_ulp(cdf)) d_scale_bad++;
                const float gsf = half_bits_to_float(gs), csf = half_bits_to_float(cb.s);
                if (std::fabs(gsf - csf) > half_ulp(csf) + 1e-6 * cb.abs_sum) d_sum_bad++;
            }
        }
        const bool ok_d = d_q_mismatch == 0 && d_scale_bad == 0 && d_sum_bad == 0 && pad_bad == 0;
        const bool ok_e = e_worst <= 1;

        // Timing: stock (norm, then quantize) vs fused.
        cudaEvent_t t0, t1;
        CHECK(cudaEventCreate(&t0));
        CHECK(cudaEventCreate(&t1));
        const int iters = 200;
        std::vector<double> us_stock, us_fused;
        for (int batch = 0; batch < 11; ++batch) {
            float ms = 0.0f;
            CHECK(cudaEventRecord(t0));
            for (int it = 0; it < iters; ++it) {
                launch_norm(dx, dw, d_plain, nullptr, s, false);
                launch_quantize(d_plain, d_q8_sep, s);
            }
            CHECK(cudaEventRecord(t1));
            CHECK(cudaEventSynchronize(t1));
            CHECK(cudaEventElapsedTime(&ms, t0, t1));
            us_stock.push_back(1000.0 * ms / iters);
            CHECK(cudaEventRecord(t0));
            for (int it = 0; it < iters; ++it) {
                launch_norm(dx, dw, d_fused, d_q8_fused, s, false);
            }
            CHECK(cudaEventRecord(t1));
            CHECK(cudaEventSynchronize(t1));
            CHECK(cudaEventElapsedTime(&ms, t0, t1));
            us_fused.push_back(1000.0 * ms / iters);
        }
        CHECK(cudaGetLastError());

        if (!ok_a) failures_a++;
        if (!(ok_b && ok_c && ok_d && ok_e)) failures_other++;
        std::printf("%-40s %5d x %d  A %s (%zu bytes differ)  B %s  C %s (%.2e)  D %s (q %d, ties %d, d %d, s %d, pad %d)"
                    "  E %s (%d)  stock %.2f us  fused %.2f us\n",
                    s.what, s.ncols, s.nrows, ok_a ? "ok" : "FAIL", a_diff_bytes, ok_b ? "ok" : "FAIL",
                    ok_c ? "ok" : "FAIL", c_worst, ok_d ? "ok" : "FAIL", d_q_mismatch, d_tie_steps, d_scale_bad,
                    d_sum_bad, pad_bad, ok_e ? "ok" : "FAIL", e_worst, fusekit_standalone::median(us_stock), fusekit_standalone::median(us_fused));

        char row[768];
        std::snprintf(row, sizeof(row),
                      "%s{\"what\": \"%s\", \"ncols\": %d, \"nrows\": %d, \"a_bytes_identical\": %s, \"a_diff_bytes\": %zu, "
                      "\"b_f32_identical\": %s, \"c_max_rel_err\": %.3e, \"d_ok\": %s, \"d_q_mismatch\": %d, "
                      "\"d_tie_steps\": %d, \"d_scale_bad\": %d, \"d_sum_bad\": %d, \"pad_bad\": %d, \"e_max_q_diff\": %d, "
                      "\"us_stock_two_launches\": %.3f, \"us_fused\": %.3f}",
                      si ? ", " : "", s.what, s.ncols, s.nrows, ok_a ? "true" : "false", a_diff_bytes,
                      ok_b ? "true" : "false", c_worst, ok_d ? "true" : "false", d_q_mismatch, d_tie_steps,
                      d_scale_bad, d_sum_bad, pad_bad, e_worst, fusekit_standalone::median(us_stock), fusekit_standalone::median(us_fused));
        json += row;

        CHECK(cudaEventDestroy(t0));
        CHECK(cudaEventDestroy(t1));
        for (void * p : {(void *) dx, (void *) dw, (void *) d_fused, (void *) d_plain, d_q8_fused, d_q8_sep}) CHECK(cudaFree(p));
    }

    const int nshapes = int(sizeof(kShapes) / sizeof(kShapes[0]));
    json += "], \"shapes_failing_a\": " + std::to_string(failures_a) + ", \"shapes_failing_bcde\": " +
            std::to_string(failures_other) + "}\n";
    if (json_path) {
        FILE * f = std::fopen(json_path, "w");
        if (!f) { std::perror(json_path); return 2; }
        std::fputs(json.c_str(), f);
        std::fclose(f);
    }
    if (sabotage) {
        std::printf("sabotage: check A failed on %d of %d shapes (all must)\n", failures_a, nshapes);
        return failures_a == nshapes ? 0 : 1;
    }
    std::printf("%s: A failed on %d, B-E on %d of %d shapes\n", failures_a + failures_other ? "FAIL" : "ok", failures_a,
                failures_other, nshapes);
    return failures_a + failures_other ? 1 : 0;
}
