// Standalone check and timing of fusekit's one-token Q8_0 / Q4_0 kernel (fusekit-q8-gemv.cuh), before ggml.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o q8_gemv_bench kernels/q8_gemv_bench.cu
//   ./q8_gemv_bench [--sabotage] [--json FILE]
//
// Check: random Q8_0 or Q4_0 weights and q8_1 activations (fresh per shape, never zeros; the q8_1 sum
// field is d * sum of the quants, rounded to half as ggml stores it), output poisoned with NaN before the
// launch, compared with a float64 reference of the same quantized data (Q4_0: d_x * (d_y * sum(q * y) -
// 8 * s_y) per block, the stored s_y) by ||out - ref|| / ||ref|| (threshold 1e-5: fp32 sums of exact
// integer block dots). --sabotage runs the
// kernel with its sabotage switch (drops one block per tile) and exits 0 only if every check FAILS.
// Timing: CUDA events around 50 back-to-back launches, median of 15 such batches, rotating over
// enough weight copies to exceed L2; beside it a plain 16-byte streaming read of the same bytes
// (the floor), and the kernel at several unroll depths. Experiments (not used by ggml yet), each checked
// like the kernel itself and timed: activations loaded late (Y_LATE), register caps for 2-4 CTAs per SM, and
// short rows (K = 256, 512) packed several to a tile.
#include "fusekit-q8-gemv.cuh"
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

using fusekit_q8::Weights;

struct Shape {
    int rows, k, experts, used;  // experts > 0: MUL_MAT_ID at one token with `used` experts
    const char * what;
    Weights weights = Weights::q8_0;
};

const Shape kShapes[] = {
    {4096, 14336, 0, 0, "Llama-3-8B MLP down"},
    {14336, 4096, 0, 0, "Llama-3-8B MLP gate/up"},
    {28672, 4096, 0, 0, "Llama-3-8B gate+up fused"},
    {128256, 4096, 0, 0, "Llama-3-8B output"},
    {248320, 2048, 0, 0, "35B-A3B output"},
    {8192, 2048, 0, 0, "35B-A3B attn q / gdn qkv"},
    {4096, 2048, 0, 0, "35B-A3B gdn gate"},
    {2048, 4096, 0, 0, "35B-A3B gdn out / attn o"},
    {512, 2048, 0, 0, "35B-A3B attn k, v / shexp"},
    {2048, 512, 0, 0, "35B-A3B shexp down"},
    {32, 2048, 0, 0, "35B-A3B gdn alpha / beta"},
    {512, 2048, 256, 8, "35B-A3B experts gate/up (id)"},
    {2048, 512, 256, 8, "35B-A3B experts down (id)"},
    {7, 1280, 0, 0, "edge: partial tile, few rows"},
    {512, 2048, 256, 8, "35B-A3B experts gate/up q4_0 (id)", Weights::q4_0},
    {2048, 512, 256, 8, "35B-A3B experts down q4_0 (id)", Weights::q4_0},
    {4096, 14336, 0, 0, "Llama-3-8B MLP down q4_0", Weights::q4_0},
    {248320, 2048, 0, 0, "35B-A3B output q4_0", Weights::q4_0},
    {7, 1280, 0, 0, "edge q4_0: partial tile, few rows", Weights::q4_0},
    {4096, 256, 0, 0, "short rows: K=256 (4 per tile)"},
    {7, 512, 0, 0, "edge: K=512, odd row count"},
    {5, 256, 256, 8, "edge: K=256 (id), 5 rows", Weights::q4_0},
};

uint16_t to_half_bits(float f) {
    const __half h = __float2half(f);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
}

float from_half_bits(uint16_t bits) {
    __half h;
    std::memcpy(&h, &bits, 2);
    return __half2float(h);
}

struct HostData {
    std::vector<uint8_t> x, y;
    std::vector<int32_t> ids;
    std::vector<double> ref;
};

// One weight block's value i (Q8_0: int8; Q4_0: the nibble, 0-15, of byte i % 16, low half first).
int weight_quant(const uint8_t * block, int i, Weights w) {
    if (w == Weights::q4_0) {
        const uint8_t byte = block[2 + i % 16];
        return i < 16 ? byte & 0x0F : byte >> 4;
    }
    return int8_t(block[2 + i]);
}

// Weights [experts or 1][rows][k/32 blocks], activations [used or 1][k/32 blocks], reference in float64.
HostData make_data(const Shape & s, std::mt19937 & rng) {
    const int nb = s.k / 32, nmat = s.experts ? s.experts : 1, nact = s.experts ? s.used : 1;
    const int bb = fusekit_q8::block_bytes_of(s.weights);
    HostData h;
    h.x.resize(size_t(nmat) * s.rows * nb * bb);
    h.y.resize(size_t(nact) * nb * 36);
    std::uniform_int_distribution<int> q(-127, 127);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.2e-3f, 2e-3f);
    for (size_t b = 0; b < h.x.size() / bb; ++b) {
        const uint16_t d = to_half_bits(scale(rng));
        std::memcpy(&h.x[b * bb], &d, 2);
        for (int i = 2; i < bb; ++i) h.x[b * bb + i] = s.weights == Weights::q4_0 ? uint8_t(byte(rng)) : uint8_t(int8_t(q(rng)));
    }
    for (size_t b = 0; b < h.y.size() / 36; ++b) {
        const float    dy = scale(rng) * 10;
        const uint16_t d  = to_half_bits(dy);
        long           qsum = 0;
        for (int i = 0; i < 32; ++i) {
            const int v = q(rng);
            qsum += v;
            h.y[b * 36 + 4 + i] = uint8_t(int8_t(v));
        }
        const uint16_t sum = to_half_bits(from_half_bits(d) * float(qsum));  // as ggml stores it (rounded)
        std::memcpy(&h.y[b * 36], &d, 2);
        std::memcpy(&h.y[b * 36 + 2], &sum, 2);
    }
    std::vector<int> perm(nmat);
    for (int i = 0; i < nmat; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int j = 0; j < nact; ++j) h.ids.push_back(s.experts ? perm[j] : 0);
    h.ref.assign(size_t(nact) * s.rows, 0.0);
    for (int j = 0; j < nact; ++j) {
        const uint8_t * yb = &h.y[size_t(j) * nb * 36];
        for (int r = 0; r < s.rows; ++r) {
            const uint8_t * xr = &h.x[(size_t(h.ids[j]) * s.rows + r) * nb * bb];
            double acc = 0.0;
            for (int b = 0; b < nb; ++b) {
                uint16_t dx, dy, sy;
                std::memcpy(&dx, xr + b * bb, 2);
                std::memcpy(&dy, yb + b * 36, 2);
                std::memcpy(&sy, yb + b * 36 + 2, 2);
                long sumi = 0;
                for (int i = 0; i < 32; ++i) sumi += long(weight_quant(xr + b * bb, i, s.weights)) * int8_t(yb[b * 36 + 4 + i]);
                const double offset = s.weights == Weights::q4_0 ? 8.0 * double(from_half_bits(sy)) : 0.0;
                acc += double(from_half_bits(dx)) * (double(from_half_bits(dy)) * double(sumi) - offset);
            }
            h.ref[size_t(j) * s.rows + r] = acc;
        }
    }
    return h;
}

fusekit_q8::Problem problem_for(const Shape & s, const uint8_t * x, const uint8_t * y, const int32_t * ids, float * dst,
                                int sabotage) {
    fusekit_q8::Problem p{};
    p.weights = s.weights;
    p.x = x;
    p.y = y;
    p.ids = s.experts ? ids : nullptr;
    p.dst = dst;
    p.nblocks = s.k / 32;
    p.nrows = s.rows;
    p.row_x = s.k / 32;
    p.channel_x = int64_t(s.rows) * (s.k / 32);
    p.channel_y = s.k / 32;
    p.channel_dst = s.rows;
    p.nchannels_y = s.experts ? s.used : 1;
    p.channel_ratio = 1;
    p.sample_ratio = 1;
    p.x_is_weight = 1;
    p.sabotage = sabotage;
    return p;
}

__global__ void stream_read(const uint4 * src, size_t n, uint4 * sink) {
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = __ldcs(src + i);
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) *sink = acc;  // keeps the loads alive
}


// The experimental launch shapes: Y_LATE, UNROLL, MIN_CTAS (fusekit-q8-gemv.cuh).
struct Experiment {
    const char * name;
    cudaError_t (*run)(const fusekit_q8::Problem &, int, int);
};

template <bool Y_LATE, int U, int MIN_CTAS, bool PACKED = false>
cudaError_t run_experiment(const fusekit_q8::Problem & p, int nact, int sm_count) {
    return fusekit_q8::launch<fusekit_q8::PlainHooks, U, Y_LATE, MIN_CTAS, PACKED>(p, nact, 1, sm_count, nullptr);
}

const Experiment kExperiments[] = {
    {"late_u4_m2", run_experiment<true, 4, 2>},
    {"late_u4_m3", run_experiment<true, 4, 3>},
    {"late_u8_m2", run_experiment<true, 8, 2>},
    {"early_u4_m2", run_experiment<false, 4, 2>},
    {"late_u2_m4", run_experiment<true, 2, 4>},
    {"late_u2", run_experiment<true, 2, 0>},  // ggml's choice for Q4_0 (fusion-5-q4-0 experiment)
    // ggml's Q8_0 shape, with short rows (K = 256, 512) packed several to a tile; the same as late_u2_m4 elsewhere
    {"packed_late_u2_m4", run_experiment<true, 2, 4, true>},
};

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    const bool sabotage = options.sabotage;
    int device = 0, sm_count = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    const size_t l2 = size_t(prop.l2CacheSize);

    std::mt19937 rng(20261130);
    std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"sm_count\": " + std::to_string(sm_count) +
                       ", \"l2_bytes\": " + std::to_string(l2) + ", \"sabotage\": " + (sabotage ? "true" : "false") +
                       ", \"shapes\": [";
    int failures = 0, checks = 0;
    std::printf("%-32s %8s %6s %9s %8s %8s %8s %8s %7s %7s %9s\n", "shape", "MB", "split", "rel_err", "floor_us", "u2_us",
                "u4_us", "u8_us", "TB/s", "floor%", "verdict");
    for (const Shape & s : kShapes) {
        HostData h = make_data(s, rng);
        const int nact = s.experts ? s.used : 1;
        const size_t touched = size_t(nact) * s.rows * (s.k / 32) * fusekit_q8::block_bytes_of(s.weights);
        const int copies = int(std::min<size_t>(16, std::max<size_t>(1, 4 * l2 / h.x.size() + 1)));
        uint8_t * dx = nullptr;
        uint8_t * dy = nullptr;
        int32_t * dids = nullptr;
        float * ddst = nullptr;
        uint4 * sink = nullptr;
        CHECK(cudaMalloc(&dx, h.x.size() * copies));
        CHECK(cudaMalloc(&dy, h.y.size()));
        CHECK(cudaMalloc(&dids, h.ids.size() * 4));
        CHECK(cudaMalloc(&ddst, h.ref.size() * 4));
        CHECK(cudaMalloc(&sink, 16));
        for (int c = 0; c < copies; ++c) CHECK(cudaMemcpy(dx + c * h.x.size(), h.x.data(), h.x.size(), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dy, h.y.data(), h.y.size(), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dids, h.ids.data(), h.ids.size() * 4, cudaMemcpyHostToDevice));

        // Correctness: poison, run once, compare with the float64 reference (INFINITY when not finite).
        std::vector<float> out(h.ref.size());
        auto checked_error = [&](auto launch_once) {
            CHECK(cudaMemset(ddst, 0xff, h.ref.size() * 4));  // NaN
            CHECK(launch_once(problem_for(s, dx, dy, dids, ddst, sabotage ? 1 : 0)));
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(out.data(), ddst, out.size() * 4, cudaMemcpyDeviceToHost));
            double num = 0, den = 0;
            for (size_t i = 0; i < out.size(); ++i) {
                if (!std::isfinite(out[i])) return double(INFINITY);
                num += (out[i] - h.ref[i]) * (out[i] - h.ref[i]);
                den += h.ref[i] * h.ref[i];
            }
            return std::sqrt(num / den);
        };
        const double rel = checked_error([&](const fusekit_q8::Problem & p) {
            return fusekit_q8::launch(p, nact, 1, sm_count, nullptr);
        });
        const bool ok = rel < 1e-5;
        ++checks;
        failures += ok ? 0 : 1;

        // The experiments: each checked the same way (sabotage included), then timed.
        std::string experiments;
        for (const Experiment & e : kExperiments) {
            const double erel = checked_error([&](const fusekit_q8::Problem & p) { return e.run(p, nact, sm_count); });
            const bool eok = erel < 1e-5;
            ++checks;
            failures += eok ? 0 : 1;
            double et = 0;
            if (!sabotage) {
                et = fusekit_standalone::median_launch_us([&](int i) {
                    const int c = i % copies;
                    CHECK(e.run(problem_for(s, dx + c * h.x.size(), dy, dids, ddst, 0), nact, sm_count));
                }, 10, 50, 15);
            }
            std::printf("    %-14s %9.2e %8.2f us %s\n", e.name, erel, et, eok ? "ok" : "WRONG");
            char item[256];
            std::snprintf(item, sizeof item, "%s\"%s\": {\"rel_err\": %.3e, \"ok\": %s, \"us\": %.3f}",
                          experiments.empty() ? "" : ", ", e.name, std::isfinite(erel) ? erel : 1e300,
                          eok ? "true" : "false", et);
            experiments += item;
        }

        // Timing: the floor (a plain 16-byte read of the bytes one token touches), then the kernel.
        double t_floor = 0, t2 = 0, t4 = 0, t8 = 0;
        if (!sabotage) {
            t_floor = fusekit_standalone::median_launch_us([&](int i) {
                const int c = i % copies;
                const uint4 * src = reinterpret_cast<const uint4 *>(dx + c * h.x.size());
                stream_read<<<sm_count * 8, 256>>>(src, touched / 16, sink);
            }, 10, 50, 15);
            auto timed = [&](auto unroll_tag) {
                constexpr int U = decltype(unroll_tag)::value;
                return fusekit_standalone::median_launch_us([&](int i) {
                    const int c = i % copies;
                    fusekit_q8::Problem q = problem_for(s, dx + c * h.x.size(), dy, dids, ddst, 0);
                    CHECK(fusekit_q8::launch<fusekit_q8::PlainHooks, U>(q, nact, 1, sm_count, nullptr));
                }, 10, 50, 15);
            };
            t2 = timed(std::integral_constant<int, 2>{});
            t4 = timed(std::integral_constant<int, 4>{});
            t8 = timed(std::integral_constant<int, 8>{});
        }
        const int split = fusekit_q8::choose_split(s.rows, nact, 1, s.k / 32, sm_count);
        const double tbs = t4 > 0 ? touched / (t4 * 1e-6) / 1e12 : 0;
        std::printf("%-32s %8.1f %6d %9.2e %8.2f %8.2f %8.2f %8.2f %7.2f %6.0f%% %9s\n", s.what, touched / 1e6, split, rel,
                    t_floor, t2, t4, t8, tbs, t4 > 0 ? 100.0 * t_floor / t4 : 0.0, ok ? "ok" : "WRONG");
        char row[1536];
        std::snprintf(row, sizeof row,
                      "%s{\"what\": \"%s\", \"weights\": \"%s\", \"rows\": %d, \"k\": %d, \"experts\": %d, \"used\": %d, \"bytes\": %zu, "
                      "\"split\": %d, \"rel_err\": %.3e, \"ok\": %s, \"floor_us\": %.3f, \"unroll2_us\": %.3f, "
                      "\"unroll4_us\": %.3f, \"unroll8_us\": %.3f, \"weight_copies\": %d, \"experiments\": {%s}}",
                      &s == kShapes ? "" : ", ", s.what, s.weights == Weights::q4_0 ? "q4_0" : "q8_0", s.rows, s.k, s.experts, s.used, touched, split,
                      std::isfinite(rel) ? rel : 1e300, ok ? "true" : "false", t_floor, t2, t4, t8, copies,
                      experiments.c_str());
        json += row;
        CHECK(cudaFree(dx));
        CHECK(cudaFree(dy));
        CHECK(cudaFree(dids));
        CHECK(cudaFree(ddst));
        CHECK(cudaFree(sink));
    }
    json += "], \"checks\": " + std::to_string(checks) + ", \"failures\": " + std::to_string(failures) + "}\n";
    return fusekit_standalone::finish(options, json, checks, failures);
}
