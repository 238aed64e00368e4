// Where ggml's graph allocator puts a one-token decode graph's ADD, RMS_NORM and MUL outputs, against their
// sources: a fused kernel that writes an output over a computed source must allow for it (session 37: every
// residual ADD's sum lies over one addend and the norm's MUL output over another, so a matcher that refused any
// overlap never fired in a model while every test-backend-ops case, whose tensors never share memory, fused).
// Runs on the CPU backend (the allocator's reuse does not depend on the backend). Build against a CPU build:
//   T=.fusekit/trees/stock; g++ (one line) -O1 -std=c++17 scripts/graph_aliases.cpp -I$T/include -I$T/ggml/include
//     -L$T/build-cpu/bin -lllama -lggml -lggml-base -Wl,-rpath,$PWD/$T/build-cpu/bin -o /tmp/graph_aliases
//   /tmp/graph_aliases MODEL.gguf 2>/dev/null
#include "llama.h"
#include "ggml.h"
#include <cstdio>
#include <vector>
static bool g_on = false;
static bool cb(struct ggml_tensor * t, bool ask, void *) {
    if (ask) return true;
    if (!g_on) return true;
    if (t->op != GGML_OP_ADD && t->op != GGML_OP_RMS_NORM && t->op != GGML_OP_MUL) return true;
    printf("%-8s %-22s %p+%zu", ggml_op_name(t->op), t->name, t->data, ggml_nbytes(t));
    for (int s = 0; s < 2; ++s) if (t->src[s]) printf(" | %s %s %p", ggml_op_name(t->src[s]->op), t->src[s]->name, t->src[s]->data);
    printf("\n");
    return true;
}
int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: graph_aliases MODEL.gguf\n");
        return 2;
    }
    llama_backend_init();
    auto mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (model == nullptr) {
        fprintf(stderr, "graph_aliases: cannot load %s\n", argv[1]);
        return 1;
    }
    auto cp = llama_context_default_params();
    cp.n_ctx = 64; cp.n_batch = 8; cp.n_ubatch = 8; cp.cb_eval = cb; cp.cb_eval_user_data = nullptr; cp.n_threads = 2;
    llama_context * ctx = llama_init_from_model(model, cp);
    std::vector<llama_token> toks = {1, 2, 3};
    llama_batch b = llama_batch_get_one(toks.data(), 3);
    llama_decode(ctx, b);
    g_on = true;
    llama_token t = 5;
    llama_batch b1 = llama_batch_get_one(&t, 1);
    llama_decode(ctx, b1);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
