// Standalone check of the conv window kernel (fusekit-gdn-chains.cuh, conv_window_kernel: the experiment
// fusion-2-conv-window) on a GPU, before and beside its ggml build:
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -Ikernels -o conv_window_check kernels/conv_window_check.cu
//   ./conv_window_check [--sabotage] [--json FILE]
//
// Per case: a conv-state cache of a few rows, the row index in device memory, the token's x and the taps; one launch.
// Checked against float64 on the host copies: y = silu(sum of the 4 taps over the cached window and x), the shifted
// window written into the destination row bit for bit (the row read, or another), every other row unchanged. Timed
// at the 35B shape (events around back-to-back launches, launch cost included). --sabotage launches the kernel with
// its sabotage switch (the token dropped): every check of y and of the window must fail.
#include "fusekit-gdn-chains.cuh"
#include "standalone.cuh"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using fusekit_gdn::kConvWidth;

namespace {

struct Case {
    const char * name;
    int64_t      channels, rows, src_row, dst_row;
};

constexpr Case kCases[] = {
    { "35B-A3B, the row read is written", 8192, 4, 1, 1 },
    { "35B-A3B, another row written", 8192, 4, 0, 3 },
    { "a part-empty block", 200, 2, 1, 0 },
    { "one channel", 1, 1, 0, 0 },
};

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    int device = 0;
    CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    std::mt19937 rng(20261201);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    constexpr int kCached = kConvWidth - 1;

    std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"sabotage\": " +
                       (options.sabotage ? "true" : "false") + ", \"cases\": [";
    int checks = 0, failures = 0;
    std::printf("%-36s %9s %10s %8s %8s %8s\n", "case", "channels", "y rel_err", "window", "others", "us");
    for (const Case & c : kCases) {
        const int64_t      row = kCached * c.channels;
        std::vector<float> cache(size_t(c.rows * row)), x(c.channels), w(size_t(c.channels) * kConvWidth);
        for (float & v : cache) v = 2.0f * u(rng);
        for (float & v : x) v = 2.0f * u(rng) + (u(rng) >= 0.0f ? 0.5f : -0.5f);  // away from 0: sabotage drops it
        for (float & v : w) v = u(rng);
        const int32_t index = int32_t(c.src_row);

        float * d_cache = nullptr, * d_x = nullptr, * d_w = nullptr, * d_y = nullptr;
        int32_t * d_index = nullptr;
        CHECK(cudaMalloc(&d_cache, cache.size() * sizeof(float)));
        CHECK(cudaMalloc(&d_x, x.size() * sizeof(float)));
        CHECK(cudaMalloc(&d_w, w.size() * sizeof(float)));
        CHECK(cudaMalloc(&d_y, x.size() * sizeof(float)));
        CHECK(cudaMalloc(&d_index, sizeof(int32_t)));
        CHECK(cudaMemcpy(d_cache, cache.data(), cache.size() * sizeof(float), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(d_w, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(d_index, &index, sizeof(int32_t), cudaMemcpyHostToDevice));
        CHECK(cudaMemset(d_y, 0xff, x.size() * sizeof(float)));  // NaN where nothing is written

        fusekit_gdn::ConvWindowArgs a{};
        a.cache      = d_cache;
        a.src_row    = d_index;
        a.cache_row  = row;
        a.x          = d_x;
        a.weight     = d_w;
        a.weight_row = kConvWidth;
        a.bias       = nullptr;
        a.window_dst = d_cache + c.dst_row * row;
        a.dst        = d_y;
        a.channels   = c.channels;
        a.sabotage   = options.sabotage ? 1 : 0;
        fusekit_gdn::launch_conv_window(a, nullptr);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());

        std::vector<float> y(x.size()), cache_out(cache.size());
        CHECK(cudaMemcpy(y.data(), d_y, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(cache_out.data(), d_cache, cache.size() * sizeof(float), cudaMemcpyDeviceToHost));

        double max_rel = 0.0;
        bool   y_ok = true, window_ok = true, others_ok = true;
        for (int64_t ch = 0; ch < c.channels; ++ch) {
            double window[kConvWidth];
            for (int j = 0; j < kCached; ++j) {
                window[j] = cache[size_t(c.src_row * row + ch * kCached + j)];
            }
            window[kCached] = x[ch];
            double sum      = 0.0;
            for (int j = 0; j < kConvWidth; ++j) {
                sum += window[j] * w[size_t(ch * kConvWidth + j)];
            }
            const double ref = sum / (1.0 + std::exp(-sum));
            const double err = std::fabs(double(y[ch]) - ref);
            max_rel          = std::max(max_rel, std::isfinite(err) ? err / std::max(std::fabs(ref), 1e-3) : INFINITY);
            y_ok             = y_ok && std::isfinite(err) && err <= 1e-6 + 1e-5 * std::fabs(ref);
            for (int j = 0; j < kCached; ++j) {
                window_ok = window_ok && cache_out[size_t(c.dst_row * row + ch * kCached + j)] == float(window[j + 1]);
            }
        }
        for (int64_t r = 0; r < c.rows; ++r) {
            if (r != c.dst_row) {
                others_ok = others_ok && std::equal(cache_out.begin() + r * row, cache_out.begin() + (r + 1) * row,
                                                    cache.begin() + r * row);
            }
        }

        double us = 0.0;
        if (c.channels == 8192 && c.src_row == c.dst_row) {
            us = fusekit_standalone::median_launch_us([&](int) { fusekit_gdn::launch_conv_window(a, nullptr); }, 20, 200, 9);
        }
        // y and the window are the value checks (the sabotage switch must break both); other rows are a rule
        checks += 2;
        failures += (y_ok ? 0 : 1) + (window_ok ? 0 : 1);
        if (!options.sabotage) {
            checks += 1;
            failures += others_ok ? 0 : 1;
        }
        std::printf("%-36s %9lld %10.2e %8s %8s %8.2f\n", c.name, (long long) c.channels, max_rel,
                    window_ok ? "exact" : "WRONG", others_ok ? "kept" : "CHANGED", us);
        char row_json[512];
        std::snprintf(row_json, sizeof row_json,
                      "%s{\"name\": \"%s\", \"channels\": %lld, \"y_max_rel_err\": %.3e, \"y_ok\": %s, "
                      "\"window_exact\": %s, \"other_rows_kept\": %s, \"us\": %.3f}",
                      &c == kCases ? "" : ", ", c.name, (long long) c.channels, max_rel, y_ok ? "true" : "false",
                      window_ok ? "true" : "false", others_ok ? "true" : "false", us);
        json += row_json;
        CHECK(cudaFree(d_cache));
        CHECK(cudaFree(d_x));
        CHECK(cudaFree(d_w));
        CHECK(cudaFree(d_y));
        CHECK(cudaFree(d_index));
    }
    json += "], \"checks\": " + std::to_string(checks) + ", \"failures\": " + std::to_string(failures) + "}\n";
    return fusekit_standalone::finish(options, json, checks, failures);
}
