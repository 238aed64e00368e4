// CPU test of fusion-2's matching (kernels/fusekit-gdn-chains.cu, host code only; no kernel is launched):
// builds a qwen35moe gated-delta-net layer as src/models/qwen35moe.cpp does, allocates it with ggml-alloc
// (the allocator llama.cpp's scheduler uses, in-place reuse included), runs fusekit_gdn_chains_plan and
// checks which nodes it claims, then walks the nodes as the patched ggml_cuda_try_fuse loop does and checks
// that every real node runs exactly once, in order, and every claimed node never runs on its own.
// Built with -DFUSEKIT_RESHAPE_RESIDUAL=1 (and the header of experiment fusion-2-reshape-residual on the include path),
// the walk also takes that experiment's epilogue (MUL_MAT, RESHAPE, ADD of one row) where ggml_cuda_try_fuse takes it;
// then --sabotage-residual uses the match without fusion-2's claims, as the version that failed on the H200 did.
// Build (needs a CPU build of the pinned tree for libggml-base):
//   nvcc -std=c++17 -I$T/ggml/include -I$T/ggml/src -I$T/ggml/src/ggml-cuda -Ikernels -I$CUBLAS_INCLUDE \
//        tests/cpp/gdn_chains_plan_test.cu -L$T/build-cpu/bin -lggml-base -o plan_test
// Built with -DFUSEKIT_GDN_WITHIN=1 and -DFUSEKIT_GDN_CHAINS_SOURCE naming a copy of fusekit-gdn-chains.cu patched by
// fusion-2-state-rows and fusion-2-within-gdn, it checks that experiment's fold of the q/k/beta launch too.
#ifndef FUSEKIT_GDN_WITHIN
#define FUSEKIT_GDN_WITHIN 0
#endif
#ifdef FUSEKIT_GDN_CHAINS_SOURCE
#include FUSEKIT_GDN_CHAINS_SOURCE
#else
#include "../../kernels/fusekit-gdn-chains.cu"
#endif

#ifndef FUSEKIT_RESHAPE_RESIDUAL
#define FUSEKIT_RESHAPE_RESIDUAL 0
#endif
#if FUSEKIT_RESHAPE_RESIDUAL
#include "fusekit-reshape-residual.cuh"
#endif

#include "ggml-alloc.h"
#include "ggml-backend.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

// ggml-cuda.cu defines this; the matcher only reaches it through CUDA_CHECK after a launch, which never happens here
void ggml_cuda_error(const char * stmt, const char * func, const char * file, int line, const char * msg) {
    std::fprintf(stderr, "unexpected CUDA error path: %s %s %s:%d %s\n", stmt, func, file, line, msg);
    std::abort();
}

// the same for what common.cuh's inline helpers name (never called here)
int ggml_cuda_get_device() {
    std::abort();
}
extern "C" const char * cublasGetStatusString(cublasStatus_t) {
    std::abort();
}
extern "C" CUresult cuGetErrorString(CUresult, const char **) {
    std::abort();
}

static int  failures          = 0;
static bool sabotage_residual = false;  // --sabotage-residual: the residual match ignores fusion-2's claims
#define EXPECT(cond, ...)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            std::printf(__VA_ARGS__);                                            \
            std::printf("\n");                                                   \
            ++failures;                                                          \
        }                                                                        \
    } while (0)

struct Layer {
    ggml_tensor * ssm_conv = nullptr;  // where the conv window is launched (FUSEKIT_GDN_CONV_WINDOW)
    ggml_tensor * out = nullptr;
    ggml_tensor * gdn = nullptr;
    ggml_tensor * silu_z = nullptr;
    ggml_tensor * add = nullptr;      // ADD(alpha, ssm_dt): where the alpha chain is launched
    ggml_tensor * sigmoid = nullptr;  // SIGMOID(beta): where q, k and beta are launched
    ggml_tensor * state_rows  = nullptr;  // build_rs's GET_ROWS of the state (skipped with FUSEKIT_GDN_STATE_ROWS)
    ggml_tensor * state_cache = nullptr;  // the layer's state cache, read in place then
    ggml_tensor * ssm_out     = nullptr;  // MUL_MAT(ssm_out), reshaped and added to the layer's input (the residual)
};

// Whether two tensors' bytes share an address (their extents as ggml_nbytes gives them).
static bool bytes_overlap(const ggml_tensor * a, const ggml_tensor * b) {
    const char * a0 = (const char *) a->data;
    const char * b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}

// One layer: the model's expression tree (build_layer_attn_linear, build_gdn_l2_norm, build_norm_gated).
// g: the graph the state updates are forward-expanded into as the model does (build_rs, build_conv_state);
// s_copy: the recurrent memory's row index input. cache_reader: a node reads the conv cache between the CPY of
// the window and SSM_CONV (the conv window must then stay on the stock path).
static Layer build_layer(ggml_context * ctx, ggml_context * ctx_w, ggml_cgraph * g, ggml_tensor * s_copy, ggml_tensor * x,
                         int64_t Hv, int64_t Hk, int64_t D, int64_t T, int64_t S, bool extra_reader,
                         bool cache_reader = false) {
    const int64_t n_embd = 256, key_dim = D * Hk, conv_dim = 2 * key_dim + D * Hv;
    const float   eps    = 1e-6f;
    Layer         L;
    if (x == nullptr) {
        x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n_embd, T, S);
        ggml_set_input(x);
    }
    // weights and recurrent states: their own buffer, as in llama.cpp (the graph allocator never reuses them)
    ggml_tensor * w_qkv   = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, n_embd, conv_dim);
    ggml_tensor * w_z     = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, n_embd, D * Hv);
    ggml_tensor * w_beta  = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, n_embd, Hv);
    ggml_tensor * w_alpha = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, n_embd, Hv);
    ggml_tensor * ssm_dt  = ggml_new_tensor_1d(ctx_w, GGML_TYPE_F32, Hv);
    ggml_tensor * ssm_a   = ggml_new_tensor_1d(ctx_w, GGML_TYPE_F32, Hv);
    ggml_tensor * conv_w  = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, 4, conv_dim);
    ggml_tensor * cache_r = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, 3 * conv_dim, S + 2);  // the layer's conv states
    ggml_tensor * cache_s = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, D * D * Hv, S + 2);  // the layer's states
    ggml_tensor * norm_w  = ggml_new_tensor_1d(ctx_w, GGML_TYPE_F32, D);
    ggml_tensor * w_out   = ggml_new_tensor_2d(ctx_w, GGML_TYPE_F32, D * Hv, n_embd);

    ggml_tensor * qkv  = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, w_qkv, x), conv_dim, T, S);
    ggml_tensor * z    = ggml_mul_mat(ctx, w_z, x);
    ggml_tensor * beta = ggml_reshape_4d(ctx, ggml_mul_mat(ctx, w_beta, x), 1, Hv, T, S);
    beta               = ggml_sigmoid(ctx, beta);
    L.sigmoid          = beta;
    ggml_tensor * alpha = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, w_alpha, x), Hv, T, S);
    L.add               = ggml_add(ctx, alpha, ssm_dt);
    ggml_tensor * gate  = ggml_mul(ctx, ggml_softplus(ctx, L.add), ssm_a);
    gate                = ggml_reshape_4d(ctx, gate, 1, Hv, T, S);

    // build_rs (a zero-sized clear, the rows of this ubatch's sequences, the extra rows: none) and build_conv_state
    // (the shifted window CPY forward-expanded first, as there), then SSM_CONV + SILU
    ggml_build_forward_expand(g, ggml_scale_inplace(ctx, ggml_view_1d(ctx, cache_r, 0, 0), 0));
    ggml_tensor * conv_states = ggml_get_rows(ctx, cache_r, ggml_view_1d(ctx, s_copy, S, 0));
    ggml_build_forward_expand(g, conv_states);
    ggml_tensor * extra = ggml_get_rows(ctx, cache_r, ggml_view_1d(ctx, s_copy, 0, S * sizeof(int32_t)));
    ggml_build_forward_expand(g, ggml_cpy(ctx, extra, ggml_view_2d(ctx, cache_r, 3 * conv_dim, 0, cache_r->nb[1], S * cache_r->nb[1])));
    conv_states           = ggml_reshape_3d(ctx, conv_states, 3, conv_dim, S);
    ggml_tensor * conv_in = ggml_concat(ctx, conv_states, ggml_transpose(ctx, qkv), 0);
    ggml_tensor * last    = ggml_view_3d(ctx, conv_in, 3, conv_dim, S, conv_in->nb[1], conv_in->nb[2], T * sizeof(float));
    ggml_tensor * update  = ggml_cpy(ctx, last, ggml_view_2d(ctx, cache_r, 3 * conv_dim, S, cache_r->nb[1], cache_r->nb[1]));
    ggml_build_forward_expand(g, update);
    if (cache_reader) {
        ggml_build_forward_expand(g, ggml_sum(ctx, update));
    }
    // build_rs of the recurrent state (between the window's CPY and SSM_CONV, as in the model)
    ggml_tensor * state = ggml_get_rows(ctx, cache_s, ggml_view_1d(ctx, s_copy, S, 0));
    ggml_build_forward_expand(g, state);
    state               = ggml_reshape_4d(ctx, state, D, D, Hv, S);
    L.ssm_conv          = ggml_ssm_conv(ctx, conv_in, conv_w);
    ggml_tensor * conv    = ggml_silu(ctx, L.ssm_conv);
    const size_t  row     = ggml_row_size(GGML_TYPE_F32, conv_dim);
    ggml_tensor * q = ggml_view_4d(ctx, conv, D, Hk, T, S, D * 4, row, row * T, 0);
    ggml_tensor * k = ggml_view_4d(ctx, conv, D, Hk, T, S, D * 4, row, row * T, key_dim * 4);
    ggml_tensor * v = ggml_view_4d(ctx, conv, D, Hv, T, S, D * 4, row, row * T, 2 * key_dim * 4);
    ggml_tensor * q_norm = ggml_rms_norm(ctx, q, eps / D);
    q = ggml_scale(ctx, q_norm, 1.0f / sqrtf(float(D)));
    k = ggml_scale(ctx, ggml_rms_norm(ctx, k, eps / D), 1.0f / sqrtf(float(D)));

    L.gdn = ggml_gated_delta_net(ctx, q, k, v, gate, beta, state, 1);
    // build_delta_net's new state (the output's tail) into the cache row kv_head = 1, forward-expanded at once as
    // the model does, so the CPY is the first node after GATED_DELTA_NET (stock's cache fusion)
    ggml_tensor * new_state = ggml_view_4d(ctx, L.gdn, D, D, Hv, S, D * 4, D * D * 4, D * D * Hv * 4, D * Hv * T * S * 4);
    ggml_build_forward_expand(g, ggml_cpy(ctx, new_state, ggml_view_2d(ctx, cache_s, D * D * Hv, S, cache_s->nb[1], cache_s->nb[1])));
    L.state_rows  = state->view_src;  // state is a reshape of the GET_ROWS
    L.state_cache = cache_s;
    ggml_tensor * o = ggml_view_4d(ctx, L.gdn, D, Hv, T, S, D * 4, D * Hv * 4, D * Hv * T * 4, 0);
    ggml_tensor * normed = ggml_mul(ctx, ggml_rms_norm(ctx, o, eps), norm_w);
    L.silu_z             = ggml_silu(ctx, ggml_reshape_4d(ctx, z, D, Hv, T, S));
    ggml_tensor * gated  = ggml_mul(ctx, normed, L.silu_z);
    L.ssm_out = ggml_mul_mat(ctx, w_out, ggml_reshape_3d(ctx, gated, D * Hv, T, S));
    L.out     = ggml_add(ctx, ggml_reshape_3d(ctx, L.ssm_out, n_embd, T, S), x);  // the residual
    if (extra_reader) {
        L.out = ggml_add(ctx, L.out, ggml_sum(ctx, q_norm));
    }
    return L;
}

// The patched ggml_cuda_try_fuse's walk over the nodes (roles only; stock fusions play no part here).
static int residual_epilogues = 0;  // MUL_MAT + RESHAPE + ADD taken as one launch by the last walk

static void walk(const ggml_cgraph * g, std::vector<int> & runs) {
    runs.assign(g->n_nodes, 0);
    residual_epilogues = 0;
    auto noop = [&](int j) { return is_noop(g->nodes[j]); };
    std::function<int(int)> try_fuse = [&](int i) -> int {
        switch (fusekit_gdn_chains_role(g, i)) {
            case fusekit_gdn_role::fused: {
                runs[i] += 100;  // the fused kernel, counted apart
                const int covered = plan.fused.at(i).covered;
                if (covered > 0) {
                    return covered;
                }
                [[fallthrough]];
            }
            case fusekit_gdn_role::skip: {
                int last = i;
                while (last + 1 < g->n_nodes &&
                       (fusekit_gdn_chains_role(g, last + 1) == fusekit_gdn_role::skip || noop(last + 1))) {
                    ++last;
                }
                if (last > i) {
                    return last - i;
                }
                const int covered = try_fuse(i + 1);
                if (covered == 0) {
                    ++runs[i + 1];
                }
                return 1 + covered;
            }
            default:
#if FUSEKIT_RESHAPE_RESIDUAL
                // ggml_cuda_try_fuse's MUL_MAT + ADD epilogue through one RESHAPE: the product's kernel also computes
                // the ADD two nodes on
                if (sabotage_residual ? fusekit_mul_mat_reshape_add(g, i)
                                      : fusekit_mul_mat_reshape_add_unclaimed(g, i, [&](int j) {
                                            return fusekit_gdn_chains_role(g, j) != fusekit_gdn_role::none;
                                        })) {
                    ++runs[i];
                    ++runs[i + 2];
                    ++residual_epilogues;
                    return 2;
                }
#endif
                return 0;
        }
    };
    for (int i = 0; i < g->n_nodes; ++i) {
        if (noop(i)) {
            continue;
        }
        const int skip = try_fuse(i);
        if (skip != 0) {
            i += skip;
            continue;
        }
        ++runs[i];
    }
}

static void run_case(const char * name, int64_t Hv, int64_t Hk, int64_t D, int64_t T, int64_t S, bool extra_reader,
                     bool expect_gate, bool expect_qk, bool expect_gated_norm, int n_layers = 1, bool cache_reader = false,
                     bool index_reused = false) {
    ggml_init_params params = { ggml_tensor_overhead() * 4096 + ggml_graph_overhead(), nullptr, true };
    ggml_context *   ctx    = ggml_init(params);
    ggml_context *   ctx_w  = ggml_init(params);
    ggml_cgraph *    g      = ggml_new_graph(ctx);
    ggml_tensor *    s_copy = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, S);
    ggml_set_input(s_copy);
    // n_layers layers in a row, each reading the one before (buffers of one layer handed on to the next)
    std::vector<Layer> layers;
    for (int l = 0; l < n_layers; ++l) {
        layers.push_back(build_layer(ctx, ctx_w, g, s_copy, l ? layers.back().out : nullptr, Hv, Hk, D, T, S,
                                     extra_reader, cache_reader));
    }
    ggml_set_output(layers.back().out);
    ggml_backend_buffer_t weights = ggml_backend_alloc_ctx_tensors_from_buft(ctx_w, ggml_backend_cpu_buffer_type());
    ggml_build_forward_expand(g, layers.back().out);
    // the conv window (experiment fusion-2-conv-window): at one token of one sequence, unless the cache is read early
    const bool expect_conv = FUSEKIT_GDN_CONV_WINDOW && T == 1 && S == 1 && !cache_reader;
    // the state read in place (experiment fusion-2-state-rows): at one token of one sequence, unless the allocator
    // hands the index's memory (s_copy, an input) to another node before the GATED_DELTA_NET reads it
    const bool expect_state = FUSEKIT_GDN_STATE_ROWS && T == 1 && S == 1 && !index_reused;
    // the q/k/beta launch folded into the GATED_DELTA_NET (experiment fusion-2-within-gdn): where that launch is
    // planned and the state is read in place, for heads of 32 to 128 floats
    const bool expect_within = FUSEKIT_GDN_WITHIN && expect_qk && expect_state && D >= 32 && D <= 128;

    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    EXPECT(ggml_gallocr_alloc_graph(galloc, g), "%s: allocation", name);
    if (getenv("FUSEKIT_GDN_DEBUG") != nullptr) {
        for (int i = 0; i < g->n_nodes; ++i) {
            const ggml_tensor * t = g->nodes[i];
            std::printf("  %2d %-16s %-12s data %p +%zu\n", i, ggml_op_desc(t), t->name, t->data, ggml_nbytes(t));
        }
    }

    fusekit_gdn_chains_plan(g, true);
    int n_skip = 0;
    for (int i = 0; i < g->n_nodes; ++i) {
        n_skip += fusekit_gdn_chains_role(g, i) == fusekit_gdn_role::skip;
    }
    int  i_sigmoid = -1;
    bool got_gate = true, got_qk = true, got_gn = true, got_conv = true, got_state = true;  // in every layer
    bool got_within = FUSEKIT_GDN_WITHIN != 0;
    for (const Layer & L : layers) {
        int i_gdn = -1, i_silu = -1, i_add = -1, i_conv = -1, i_state_rows = -1;
        for (int i = 0; i < g->n_nodes; ++i) {
            const ggml_tensor * t = g->nodes[i];
            i_conv       = t == L.ssm_conv ? i : i_conv;
            i_state_rows = t == L.state_rows ? i : i_state_rows;
            i_gdn     = t == L.gdn ? i : i_gdn;
            i_silu    = t == L.silu_z ? i : i_silu;
            i_add     = t == L.add ? i : i_add;
            i_sigmoid = t == L.sigmoid ? i : i_sigmoid;
        }
        auto fused_at = [&](int i) { return fusekit_gdn_chains_role(g, i) == fusekit_gdn_role::fused; };
        got_gate = got_gate && fused_at(i_add);
        got_gn   = got_gn && fused_at(i_silu);
        got_conv = got_conv && fused_at(i_conv);
        fusekit_gdn_state_rows rows{};
        const bool in_place = fusekit_gdn_chains_state_rows(g, i_gdn, rows);
#if FUSEKIT_GDN_WITHIN
        fusekit_gdn_within within{};
        const bool         folded = fusekit_gdn_chains_within(g, i_gdn, within);
        const ggml_tensor * gdn   = L.gdn;
        EXPECT(!folded || (in_place && fusekit_gdn_chains_role(g, i_sigmoid) == fusekit_gdn_role::skip),
               "%s: a fold has the state in place and the SIGMOID skipped", name);
        EXPECT(!folded || (within.q == gdn->src[0]->src[0]->src[0]->data &&
                           within.k == gdn->src[1]->src[0]->src[0]->data && within.beta == L.sigmoid->src[0]->data),
               "%s: the fold reads the norms' and the SIGMOID's sources", name);
        // the folded kernel reads the three sources while its blocks write the GATED_DELTA_NET's output: the graph
        // allocator (which thinks the sources dead after the norms and the SIGMOID) must not have put them there
        for (const ggml_tensor * source :
             { gdn->src[0]->src[0]->src[0], gdn->src[1]->src[0]->src[0], L.sigmoid->src[0] }) {
            EXPECT(!folded || !bytes_overlap(source, gdn), "%s: the output of GATED_DELTA_NET lies over the source %s",
                   name, source->name);
        }
        got_within = got_within && folded;
        got_qk     = got_qk && (fused_at(i_sigmoid) || folded);
#else
        got_qk = got_qk && fused_at(i_sigmoid);
#endif
        EXPECT(in_place == (fusekit_gdn_chains_role(g, i_state_rows) == fusekit_gdn_role::skip),
               "%s: the state's GET_ROWS is skipped exactly when the state is read in place", name);
        EXPECT(!in_place || (rows.base == L.state_cache->data && rows.row == s_copy->data &&
                             rows.row_stride == int64_t(L.state_cache->nb[1] / sizeof(float))),
               "%s: the state is read in the layer's cache, at the row s_copy names", name);
        got_state = got_state && in_place;
        EXPECT(fusekit_gdn_chains_role(g, i_gdn) == fusekit_gdn_role::none, "%s: GATED_DELTA_NET itself is stock", name);
    }
    EXPECT(got_gate == expect_gate, "%s: alpha chain planned %d", name, got_gate);
    EXPECT(got_qk == expect_qk, "%s: q/k/beta planned %d", name, got_qk);
    EXPECT(got_gn == expect_gated_norm, "%s: gated norm planned %d", name, got_gn);
    EXPECT(got_conv == expect_conv, "%s: conv window planned %d", name, got_conv);
    EXPECT(got_state == expect_state, "%s: state read in place %d", name, got_state);
    EXPECT(got_within == expect_within, "%s: q/k/beta folded into the GATED_DELTA_NET %d", name, got_within);
    EXPECT(n_skip == n_layers * (2 * got_gate + 4 * got_qk + 3 * got_gn + 4 * got_conv + got_state + got_within),
           "%s: %d nodes claimed", name, n_skip);

    std::vector<int> runs;
    walk(g, runs);
#if FUSEKIT_RESHAPE_RESIDUAL
    // at one token of one sequence: ssm_out's residual in every layer, and the alpha chain's first three nodes too
    // where fusion-2 leaves them to stock (its plan computes that ADD itself otherwise)
    const int expect_residual = T == 1 && S == 1 ? n_layers * (got_gate ? 1 : 2) : 0;
    EXPECT(residual_epilogues == expect_residual, "%s: %d residual epilogues (expected %d)", name, residual_epilogues,
           expect_residual);
#endif
    int launches = 0, fused_kernels = 0;
    for (int i = 0; i < g->n_nodes; ++i) {
        const fusekit_gdn_role role = fusekit_gdn_chains_role(g, i);
        const int              own  = runs[i] % 100;
        fused_kernels += runs[i] / 100;
        launches += own + runs[i] / 100;
        EXPECT(runs[i] / 100 == (role == fusekit_gdn_role::fused ? 1 : 0), "%s: fused kernel at node %d", name, i);
        if (is_noop(g->nodes[i])) {
            EXPECT(own == 0, "%s: view node %d ran", name, i);
        } else {
            EXPECT(own == (role == fusekit_gdn_role::none ? 1 : 0), "%s: node %d (%s %s) ran %d times", name, i,
                   ggml_op_desc(g->nodes[i]), g->nodes[i]->name, own);
        }
    }
    std::printf("%-32s nodes %3d  alpha chain %d  q/k/beta %d  gated norm %d  conv window %d  state in place %d  "
                "folded %d  claimed %2d  residual epilogues %d  node runs + kernels %d\n", name, g->n_nodes, got_gate,
                got_qk, got_gn, got_conv, got_state, got_within, n_skip, residual_epilogues, launches);

    // a disabled plan gives no roles
    fusekit_gdn_chains_plan(g, false);
    EXPECT(fusekit_gdn_chains_role(g, i_sigmoid) == fusekit_gdn_role::none, "%s: disabled plan", name);

    ggml_gallocr_free(galloc);
    ggml_backend_buffer_free(weights);
    ggml_free(ctx);
    ggml_free(ctx_w);
}

int main(int argc, char ** argv) {
    sabotage_residual = argc > 1 && std::string(argv[1]) == "--sabotage-residual";
    if (sabotage_residual && !FUSEKIT_RESHAPE_RESIDUAL) {
        std::printf("--sabotage-residual needs a build with -DFUSEKIT_RESHAPE_RESIDUAL=1\n");
        return 2;
    }
    // 35B-A3B shapes (32 value heads, 16 key heads, head size 128)
    run_case("35B, 1 token",               32, 16, 128, 1, 1, false, true,  true,  true);
    run_case("35B, 1 token, 4 sequences",  32, 16, 128, 1, 4, false, true,  true,  true);
    run_case("35B, 5 tokens (prompt)",     32, 16, 128, 5, 1, false, false, false, false);
    run_case("35B, q norm read elsewhere", 32, 16, 128, 1, 1, true,  true,  false, true);
    run_case("head size 64",               16, 16, 64,  1, 1, false, true,  true,  true);
    // (at these shapes ggml-alloc gives s_copy's memory to a later MUL_MAT once the last GET_ROWS has read it: the
    // index is gone by the GATED_DELTA_NET, so the state stays copied; FUSEKIT_GDN_DEBUG=1 names the node)
    run_case("head size 16 (not taken)",   8,  4,  16,  1, 1, false, false, false, false, 1, false, true);
    run_case("35B, 1 token, 6 layers",     32, 16, 128, 1, 1, false, true,  true,  true, 6);
    run_case("35B, 5 tokens, 3 layers",    32, 16, 128, 5, 1, false, false, false, false, 3);
    run_case("35B, cache read before conv", 32, 16, 128, 1, 1, false, true,  true,  true, 1, true);
    std::printf(failures ? "%d failures\n" : "plan checks passed\n", failures);
    return failures ? 1 : 0;
}
