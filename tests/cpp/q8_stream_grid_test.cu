// The stream grids of fusion-5-stream-zzzzzz-full-grid and fusion-5-stream-zzzzzzz-fill-or-cap on the CPU:
// plan_stream's CTAs for the one-token Q8_0 tables that take the stream kernel, on 132 SMs (H100 SXM, H200), and the
// rows the most loaded SM walks when the block scheduler places CTA i on SM i mod 132 (breadth-first, as on an idle
// GPU) and the warps take rows in turn (INTERLEAVE: warp w of G takes rows w, w + G, ...). Each table names what the
// rule before the full grid gives, what the full grid gives, and which of the two fill-or-cap takes; the program
// wants the rule its header declares (FUSEKIT_STREAM_FILL_OR_CAP, else FUSEKIT_STREAM_FULL_GRID, else the rule
// before), or the one asked for: against a header without the experiment, asking for it must fail.
//
//   nvcc -std=c++17 -arch=sm_90 -I<header folder> -o grid tests/cpp/q8_stream_grid_test.cu
//   ./grid                       every table as the header's plan_stream should give it
//   ./grid --expect-full         every table as fusion-5-stream-zzzzzz-full-grid gives it
//   ./grid --expect-fill-or-cap  every table as fusion-5-stream-zzzzzzz-fill-or-cap gives it
//   ./grid --expect-before       every table as the rule before both gave it
// Exit 0 when every table matches the expectation asked for, 1 otherwise.

#include "fusekit-q8-gemv.cuh"
#include "q8_stream_plan.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

namespace {

using namespace fusekit_q8;

enum class Rule { before, full, fill_or_cap };

#if defined(FUSEKIT_STREAM_FILL_OR_CAP)
constexpr Rule kHeaderRule = Rule::fill_or_cap;
#elif defined(FUSEKIT_STREAM_FULL_GRID)
constexpr Rule kHeaderRule = Rule::full;
#else
constexpr Rule kHeaderRule = Rule::before;
#endif

const char * rule_name(Rule rule) {
    return rule == Rule::full          ? "fusion-5-stream-zzzzzz-full-grid"
         : rule == Rule::fill_or_cap ? "fusion-5-stream-zzzzzzz-fill-or-cap"
                                       : "the rule before fusion-5-stream-zzzzzz-full-grid";
}

struct Table {
    const char * what;
    int          nrows, nblocks;
    int          ctas_before, max_rows_before;  // the rule before: as few CTAs as give every warp the same rows
    int          ctas_full, max_rows_full;      // fusion-5-stream-zzzzzz-full-grid: every slot
    bool         fill;                          // fusion-5-stream-zzzzzzz-fill-or-cap takes the full grid
};

// max rows an SM: CTA i on SM i mod 132; warp w's rows (nrows - 1 - w) / G + 1 for w < nrows
// fill: the plain grid puts 4 CTAs on some SM (more than 3 x 132 CTAs); the 384-CTA tables keep the cap's grid
constexpr Table kTables[] = {
    {"Llama-3-8B qkv 6144 x 4096", 6144, 128, 384, 48, 528, 48, false},
    {"Llama-3-8B down 4096 x 14336", 4096, 448, 512, 32, 512, 32, true},
    {"Llama-3-8B up 14336 x 4096", 14336, 128, 448, 128, 528, 112, true},
    {"Llama-3-8B gate+up 28672 x 4096", 28672, 128, 512, 224, 528, 224, true},
    {"Llama-3-8B output 128256 x 4096", 128256, 128, 518, 992, 528, 976, true},
    {"35B output 248320 x 2048", 248320, 64, 527, 1888, 528, 1888, true},
    {"35B ssm_out 2048 x 4096", 2048, 128, 256, 16, 256, 16, false},
    {"gdn wqkv 8192 x 2048", 8192, 64, 512, 64, 528, 64, true},
    {"6144 x 2048", 6144, 64, 384, 48, 528, 48, false},
};

// The rows the most loaded SM walks for a grid of `ctas` CTAs over `nrows` rows dealt in turn.
int max_rows_per_sm(int nrows, int ctas) {
    const int grid_warps = ctas * kWarpsPerCta;
    int       most       = 0;
    for (int sm = 0; sm < kSmCount; ++sm) {
        int rows = 0;
        for (int cta = sm; cta < ctas; cta += kSmCount) {
            for (int w = cta * kWarpsPerCta; w < (cta + 1) * kWarpsPerCta; ++w) {
                rows += w < nrows ? (nrows - 1 - w) / grid_warps + 1 : 0;
            }
        }
        most = std::max(most, rows);
    }
    return most;
}

}  // namespace

int main(int argc, char ** argv) {
    Rule rule = kHeaderRule;
    if (argc > 1) {
        rule = std::strcmp(argv[1], "--expect-full") == 0        ? Rule::full
             : std::strcmp(argv[1], "--expect-fill-or-cap") == 0 ? Rule::fill_or_cap
             : std::strcmp(argv[1], "--expect-before") == 0      ? Rule::before
                                                                 : kHeaderRule;
    }
    int wrong = 0;
    for (const Table & t : kTables) {
        const int  ctas      = int(plan_plain_q8(t.nrows, t.nblocks).grid.x);
        const int  max_rows  = max_rows_per_sm(t.nrows, ctas);
        const bool full      = rule == Rule::full || (rule == Rule::fill_or_cap && t.fill);
        const int  want_ctas = full ? t.ctas_full : t.ctas_before;
        const int  want_rows = full ? t.max_rows_full : t.max_rows_before;
        const bool ok       = ctas == want_ctas && max_rows == want_rows;
        wrong += !ok;
        std::printf("%-34s %4d CTAs, at most %5d rows an SM (%.1f on average; expected %d CTAs, %d rows)%s\n", t.what,
                    ctas, max_rows, double(t.nrows) / kSmCount, want_ctas, want_rows, ok ? "" : "  WRONG");
    }
    std::printf("%d of %zu tables as %s expects\n", int(std::size(kTables)) - wrong, std::size(kTables),
                rule_name(rule));
    return wrong ? 1 : 0;
}
