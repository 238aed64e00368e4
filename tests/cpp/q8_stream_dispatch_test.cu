// Which one-token products fusekit-q8-gemv.cuh's plan sends to the stream kernel (fusion-5-stock-streamed,
// fusion-5-stock-wider-stream and fusion-5-stream-zzz-medium-tables), on the CPU: plan is host code, so it runs here
// with ggml's template arguments (fusekit-q8-gemv.cu: UNROLL 2, Y_LATE, 4 CTAs' registers, 2 with a gate, short rows
// packed) and PlainHooks, for the plain products of the 35B-A3B preset and of Llama-3-8B and a few edge cases, on an
// H200's 132 SMs. Each case names what each rule wants: the medium-tables rule (plain Q8_0 tables of 2^19 blocks and
// more stream too), the wider rule before it, and fusion-5-stock-whole-blocks' rule before that; the program wants
// the one its header declares, or the one asked for.
// With fusion-5-stock-y-shared the wider and medium rules also refuse rows longer than the activations' shared copy.
// A second section asks mmvq_short_table (fusion-5-stream-zzzz-mmvq-short-tables: short plain Q8_0 tables stay with
// ggml's MMVQ, before plan) for every case: it wants the experiment's rule where the header has it or --expect-short
// asks for it, else no case left to MMVQ.
//
//   nvcc -std=c++17 -arch=sm_90 -I<header folder> -o dispatch tests/cpp/q8_stream_dispatch_test.cu
//   ./dispatch                   every case as the header's plan should choose ("dispatch as expected"): the medium
//                                rule where the header has fusion-5-stream-zzz-medium-tables, else the wider rule
//   ./dispatch --expect-medium   every case as the medium-tables rule chooses
//   ./dispatch --expect-wider    every case as fusion-5-stock-wider-stream's rule chooses
//   ./dispatch --expect-before   every case as the rule before it chose (the header without that experiment)
//   ./dispatch --expect-short    the header's plan as above, and the short-tables rule whether the header has it or not
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
    bool         medium_table   = false;  // a plain Q8_0 table of 2^19 blocks or more: the medium rule streams it
    bool         mmvq_short     = false;  // at most 16 rows an SM of 64 blocks or more, plain Q8_0: MMVQ's own
    bool stream_medium() const { return stream_wider || medium_table; }  // fusion-5-stream-zzz-medium-tables' choice
};

#ifdef FUSEKIT_STREAM_MEDIUM_TABLES
constexpr bool kMediumTables = kStreamMediumTables;  // fusion-5-stream-zzz-medium-tables: medium Q8_0 tables stream
#else
constexpr bool kMediumTables = false;
#endif

#ifdef FUSEKIT_MMVQ_SHORT_TABLES
constexpr bool kShortTables = kMmvqShortTables;  // fusion-5-stream-zzzz-mmvq-short-tables: short tables stay MMVQ's
bool left_to_mmvq(const Problem & p, int nchannels, int sm_count) {
    return mmvq_short_table(p, nchannels, 1, sm_count);
}
#else
constexpr bool kShortTables = false;
bool left_to_mmvq(const Problem &, int, int) {
    return false;
}
#endif

#ifdef FUSEKIT_STREAM_Y_SHARED
constexpr bool kYShared = kStreamYShared;  // fusion-5-stock-y-shared: plan's stream kernel copies y to shared memory
#else
constexpr bool kYShared = false;
#endif

constexpr int kSmCount = 132;  // the H200's

const Case kCases[] = {
    {"35B gdn wqkv 8192x2048", Weights::q8_0, 8192, 64, false, false, false, 1, false, false, false, true},
    {"35B gdn wqkv_gate 4096x2048", Weights::q8_0, 4096, 64, false, false, false, 1, false, false},
    {"35B ssm_out 2048x4096 + residual", Weights::q8_0, 2048, 128, false, true, false, 1, true, false, false, false, true},
    {"35B attention out 2048x4096 + residual", Weights::q8_0, 2048, 128, false, true, false, 1, true, false, false, false, true},
    {"35B ssm_out 2048x4096, no bias", Weights::q8_0, 2048, 128, false, false, false, 1, true, false, false, false, true},
    {"35B shared expert gate/up 512x2048", Weights::q8_0, 512, 64, true, false, false, 1, false, false},
    {"35B shared expert down 2048x512", Weights::q8_0, 2048, 16, false, false, false, 1, false, false},
    {"35B experts down (ids) 2048x512 q4_0", Weights::q4_0, 2048, 16, false, false, true, 1, false, false},
    {"35B output head 248320x2048", Weights::q8_0, 248320, 64, false, false, false, 1, true, true},
    {"Llama wq/wo 4096x4096", Weights::q8_0, 4096, 128, false, false, false, 1, false, false, false, true},
    {"Llama qkv 6144x4096", Weights::q8_0, 6144, 128, false, false, false, 1, false, false, false, true},
    {"Llama wk/wv 1024x4096", Weights::q8_0, 1024, 128, false, false, false, 1, true, false, false, false, true},
    {"Llama gate/up 14336x4096", Weights::q8_0, 14336, 128, false, false, false, 1, false, false, false, true},
    {"Llama down 4096x14336", Weights::q8_0, 4096, 448, false, false, false, 1, false, false, false, true},
    {"Llama output 128256x4096", Weights::q8_0, 128256, 128, false, false, false, 1, true, true},
    {"q4_0 2048x2048", Weights::q4_0, 2048, 64, false, false, false, 1, true, false},
    {"q4_0 8192x2048 (medium, not Q8_0)", Weights::q4_0, 8192, 64, false, false, false, 1, false, false},
    {"one block short of medium 4095x128", Weights::q8_0, 4095, 128, false, false, false, 1, false, false},
    {"gated medium 8192x2048", Weights::q8_0, 8192, 64, true, false, false, 1, false, false},
    {"one row 1x2048", Weights::q8_0, 1, 64, false, false, false, 1, true, false, false, false, true},
    {"two channels 1024x4096", Weights::q8_0, 1024, 128, false, false, false, 2, false, false},
    {"gated head-sized 20011x2048", Weights::q8_0, 20011, 64, true, false, false, 1, false, false},
    {"one tile per row 300x1024", Weights::q8_0, 300, 32, false, false, false, 1, false, false},
    {"long rows 20000x16384", Weights::q8_0, 20000, 512, false, false, false, 1, true, true, true},
    {"35B attention wk 512x2048", Weights::q8_0, 512, 64, false, false, false, 1, true, false, false, false, true},
    {"V100 expert 640x2560", Weights::q8_0, 640, 80, false, false, false, 1, true, false, false, false, true},
    {"Qwen3-1.7B down 2048x6144", Weights::q8_0, 2048, 192, false, false, false, 1, true, false, false, false, true},
    {"16 rows an SM 2112x64", Weights::q8_0, 2112, 64, false, false, false, 1, false, false, false, false, true},
    {"one row over 16 an SM 2113x64", Weights::q8_0, 2113, 64, false, false, false, 1, false, false},
    {"63 blocks a row 2048x63", Weights::q8_0, 2048, 63, false, false, false, 1, true, false},
    {"q4_0 short 2048x4096", Weights::q4_0, 2048, 128, false, false, false, 1, true, false},
};

template <Weights W>
bool takes_stream(const Problem & p, int nchannels) {
    const Launch l = plan<PlainHooks, 2, true, 4, W, 2, true>(p, nchannels, 1, kSmCount);
    return l.kernel == plan_stream<PlainHooks, W>(p, kSmCount).kernel;  // the stream kernel as plan_stream makes it
}

enum class Rule { header, medium, wider, before };

const char * rule_name(Rule rule) {
    switch (rule) {
        case Rule::medium: return "fusion-5-stream-zzz-medium-tables";
        case Rule::wider:  return "fusion-5-stock-wider-stream";
        case Rule::before: return "the rule before fusion-5-stock-wider-stream";
        default:           return kMediumTables ? "fusion-5-stream-zzz-medium-tables" : "fusion-5-stock-wider-stream";
    }
}

}  // namespace

int main(int argc, char ** argv) {
    Rule rule = Rule::header;
    if (argc > 1) {
        rule = std::strcmp(argv[1], "--expect-before") == 0 ? Rule::before
             : std::strcmp(argv[1], "--expect-wider") == 0  ? Rule::wider
             : std::strcmp(argv[1], "--expect-medium") == 0 ? Rule::medium
                                                            : Rule::header;
    }
    const bool medium = rule == Rule::medium || (rule == Rule::header && kMediumTables);
    const bool expect_short = argc > 1 && std::strcmp(argv[1], "--expect-short") == 0;
    const bool short_rule   = expect_short || kShortTables;
    static const float   bias[1]  = {0.0f};
    static const int32_t ids[1]   = {0};
    static const uint8_t dummy[1] = {0};
    const auto problem_of = [&](const Case & c) {
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
        return p;
    };
    int wrong = 0;
    for (const Case & c : kCases) {
        const Problem p = problem_of(c);
        const bool got  = c.w == Weights::q4_0 ? takes_stream<Weights::q4_0>(p, c.nchannels)
                                               : takes_stream<Weights::q8_0>(p, c.nchannels);
        const bool want = rule == Rule::before ? c.stream_before
                                               : (medium ? c.stream_medium() : c.stream_wider) &&
                                                     !(kYShared && c.too_long_for_y);
        wrong += got != want;
        std::printf("%-42s %-12s (expected %s)%s\n", c.what, got ? "stream" : "row kernels",
                    want ? "stream" : "row kernels", got != want ? "  WRONG" : "");
    }
    std::printf("stream depth %d%s; %d of %zu cases as %s expects\n", kStreamDepth, kYShared ? ", y in shared memory" : "",
                int(std::size(kCases)) - wrong, std::size(kCases), rule_name(rule));
    // fusion-5-stream-zzzz-mmvq-short-tables: which products fusekit_q8_gemv_try leaves to MMVQ before it plans
    int wrong_short = 0;
    for (const Case & c : kCases) {
        const bool got  = left_to_mmvq(problem_of(c), c.nchannels, kSmCount);
        const bool want = short_rule && c.mmvq_short;
        wrong_short += got != want;
        std::printf("short tables: %-42s %-7s (expected %s)%s\n", c.what, got ? "MMVQ" : "fusekit", want ? "MMVQ" : "fusekit",
                    got != want ? "  WRONG" : "");
    }
    std::printf("%d of %zu cases as %s expects\n", int(std::size(kCases)) - wrong_short, std::size(kCases),
                short_rule ? "fusion-5-stream-zzzz-mmvq-short-tables" : "no short-tables rule");
    wrong += wrong_short;
    std::printf(wrong ? "dispatch differs\n" : "dispatch as expected\n");
    return wrong ? 1 : 0;
}
