// The match of the experiment fusion-2-reshape-residual (fusekit_mul_mat_reshape_add, from the patch's header) on
// the nodes qwen35moe builds at the end of a gated-delta-net layer: MUL_MAT(ssm_out), reshape_2d, ADD(residual),
// then the post-attention RMS_NORM. Host code only; no tensor is allocated or computed.
//
//   reshape_residual_match_test              every check must pass ("match checks passed", exit 0)
//   reshape_residual_match_test --sabotage   the first version's test (ggml_can_fuse of the three ops) in its
//                                            place: the one-token decode case must fail (exit 1)

#include "ggml-cuda/fusekit-reshape-residual.cuh"
#include "ggml.h"

#include <cstdio>
#include <cstring>

namespace {

bool g_sabotage = false;

bool match(const ggml_cgraph * graph, int i) {
    if (g_sabotage) {
        const ggml_op ops[3] = { GGML_OP_MUL_MAT, GGML_OP_RESHAPE, GGML_OP_ADD };
        return ggml_nrows(graph->nodes[i]) == 1 && ggml_can_fuse(graph, i, ops, 3);
    }
    return fusekit_mul_mat_reshape_add(graph, i);
}

// What a case changes in the layer's tail.
struct TailShape {
    int64_t n_tokens      = 1;      // 1: decode
    bool    reader_of_mm  = false;  // another node reads the product itself
    bool    reader_of_row = false;  // another node reads the reshaped row
    bool    broadcast     = false;  // the residual is one value added to the whole row (never in the model)
    bool    residual_first = false;  // ADD(residual, row) instead of ADD(row, residual)
};

// The layer tail as qwen35moe builds it (build_layer_attn_linear, then the residual and the post-attention norm);
// returns the index of the ssm_out MUL_MAT in the graph, or -1.
int build_tail(ggml_context * ctx, ggml_cgraph * graph, const TailShape & shape) {
    const int64_t value_dim = 64, n_embd = 32;
    ggml_tensor * ssm_out = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, value_dim, n_embd);
    ggml_tensor * gated   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, value_dim, shape.n_tokens);
    ggml_tensor * inp_sa  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, shape.broadcast ? 1 : n_embd, shape.n_tokens);
    ggml_tensor * norm_w  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_embd);
    ggml_set_input(gated);
    ggml_set_input(inp_sa);

    ggml_tensor * product = ggml_mul_mat(ctx, ssm_out, gated);
    ggml_tensor * row     = ggml_reshape_2d(ctx, product, n_embd, shape.n_tokens);
    ggml_tensor * sum     = shape.residual_first ? ggml_add(ctx, inp_sa, row) : ggml_add(ctx, row, inp_sa);
    ggml_tensor * normed  = ggml_mul(ctx, ggml_rms_norm(ctx, sum, 1e-6f), norm_w);
    ggml_build_forward_expand(graph, normed);
    if (shape.reader_of_mm) {
        ggml_build_forward_expand(graph, ggml_scale(ctx, product, 2.0f));
    }
    if (shape.reader_of_row) {
        ggml_build_forward_expand(graph, ggml_scale(ctx, row, 2.0f));
    }
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
        if (ggml_graph_node(graph, i) == product) {
            return i;
        }
    }
    return -1;
}

int g_failed = 0;

void check(const char * what, const TailShape & shape, bool expect_match, bool expect_order = true) {
    ggml_init_params params = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context *   ctx    = ggml_init(params);
    ggml_cgraph *    graph  = ggml_new_graph(ctx);
    const int        i      = build_tail(ctx, graph, shape);
    bool             ok     = i >= 0;
    if (ok && expect_order) {  // the model's order: the RESHAPE and the ADD follow the product at once
        ok = ggml_graph_n_nodes(graph) > i + 2 && ggml_graph_node(graph, i + 1)->op == GGML_OP_RESHAPE &&
             ggml_graph_node(graph, i + 2)->op == GGML_OP_ADD;
    }
    const bool matched = ok && match(graph, i);
    ok                 = ok && matched == expect_match;
    std::printf("%-58s expect %-8s got %-8s %s\n", what, expect_match ? "match" : "no match",
                matched ? "match" : "no match", ok ? "ok" : "WRONG");
    g_failed += ok ? 0 : 1;
    ggml_free(ctx);
}

}  // namespace

int main(int argc, char ** argv) {
    g_sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;

    TailShape decode;
    check("one token: ssm_out, reshape, residual ADD", decode, true);

    TailShape prompt = decode;
    prompt.n_tokens  = 2;
    check("two tokens (the product is not one row)", prompt, false);

    TailShape mm_read    = decode;
    mm_read.reader_of_mm = true;
    check("another reader of the product", mm_read, false, false);

    TailShape row_read     = decode;
    row_read.reader_of_row = true;
    check("another reader of the reshaped row", row_read, false, false);

    TailShape swapped      = decode;
    swapped.residual_first = true;
    check("one token, the ADD's operands the other way round", swapped, true);

    TailShape broadcast = decode;
    broadcast.broadcast = true;
    check("one token, a residual of one value (broadcast)", broadcast, false);

    if (g_failed > 0) {
        std::printf("%d match check(s) WRONG\n", g_failed);
        return 1;
    }
    std::printf("match checks passed\n");
    return 0;
}
