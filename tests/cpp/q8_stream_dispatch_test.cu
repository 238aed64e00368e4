// Which one-token products fusekit-q8-gemv.cuh's plan sends to the stream kernel (fusion-5-stock-streamed and
// fusion-5-stock-wider-stream), on the CPU: plan is host code, so it runs here with ggml's template arguments
// (fusekit-q8-gemv.cu: UNROLL 2, Y_LATE, 4 CTAs' registers, 2 with a gate, short rows packed) and PlainHooks, for
// the plain products of the 35B-A3B preset and of Llama-3-8B and a few edge cases, on an H200's 132 SMs. Each case
// names what the wider rule wants and what fusion-5-stock-whole-blocks' rule wanted; the program wants one of them.
// With fusion-5-stock-y-shared the wider rule also refuses rows longer than the activations' shared copy holds.
//
//   nvcc -std=c++17 -arch=sm_90 -I<header folder> -o dispatch tests/cpp/q8_stream_dispatch_test.cu
//   ./dispatch                   every case as fusion-5-stock-wider-stream's plan chooses ("dispatch as expected")
//   ./dispatch --expect-before   every case as the rule before it chose (the header without that experiment)
// Exit 0 when every case matches the expectation asked for, 1 otherwise.

#include "fusekit-q8-gemv.cuh"

#include <cstdio>
#include <cstring>
#include <iterator>

namespace {

using namespace fusekit_q8;

struct Case {
    const char * what;
    Weights      w;
    int          nrows;
    int          nblocks;
    bool         gate, bias, ids;
    int          nchannels;
    bool         stream_wider;   // fusion-5-stock-wider-stream's choice
    bool         stream_before;  // fusion-5-stock-streamed's (kStreamMinRows rows and more, no bias)
    bool         too_long_for_y = false;  // rows over kStreamYBlocks: fusion-5-stock-y-shared's stream_fits refuses them
};

#ifdef FUSEKIT_STREAM_Y_SHARED
constexpr bool kYShared = kStreamYShared;  // fusion-5-stock-y-shared: plan's stream kernel copies y to shared memory
#else
constexpr bool kYShared = false;
#endif

constexpr int kSmCount = 132;  // the H200's

const Case kCases[] = {
    {"35B gdn wqkv 8192x2048", Weights::q8_0, 8192, 64, false, false, false, 1, false, false},
    {"35B gdn wqkv_gate 4096x2048", Weights::q8_0, 4096, 64, false, false, false, 1, false, false},
    {"35B ssm_out 2048x4096 + residual", Weights::q8_0, 2048, 128, false, true, false, 1, true, false},
    {"35B attention out 2048x4096 + residual", Weights::q8_0, 2048, 128, false, true, false, 1, true, false},
    {"35B ssm_out 2048x4096, no bias", Weights::q8_0, 2048, 128, false, false, false, 1, true, false},
    {"35B shared expert gate/up 512x2048", Weights::q8_0, 512, 64, true, false, false, 1, false, false},
    {"35B shared expert down 2048x512", Weights::q8_0, 2048, 16, false, false, false, 1, false, false},
    {"35B experts down (ids) 2048x512 q4_0", Weights::q4_0, 2048, 16, false, false, true, 1, false, false},
    {"35B output head 248320x2048", Weights::q8_0, 248320, 64, false, false, false, 1, true, true},
    {"Llama wq/wo 4096x4096", Weights::q8_0, 4096, 128, false, false, false, 1, false, false},
    {"Llama wk/wv 1024x4096", Weights::q8_0, 1024, 128, false, false, false, 1, true, false},
    {"Llama gate/up 14336x4096", Weights::q8_0, 14336, 128, false, false, false, 1, false, false},
    {"Llama down 4096x14336", Weights::q8_0, 4096, 448, false, false, false, 1, false, false},
    {"Llama output 128256x4096", Weights::q8_0, 128256, 128, false, false, false, 1, true, true},
    {"q4_0 2048x2048", Weights::q4_0, 2048, 64, false, false, false, 1, true, false},
    {"one row 1x2048", Weights::q8_0, 1, 64, false, false, false, 1, true, false},
    {"two channels 1024x4096", Weights::q8_0, 1024, 128, false, false, false, 2, false, false},
    {"gated head-sized 20011x2048", Weights::q8_0, 20011, 64, true, false, false, 1, false, false},
    {"one tile per row 300x1024", Weights::q8_0, 300, 32, false, false, false, 1, false, false},
    {"long rows 20000x16384", Weights::q8_0, 20000, 512, false, false, false, 1, true, true, true},
};

template <Weights W>
bool takes_stream(const Problem & p, int nchannels) {
    const Launch l = plan<PlainHooks, 2, true, 4, W, 2, true>(p, nchannels, 1, kSmCount);
    return l.kernel == plan_stream<PlainHooks, W>(p, kSmCount).kernel;  // the stream kernel as plan_stream makes it
}

}  // namespace

int main(int argc, char ** argv) {
    const bool before = argc > 1 && std::strcmp(argv[1], "--expect-before") == 0;
    static const float   bias[1]  = {0.0f};
    static const int32_t ids[1]   = {0};
    static const uint8_t dummy[1] = {0};
    int wrong = 0;
    for (const Case & c : kCases) {
        Problem p{};
        p.weights       = c.w;
        p.nrows         = c.nrows;
        p.nblocks       = c.nblocks;
        p.row_x         = c.nblocks;
        p.gate          = c.gate ? dummy : nullptr;
        p.x_bias        = c.bias ? bias : nullptr;
        p.ids           = c.ids ? ids : nullptr;
        p.channel_ratio = 1;
        p.sample_ratio  = 1;
        const bool got  = c.w == Weights::q4_0 ? takes_stream<Weights::q4_0>(p, c.nchannels)
                                               : takes_stream<Weights::q8_0>(p, c.nchannels);
        const bool want = before ? c.stream_before : c.stream_wider && !(kYShared && c.too_long_for_y);
        wrong += got != want;
        std::printf("%-42s %-12s (expected %s)%s\n", c.what, got ? "stream" : "row kernels",
                    want ? "stream" : "row kernels", got != want ? "  WRONG" : "");
    }
    std::printf("stream depth %d%s; %d of %zu cases as %s expects\n", kStreamDepth, kYShared ? ", y in shared memory" : "",
                int(std::size(kCases)) - wrong, std::size(kCases),
                before ? "the rule before fusion-5-stock-wider-stream" : "fusion-5-stock-wider-stream");
    std::printf(wrong ? "dispatch differs\n" : "dispatch as expected\n");
    return wrong ? 1 : 0;
}
