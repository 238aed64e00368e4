// What every standalone kernel program in kernels/ shares: CUDA error checks and its command line
// (`--sabotage`, `--json FILE`, `--once`). Host code only; include it from the program's .cu file.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// Every CUDA call is checked: exit code 0 alone proves nothing.
#define CHECK(...)                                                                             \
    do {                                                                                        \
        cudaError_t err_ = (__VA_ARGS__);                                                       \
        if (err_ != cudaSuccess) {                                                              \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            std::exit(2);                                                                       \
        }                                                                                       \
    } while (0)

namespace fusekit_standalone {

struct Options {
    bool         sabotage  = false;    // run the kernel with its sabotage switch: every check must fail
    const char * json_path = nullptr;  // write the results here
    bool         once      = false;    // every timed launch runs once (under a profiler such as ncu); no timings
};

// Set by `--once` (parse_options): launch_us_batches launches once and times nothing.
inline bool g_launch_once = false;

// Parses `[--sabotage] [--json FILE] [--once]`; prints the usage and exits 2 on anything else.
inline Options parse_options(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--sabotage")) {
            o.sabotage = true;
        } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
            o.json_path = argv[++i];
        } else if (!std::strcmp(argv[i], "--once")) {
            o.once = g_launch_once = true;
        } else {
            std::fprintf(stderr, "usage: %s [--sabotage] [--json FILE] [--once]\n", argv[0]);
            std::exit(2);
        }
    }
    return o;
}

// The median of a set of timings.
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Microseconds per launch of each batch: `warmup` launches, then `batches` batches of `per_batch` back-to-back
// launches between CUDA events (launch cost included). launch(i) gets the launch's number, so a caller can rotate
// over weight copies that together exceed L2.
template <class Launch>
std::vector<double> launch_us_batches(Launch launch, int warmup, int per_batch, int batches) {
    if (g_launch_once) {  // under a profiler: one launch, no timing (0 us)
        launch(0);
        CHECK(cudaDeviceSynchronize());
        return {0.0};
    }
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; ++i) {
        launch(i);
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<double> per_launch;
    for (int r = 0; r < batches; ++r) {
        CHECK(cudaEventRecord(a));
        for (int i = 0; i < per_batch; ++i) {
            launch(i);
        }
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        per_launch.push_back(1000.0 * ms / per_batch);
    }
    CHECK(cudaGetLastError());
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return per_launch;
}

// The median batch of launch_us_batches.
template <class Launch>
double median_launch_us(Launch launch, int warmup, int per_batch, int batches) {
    return median(launch_us_batches(launch, warmup, per_batch, batches));
}

// Writes the JSON (when asked), prints the verdict and returns the exit code: without --sabotage, 0 when
// no check failed; with it, 0 only when every check failed (a check that cannot fail is a defect).
inline int finish(const Options & o, const std::string & json, int checks, int failures) {
    if (o.json_path) {
        FILE * f = std::fopen(o.json_path, "w");
        if (!f) {
            std::perror(o.json_path);
            return 2;
        }
        std::fputs(json.c_str(), f);
        std::fclose(f);
    }
    if (o.sabotage) {
        std::printf("sabotage: %d of %d checks failed (all must)\n", failures, checks);
        return failures == checks ? 0 : 1;
    }
    std::printf("%d of %d checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}

}  // namespace fusekit_standalone
