// Host-only pieces shared by fusion-4's two check programs (chunked_gdn_host_check.cu on the CPU,
// chunked_gdn_check.cu on a GPU): the random inputs of a case, laid out with ggml's strides, and the
// float64 serial recurrence of ggml-cpu/ops.cpp that both compare against.
#pragma once

#include "fusekit-chunked-gdn.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace fusekit_gdn_ref {

using fusekit_gdn::GdnParams;

constexpr double kSentinel = 12345.0;  // unwritten snapshot slots; no real value comes near it

struct Case {
    int S, H_k, H_v, T, B, Bq, K, C, n_cols;
    const char * what;
    bool         cache_path = false;  // snapshots to a separate "cache" buffer with a padded slot stride
    bool         backend_ops = false; // test-backend-ops' GATED_DELTA_NET inputs: permuted q/k/v (token and
                                      // head strides swapped), g ~ U(-20, -1e-4), v ~ U(-0.3, 5),
                                      // state and (pre-norm) q/k ~ U(-1, 1), beta ~ U(0, 1)
};

// Host data of one case: buffers with the op's strides, and the params that view them.
struct Inputs {
    std::vector<float> qbuf, kbuf, vbuf, g, beta, state;
    GdnParams          p{};
    size_t             dst_elems = 0, attn_elems = 0;
};

inline Inputs make_inputs(const Case & c, std::mt19937 & rng) {
    std::normal_distribution<float>       normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    Inputs in;
    const int S = c.S;
    // q, k: [S, H_k, T, Bq] in buffers whose token stride has 8 floats of padding (conv output views).
    int64_t qk_s1 = S, qk_s2 = int64_t(S) * c.H_k + 8, qk_s3 = qk_s2 * c.T;
    // v: [S, H_v, T, B] inside a packed row of (q k v)-sized tokens, head stride padded by 4 floats.
    int64_t v_s1 = S + 4, v_s2 = v_s1 * c.H_v + int64_t(2) * S * c.H_k, v_s3 = v_s2 * c.T;
    if (c.backend_ops) {  // ggml_permute(.., 0, 2, 1, 3) of a contiguous [S, T, H, B]
        qk_s1 = int64_t(S) * c.T, qk_s2 = S, qk_s3 = qk_s1 * c.H_k;
        v_s1 = int64_t(S) * c.T, v_s2 = S, v_s3 = v_s1 * c.H_v;
    }
    std::uniform_real_distribution<float> sym(-1.0f, 1.0f), v_ops(-0.3f, 5.0f), g_ops(-20.0f, -1e-4f);
    in.qbuf.assign(size_t(qk_s3) * c.Bq, std::nanf(""));  // padding is NaN: reading it poisons the result
    in.kbuf.assign(size_t(qk_s3) * c.Bq, std::nanf(""));
    in.vbuf.assign(size_t(v_s3) * c.B, std::nanf(""));
    auto l2_rows = [&](std::vector<float> & buf) {
        for (int b = 0; b < c.Bq; ++b)
            for (int t = 0; t < c.T; ++t)
                for (int h = 0; h < c.H_k; ++h) {
                    float * row = &buf[b * qk_s3 + t * qk_s2 + h * qk_s1];
                    double  ss  = 0;
                    for (int i = 0; i < S; ++i) {
                        row[i] = c.backend_ops ? sym(rng) : normal(rng);
                        ss += double(row[i]) * row[i];
                    }
                    const float inv = float(1.0 / std::sqrt(ss + 1e-6));  // the model's eps
                    for (int i = 0; i < S; ++i) row[i] *= inv;
                }
    };
    l2_rows(in.qbuf);
    l2_rows(in.kbuf);
    for (int b = 0; b < c.B; ++b)
        for (int t = 0; t < c.T; ++t)
            for (int h = 0; h < c.H_v; ++h)
                for (int j = 0; j < S; ++j) in.vbuf[b * v_s3 + t * v_s2 + h * v_s1 + j] = c.backend_ops ? v_ops(rng) : normal(rng);
    const size_t gates = size_t(c.H_v) * c.T * c.B;
    in.g.resize(gates);
    in.beta.resize(gates);
    for (size_t i = 0; i < gates; ++i) {
        const float u = uni(rng);
        in.g[i]       = u < 0.05f ? 0.0f : -std::exp(std::log(1e-3f) + (std::log(4.0f) - std::log(1e-3f)) * uni(rng));
        in.beta[i]    = 1.0f / (1.0f + std::exp(-1.5f * normal(rng)));
        if (c.backend_ops) {
            in.g[i]    = g_ops(rng);
            in.beta[i] = uni(rng);
        }
    }
    in.state.resize(size_t(S) * S * c.H_v * c.B);
    for (auto & x : in.state) x = c.backend_ops ? sym(rng) : 0.3f * normal(rng);

    GdnParams & p = in.p;
    p.q = in.qbuf.data();
    p.k = in.kbuf.data();
    p.v = in.vbuf.data();
    p.g = in.g.data();
    p.beta = in.beta.data();
    p.state = in.state.data();
    p.S = S; p.H_v = c.H_v; p.H_k = c.H_k; p.T = c.T; p.B = c.B; p.rq3 = c.B / c.Bq;
    p.q_s1 = p.k_s1 = qk_s1; p.q_s2 = p.k_s2 = qk_s2; p.q_s3 = p.k_s3 = qk_s3;
    p.v_s1 = v_s1; p.v_s2 = v_s2; p.v_s3 = v_s3;
    p.K = c.K;
    p.scale = 1.0f / sqrtf(float(S));
    in.attn_elems = size_t(S) * c.H_v * c.T * c.B;
    in.dst_elems  = in.attn_elems + size_t(c.K) * S * S * c.H_v * c.B;
    return in;
}

// float64 serial recurrence, line for line the semantics of ggml_compute_forward_gated_delta_net_one_chunk
// (scalar gate): decay, delta = (v - S^T k) beta, S += k delta^T, o = scale S^T q, snapshot slot T-1-t.
// (sequence, head) pairs are independent and write disjoint parts of dst: `threads` workers split them.
inline std::vector<double> serial_reference(const GdnParams & p, int threads = 1) {
    const int64_t S = p.S, H = p.H_v;
    const int64_t attn = S * H * p.T * p.B, snap = S * S * H * p.B;
    std::vector<double> dst(size_t(attn + p.K * snap), kSentinel);
    auto one_head = [&](int64_t iv3, int64_t iv1) {
        std::vector<double> M(static_cast<size_t>(S * S)), delta(static_cast<size_t>(S));
        const int64_t iq1 = iv1 % p.H_k, iq3 = iv3 / p.rq3;  // tiled heads, broadcast sequences
        const float * s_in = p.state + (iv3 * H + iv1) * S * S;
        for (int64_t x = 0; x < S * S; ++x) M[x] = s_in[x];  // M[j*S + i] = S[i][j]
        for (int64_t t = 0; t < p.T; ++t) {
            const float * q = p.q + iq3 * p.q_s3 + t * p.q_s2 + iq1 * p.q_s1;
            const float * k = p.k + iq3 * p.k_s3 + t * p.k_s2 + iq1 * p.k_s1;
            const float * v = p.v + iv3 * p.v_s3 + t * p.v_s2 + iv1 * p.v_s1;
            const double  beta = p.beta[(iv3 * p.T + t) * H + iv1];
            const double  a    = std::exp(double(p.g[(iv3 * p.T + t) * H + iv1]));
            for (auto & x : M) x *= a;
            for (int64_t j = 0; j < S; ++j) {
                double sum = 0;
                for (int64_t i = 0; i < S; ++i) sum += M[j * S + i] * k[i];
                delta[j] = (v[j] - sum) * beta;
            }
            for (int64_t j = 0; j < S; ++j)
                for (int64_t i = 0; i < S; ++i) M[j * S + i] += delta[j] * k[i];
            for (int64_t j = 0; j < S; ++j) {
                double sum = 0;
                for (int64_t i = 0; i < S; ++i) sum += M[j * S + i] * q[i];
                dst[((iv3 * p.T + t) * H + iv1) * S + j] = sum * double(p.scale);
            }
            const int64_t slot = p.T - 1 - t;
            if (slot >= 0 && slot < p.K) {
                std::copy(M.begin(), M.end(), dst.begin() + attn + slot * snap + (iv3 * H + iv1) * S * S);
            }
        }
    };
    const int64_t pairs = int64_t(p.B) * H;
    auto worker = [&](int w) {
        for (int64_t x = w; x < pairs; x += threads) one_head(x / H, x % H);
    };
    if (threads <= 1) {
        worker(0);
    } else {
        std::vector<std::thread> pool;
        for (int w = 0; w < threads; ++w) pool.emplace_back(worker, w);
        for (auto & t : pool) t.join();
    }
    return dst;
}

template <typename Real>
inline double rel_error(const std::vector<Real> & x, const std::vector<double> & ref, size_t lo, size_t hi) {
    double worst = 0, scale = 0;
    for (size_t i = lo; i < hi; ++i) {
        scale = std::max(scale, std::fabs(ref[i] == kSentinel ? 0.0 : ref[i]));
        const double d = std::fabs(double(x[i]) - ref[i]);
        worst = std::max(worst, std::isfinite(d) ? d : INFINITY);
    }
    return worst / std::max(scale, 1e-30);
}


}  // namespace fusekit_gdn_ref
