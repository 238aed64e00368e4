// Host-side check of the rows reader's quantize (q8-rows-reader.cuh), for machines without a GPU.
//
//   nvcc -O2 -std=c++17 -Ikernels -o q8_rows_reader_host_check kernels/q8_rows_reader_host_check.cu && ./q8_rows_reader_host_check [--sabotage]
//
// quantize_block_serial (one thread, one block) must give the bytes of the host's quantize_q8_1 (q8-1-host.cuh: the
// device's expressions, the butterfly's order of the sum) on every block: normal values at several scales, blocks
// with one large value, values on the rounding ties of their own scale (x = (n + 1/2) d, exactly representable), and
// a block of zeros (d = 0, every q 0). What it cannot see: the division under -use_fast_math (ggml's build), where
// quantize_q8_1 and the reader compile to the same instruction but this host compares IEEE division with itself.
// --sabotage: the reader's wipe switch on every block; it exits 0 only if every check of a non-zero block fails.
#include "q8-1-host.cuh"
#include "q8-rows-reader.cuh"

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

int main(int argc, char ** argv) {
    const bool sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;
    std::mt19937 rng(55);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<std::vector<float>> blocks;
    for (float scale : {1e-6f, 1e-2f, 1.0f, 37.0f, 6e4f}) {
        for (int b = 0; b < 200; ++b) {
            std::vector<float> v(32);
            for (float & x : v) {
                x = scale * normal(rng);
            }
            blocks.push_back(v);
        }
    }
    for (int b = 0; b < 32; ++b) {  // one large value, the rest small: most q are 0 or +-1
        std::vector<float> v(32);
        for (float & x : v) {
            x = 1e-3f * normal(rng);
        }
        v[b] = b % 2 ? -100.0f : 100.0f;
        blocks.push_back(v);
    }
    {  // ties: amax = 127 gives d = 1, so x = n + 0.5 rounds away from zero in roundf
        std::vector<float> v(32);
        for (int i = 0; i < 32; ++i) {
            v[i] = (i % 2 ? -1.0f : 1.0f) * (float(i) + 0.5f);
        }
        v[31] = 127.0f;
        blocks.push_back(v);
    }
    int checks = 0, failures = 0;
    for (const std::vector<float> & v : blocks) {
        alignas(16) float x[32];
        std::memcpy(x, v.data(), sizeof(x));
        fusekit_nq::block_q8_1_t got{}, want = fusekit_q8_host::quantize_block(x);
        fusekit_rr::quantize_block_serial(x, got, sabotage);
        ++checks;
        if (std::memcmp(&got, &want, sizeof(got)) != 0) {
            ++failures;
        }
    }
    // zeros: d = 0, q = 0, sum 0 (the wipe gives the same bytes, so this check is outside the sabotage count)
    alignas(16) float zeros[32] = {};
    fusekit_nq::block_q8_1_t got{}, want = fusekit_q8_host::quantize_block(zeros);
    fusekit_rr::quantize_block_serial(zeros, got, false);
    const bool zeros_ok = std::memcmp(&got, &want, sizeof(got)) == 0;
    if (sabotage) {
        std::printf("sabotage: %d of %d blocks wrong (all must be)\n", failures, checks);
        return failures == checks ? 0 : 1;
    }
    std::printf("%d of %d blocks equal to quantize_q8_1's bytes; zeros %s\n", checks - failures, checks,
                zeros_ok ? "ok" : "WRONG");
    if (failures == 0 && zeros_ok) {
        std::printf("host checks passed\n");
        return 0;
    }
    return 1;
}
