// Host-side check of fusion-4's chunked gated delta rule (fusekit-chunked-gdn.cuh), for machines
// without a GPU:
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -I kernels -o chunked_gdn_host_check kernels/chunked_gdn_host_check.cu
//   ./chunked_gdn_host_check [--sabotage]
//
// For every case (fresh random inputs each), the whole dst of GATED_DELTA_NET (attention output, then
// K snapshot slots) is computed three ways and compared:
//   ref     float64 serial recurrence written straight from ggml-cpu/ops.cpp (same strides, head
//           tiling h % H_k, q/k sequence b / rq3, transposed state, scale on the output, slot mapping)
//   chunked<double>  the kernel's own __host__ __device__ phases, run with one worker and a no-op barrier
//   chunked<float>   the same phases in float, as the CUDA kernel runs them
// and, where S = 128 (the tensor-core kernels' shape; not the fused cache-write case yet), step 2a's two passes and
// step 2b's split (records, chain, output pass) in their plain-loop specification (fusekit-chunked-gdn-tc.cuh), in
// double and float, against the same reference; and the prep pass's blocked inverse against forward substitution.
// Inputs look like the model's: q and k rows L2-normalized (build_gdn_l2_norm), v ~ N(0, 1), beta =
// sigmoid(N(0, 1.5)) in (0, 1), g = -exp(U(ln 1e-3, ln 4)) <= 0 with some exact zeros (no decay),
// state ~ N(0, 0.3). q/k live in padded buffers and v in a packed "qkv"-like buffer with a padded
// head stride, so every stride of the op contract is exercised; one case broadcasts q/k over sequences,
// one sends the snapshots through the fused cache-write path, one uses test-backend-ops' permuted
// layouts and distributions (g down to -20: whole chunks where exp(G) underflows to 0).
// Unwritten snapshot slots hold a sentinel in all three outputs, so a slot written that ggml leaves
// alone is caught too.
//
// Error measure: max |x - ref| over a region (attention output, or all state slots) divided by
// max |ref| of that region. Thresholds and why:
//   double: 1e-10. Only rounding of float64 arithmetic separates the two algebraically equal forms;
//           the triangular solve and up to 1000 tokens of carried state amplify 1e-16 by far less
//           than 1e5 (measured: at most 1.3e-15 over all cases).
//   float:  2e-6 (state and output). fp32 has 6e-8 unit roundoff; each value is a dot product over
//           S key channels plus a chunk sum over <= 64 tokens plus the triangular solve. A float
//           serial recurrence in ops.cpp's own order scores about 3.5e-7 on this measure and these
//           inputs, and the chunked phases in float score at most 4.3e-7 (every case, T = 1000
//           included): the same class; 2e-6 leaves a 5x margin. The delta rule with beta < 1,
//           |k| = 1 and g <= 0 does not amplify carried state error, so this does not grow with T.
//           (Before the cumulative log decay G was kept in float64 the float error was 2e-6, and
//           1.1e-5 on test-backend-ops' g down to -20: see the Workspace comment in the header.)
// --sabotage runs the phases with their sabotage switch (the intra-chunk mask includes the diagonal):
// the program exits 0 only if EVERY comparison (float and double, every case) then fails.
//
// CTA schedule check (not under --sabotage: it does not depend on the switch): the CUDA kernel runs the
// same phases with 256 workers and __syncthreads between them. Here 256 std::threads run them with a
// barrier that lets exactly one worker run at a time, in forward order in one barrier interval and
// reverse order in the next (and the opposite in a second run). If a phase read something another
// worker writes in the same interval, or the work split left an element out or did it twice, the
// result would depend on the order; each element's arithmetic does not depend on who computes it, so
// both schedules must be BIT-identical to the one-worker run, on the kernel's shape (S = 128, C = 64,
// 32 columns per CTA) over several chunks with snapshots.
// What it cannot see: memory-model effects of real concurrency, shared-memory sizes, launch shapes.
#include "chunked-gdn-reference.h"
#include "fusekit-chunked-gdn.cuh"
#include "fusekit-chunked-gdn-tc.cuh"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <random>
#include <vector>

namespace {

using namespace fusekit_gdn;
using namespace fusekit_gdn_ref;

// The kernel's phases on the CPU: one worker, no-op barrier, every (sequence, head, column slice).
template <typename Real>
std::vector<Real> chunked(const Inputs & in, const Case & c, int sabotage) {
    std::vector<Real> dst(in.dst_elems, Real(kSentinel));
    GdnParamsT<Real>  p;
    std::memcpy(static_cast<void *>(&p), &in.p, sizeof(p));  // same layout; only dst's type differs
    point_output_at_dst(p, dst.data());
    // The fused cache write: slots go to a separate buffer whose slot stride has 40 extra values
    // (poisoned), copied back into dst's layout for the comparison; a touched pad fails the case.
    const size_t      slot = size_t(c.S) * c.S * c.H_v * c.B, pad = 40;
    std::vector<Real> cache(c.cache_path ? c.K * (slot + pad) : 0, Real(kSentinel));
    if (c.cache_path) {
        p.state_out         = cache.data();
        p.state_slot_stride = int64_t(slot + pad);
    }
    std::vector<double>   ws(size_t(workspace_bytes<Real>(c.S, c.C, c.n_cols) + 7) / 8);  // 8-byte aligned
    const Workspace<Real> w = carve_workspace<Real>(ws.data(), c.S, c.C, c.n_cols);
    for (int b = 0; b < c.B; ++b)
        for (int h = 0; h < c.H_v; ++h)
            for (int j0 = 0; j0 < c.S; j0 += c.n_cols)
                chunked_gdn_slice(p, w, b, h, j0, c.n_cols, c.C, sabotage, 0, 1, NoBarrier{});
    for (int s = 0; c.cache_path && s < c.K; ++s) {
        std::copy_n(cache.begin() + s * (slot + pad), slot, dst.begin() + in.attn_elems + s * slot);
        for (size_t x = 0; x < pad; ++x) {
            if (cache[s * (slot + pad) + slot + x] != Real(kSentinel)) {
                dst[in.attn_elems + s * slot] = Real(NAN);  // wrote outside its slot
            }
        }
    }
    return dst;
}

// The tensor-core steps' plain-loop specification (fusekit-chunked-gdn-tc.cuh): every chunk's record first, then per
// (sequence, head) step 2a's state pass, or (split) step 2b's chain, which writes the chunk states and U over U0, and
// its output pass over every chunk. Only S = 128 and C = 64 (the tensor-core kernels' shape).
template <typename Real>
std::vector<Real> tensor_core_spec(const Inputs & in, const Case & c, int sabotage, bool split) {
    using namespace fusekit_gdn_tc;
    std::vector<Real> dst(in.dst_elems, Real(kSentinel));
    GdnParamsT<Real>  p;
    std::memcpy(static_cast<void *>(&p), &in.p, sizeof(p));  // same layout; only dst's type differs
    point_output_at_dst(p, dst.data());
    const int64_t     chunks = chunk_count(c.T);
    std::vector<Real> records(size_t(int64_t(c.B) * c.H_v * chunks * Record::floats), Real(NAN));
    std::vector<Real> states(split ? size_t(int64_t(c.B) * c.H_v * chunks * kS * kS) : 0, Real(NAN));
    for (int b = 0; b < c.B; ++b)
        for (int h = 0; h < c.H_v; ++h) {
            for (int ch = 0; ch < chunks; ++ch) {
                prep_chunk_host<Real>(p, b, h, ch, sabotage, records.data() + record_index(p, b, h, ch) * Record::floats);
            }
            if (!split) {
                state_pass_host<Real>(p, b, h, records.data());
                continue;
            }
            chain_host<Real>(p, b, h, records.data(), states.data());
            for (int ch = 0; ch < chunks; ++ch) {
                output_host<Real>(p, b, h, ch, records.data(), states.data());
            }
        }
    return dst;
}

// nthr workers that take turns: one runs until its next barrier, then hands over to the next in the
// interval's order; the order flips (forward / reverse) at every interval boundary.
class TurnTakingCta {
  public:
    TurnTakingCta(int nthr, bool start_reversed) : nthr_(nthr), reversed_(start_reversed), wake_(size_t(nthr)) {}

    void wait_turn(int tid) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_[size_t(tid)].wait(lock, [&] { return worker_at(pos_) == tid; });
    }

    // Wakes only the next worker (waking all 256 on every hand-over costs minutes on two cores).
    void hand_over() {
        std::lock_guard<std::mutex> lock(mu_);
        if (++pos_ == nthr_) {  // every worker reached the barrier: the next interval starts
            pos_      = 0;
            reversed_ = !reversed_;
        }
        wake_[size_t(worker_at(pos_))].notify_one();
    }

  private:
    int worker_at(int pos) const { return reversed_ ? nthr_ - 1 - pos : pos; }

    std::mutex                           mu_;
    int                                  nthr_, pos_ = 0;
    bool                                 reversed_;
    std::vector<std::condition_variable> wake_;
};

struct TurnBarrier {
    TurnTakingCta * cta;
    int             tid;
    FUSEKIT_GDN_HD void operator()() const {
#if !defined(__CUDA_ARCH__)
        cta->hand_over();
        cta->wait_turn(tid);
#endif
    }
};

// The float phases with nthr workers on one shared workspace, per (sequence, head, column slice).
std::vector<float> chunked_cta(const Inputs & in, const Case & c, int nthr, bool start_reversed) {
    std::vector<float> dst(in.dst_elems, float(kSentinel));
    GdnParams          p = in.p;
    point_output_at_dst(p, dst.data());
    std::vector<double>    ws(size_t(workspace_bytes<float>(c.S, c.C, c.n_cols) + 7) / 8);
    const Workspace<float> w = carve_workspace<float>(ws.data(), c.S, c.C, c.n_cols);
    for (int b = 0; b < c.B; ++b)
        for (int h = 0; h < c.H_v; ++h)
            for (int j0 = 0; j0 < c.S; j0 += c.n_cols) {
                TurnTakingCta            cta(nthr, start_reversed);
                std::vector<std::thread> workers;
                for (int tid = 0; tid < nthr; ++tid) {
                    workers.emplace_back([&, tid] {
                        cta.wait_turn(tid);
                        chunked_gdn_slice(p, w, b, h, j0, c.n_cols, c.C, kSabotageNone, tid, nthr, TurnBarrier{&cta, tid});
                        cta.hand_over();
                    });
                }
                for (auto & t : workers) t.join();
            }
    return dst;
}

// The prep pass's blocked inverse (invert_unit_lower_blocked) against the specification's forward substitution, on
// A as the prep pass builds it: beta_s exp(G_s - G_m) (k_s . k_m) below the diagonal, L-row chunks zero below row L.
struct InverseInput {
    int              L;
    std::vector<double> A;  // kC x kC
};

// shared: the weight of one direction every key shares (0: independent keys, k_s . k_m about N(0, 1/128); 3: about
// 0.9, the strongly coupled keys that make (I + A)^-1 grow).
InverseInput make_inverse_input(std::mt19937 & rng, int L, double g_scale, double shared) {
    using fusekit_gdn_tc::kC;
    using fusekit_gdn_tc::kS;
    std::normal_distribution<double>       normal(0.0, 1.0);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<double>                    k(size_t(kC) * kS), G(kC), beta(kC), common(kS);
    for (double & x : common) {
        x = normal(rng) * shared;
    }
    double acc = 0;
    for (int r = 0; r < kC; ++r) {
        double norm = 0;
        for (int i = 0; i < kS; ++i) {
            k[size_t(r) * kS + i] = common[size_t(i)] + normal(rng);
            norm += k[size_t(r) * kS + i] * k[size_t(r) * kS + i];
        }
        for (int i = 0; i < kS; ++i) {
            k[size_t(r) * kS + i] /= std::sqrt(norm);  // L2-normalised keys, as the model's
        }
        acc -= g_scale * unit(rng);
        G[r]    = acc;
        beta[r] = 1.0 / (1.0 + std::exp(-1.5 * normal(rng)));
    }
    InverseInput in{L, std::vector<double>(size_t(kC) * kC, 0.0)};
    for (int s = 0; s < L; ++s) {
        for (int m = 0; m < s; ++m) {
            double dot = 0;
            for (int i = 0; i < kS; ++i) {
                dot += k[size_t(s) * kS + i] * k[size_t(m) * kS + i];
            }
            in.A[size_t(s) * kC + m] = beta[s] * std::exp(G[s] - G[m]) * dot;
        }
    }
    return in;
}

// The specification's forward substitution (prep_chunk_host), one column after another.
std::vector<double> inverse_by_substitution(const std::vector<double> & A) {
    using fusekit_gdn_tc::kC;
    std::vector<double> P(size_t(kC) * kC, 0.0);
    for (int col = 0; col < kC; ++col) {
        for (int r = col; r < kC; ++r) {
            double acc = 0;
            for (int m = col; m < r; ++m) {
                acc += A[size_t(r) * kC + m] * P[size_t(m) * kC + col];
            }
            P[size_t(r) * kC + col] = r == col ? 1.0 : -acc;
        }
    }
    return P;
}

// The blocked inverse in Real, with nthr turn-taking workers (nthr = 1: one worker, no-op barrier), its matrices' rows
// ld floats apart (ld > kC: the device's padded rows; the padding starts as NaN and is never read); P comes back kC
// wide.
template <typename Real>
std::vector<Real> inverse_blocked(const std::vector<double> & A64, int nthr, bool start_reversed, int sabotage,
                                  int ld = fusekit_gdn_tc::kC) {
    using fusekit_gdn_tc::kC;
    std::vector<Real> A(size_t(kC) * ld, Real(NAN)), P(size_t(kC) * ld, Real(NAN)), X(size_t(kC) * ld, Real(NAN));
    for (int r = 0; r < kC; ++r) {
        for (int c = 0; c < kC; ++c) {
            A[size_t(r) * ld + c] = Real(A64[size_t(r) * kC + c]);
        }
    }
    auto packed = [&] {
        std::vector<Real> out(size_t(kC) * kC);
        for (int r = 0; r < kC; ++r) {
            std::copy_n(P.begin() + ptrdiff_t(r) * ld, kC, out.begin() + ptrdiff_t(r) * kC);
        }
        return out;
    };
    if (nthr == 1) {
        fusekit_gdn_tc::invert_unit_lower_blocked(A.data(), P.data(), X.data(), 0, 1, NoBarrier{}, sabotage, ld);
        return packed();
    }
    TurnTakingCta            cta(nthr, start_reversed);
    std::vector<std::thread> workers;
    for (int tid = 0; tid < nthr; ++tid) {
        workers.emplace_back([&, tid] {
            cta.wait_turn(tid);
            fusekit_gdn_tc::invert_unit_lower_blocked(A.data(), P.data(), X.data(), tid, nthr, TurnBarrier{&cta, tid},
                                                      sabotage, ld);
            cta.hand_over();
        });
    }
    for (auto & t : workers) t.join();
    return packed();
}

template <typename Real> double max_relative_difference(const std::vector<Real> & x, const std::vector<double> & ref) {
    double diff = 0, scale = 0;
    for (size_t e = 0; e < ref.size(); ++e) {
        diff  = std::max(diff, std::abs(double(x[e]) - ref[e]));  // NaN (an element never written) makes it NaN
        scale = std::max(scale, std::abs(ref[e]));
        if (std::isnan(double(x[e]))) {
            return INFINITY;
        }
    }
    return diff / scale;
}

}  // namespace

int main(int argc, char ** argv) {
    const bool sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;
    std::mt19937 rng(20261130u);
    // T: one token, less than a chunk, exactly one chunk, one token over, several, long. H_v = 2 H_k
    // everywhere (tiling), B = 2, K > 1 snapshots (more than T for T = 1, across a chunk edge for
    // C = 16), column slices narrower than S (j0 > 0), chunk sizes 64, 16 and 1 (= serial).
    const Case cases[] = {
        {128, 2, 4, 1, 2, 2, 1, 64, 32, "T=1, 35B head size"},
        {128, 2, 4, 1, 2, 2, 3, 64, 128, "T=1 < K=3"},
        {64, 2, 4, 7, 2, 2, 1, 64, 64, "T=7"},
        {128, 2, 4, 64, 2, 2, 2, 64, 32, "T=64, one full chunk, K=2"},
        {128, 2, 4, 65, 2, 2, 1, 64, 32, "T=65, one token over"},
        {64, 2, 4, 65, 2, 2, 1, 64, 16, "T=65, S=64"},
        {64, 2, 4, 200, 2, 2, 1, 64, 64, "T=200"},
        {64, 2, 4, 200, 2, 1, 20, 16, 32, "T=200, C=16, K=20 spans chunks, q/k broadcast over sequences"},
        {32, 2, 4, 63, 2, 2, 4, 1, 32, "C=1: the chunked phases degenerate to the serial rule"},
        {128, 2, 4, 1000, 2, 2, 1, 64, 64, "T=1000, 35B head size"},
        {64, 2, 4, 1000, 2, 2, 3, 64, 64, "T=1000, K=3"},
        {64, 2, 4, 130, 2, 2, 4, 64, 32, "T=130, K=4 through the fused cache-write path", true},
        {64, 2, 4, 300, 2, 2, 2, 64, 32, "test-backend-ops inputs: permuted q/k/v, g down to -20", false, true},
        {128, 2, 4, 130, 2, 1, 3, 64, 32, "T=130, q/k broadcast, K=3 across a chunk edge"},
        {128, 2, 4, 150, 1, 1, 2, 64, 32, "test-backend-ops inputs at S=128", false, true},
    };
    const double kTolDouble = 1e-10, kTolFloat = 2e-6;
    int checks = 0, failures = 0;
    double worst_double = 0, worst_float = 0;
    // One implementation's four comparisons (double / float, output / state) against the reference: counted, the
    // failures named (outside --sabotage), the worst errors kept.
    const double kTols[4]  = {kTolDouble, kTolDouble, kTolFloat, kTolFloat};
    const char * kNames[4] = {"double out", "double state", "float out", "float state"};
    auto tally = [&](const char * impl, const std::vector<double> & out_d, const std::vector<float> & out_f,
                     const Inputs & in, const std::vector<double> & ref, const char * line_start) {
        const double errs[4] = {rel_error(out_d, ref, 0, in.attn_elems), rel_error(out_d, ref, in.attn_elems, in.dst_elems),
                                rel_error(out_f, ref, 0, in.attn_elems), rel_error(out_f, ref, in.attn_elems, in.dst_elems)};
        std::printf("%s out/state err: double %.1e %.1e  float %.1e %.1e\n", line_start, errs[0], errs[1], errs[2], errs[3]);
        for (int e = 0; e < 4; ++e) {
            const bool ok = errs[e] < kTols[e];
            ++checks;
            failures += ok ? 0 : 1;
            if (!ok && !sabotage) {
                std::printf("  WRONG %s, %s: %.3e >= %.0e\n", impl, kNames[e], errs[e], kTols[e]);
            }
        }
        if (!sabotage) {
            worst_double = std::max({worst_double, errs[0], errs[1]});
            worst_float  = std::max({worst_float, errs[2], errs[3]});
        }
    };
    for (const Case & c : cases) {
        const Inputs              in  = make_inputs(c, rng);
        const std::vector<double> ref = serial_reference(in.p);
        const int                 sab = sabotage ? kSabotageMaskDiagonal : kSabotageNone;
        char                      line[256];
        std::snprintf(line, sizeof(line), "S=%3d H_k=%d H_v=%d T=%4d B=%d K=%2d C=%2d cols=%3d (%s)\n ", c.S, c.H_k, c.H_v,
                      c.T, c.B, c.K, c.C, c.n_cols, c.what);
        tally("chunked", chunked<double>(in, c, sab), chunked<float>(in, c, sab), in, ref, line);
        if (c.S != fusekit_gdn_tc::kS || c.C != fusekit_gdn_tc::kC || c.cache_path) {
            continue;  // the two passes take the 35B head size and chunks of 64 (the cache path: step 1 only, for now)
        }
        for (const bool split : {false, true}) {
            tally(split ? "chain and output" : "two passes", tensor_core_spec<double>(in, c, sab, split),
                  tensor_core_spec<float>(in, c, sab, split), in, ref,
                  split ? "  chain and output (step 2b):" : "  two passes (step 2a):");
        }
    }
    // The prep pass's blocked inverse: a full chunk and a partial one (rows past L are zero), weak and strong decay.
    // double: 1e-12 (two orders of the same sums); float: 1e-5 (P's entries are sums of products of up to 64 factors
    // of size <= 1; measured about 1e-7); 256 turn-taking workers: bit-identical to one worker.
    const struct { int L; double g_scale, shared; const char * what; } inverse_cases[] = {
        {64, 0.05, 0.0, "full chunk, weak decay"},
        {64, 0.02, 3.0, "full chunk, coupled keys"},
        {64, 2.0, 0.0, "full chunk, strong decay"},
        {37, 0.3, 1.0, "partial chunk, L = 37"}};
    for (const auto & ic : inverse_cases) {
        const InverseInput        in   = make_inverse_input(rng, ic.L, ic.g_scale, ic.shared);
        const std::vector<double> spec = inverse_by_substitution(in.A);
        const int                 sab  = sabotage ? 1 : 0;
        const double              e_d  = max_relative_difference(inverse_blocked<double>(in.A, 1, false, sab), spec);
        const auto                one  = inverse_blocked<float>(in.A, 1, false, sab);
        const double              e_f  = max_relative_difference(one, spec);
        std::printf("blocked inverse (%s): double %.1e, float %.1e against forward substitution\n", ic.what, e_d, e_f);
        for (const double e : {e_d < 1e-12 ? 0.0 : 1.0, e_f < 1e-5 ? 0.0 : 1.0}) {
            ++checks;
            failures += e > 0 ? 1 : 0;
        }
        if (!sabotage) {
            for (bool start_reversed : {false, true}) {
                const auto cta = inverse_blocked<float>(in.A, 256, start_reversed, 0);
                const bool ok  = std::memcmp(cta.data(), one.data(), one.size() * sizeof(float)) == 0;
                ++checks;
                failures += ok ? 0 : 1;
                std::printf("  256 turn-taking workers, %s order first: %s\n", start_reversed ? "reverse" : "forward",
                            ok ? "bit-identical to one worker" : "WRONG, differs from one worker");
            }
            // the device's padded rows (NaN padding: a read of it would show)
            const auto padded = inverse_blocked<float>(in.A, 256, false, 0, fusekit_gdn_tc::kC + fusekit_gdn_tc::kPadBanks);
            const bool ok     = std::memcmp(padded.data(), one.data(), one.size() * sizeof(float)) == 0;
            ++checks;
            failures += ok ? 0 : 1;
            std::printf("  256 workers, rows of %d floats: %s\n", fusekit_gdn_tc::kC + fusekit_gdn_tc::kPadBanks,
                        ok ? "bit-identical to one worker" : "WRONG, differs from one worker");
        }
    }
    if (!sabotage) {
        // The kernel's CTA shape: 256 workers, S = 128, C = 64, 32 columns; T = 150 is three chunks (the
        // last one partial) and K = 70 snapshot slots reach back across a chunk edge.
        const Case   c   = {128, 1, 2, 150, 1, 1, 70, 64, 32, "CTA schedules"};
        const Inputs in  = make_inputs(c, rng);
        const auto   one = chunked<float>(in, c, kSabotageNone);
        for (bool start_reversed : {false, true}) {
            const auto cta = chunked_cta(in, c, 256, start_reversed);
            const bool ok  = std::memcmp(cta.data(), one.data(), one.size() * sizeof(float)) == 0;
            ++checks;
            failures += ok ? 0 : 1;
            std::printf("256 turn-taking workers, %s order first: %s the one-worker result\n",
                        start_reversed ? "reverse" : "forward", ok ? "bit-identical to" : "WRONG, differs from");
        }
    }
    if (sabotage) {
        std::printf("sabotage: %d of %d comparisons wrong (all must be)\n", failures, checks);
        return failures == checks ? 0 : 1;
    }
    std::printf("worst relative error: double %.2e (limit %.0e), float %.2e (limit %.0e)\n", worst_double, kTolDouble,
                worst_float, kTolFloat);
    std::printf("%d of %d host checks passed\n", checks - failures, checks);
    return failures == 0 ? 0 : 1;
}
