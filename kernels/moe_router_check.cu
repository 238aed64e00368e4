// Standalone check and timing of fusekit's MoE router and tail kernels (fusekit-moe-router.cuh).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels -o moe_router_check kernels/moe_router_check.cu
//   ./moe_router_check [--sabotage] [--json FILE]
//
// Check: random inputs (fresh per case), outputs poisoned with NaN before the launch, compared with
// a float64 reference: the selected ids must be identical (the reference breaks ties the way stock
// topk_moe does: the lower expert id first) and weights / tail outputs within a relative error of
// 1e-5. Cases with tied logits use identical weight rows, so the fp32 logits tie exactly too.
// --sabotage runs the kernels with their sabotage switch and exits 0 only if every check FAILS.
// Each router case runs the selection by rounds of warp argmax (the plain kernel, stock topk_moe's order), the
// experiment fusion-3-router-ahead (weights loaded before the wait, with the rounds) and the selection by rank
// (fusion-3's default in ggml since session 13), checked alike; the rank kernel's ids and weights must also equal the
// plain kernel's bit for bit (its claim: the same selection, arithmetic unchanged).
// Timing: CUDA events around 200 back-to-back launches, median of 15 such batches (launch cost
// included, inputs L2-resident as they are in a decode step).
#include "fusekit-moe-router.cuh"
#include "standalone.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>


namespace {

using fusekit_moe::PlainHooks;

__device__ unsigned g_ticket[1];

struct RouterCase {
    int n_embd, n_expert, n_used;
    bool norm;
    float scale;
    bool ties;
    const char * what;
};

const RouterCase kRouterCases[] = {
    {2048, 256, 8, true, 1.0f, false, "35B-A3B router"},
    {2048, 256, 8, false, 1.0f, false, "35B-A3B router, no norm"},
    {2048, 256, 8, true, 2.5f, false, "router with scale"},
    {2048, 256, 7, true, 1.0f, true, "router, a tied pair split by k = 7"},
    {2048, 256, 1, true, 1.0f, false, "router k = 1"},
    {7168, 288, 8, true, 1.0f, false, "288 experts"},
    {1024, 576, 8, true, 1.0f, false, "576 experts"},
    {64, 8, 3, true, 1.0f, true, "8 experts, a tied pair split by k = 3"},
    {96, 4, 4, true, 1.0f, false, "k = all experts"},
    {2, 2, 1, false, 1.0f, false, "smallest"},
};

struct TailCase {
    int n_embd, n_used;
    bool moved;  // weighted expert sum inside the tail (else moe_out is an input)
    bool expert_scale;
    const char * what;
};

const TailCase kTailCases[] = {
    {2048, 8, true, false, "35B-A3B tail (sum + shared + residual)"},
    {2048, 8, false, false, "35B-A3B tail, sum kept in ggml"},
    {2048, 8, true, true, "tail with expert scale"},
    {64, 2, true, false, "small tail"},
    {300, 15, true, true, "odd tail, 15 experts"},
};

double rel_err(const std::vector<float> & out, const std::vector<double> & ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        if (!std::isfinite(out[i])) {
            return INFINITY;
        }
        num += (out[i] - ref[i]) * (out[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}


// The float64 router: logits, softmax, top-k (value desc, then id asc), normalise, scale.
void router_reference(const RouterCase & c, const std::vector<float> & w, const std::vector<float> & x,
                      std::vector<int> & ids, std::vector<double> & weights) {
    std::vector<double> logit(c.n_expert);
    for (int e = 0; e < c.n_expert; ++e) {
        double acc = 0;
        for (int k = 0; k < c.n_embd; ++k) acc += double(w[size_t(e) * c.n_embd + k]) * x[k];
        logit[e] = acc;
    }
    const double mx = *std::max_element(logit.begin(), logit.end());
    double sum = 0;
    std::vector<double> prob(c.n_expert);
    for (int e = 0; e < c.n_expert; ++e) sum += (prob[e] = std::exp(logit[e] - mx));
    for (double & p : prob) p /= sum;
    std::vector<int> order(c.n_expert);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
    ids.assign(order.begin(), order.begin() + c.n_used);
    weights.resize(c.n_used);
    double wsum = 0;
    for (int k = 0; k < c.n_used; ++k) wsum += (weights[k] = prob[ids[k]]);
    for (double & v : weights) v = (c.norm ? v / std::max(wsum, 6.103515625e-5) : v) * c.scale;
}

}  // namespace

int main(int argc, char ** argv) {
    const fusekit_standalone::Options options = fusekit_standalone::parse_options(argc, argv);
    const bool sabotage = options.sabotage;
    int device = 0;
    CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    unsigned * ticket = nullptr;
    CHECK(cudaGetSymbolAddress(reinterpret_cast<void **>(&ticket), g_ticket));

    std::mt19937 rng(20261201);
    std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"sabotage\": " + (sabotage ? "true" : "false") +
                       ", \"router\": [";
    int failures = 0, checks = 0;

    std::printf("%-42s %8s %10s %9s %9s\n", "router case", "ids", "rel_err", "us", "verdict");
    for (const RouterCase & c : kRouterCases) {
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f), wdist(-0.1f, 0.1f);
        std::vector<float> w(size_t(c.n_expert) * c.n_embd), x(c.n_embd);
        for (int e = 0; e < c.n_expert; ++e) {
            // ties: rows 2j and 2j+1 are equal, so each logit appears twice, bit for bit
            const int source = c.ties ? (e & ~1) : e;
            for (int k = 0; k < c.n_embd; ++k) {
                w[size_t(e) * c.n_embd + k] = source == e ? wdist(rng) : w[size_t(source) * c.n_embd + k];
            }
        }
        for (float & v : x) v = dist(rng);
        std::vector<int> ref_ids;
        std::vector<double> ref_w;
        router_reference(c, w, x, ref_ids, ref_w);

        float * dw = nullptr, * dx = nullptr, * dlogits = nullptr, * dweights = nullptr;
        int32_t * dids = nullptr;
        CHECK(cudaMalloc(&dw, w.size() * 4));
        CHECK(cudaMalloc(&dx, x.size() * 4));
        CHECK(cudaMalloc(&dlogits, size_t(c.n_expert) * 4));
        CHECK(cudaMalloc(&dweights, size_t(c.n_used) * 4));
        CHECK(cudaMalloc(&dids, size_t(c.n_used) * 4));
        CHECK(cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));

        fusekit_moe::RouterParams p{};
        p.w = dw; p.x = dx; p.logits = dlogits; p.ids = dids; p.weights = dweights; p.ticket = ticket;
        p.n_embd = c.n_embd; p.n_expert = c.n_expert; p.n_used = c.n_used;
        p.gemv_threads = fusekit_moe::mmvf_block_size(c.n_embd);
        p.norm = c.norm ? 1 : 0; p.clamp = c.norm ? 6.103515625e-5f : -INFINITY; p.scale = c.scale;
        p.sabotage = sabotage ? 1 : 0;
        void (*kernel)(fusekit_moe::RouterParams) = nullptr;
        fusekit_moe::router_kernel_for<PlainHooks, 0, false>(c.n_expert, &kernel);  // the argmax rounds
        if (kernel == nullptr || !fusekit_moe::router_supported(c.n_embd, c.n_expert, c.n_used)) {
            std::fprintf(stderr, "unsupported router case %s\n", c.what);
            return 2;
        }
        // One kernel: poisoned outputs, one launch, ids and weights against the reference, then its timing.
        struct Outcome {
            bool ids_ok;
            double rel;
            bool ok;
            double us;
            std::vector<int32_t> ids;
            std::vector<float> weights;
        };
        auto run_checked = [&](void (*k)(fusekit_moe::RouterParams), const char * label) {
            CHECK(cudaMemset(dweights, 0xff, size_t(c.n_used) * 4));  // NaN
            CHECK(cudaMemset(dids, 0xff, size_t(c.n_used) * 4));      // -1
            k<<<fusekit_moe::router_grid(p), fusekit_moe::kCta>>>(p);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            std::vector<int32_t> ids(c.n_used);
            std::vector<float> out(c.n_used);
            CHECK(cudaMemcpy(ids.data(), dids, ids.size() * 4, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(out.data(), dweights, out.size() * 4, cudaMemcpyDeviceToHost));
            Outcome o{std::equal(ids.begin(), ids.end(), ref_ids.begin()), rel_err(out, ref_w), false, 0.0, ids, out};
            o.ok = o.ids_ok && o.rel < 1e-5;
            ++checks;
            failures += o.ok ? 0 : 1;
            if (!sabotage) {
                o.us = fusekit_standalone::median_launch_us([&](int) { k<<<fusekit_moe::router_grid(p), fusekit_moe::kCta>>>(p); }, 20, 200, 15);
            }
            std::printf("%-42s %8s %10.2e %9.2f %9s\n", label, o.ids_ok ? "same" : "DIFFER", o.rel, o.us, o.ok ? "ok" : "WRONG");
            return o;
        };
        const Outcome plain = run_checked(kernel, c.what);
        // The experiment fusion-3-router-ahead: weights loaded before the wait (AHEAD = 4), checked the same way.
        void (*ahead_kernel)(fusekit_moe::RouterParams) = nullptr;
        fusekit_moe::router_kernel_for<PlainHooks, 4, false>(c.n_expert, &ahead_kernel);
        const Outcome ahead = run_checked(ahead_kernel, "  (weights loaded ahead)");
        // The selection by rank (fusion-3's default): the reference check, and the same bits as the plain kernel.
        void (*rank_kernel)(fusekit_moe::RouterParams) = nullptr;
        fusekit_moe::router_kernel_for<PlainHooks, 0, true>(c.n_expert, &rank_kernel);
        const Outcome rank = run_checked(rank_kernel, "  (experts picked by rank)");
        // Its baseline is the plain kernel without sabotage, so that a sabotaged rank kernel fails this check too.
        std::vector<int32_t> base_ids = plain.ids;
        std::vector<float> base_w = plain.weights;
        if (sabotage) {
            fusekit_moe::RouterParams honest = p;
            honest.sabotage = 0;
            kernel<<<fusekit_moe::router_grid(honest), fusekit_moe::kCta>>>(honest);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(base_ids.data(), dids, base_ids.size() * 4, cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(base_w.data(), dweights, base_w.size() * 4, cudaMemcpyDeviceToHost));
        }
        const bool rank_same_bits =
            rank.ids == base_ids && std::memcmp(rank.weights.data(), base_w.data(), base_w.size() * 4) == 0;
        ++checks;
        failures += rank_same_bits ? 0 : 1;
        std::printf("%-42s %8s\n", "  (rank: bits equal to the plain kernel)", rank_same_bits ? "same" : "DIFFER");
        char row[1024];
        std::snprintf(row, sizeof row,
                      "%s{\"what\": \"%s\", \"n_embd\": %d, \"n_expert\": %d, \"n_used\": %d, \"ids_identical\": %s, "
                      "\"rel_err\": %.3e, \"ok\": %s, \"us\": %.3f, \"ahead\": {\"ids_identical\": %s, \"rel_err\": %.3e, "
                      "\"ok\": %s, \"us\": %.3f}, \"rank\": {\"ids_identical\": %s, \"rel_err\": %.3e, \"ok\": %s, "
                      "\"us\": %.3f, \"same_bits_as_plain\": %s}}",
                      json.back() == '[' ? "" : ", ", c.what, c.n_embd, c.n_expert, c.n_used, plain.ids_ok ? "true" : "false",
                      std::isfinite(plain.rel) ? plain.rel : 1e300, plain.ok ? "true" : "false", plain.us,
                      ahead.ids_ok ? "true" : "false", std::isfinite(ahead.rel) ? ahead.rel : 1e300,
                      ahead.ok ? "true" : "false", ahead.us, rank.ids_ok ? "true" : "false",
                      std::isfinite(rank.rel) ? rank.rel : 1e300, rank.ok ? "true" : "false", rank.us,
                      rank_same_bits ? "true" : "false");
        json += row;
        CHECK(cudaFree(dw)); CHECK(cudaFree(dx)); CHECK(cudaFree(dlogits)); CHECK(cudaFree(dweights)); CHECK(cudaFree(dids));
    }

    json += "], \"tail\": [";
    const int router_checks = checks;
    std::printf("%-42s %8s %10s %9s %9s\n", "tail case", "", "rel_err", "us", "verdict");
    for (const TailCase & c : kTailCases) {
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f), gdist(-0.05f, 0.05f);
        const int n = c.n_embd, k = c.n_used;
        std::vector<float> wg(n), x(n), experts(size_t(k) * n), escale(k), weights(k), moe(n), shexp(n), residual(n);
        for (float & v : wg) v = gdist(rng);
        for (auto * vec : {&x, &experts, &escale, &weights, &shexp, &residual}) {
            for (float & v : *vec) v = dist(rng);
        }
        std::vector<double> ref(n);
        double g = 0;
        for (int i = 0; i < n; ++i) g += double(wg[i]) * x[i];
        const double sig = 1.0 / (1.0 + std::exp(-g));
        for (int i = 0; i < n; ++i) {
            double m = 0;
            for (int e = 0; e < k; ++e) m += double(experts[size_t(e) * n + i]) * (c.expert_scale ? escale[e] : 1.0) * weights[e];
            moe[i] = float(m);  // the input when the sum stays in ggml
            ref[i] = (c.moved ? m : double(moe[i])) + double(shexp[i]) * sig + residual[i];
        }
        auto upload = [](const std::vector<float> & h) {
            float * d = nullptr;
            CHECK(cudaMalloc(&d, h.size() * 4));
            CHECK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
            return d;
        };
        float * dwg = upload(wg), * dx = upload(x), * dexp = upload(experts), * dsc = upload(escale);
        float * dwt = upload(weights), * dmoe = upload(moe), * dsh = upload(shexp), * dres = upload(residual);
        float * ddst = nullptr;
        CHECK(cudaMalloc(&ddst, size_t(n) * 4));
        CHECK(cudaMemset(ddst, 0xff, size_t(n) * 4));  // NaN

        fusekit_moe::TailParams p{};
        p.w_gate = dwg; p.x = dx;
        p.experts = c.moved ? dexp : nullptr;
        p.expert_scale = c.moved && c.expert_scale ? dsc : nullptr;
        p.weights = c.moved ? dwt : nullptr;
        p.moe_out = c.moved ? nullptr : dmoe;
        p.shexp = dsh; p.residual = dres; p.dst = ddst;
        p.n_embd = n; p.n_used = k; p.gemv_threads = fusekit_moe::mmvf_block_size(n);
        p.sabotage = sabotage ? 1 : 0;
        fusekit_moe::tail_kernel<PlainHooks><<<fusekit_moe::tail_grid(p), fusekit_moe::kCta>>>(p);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        std::vector<float> out(n);
        CHECK(cudaMemcpy(out.data(), ddst, out.size() * 4, cudaMemcpyDeviceToHost));
        const double rel = rel_err(out, ref);
        const bool ok = rel < 1e-5;
        ++checks;
        failures += ok ? 0 : 1;
        const double us = sabotage ? 0.0 : fusekit_standalone::median_launch_us([&](int) {
            fusekit_moe::tail_kernel<PlainHooks><<<fusekit_moe::tail_grid(p), fusekit_moe::kCta>>>(p);
        }, 20, 200, 15);
        std::printf("%-42s %8s %10.2e %9.2f %9s\n", c.what, "", rel, us, ok ? "ok" : "WRONG");
        char row[512];
        std::snprintf(row, sizeof row,
                      "%s{\"what\": \"%s\", \"n_embd\": %d, \"n_used\": %d, \"moved_sum\": %s, \"rel_err\": %.3e, "
                      "\"ok\": %s, \"us\": %.3f}",
                      checks > router_checks + 1 ? ", " : "", c.what, n, k, c.moved ? "true" : "false",
                      std::isfinite(rel) ? rel : 1e300, ok ? "true" : "false", us);
        json += row;
        for (float * d : {dwg, dx, dexp, dsc, dwt, dmoe, dsh, dres, ddst}) CHECK(cudaFree(d));
    }

    json += "], \"checks\": " + std::to_string(checks) + ", \"failures\": " + std::to_string(failures) + "}\n";
    return fusekit_standalone::finish(options, json, checks, failures);
}
