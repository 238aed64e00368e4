// Host-side check of fusekit's gated-delta-net chain kernels (fusekit-gdn-chains.cuh), for machines without a GPU.
//
//   nvcc -O2 -std=c++17 -Ikernels -o gdn_chains_host_check kernels/gdn_chains_host_check.cu && ./gdn_chains_host_check [--sabotage]
//
// Runs, on the CPU, the kernels' own host-callable pieces (butterfly32, chunks_used, combine_warp_sums,
// rms_scale, gate_value, sigmoid_value, gated_norm_value, row_offset, prologue_blocks) in the kernels' data
// flow: block b of the prologue takes q row b, then k rows, then 32 gate/beta elements; lane l of a row holds
// elements l, l+32, ... and each chunk is reduced over the 32 lanes. Checked:
//   - the sum of squares equals, bit for bit, an independent emulation of stock's rms_norm_f32<256> reduction
//     (one element per thread, a butterfly per warp, a butterfly over the 8 warp sums);
//   - q/k norms, the gate, beta and the gated output norm against float64 references of the model's formulas,
//     reading the q/k views of a conv-output-shaped buffer through their strides;
//   - every output element written exactly once (the block/lane indexing);
//   - the conv window (conv_window_load, conv_window_value): y against float64 silu(sum of the 4 taps) and the
//     shifted window written back, into the row it was read from and into another row, no other row touched.
// What it cannot see: the shuffles themselves, launch shapes, rsqrtf/expf on the GPU (-use_fast_math),
// whether ggml-cuda.cu's matching fires on a real graph. --sabotage turns on the kernels' sabotage switch
// (drop a chunk of the sum of squares, drop the ssm_dt bias, negate the sigmoid, drop the silu, drop the conv
// window's token): it exits 0
// only if every value check fails.
#include "fusekit-gdn-chains.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace fusekit_gdn;

struct Tally {
    int checks = 0, failures = 0;            // all checks
    int sum_checks = 0, sum_failures = 0;    // the value checks, which the sabotage switch must break
    void value(bool ok, const char * what) {
        ++checks;
        ++sum_checks;
        if (!ok) {
            ++failures;
            ++sum_failures;
        }
        (void) what;
    }
    void rule(bool ok, const char * what, bool quiet) {
        ++checks;
        if (!ok) {
            ++failures;
            if (!quiet) {
                std::printf("FAIL: %s\n", what);
            }
        }
    }
};

// Stock's rms_norm_f32<256> reduction for ncols <= 256, emulated independently: thread t of 256 holds
// x[t]^2 (0 past ncols), each warp butterflies, lane w of the second stage holds warp w's sum (0 past 8).
float stock_sumsq(const float * x, int ncols) {
    float warp_sum[8];
    for (int w = 0; w < 8; ++w) {
        float lanes[kWarp];
        for (int l = 0; l < kWarp; ++l) {
            const int t = w * kWarp + l;
            float     tmp = 0.0f;
            if (t < ncols) {
                tmp += x[t] * x[t];
            }
            lanes[l] = tmp;
        }
        warp_sum[w] = butterfly32(lanes);
    }
    float second[kWarp];
    for (int l = 0; l < kWarp; ++l) {
        second[l] = l < 8 ? warp_sum[l] : 0.0f;
    }
    return butterfly32(second);
}

// The kernels' reduction (row_sumsq): lane l holds chunk c = x[32c + l], each chunk butterflied, then combined.
float kernel_sumsq(const float * x, int ncols, int sabotage) {
    const int nchunks = ncols / kWarp;
    const int used    = chunks_used(nchunks, sabotage);
    float     s[kMaxChunks] = {};
    for (int c = 0; c < nchunks; ++c) {
        float lanes[kWarp];
        for (int l = 0; l < kWarp; ++l) {
            const float v = x[c * kWarp + l];
            lanes[l]      = c < used ? v * v : 0.0f;
        }
        s[c] = butterfly32(lanes);
    }
    return combine_warp_sums(s);
}

bool close(double got, double ref, double rel, double abs_tol) {
    return std::isfinite(got) && std::fabs(got - ref) <= abs_tol + rel * std::fabs(ref);
}

// One prologue launch at given shapes, emulated block by block.
void check_prologue(int ncols, int n_k_heads, int n_v_heads, int n_seqs, int sabotage, std::mt19937 & rng, Tally & t) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t key_dim  = int64_t(ncols) * n_k_heads;
    const int64_t conv_dim = 2 * key_dim + int64_t(ncols) * n_v_heads;
    std::vector<float> conv(size_t(conv_dim) * n_seqs);
    for (float & v : conv) {
        v = u(rng) * 3.0f;
    }
    const float eps = 1e-6f / ncols, scale_out = 1.0f / std::sqrt(float(ncols));

    PrologueArgs a{};
    // the q and k views of build_layer_attn_linear: [ncols, n_k_heads, 1 token, n_seqs] of the conv output
    a.q_src   = { conv.data(), n_k_heads, 1, ncols, conv_dim, conv_dim };
    a.k_src   = { conv.data() + key_dim, n_k_heads, 1, ncols, conv_dim, conv_dim };
    a.rows_q  = int64_t(n_k_heads) * n_seqs;
    a.rows_k  = a.rows_q;
    a.ncols   = ncols;
    a.eps_q   = a.eps_k = eps;
    a.scale_q = a.scale_k = scale_out;
    std::vector<float> q_dst(size_t(a.rows_q) * ncols, NAN), k_dst(size_t(a.rows_k) * ncols, NAN);
    std::vector<int>   q_writes(q_dst.size()), k_writes(k_dst.size());
    a.q_dst = q_dst.data();
    a.k_dst = k_dst.data();

    const int64_t      n_gate = int64_t(n_v_heads) * n_seqs;
    std::vector<float> alpha(n_gate), dt(n_v_heads), ssm_a(n_v_heads), beta(n_gate);
    for (auto & v : alpha) v = u(rng) * 12.0f + 6.0f;  // reaches the softplus > 20 branch too
    for (auto & v : dt) v = 0.5f + std::fabs(u(rng));
    for (auto & v : ssm_a) v = -0.1f - 1.9f * std::fabs(u(rng));
    for (auto & v : beta) {
        const float r = u(rng) * 4.0f;
        v             = r + (r >= 0.0f ? 0.5f : -0.5f);  // away from 0, where sigmoid(x) = sigmoid(-x)
    }
    const std::vector<float> alpha_in = alpha, beta_in = beta;
    // stock runs ADD, SOFTPLUS, MUL and SIGMOID in place: so does the emulation (results over the sources)
    a.alpha    = alpha.data();
    a.dt_bias  = dt.data();
    a.ssm_a    = ssm_a.data();
    a.gate_dst = alpha.data();
    a.beta_raw = beta.data();
    a.beta_dst = beta.data();
    a.n_heads  = n_v_heads;
    a.n_gate   = n_gate;
    a.with_gate = 1;  // both halves at once here; the glue launches them separately (rows 0 for the gate)
    a.with_beta = 1;
    a.sabotage = sabotage;

    std::vector<int> gate_writes(n_gate);
    const int64_t    blocks = prologue_blocks(a);
    for (int64_t b = 0; b < blocks; ++b) {
        if (b < a.rows_q + a.rows_k) {
            const bool    is_q = b < a.rows_q;
            const Rows &  src  = is_q ? a.q_src : a.k_src;
            const int64_t row  = is_q ? b : b - a.rows_q;
            const float * x    = src.data + row_offset(row, src.n1, src.n2, src.s1, src.s2, src.s3);
            const float   sc   = rms_scale(kernel_sumsq(x, ncols, sabotage), ncols, is_q ? a.eps_q : a.eps_k);
            t.rule(sabotage || kernel_sumsq(x, ncols, 0) == stock_sumsq(x, ncols),
                   "sum of squares in stock's reduction order, bit for bit", false);
            float * out = (is_q ? a.q_dst : a.k_dst) + row * ncols;
            for (int c = 0; c < ncols / kWarp; ++c) {
                for (int l = 0; l < kWarp; ++l) {
                    const int col = c * kWarp + l;
                    out[col]      = (is_q ? a.scale_q : a.scale_k) * (sc * x[col]);
                    ++(is_q ? q_writes : k_writes)[row * ncols + col];
                }
            }
            continue;
        }
        for (int l = 0; l < kWarp; ++l) {
            const int64_t i = (b - a.rows_q - a.rows_k) * kWarp + l;
            if (i < a.n_gate) {
                if (a.with_gate) {
                    const int64_t h = i % a.n_heads;
                    a.gate_dst[i]   = gate_value(a.alpha[i], a.dt_bias[h], a.ssm_a[h], a.sabotage);
                }
                if (a.with_beta) {
                    a.beta_dst[i] = sigmoid_value(a.beta_raw[i], a.sabotage);
                }
                ++gate_writes[i];
            }
        }
    }

    // float64 references, indexed independently: (seq, head) -> conv offset
    for (int s = 0; s < n_seqs; ++s) {
        for (int h = 0; h < n_k_heads; ++h) {
            for (int which = 0; which < 2; ++which) {
                const float * x   = conv.data() + int64_t(s) * conv_dim + which * key_dim + int64_t(h) * ncols;
                const float * got = (which == 0 ? q_dst : k_dst).data() + (int64_t(s) * n_k_heads + h) * ncols;
                double        ss  = 0.0;
                for (int c = 0; c < ncols; ++c) {
                    ss += double(x[c]) * x[c];
                }
                const double inv = 1.0 / std::sqrt(ss / ncols + double(eps));
                bool         ok  = true;
                for (int c = 0; c < ncols; ++c) {
                    ok = ok && close(got[c], double(scale_out) * inv * x[c], 2e-6, 1e-7);
                }
                t.value(ok, which == 0 ? "q L2 norm row" : "k L2 norm row");
            }
        }
    }
    for (int64_t i0 = 0; i0 < n_gate; i0 += kWarp) {  // one value check per 32 elements
        bool ok_gate = true, ok_beta = true;
        for (int64_t i = i0; i < std::min<int64_t>(n_gate, i0 + kWarp); ++i) {
            const int64_t h  = i % n_v_heads;
            const double  x  = double(alpha_in[i]) + dt[h];
            const double  sp = x > 20.0 ? x : std::log1p(std::exp(x));
            ok_gate = ok_gate && close(alpha[i], sp * ssm_a[h], 2e-6, 1e-6);
            ok_beta = ok_beta && close(beta[i], 1.0 / (1.0 + std::exp(-double(beta_in[i]))), 2e-6, 1e-7);
        }
        t.value(ok_gate, "gate");
        t.value(ok_beta, "beta");
    }
    bool once = true;
    for (int w : q_writes) once = once && w == 1;
    for (int w : k_writes) once = once && w == 1;
    for (int w : gate_writes) once = once && w == 1;
    t.rule(once, "prologue writes every q, k, gate and beta element exactly once", false);

    // the launch shapes the glue uses: the gate alone (no rows), and q/k with beta
    PrologueArgs gate_only = a;
    gate_only.rows_q = gate_only.rows_k = 0;
    gate_only.with_beta                 = 0;
    t.rule(prologue_blocks(gate_only) == (n_gate + kWarp - 1) / kWarp, "gate launch: one block per 32 heads", false);
    PrologueArgs qk_beta = a;
    qk_beta.with_gate    = 0;
    t.rule(prologue_blocks(qk_beta) == a.rows_q + a.rows_k + (n_gate + kWarp - 1) / kWarp,
           "q/k/beta launch: a block per row, then one per 32 heads", false);
}

// One gated-norm launch, emulated; the output goes over z in place as stock may do.
void check_gated_norm(int ncols, int n_heads, int n_seqs, int sabotage, std::mt19937 & rng, Tally & t) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t rows = int64_t(n_heads) * n_seqs;
    // the GATED_DELTA_NET output view: [ncols, n_heads, 1, n_seqs] at the start of a larger result buffer
    std::vector<float> result(size_t(rows) * ncols + 4096), z(size_t(rows) * ncols), w(ncols);
    for (auto & v : result) v = u(rng) * 0.2f;
    for (auto & v : z) v = u(rng) * 6.0f;
    for (auto & v : w) v = 0.5f + std::fabs(u(rng));
    const std::vector<float> z_in = z;

    GatedNormArgs a{};
    a.x        = { result.data(), n_heads, 1, ncols, int64_t(ncols) * n_heads, int64_t(ncols) * n_heads };
    a.z        = { z.data(), n_heads, 1, ncols, int64_t(ncols) * n_heads, int64_t(ncols) * n_heads };
    a.weight   = w.data();
    a.dst      = z.data();
    a.rows     = rows;
    a.ncols    = ncols;
    a.eps      = 1e-6f;
    a.sabotage = sabotage;

    std::vector<int> writes(z.size());
    for (int64_t row = 0; row < a.rows; ++row) {
        const float * x  = a.x.data + row_offset(row, a.x.n1, a.x.n2, a.x.s1, a.x.s2, a.x.s3);
        const float * zr = a.z.data + row_offset(row, a.z.n1, a.z.n2, a.z.s1, a.z.s2, a.z.s3);
        t.rule(sabotage || kernel_sumsq(x, ncols, 0) == stock_sumsq(x, ncols),
               "gated norm: sum of squares in stock's reduction order, bit for bit", false);
        const float sc  = rms_scale(kernel_sumsq(x, ncols, sabotage), ncols, a.eps);
        float *     out = a.dst + row * ncols;
        for (int col = 0; col < ncols; ++col) {  // lane order does not matter: each element read then written
            out[col] = gated_norm_value(x[col], sc, a.weight[col], zr[col], a.sabotage);
            ++writes[row * ncols + col];
        }
    }
    for (int64_t row = 0; row < rows; ++row) {
        const float * x  = result.data() + row * ncols;
        double        ss = 0.0;
        for (int c = 0; c < ncols; ++c) {
            ss += double(x[c]) * x[c];
        }
        const double inv = 1.0 / std::sqrt(ss / ncols + 1e-6);
        bool         ok  = true;
        for (int c = 0; c < ncols; ++c) {
            const double zz  = z_in[row * ncols + c];
            const double ref = zz / (1.0 + std::exp(-zz)) * (inv * x[c] * w[c]);
            ok = ok && close(z[row * ncols + c], ref, 4e-6, 1e-7);
        }
        t.value(ok, "gated norm row");
    }
    bool once = true;
    for (int n : writes) once = once && n == 1;
    t.rule(once, "gated norm writes every element exactly once", false);
}

// One conv-window launch, emulated thread by thread (channel c), with the window written back into the cache
// (the CPY's row may be the row read, as at one sequence), against a float64 reference on an untouched copy.
void check_conv_window(int64_t channels, int64_t rows, int64_t src_row, int64_t dst_row, int sabotage, std::mt19937 & rng,
                       Tally & t) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    constexpr int kCached = kConvWidth - 1;
    const int64_t row     = kCached * channels;
    std::vector<float> cache(size_t(rows * row)), x(channels), w(size_t(channels) * kConvWidth), y(channels, NAN);
    for (auto & v : cache) v = u(rng) * 2.0f;
    for (auto & v : x) v = u(rng) * 2.0f + (u(rng) >= 0.0f ? 0.5f : -0.5f);  // away from 0: sabotage drops it
    for (auto & v : w) v = u(rng);
    const std::vector<float> cache_in = cache;
    const int32_t            index    = int32_t(src_row);

    ConvWindowArgs a{};
    a.cache      = cache.data();
    a.src_row    = &index;
    a.cache_row  = row;
    a.x          = x.data();
    a.weight     = w.data();
    a.weight_row = kConvWidth;
    a.bias       = nullptr;
    a.window_dst = cache.data() + dst_row * row;
    a.dst        = y.data();
    a.channels   = channels;
    a.sabotage   = sabotage;

    std::vector<int> writes(size_t(channels) * (1 + kCached));
    for (int64_t c = 0; c < a.channels; ++c) {  // conv_window_kernel's thread c
        float window[kConvWidth], taps[kConvWidth];
        conv_window_load(a.cache + int64_t(*a.src_row) * a.cache_row + c * kCached, a.x[c], a.sabotage, window);
        for (int j = 0; j < kConvWidth; ++j) {
            taps[j] = a.weight[c * a.weight_row + j];
        }
        a.dst[c] = conv_window_value(window, taps, a.bias != nullptr ? a.bias[c] : 0.0f);
        ++writes[c * (1 + kCached)];
        for (int j = 0; j < kCached; ++j) {
            a.window_dst[c * kCached + j] = window[j + 1];
            ++writes[c * (1 + kCached) + 1 + j];
        }
    }

    // float64: window = cached values of src_row, then x; y = silu(sum); the cache's dst_row = window shifted by one
    for (int64_t c0 = 0; c0 < channels; c0 += 256) {  // one value check per 256 channels
        bool ok_y = true, ok_window = true;
        for (int64_t c = c0; c < std::min<int64_t>(channels, c0 + 256); ++c) {
            double window[kConvWidth];
            for (int j = 0; j < kCached; ++j) {
                window[j] = cache_in[src_row * row + c * kCached + j];
            }
            window[kCached] = x[c];
            double sum      = 0.0;
            for (int j = 0; j < kConvWidth; ++j) {
                sum += window[j] * w[c * kConvWidth + j];
            }
            ok_y = ok_y && close(y[c], sum / (1.0 + std::exp(-sum)), 2e-6, 1e-6);
            for (int j = 0; j < kCached; ++j) {
                ok_window = ok_window && cache[dst_row * row + c * kCached + j] == float(window[j + 1]);
            }
        }
        t.value(ok_y, "conv window output");
        t.value(ok_window, "conv window written back");
    }
    bool others = true;  // rows other than dst_row keep their values
    for (int64_t r = 0; r < rows; ++r) {
        if (r != dst_row) {
            others = others && std::equal(cache.begin() + r * row, cache.begin() + (r + 1) * row, cache_in.begin() + r * row);
        }
    }
    t.rule(others, "conv window writes no cache row but the CPY's", false);
    bool once = true;
    for (int n : writes) once = once && n == 1;
    t.rule(once, "conv window writes every output and window element exactly once", false);
}

}  // namespace

int main(int argc, char ** argv) {
    const bool sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;
    std::mt19937 rng(20261130);
    Tally        t;

    // stock's reduction order itself: the combine expression against the second-stage butterfly
    for (int trial = 0; trial < 1000; ++trial) {
        std::uniform_real_distribution<float> u(0.0f, 100.0f);
        float s[kMaxChunks], lanes[kWarp] = {};
        for (int c = 0; c < kMaxChunks; ++c) {
            s[c] = lanes[c] = u(rng);
        }
        t.rule(combine_warp_sums(s) == butterfly32(lanes), "combine_warp_sums is the second-stage butterfly", trial > 0);
    }

    // the 35B-A3B shapes (128, 16 key heads, 32 value heads), other head sizes, several sequences
    const int shapes[][4] = { { 128, 16, 32, 1 }, { 128, 16, 32, 3 }, { 32, 4, 8, 2 }, { 64, 16, 16, 1 },
                              { 256, 2, 4, 1 },   { 128, 1, 33, 1 } };
    for (const auto & sh : shapes) {
        for (int rep = 0; rep < 4; ++rep) {
            check_prologue(sh[0], sh[1], sh[2], sh[3], sabotage ? 1 : 0, rng, t);
            check_gated_norm(sh[0], sh[2], sh[3], sabotage ? 1 : 0, rng, t);
        }
    }

    // the conv window: the 35B-A3B channels (2 x 16 x 128 + 32 x 128) reading and writing the same row, or another
    // row; a channel count that leaves the last block of 128 part-empty
    const int64_t windows[][4] = { { 8192, 4, 1, 1 }, { 8192, 4, 0, 3 }, { 200, 2, 1, 0 }, { 1, 1, 0, 0 } };
    for (const auto & wn : windows) {
        check_conv_window(wn[0], wn[1], wn[2], wn[3], sabotage ? 1 : 0, rng, t);
    }

    if (sabotage) {
        // the order and indexing rules do not depend on the switch: count only the value checks
        std::printf("sabotage: %d of %d value checks wrong (all must be)\n", t.sum_failures, t.sum_checks);
        return t.sum_failures == t.sum_checks ? 0 : 1;
    }
    std::printf("%d of %d host checks passed\n", t.checks - t.failures, t.checks);
    return t.failures == 0 ? 0 : 1;
}
