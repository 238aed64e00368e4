// The residency cap of fusion-5-stream-zzzzz-residency-cap on the CPU: which stream grids plan_stream caps on 132 SMs
// (stream_residency_cap), and whether the dynamic shared memory it reserves (stream_residency_reserve) lets exactly
// the cap's CTAs share an SM: the cap fits, one more does not, in steps of the allocation granule and under the
// 48 KB a launch may ask by default. The SMs: the H100's and H200's (228 KB of shared memory an SM) and the A100's
// (164 KB); the kernel's static shared memory: the stream kernel's 44,416 bytes (y-pairs layout) and a sweep.
// --sabotage asks for one granule less (stream_residency_reserve's own switch): then cap + 1 CTAs fit, and the
// program must say so.
//
//   nvcc -std=c++17 -arch=sm_90 -I<header folder> -o cap tests/cpp/q8_residency_cap_test.cu && ./cap [--sabotage]
// Exit 0 when every case holds, 1 otherwise.

#include "fusekit-q8-gemv.cuh"
#include "q8_stream_plan.cuh"

#include <cstdio>
#include <cstring>

namespace {

using namespace fusekit_q8;

constexpr int kStreamStatic = 44416;  // the stream kernel's ring and y-pairs copy (fusion-5-stream-y-pairs)

struct Table {
    const char * what;
    int          nrows, nblocks;
    int          cap;  // what the grid should be capped at on 132 SMs (0: no cap)
};

// plan_stream's grids: 6144 rows take 2 a warp (3,072 warps, 384 CTAs: at most 3 an SM); the full grids stay as they
// are; 2048 x 4096 (the 35B preset's ssm_out) would be capped at 2, but fusion-5-stream-zzzz-mmvq-short-tables leaves
// it to MMVQ before ggml plans
constexpr Table kTables[] = {
    {"6144 x 4096", 6144, 128, 3},     {"6144 x 2048", 6144, 64, 3},     {"4096 x 4096", 4096, 128, 0},
    {"4096 x 14336", 4096, 448, 0},    {"14336 x 4096", 14336, 128, 0},  {"28672 x 4096", 28672, 128, 0},
    {"248320 x 2048", 248320, 64, 0},  {"2048 x 4096", 2048, 128, 2},    {"1000 x 64", 1000, 2, 0},
};

struct Sm {
    const char * what;
    int          per_sm, reserved;
};

constexpr Sm kSms[] = {{"H100/H200", 233472, 1024}, {"A100", 167936, 1024}};

// cap CTAs of per_cta bytes fit an SM, cap + 1 do not
bool caps_exactly(const Sm & sm, int cap, int static_bytes, int dynamic) {
    const int per_cta = static_bytes + dynamic + sm.reserved;
    return cap * per_cta <= sm.per_sm && (cap + 1) * per_cta > sm.per_sm;
}

}  // namespace

int main(int argc, char ** argv) {
    const bool sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;
    int wrong = 0, cases = 0;
    int        devices = 0;
    const bool gpu     = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    (void) cudaGetLastError();
    for (const Table & t : kTables) {
        const Launch l   = plan_plain_q8(t.nrows, t.nblocks);
        const int    got = stream_residency_cap(int(l.grid.x), kSmCount);
        const bool   bad = got != t.cap || (!gpu && l.smem != 0);  // without a GPU the runtime cannot say: no reserve
        ++cases;
        wrong += bad;
        std::printf("grid %-14s %4u CTAs: cap %d (expected %d)%s\n", t.what, l.grid.x, got, t.cap, bad ? "  WRONG" : "");
    }
    for (const Sm & sm : kSms) {
        for (int cap = 2; cap <= 3; ++cap) {
            const int dynamic = stream_residency_reserve(cap, sm.per_sm, sm.reserved, kStreamStatic, sabotage);
            const bool ok     = dynamic % kSmemGranule == 0 && dynamic <= kSmemDefaultLimit &&
                            (dynamic == 0 ? (cap + 1) * (kStreamStatic + sm.reserved) > sm.per_sm  // caps by itself
                                          : caps_exactly(sm, cap, kStreamStatic, dynamic));
            ++cases;
            wrong += !ok;
            std::printf("%-9s cap %d, static %d: reserve %d bytes%s\n", sm.what, cap, kStreamStatic, dynamic,
                        ok ? "" : "  WRONG (cap + 1 CTAs fit, or the cap does not)");
        }
        // every static size the stream kernel could have: a reserve, where one is made, caps exactly
        int sweep_wrong = 0, reserves = 0;
        for (int static_bytes = 0; static_bytes <= 64 * 1024; static_bytes += 16) {
            for (int cap = 2; cap <= 3; ++cap) {
                const int dynamic = stream_residency_reserve(cap, sm.per_sm, sm.reserved, static_bytes, sabotage);
                if (dynamic != 0) {
                    ++reserves;
                    sweep_wrong += !caps_exactly(sm, cap, static_bytes, dynamic) || dynamic % kSmemGranule != 0 ||
                                   dynamic > kSmemDefaultLimit;
                }
            }
        }
        ++cases;
        wrong += sweep_wrong != 0 || reserves == 0;
        std::printf("%-9s static 0-64 KB: %d reserves, %d wrong%s\n", sm.what, reserves, sweep_wrong,
                    sweep_wrong != 0 || reserves == 0 ? "  WRONG" : "");
    }
    // the reserve Llama-3-8B's 6144 x 4096 (its attention q, k, v) asks on an H100 or H200
    const int h100 = stream_residency_reserve(3, kSms[0].per_sm, kSms[0].reserved, kStreamStatic, sabotage);
    std::printf("6144 x 4096 on 132 SMs of 228 KB: 3 CTAs an SM with %d bytes reserved each\n", h100);
    std::printf("%d of %d cases as fusion-5-stream-zzzzz-residency-cap expects%s\n", cases - wrong, cases,
                sabotage ? " (sabotaged reserve)" : "");
    return wrong ? 1 : 0;
}
