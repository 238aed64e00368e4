// What every standalone kernel program in kernels/ shares: CUDA error checks and its command line
// (`--sabotage`, `--json FILE`). Host code only; include it from the program's .cu file.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

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
};

// Parses `[--sabotage] [--json FILE]`; prints the usage and exits 2 on anything else.
inline Options parse_options(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--sabotage")) {
            o.sabotage = true;
        } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
            o.json_path = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--sabotage] [--json FILE]\n", argv[0]);
            std::exit(2);
        }
    }
    return o;
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
