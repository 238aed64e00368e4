// fusekit fusion-2 (gdn-chains): matching the element-wise chains of a gated-delta-net layer
// (src/models/qwen35moe.cpp build_layer_attn_linear, models.h build_gdn_l2_norm) and launching the
// fused kernels of fusekit-gdn-chains.cuh.
//
// Node order at one token (ggml_visit_parents, sources left to right), views and reshapes left out:
//   ... SSM_CONV, SILU, RMS_NORM(q), SCALE(q), RMS_NORM(k), SCALE(k), MUL_MAT(alpha), ADD(ssm_dt),
//   SOFTPLUS, MUL(ssm_a), MUL_MAT(beta), SIGMOID, GET_ROWS(state) ..., GATED_DELTA_NET, CPY(state) ...
//   RMS_NORM(o), MUL(ssm_norm), MUL_MAT(z), SILU(z), MUL
// The chains are not adjacent (the alpha, beta and z products sit between them). Three launches:
//   - at ADD: the alpha chain (ADD, SOFTPLUS, MUL: adjacent but for views);
//   - at SIGMOID: the q and k L2 norms, skipped where they stand, and the beta sigmoid;
//   - at SILU(z): the gated norm, RMS_NORM(o) and MUL(ssm_norm) skipped where they stand.
// (One launch for the whole prologue at GATED_DELTA_NET does not survive ggml-alloc: alpha's buffer is
// handed to the beta product once stock's ADD has run; tests/cpp/gdn_chains_plan_test.cu shows it.)
// Deferring a node is sound when:
//   - the pattern matches exactly (ops, operand order, types, shapes, strides; anything else: stock);
//   - the intermediates (RMS_NORM, ADD, SOFTPLUS, the norm and its MUL, SILU) have no reader outside
//     the chain and are not graph outputs, and the chain's results have no reader before the node
//     where they are now written;
//   - no node that runs in between writes over the chain's sources (the allocator may hand a buffer on
//     once its last stock reader has run) or over its results;
//   - a result overlaps a source only where stock itself runs in place, element for element.
// Nothing here is run when GGML_CUDA_DISABLE_FUSION is set or the graph uses several streams.
#include "fusekit-gdn-chains-glue.cuh"
#include "fusekit-gdn-chains.cuh"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <utility>
#include <vector>

// The sabotage patch (tests/patches/sabotage-gdn-chains.patch) sets this to 1: every fused result wrong.
#define FUSEKIT_GDN_SABOTAGE 0

namespace {

struct Fused {
    int                        covered     = 0;      // nodes after the launch node that the kernel also computes
    bool                       is_prologue = false;
    fusekit_gdn::PrologueArgs  prologue{};
    fusekit_gdn::GatedNormArgs gated_norm{};
};

// One plan per thread: the node loop that reads it runs on the thread that built it.
struct Plan {
    const ggml_cgraph *               graph   = nullptr;
    int                               n_nodes = 0;
    std::vector<fusekit_gdn_role>     roles;
    std::unordered_map<int, Fused>    fused;  // by node index
    std::unordered_map<int, fusekit_gdn_state_rows> state_rows;  // by GATED_DELTA_NET node index
};

thread_local Plan plan;

// The experiment fusion-2-conv-window (patches/experiments/) sets this to 1: the conv-state path at one token
// (GET_ROWS, CONCAT, CPY of the window, SSM_CONV+SILU) becomes one launch at SSM_CONV (match_conv_window).
// (tests/cpp/gdn_chains_plan_test.cu is also built with -DFUSEKIT_GDN_CONV_WINDOW=1.)
#ifndef FUSEKIT_GDN_CONV_WINDOW
#define FUSEKIT_GDN_CONV_WINDOW 0
#endif

bool is_noop(const ggml_tensor * t) {
    return ggml_is_empty(t) || t->op == GGML_OP_NONE || t->op == GGML_OP_RESHAPE || t->op == GGML_OP_VIEW ||
           t->op == GGML_OP_PERMUTE || t->op == GGML_OP_TRANSPOSE;
}

const ggml_tensor * storage_of(const ggml_tensor * t) {
    return t->view_src ? t->view_src : t;
}

bool overlap(const ggml_tensor * a, const ggml_tensor * b) {
    const uintptr_t a0 = uintptr_t(a->data), a1 = a0 + ggml_nbytes(a);
    const uintptr_t b0 = uintptr_t(b->data), b1 = b0 + ggml_nbytes(b);
    return a0 < b1 && b0 < a1;
}

bool is_f32(const ggml_tensor * t) {
    return t != nullptr && t->type == GGML_TYPE_F32 && t->data != nullptr;
}

bool is_unary(const ggml_tensor * t, ggml_unary_op op) {
    return t != nullptr && t->op == GGML_OP_UNARY && ggml_get_unary_op(t) == op;
}

bool rows_are_ours(const ggml_tensor * t) {
    return t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 && t->nb[2] % sizeof(float) == 0 &&
           t->nb[3] % sizeof(float) == 0;
}

bool ncols_are_ours(int64_t n) {
    return n == 32 || n == 64 || n == 128 || n == 256;
}

fusekit_gdn::Rows rows_of(const ggml_tensor * t) {
    return { (const float *) t->data, t->ne[1], t->ne[2], int64_t(t->nb[1] / sizeof(float)),
             int64_t(t->nb[2] / sizeof(float)), int64_t(t->nb[3] / sizeof(float)) };
}

// What the plan builder knows about the whole graph.
struct GraphIndex {
    const ggml_cgraph *                                       graph;
    std::unordered_map<const ggml_tensor *, int>              index;    // node -> position
    std::unordered_map<const ggml_tensor *, std::vector<int>> readers;  // storage -> non-view nodes reading it

    explicit GraphIndex(const ggml_cgraph * g) : graph(g) {
        for (int i = 0; i < g->n_nodes; ++i) {
            const ggml_tensor * node = g->nodes[i];
            index[node]              = i;
            if (is_noop(node)) {
                continue;  // a view reads nothing; whoever reads the view is counted on its storage
            }
            for (const ggml_tensor * src : node->src) {
                if (src != nullptr) {
                    std::vector<int> & r = readers[storage_of(src)];
                    if (r.empty() || r.back() != i) {
                        r.push_back(i);
                    }
                }
            }
        }
    }

    int position(const ggml_tensor * t) const {
        const auto it = index.find(t);
        return it == index.end() ? -1 : it->second;
    }

    const std::vector<int> & readers_of(const ggml_tensor * t) const {
        static const std::vector<int> none;
        const auto it = readers.find(storage_of(t));
        return it == readers.end() ? none : it->second;
    }

    // An intermediate: read by exactly one node, `only`.
    bool read_only_by(const ggml_tensor * t, int only) const {
        const std::vector<int> & r = readers_of(t);
        return r.size() == 1 && r[0] == only;
    }

    // A result written late: no node before `from` reads it.
    bool read_from(const ggml_tensor * t, int from) const {
        for (int i : readers_of(t)) {
            if (i < from) {
                return false;
            }
        }
        return true;
    }
};

// The chain nodes must be computed, not graph outputs, and not yet claimed by another fused kernel.
bool claimable(const ggml_cgraph * g, const std::vector<int> & nodes) {
    for (int i : nodes) {
        if (i < 0) {
            return false;
        }
        const ggml_tensor * t = g->nodes[i];
        if (!(t->flags & GGML_TENSOR_FLAG_COMPUTE) || (t->flags & GGML_TENSOR_FLAG_OUTPUT) ||
            plan.roles[i] != fusekit_gdn_role::none) {
            return false;
        }
    }
    return true;
}

// No node in (from, at) outside the chain writes over t. `from` is where stock reads a source (nodes
// before it made the source, as they do for stock) or writes a result (the memory is the result's from then on).
bool untouched_between(const ggml_cgraph * g, int from, int at, const std::vector<int> & chain, const ggml_tensor * t) {
    for (int j = from + 1; j < at; ++j) {
        const ggml_tensor * node = g->nodes[j];
        if (is_noop(node) || std::find(chain.begin(), chain.end(), j) != chain.end()) {
            continue;
        }
        if (overlap(node, t)) {
            if (getenv("FUSEKIT_GDN_DEBUG") != nullptr) {
                GGML_LOG_INFO("fusekit gdn-chains: node %d (%s %s) writes over %s, needed until node %d\n", j,
                              ggml_op_desc(node), node->name, t->name, at);
            }
            return false;
        }
    }
    return true;
}

// A result may share memory with a source only as stock's in-place step does: same start, contiguous.
bool same_elements(const ggml_tensor * a, const ggml_tensor * b) {
    return a->data == b->data && ggml_is_contiguous(a) && ggml_is_contiguous(b) && ggml_nelements(a) == ggml_nelements(b);
}

// FUSEKIT_GDN_DEBUG=1: say which candidate was left to stock, and at which check (a line of this file).
void reject(const ggml_cgraph * g, int at, int line) {
    static const bool debug = getenv("FUSEKIT_GDN_DEBUG") != nullptr;
    if (debug) {
        GGML_LOG_INFO("fusekit gdn-chains: node %d (%s %s) stays on the stock path (fusekit-gdn-chains.cu:%d)\n", at,
                      ggml_op_desc(g->nodes[at]), g->nodes[at]->name, line);
    }
}

// SCALE(RMS_NORM(x)) of build_gdn_l2_norm.
struct L2Chain {
    const ggml_tensor * scale = nullptr;
    const ggml_tensor * norm  = nullptr;
    const ggml_tensor * x     = nullptr;
    float               eps = 0.0f, scale_out = 1.0f;
};

bool match_l2(const ggml_tensor * t, L2Chain & c) {
    if (t->op != GGML_OP_SCALE || !is_f32(t) || !ggml_is_contiguous(t) || ggml_get_op_params_f32(t, 1) != 0.0f) {
        return false;  // op_params[1] is SCALE's bias: stock's RMS_NORM+SCALE fusion needs it 0 too
    }
    const ggml_tensor * norm = t->src[0];
    if (norm == nullptr || norm->op != GGML_OP_RMS_NORM || !is_f32(norm) || !ggml_are_same_shape(norm, t)) {
        return false;
    }
    const ggml_tensor * x = norm->src[0];
    if (!is_f32(x) || !rows_are_ours(x) || !ggml_are_same_shape(x, t) || !ncols_are_ours(x->ne[0])) {
        return false;
    }
    c = { t, norm, x, ggml_get_op_params_f32(norm, 0), ggml_get_op_params_f32(t, 0) };
    return true;
}

// Claims `chain` for a fused kernel launched at node `at` that covers `covered` nodes after it.
void claim(const std::vector<int> & chain, int at, int covered, const fusekit_gdn::PrologueArgs * prologue,
           const fusekit_gdn::GatedNormArgs * gated_norm) {
    for (int i : chain) {
        plan.roles[i] = fusekit_gdn_role::skip;
    }
    plan.roles[at] = fusekit_gdn_role::fused;
    Fused f{};
    f.covered = covered;
    if (prologue != nullptr) {
        f.prologue     = *prologue;
        f.is_prologue  = true;
    } else {
        f.gated_norm = *gated_norm;
    }
    plan.fused[at] = f;
}

// The first node after `at` that is not a view (g->n_nodes if there is none).
int next_real_node(const ggml_cgraph * g, int at) {
    int next = at + 1;
    while (next < g->n_nodes && is_noop(g->nodes[next])) {
        ++next;
    }
    return next;
}

// The nodes strictly between a and b are all views or in `allowed`.
bool only_between(const ggml_cgraph * g, int a, int b, const std::vector<int> & allowed) {
    for (int j = a + 1; j < b; ++j) {
        if (!is_noop(g->nodes[j]) && std::find(allowed.begin(), allowed.end(), j) == allowed.end()) {
            return false;
        }
    }
    return true;
}

// The inputs of one GATED_DELTA_NET at one token, as build_layer_attn_linear makes them.
struct GdnInputs {
    L2Chain             q, k;
    const ggml_tensor * gate = nullptr, * softplus = nullptr, * add = nullptr;
    const ggml_tensor * alpha = nullptr, * dt = nullptr, * ssm_a = nullptr;
    const ggml_tensor * beta = nullptr, * beta_raw = nullptr;
    int64_t             n_heads = 0, n_gate = 0;
};

// g = reshape(MUL(SOFTPLUS(ADD(alpha, ssm_dt)), ssm_a)), as ggml_add/ggml_mul order their operands.
bool match_gate_chain(const ggml_tensor * g_in, GdnInputs & m) {
    const ggml_tensor * gate = g_in;
    while (gate != nullptr && gate->op == GGML_OP_RESHAPE) {
        gate = gate->src[0];
    }
    if (gate == nullptr || gate->op != GGML_OP_MUL || !is_f32(gate) || !ggml_is_contiguous(gate)) {
        return false;
    }
    const ggml_tensor * softplus = gate->src[0];
    const ggml_tensor * ssm_a    = gate->src[1];
    if (!is_unary(softplus, GGML_UNARY_OP_SOFTPLUS) || !is_f32(softplus) || !is_f32(ssm_a)) {
        return false;
    }
    const ggml_tensor * add = softplus->src[0];
    if (add == nullptr || add->op != GGML_OP_ADD || !is_f32(add)) {
        return false;
    }
    const ggml_tensor * alpha = add->src[0];
    const ggml_tensor * dt    = add->src[1];
    if (!is_f32(alpha) || !is_f32(dt) || !ggml_is_contiguous(alpha) || !ggml_is_contiguous(dt) ||
        !ggml_is_contiguous(ssm_a)) {
        return false;
    }
    const int64_t n_heads = alpha->ne[0];
    if (dt->ne[0] != n_heads || ggml_nelements(dt) != n_heads || ssm_a->ne[0] != n_heads ||
        ggml_nelements(ssm_a) != n_heads || !ggml_are_same_shape(add, alpha) || !ggml_are_same_shape(softplus, alpha) ||
        !ggml_are_same_shape(gate, alpha) || g_in->ne[0] != 1 || g_in->ne[1] != n_heads) {
        return false;
    }
    m.gate = gate, m.softplus = softplus, m.add = add, m.alpha = alpha, m.dt = dt, m.ssm_a = ssm_a;
    m.n_heads = n_heads;
    m.n_gate  = ggml_nelements(alpha);
    return true;
}

fusekit_gdn::PrologueArgs prologue_args(const GdnInputs & m) {
    fusekit_gdn::PrologueArgs a{};
    a.q_src    = rows_of(m.q.x);
    a.k_src    = rows_of(m.k.x);
    a.q_dst    = (float *) m.q.scale->data;
    a.k_dst    = (float *) m.k.scale->data;
    a.rows_q   = ggml_nrows(m.q.x);
    a.rows_k   = ggml_nrows(m.k.x);
    a.ncols    = int(m.q.x->ne[0]);
    a.eps_q    = m.q.eps;
    a.eps_k    = m.k.eps;
    a.scale_q  = m.q.scale_out;
    a.scale_k  = m.k.scale_out;
    a.alpha    = (const float *) m.alpha->data;
    a.dt_bias  = (const float *) m.dt->data;
    a.ssm_a    = (const float *) m.ssm_a->data;
    a.gate_dst = (float *) m.gate->data;
    a.beta_raw = (const float *) m.beta_raw->data;
    a.beta_dst = (float *) m.beta->data;
    a.n_heads  = m.n_heads;
    a.n_gate   = m.n_gate;
    a.sabotage = FUSEKIT_GDN_SABOTAGE;
    return a;
}

// From a GATED_DELTA_NET with one token per sequence, two launches:
//  - the alpha chain ADD, SOFTPLUS, MUL (adjacent but for views) at the ADD: alpha cannot wait for a later
//    launch, because ggml-alloc hands its buffer on (e.g. to the beta product) once stock's ADD has run;
//  - q and k L2 norms and the beta SIGMOID at the SIGMOID, the last of them: the conv output the norms read
//    stays allocated up to GATED_DELTA_NET (v is a view of it), and the norms' results are read only there.
void match_prologue(const GraphIndex & gi, int at) {
    const ggml_cgraph * g   = gi.graph;
    const ggml_tensor * gdn = g->nodes[at];
    if (!is_f32(gdn) || gdn->src[2] == nullptr || gdn->src[2]->ne[2] != 1) {
        return reject(g, at, __LINE__);  // one token per sequence only: prompts keep the stock path
    }
    GdnInputs m;
    if (!match_l2(gdn->src[0], m.q) || !match_l2(gdn->src[1], m.k) || m.q.x->ne[0] != m.k.x->ne[0] ||
        !match_gate_chain(gdn->src[3], m)) {
        return reject(g, at, __LINE__);
    }
    m.beta = gdn->src[4];
    if (!is_unary(m.beta, GGML_UNARY_OP_SIGMOID) || !is_f32(m.beta) || !ggml_is_contiguous(m.beta)) {
        return reject(g, at, __LINE__);
    }
    m.beta_raw = m.beta->src[0];
    if (!is_f32(m.beta_raw) || !ggml_is_contiguous(m.beta_raw) || ggml_nelements(m.beta_raw) != m.n_gate ||
        ggml_nelements(m.beta) != m.n_gate || m.beta->ne[1] != m.n_heads) {
        return reject(g, at, __LINE__);
    }
    const fusekit_gdn::PrologueArgs all = prologue_args(m);

    // the alpha chain, at its ADD
    const int i_add = gi.position(m.add), i_softplus = gi.position(m.softplus), i_gate = gi.position(m.gate);
    const std::vector<int> gate_chain = { i_softplus, i_gate };
    if (i_add >= 0 && claimable(g, { i_add, i_softplus, i_gate }) && i_add < i_softplus && i_softplus < i_gate &&
        only_between(g, i_add, i_gate, { i_softplus }) && gi.read_only_by(m.add, i_softplus) &&
        gi.read_only_by(m.softplus, i_gate) && !overlap(m.gate, m.dt) && !overlap(m.gate, m.ssm_a) &&
        (!overlap(m.gate, m.alpha) || same_elements(m.gate, m.alpha))) {
        fusekit_gdn::PrologueArgs a = all;
        a.rows_q = a.rows_k = 0;
        a.with_gate         = 1;
        a.with_beta         = 0;
        claim(gate_chain, i_add, i_gate - i_add, &a, nullptr);
    } else {
        reject(g, at, __LINE__);
    }

    // q, k and beta, at the SIGMOID
    const int i_qn = gi.position(m.q.norm), i_qs = gi.position(m.q.scale);
    const int i_kn = gi.position(m.k.norm), i_ks = gi.position(m.k.scale);
    const int i_beta = gi.position(m.beta);
    const std::vector<int> qk_chain = { i_qn, i_qs, i_kn, i_ks };
    if (!claimable(g, { i_qn, i_qs, i_kn, i_ks, i_beta }) || std::max({ i_qn, i_qs, i_kn, i_ks }) >= i_beta ||
        i_qn >= i_qs || i_kn >= i_ks || i_beta >= at) {
        return reject(g, at, __LINE__);
    }
    // the norms' intermediates are read only by their SCALE; their results by nobody before the SIGMOID
    if (!gi.read_only_by(m.q.norm, i_qs) || !gi.read_only_by(m.k.norm, i_ks) || !gi.read_from(m.q.scale, i_beta + 1) ||
        !gi.read_from(m.k.scale, i_beta + 1)) {
        return reject(g, at, __LINE__);
    }
    // memory: the conv views untouched from stock's norm on, the results from stock's SCALE on
    const std::pair<const ggml_tensor *, int> watched[] = {
        { m.q.x, i_qn }, { m.k.x, i_kn }, { m.q.scale, i_qs }, { m.k.scale, i_ks },
    };
    for (const auto & [t, from] : watched) {
        if (!untouched_between(g, from, i_beta, qk_chain, t)) {
            return reject(g, at, __LINE__);
        }
    }
    for (const ggml_tensor * r : { m.q.scale, m.k.scale }) {
        for (const ggml_tensor * other : { m.q.x, m.k.x, m.beta_raw, m.beta, r == m.q.scale ? m.k.scale : m.q.scale }) {
            if (overlap(r, other)) {
                return reject(g, at, __LINE__);
            }
        }
    }
    if (overlap(m.beta, m.q.x) || overlap(m.beta, m.k.x) ||
        (overlap(m.beta, m.beta_raw) && !same_elements(m.beta, m.beta_raw))) {
        return reject(g, at, __LINE__);
    }
    fusekit_gdn::PrologueArgs a = all;
    a.with_gate = 0;
    a.with_beta = 1;
    claim(qk_chain, i_beta, 0, &a, nullptr);
}

// out = MUL(MUL(RMS_NORM(o), ssm_norm), SILU(z)) of build_norm_gated, o a GATED_DELTA_NET output view.
void match_gated_norm(const GraphIndex & gi, int at) {
    const ggml_cgraph * g    = gi.graph;
    const ggml_tensor * silu = g->nodes[at];
    if (!is_unary(silu, GGML_UNARY_OP_SILU) || !is_f32(silu)) {
        return;  // not a candidate (every other unary op comes here)
    }
    const int last = next_real_node(g, at);
    if (last >= g->n_nodes) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * out = g->nodes[last];
    if (out->op != GGML_OP_MUL || !is_f32(out) || !ggml_is_contiguous(out) || out->src[1] != silu) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * normed = out->src[0];
    if (normed == nullptr || normed->op != GGML_OP_MUL || !is_f32(normed)) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * norm   = normed->src[0];
    const ggml_tensor * weight = normed->src[1];
    if (norm == nullptr || norm->op != GGML_OP_RMS_NORM || !is_f32(norm) || !is_f32(weight) ||
        !ggml_is_contiguous(weight)) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * o = norm->src[0];
    const ggml_tensor * z = silu->src[0];
    if (!is_f32(o) || !is_f32(z) || !rows_are_ours(o) || !rows_are_ours(z) ||
        storage_of(o)->op != GGML_OP_GATED_DELTA_NET) {
        return reject(g, at, __LINE__);
    }
    const int64_t ncols = o->ne[0];
    if (!ncols_are_ours(ncols) || o->ne[2] != 1 || weight->ne[0] != ncols || ggml_nelements(weight) != ncols ||
        !ggml_are_same_shape(o, z) || !ggml_are_same_shape(o, norm) || !ggml_are_same_shape(o, normed) ||
        !ggml_are_same_shape(o, silu) || !ggml_are_same_shape(o, out)) {
        return reject(g, at, __LINE__);
    }

    const std::vector<int> chain = { gi.position(norm), gi.position(normed), at, last };
    if (!claimable(g, chain) || chain[0] >= chain[1] || chain[1] >= at) {
        return reject(g, at, __LINE__);
    }
    if (!gi.read_only_by(norm, chain[1]) || !gi.read_only_by(normed, last) || !gi.read_only_by(silu, last)) {
        return reject(g, at, __LINE__);
    }
    // o and ssm_norm must survive from RMS_NORM(o) to SILU(z); z is made in between, which is the point
    if (!untouched_between(g, chain[0], at, chain, o) || !untouched_between(g, chain[1], at, chain, weight)) {
        return reject(g, at, __LINE__);
    }
    if (overlap(out, o) || overlap(out, weight) || (overlap(out, z) && !same_elements(out, z))) {
        return reject(g, at, __LINE__);
    }

    fusekit_gdn::GatedNormArgs a{};
    a.x        = rows_of(o);
    a.z        = rows_of(z);
    a.weight   = (const float *) weight->data;
    a.dst      = (float *) out->data;
    a.rows     = ggml_nrows(o);
    a.ncols    = int(ncols);
    a.eps      = ggml_get_op_params_f32(norm, 0);
    a.sabotage = FUSEKIT_GDN_SABOTAGE;
    claim({ chain[0], chain[1], last }, at, last - at, nullptr, &a);
}

// The conv-state path of build_conv_state (src/models/delta-net-base.cpp) at one token and one sequence:
//   conv_states = GET_ROWS(cache, s_copy)                  the cached window of the sequence's row
//   conv_input  = CONCAT(reshape(conv_states), transpose(qkv_mixed), dim 0)
//   CPY(view(conv_input, from column 1), view(cache, row kv_head))   the shifted window back into the cache
//   y           = SILU(SSM_CONV(conv_input, ssm_conv1d))   stock: one fused launch
// launched at SSM_CONV as conv_window_kernel. GET_ROWS, CONCAT and CPY are skipped where they stand: the cache row
// and x are read at SSM_CONV instead, so neither may be written in between, and nobody may read the cache between
// the CPY and SSM_CONV (stock has written the new window by then). At one sequence the thread of a channel reads
// that channel's window before it writes it, so the CPY's row may be the one read.
void match_conv_window(const GraphIndex & gi, int at) {
    const ggml_cgraph * g    = gi.graph;
    const ggml_tensor * conv = g->nodes[at];
    const ggml_tensor * sx   = conv->src[0];
    const ggml_tensor * w    = conv->src[1];
    if (!is_f32(conv) || !ggml_is_contiguous(conv) || !is_f32(w) || w->ne[0] != fusekit_gdn::kConvWidth ||
        w->nb[0] != sizeof(float) || w->nb[1] % sizeof(float) != 0 || sx == nullptr || sx->op != GGML_OP_CONCAT ||
        !is_f32(sx) || !ggml_is_contiguous(sx) || sx->ne[0] != fusekit_gdn::kConvWidth || sx->ne[2] != 1 ||
        ggml_get_op_params_i32(sx, 0) != 0) {
        return reject(g, at, __LINE__);  // one token (ne[0] = the taps), one sequence, d_conv 4, F32 only
    }
    const int64_t channels = sx->ne[1];
    const int     i_silu   = next_real_node(g, at);
    if (i_silu >= g->n_nodes) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * silu = g->nodes[i_silu];
    if (!is_unary(silu, GGML_UNARY_OP_SILU) || silu->src[0] != conv || !is_f32(silu) || !ggml_is_contiguous(silu) ||
        ggml_nelements(silu) != channels) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * cached = sx->src[0];  // reshape of GET_ROWS
    const ggml_tensor * x      = sx->src[1];  // transposed qkv_mixed
    const ggml_tensor * rows   = storage_of(cached);
    if (cached == nullptr || x == nullptr || rows->op != GGML_OP_GET_ROWS || !is_f32(rows) || !ggml_is_contiguous(rows) ||
        !ggml_is_contiguous(cached) || cached->ne[0] != fusekit_gdn::kConvWidth - 1 || cached->ne[1] != channels ||
        !is_f32(x) || x->ne[0] != 1 || x->ne[1] != channels || x->nb[1] != sizeof(float)) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * cache = rows->src[0];
    const ggml_tensor * index = rows->src[1];
    const int64_t       width = (fusekit_gdn::kConvWidth - 1) * channels;
    if (!is_f32(cache) || cache->ne[0] != width || cache->nb[0] != sizeof(float) || cache->nb[1] % sizeof(float) != 0 ||
        index == nullptr || index->type != GGML_TYPE_I32 || index->data == nullptr || ggml_nelements(index) != 1 ||
        ggml_nelements(rows) != width) {
        return reject(g, at, __LINE__);
    }
    // the CPY: the concat's only reader besides SSM_CONV, from its column 1 into one row of the same cache
    const int i_rows = gi.position(rows), i_concat = gi.position(sx);
    const std::vector<int> & concat_readers = gi.readers_of(sx);
    if (i_rows < 0 || i_concat < 0 || concat_readers.size() != 2 || concat_readers[1] != at) {
        return reject(g, at, __LINE__);
    }
    const int           i_cpy   = concat_readers[0];
    const ggml_tensor * cpy     = g->nodes[i_cpy];
    const ggml_tensor * shifted = cpy->src[0];
    const ggml_tensor * row_dst = cpy->src[1];
    if (cpy->op != GGML_OP_CPY || shifted == nullptr || row_dst == nullptr || shifted->view_src != sx ||
        shifted->view_offs != sizeof(float) || shifted->ne[0] != fusekit_gdn::kConvWidth - 1 ||
        shifted->ne[1] != channels || shifted->nb[1] != sx->nb[1] || !is_f32(row_dst) || !ggml_is_contiguous(row_dst) ||
        ggml_nelements(row_dst) != width || storage_of(row_dst) != storage_of(cache)) {
        return reject(g, at, __LINE__);
    }
    const std::vector<int> chain = { i_rows, i_concat, i_cpy, i_silu };
    if (!claimable(g, { i_rows, i_concat, i_cpy, at, i_silu }) || !(i_rows < i_concat && i_concat < i_cpy && i_cpy < at) ||
        !only_between(g, at, i_silu, {})) {
        return reject(g, at, __LINE__);
    }
    // intermediates: GET_ROWS read only by the CONCAT, SSM_CONV only by the SILU
    if (!gi.read_only_by(rows, i_concat) || !gi.read_only_by(conv, i_silu)) {
        return reject(g, at, __LINE__);
    }
    // the sources, read at SSM_CONV now: the cache from GET_ROWS on, x from the CONCAT on, the index
    if (!untouched_between(g, i_rows, at, chain, cache) || !untouched_between(g, i_concat, at, chain, x) ||
        !untouched_between(g, i_rows, at, chain, index)) {
        return reject(g, at, __LINE__);
    }
    for (int i : gi.readers_of(cache)) {  // the new window is written at SSM_CONV now: no reader may come between
        if (i > i_cpy && i < at) {
            return reject(g, at, __LINE__);
        }
    }
    // the output may take x's memory (ggml-alloc hands it on after the CONCAT): element for element, as channel c's
    // thread reads x[c] before it writes y[c]
    const bool y_over_x = silu->data == x->data && x->nb[1] == sizeof(float);
    if (overlap(silu, cache) || (overlap(silu, x) && !y_over_x) || overlap(silu, w) || overlap(silu, index) ||
        overlap(row_dst, x) || overlap(row_dst, w) || overlap(row_dst, index)) {
        return reject(g, at, __LINE__);
    }

    fusekit_gdn::PrologueArgs a{};
    a.with_conv       = 1;
    a.conv.cache      = (const float *) cache->data;
    a.conv.src_row    = (const int32_t *) index->data;
    a.conv.cache_row  = int64_t(cache->nb[1] / sizeof(float));
    a.conv.x          = (const float *) x->data;
    a.conv.weight     = (const float *) w->data;
    a.conv.weight_row = int64_t(w->nb[1] / sizeof(float));
    a.conv.bias       = nullptr;
    a.conv.window_dst = (float *) row_dst->data;
    a.conv.dst        = (float *) silu->data;
    a.conv.channels   = channels;
    a.conv.sabotage   = FUSEKIT_GDN_SABOTAGE;
    claim({ i_rows, i_concat, i_cpy, i_silu }, at, i_silu - at, &a, nullptr);
}

// The experiment fusion-2-state-rows (patches/experiments/) sets this to 1: at one token of one sequence the
// GATED_DELTA_NET reads its recurrent state in the cache row itself, and build_rs's GET_ROWS copy is skipped
// (match_state_rows). (tests/cpp/gdn_chains_plan_test.cu is also built with -DFUSEKIT_GDN_STATE_ROWS=1.)
#ifndef FUSEKIT_GDN_STATE_ROWS
#define FUSEKIT_GDN_STATE_ROWS 0
#endif

// Whether stock's GDN->CPY cache fusion (ggml_cuda_try_gdn_cache_fusion in ggml-cuda.cu) takes the GATED_DELTA_NET at
// `at`: the same checks, so that a state read in place is never also needed in the GATED_DELTA_NET's own output.
// ggml-cuda.cu asserts the two agree where it launches.
bool takes_cache_fusion(const ggml_cgraph * g, int at) {
    const ggml_tensor * gdn = g->nodes[at];
    const ggml_tensor * v   = gdn->src[2];
    if (gdn->type != GGML_TYPE_F32 || (gdn->flags & GGML_TENSOR_FLAG_OUTPUT) || v == nullptr) {
        return false;
    }
    const int64_t S_v = v->ne[0], H = v->ne[1], n_tokens = v->ne[2], n_seqs = v->ne[3];
    const int64_t D         = S_v * S_v * H;
    const int64_t n_written = std::min<int64_t>(n_tokens, ggml_get_op_params_i32(gdn, 0));
    const int     i_cpy     = next_real_node(g, at);
    if (i_cpy >= g->n_nodes) {
        return false;
    }
    const ggml_tensor * cpy = g->nodes[i_cpy];
    if (cpy->op != GGML_OP_CPY || (cpy->flags & GGML_TENSOR_FLAG_OUTPUT)) {
        return false;
    }
    const ggml_tensor * src = cpy->src[0];
    const ggml_tensor * dst = cpy->src[1];
    return src != nullptr && dst != nullptr && src->op == GGML_OP_VIEW && src->view_src == gdn &&
           src->view_offs == ggml_row_size(GGML_TYPE_F32, S_v * H * n_tokens * n_seqs) && ggml_is_contiguous(src) &&
           dst->op == GGML_OP_VIEW && is_f32(dst) && dst->ne[0] == D && dst->ne[1] == n_seqs &&
           dst->ne[2] == n_written && dst->ne[3] == 1 && dst->nb[0] == sizeof(float) &&
           dst->nb[1] == ggml_row_size(GGML_TYPE_F32, D);
}

// The recurrent state of a GATED_DELTA_NET at one token of one sequence, read where it lies. build_rs copies the
// sequence's row of the layer's state cache with GET_ROWS (2 MiB per layer at the 35B shapes), the GATED_DELTA_NET
// reads the copy, and stock's cache fusion writes the new state into the cache row kv_head. Here the GET_ROWS is
// skipped and the kernel reads row index[0] of the cache. Only where that is the same data: the GET_ROWS read by the
// GATED_DELTA_NET alone (through its reshape), nothing writing over the cache or the index in between, one sequence
// (each thread reads its own state elements before it writes them, so the row read may be the row written), and
// the cache fusion taking the GATED_DELTA_NET (its output then never holds the state).
void match_state_rows(const GraphIndex & gi, int at) {
    const ggml_cgraph * g     = gi.graph;
    const ggml_tensor * gdn   = g->nodes[at];
    const ggml_tensor * state = gdn->src[5];
    const ggml_tensor * v     = gdn->src[2];
    if (!is_f32(gdn) || v == nullptr || v->ne[2] != 1 || v->ne[3] != 1 || state == nullptr || !is_f32(state) ||
        !ggml_is_contiguous(state) || !takes_cache_fusion(g, at)) {
        return reject(g, at, __LINE__);  // one token of one sequence, with stock's cache fusion
    }
    const ggml_tensor * rows = storage_of(state);
    if (rows->op != GGML_OP_GET_ROWS || !is_f32(rows) || !ggml_is_contiguous(rows) || state->view_offs != 0 ||
        ggml_nelements(rows) != ggml_nelements(state) || rows->ne[1] != 1) {
        return reject(g, at, __LINE__);
    }
    const ggml_tensor * cache = rows->src[0];
    const ggml_tensor * index = rows->src[1];
    if (!is_f32(cache) || cache->ne[0] != rows->ne[0] || cache->nb[0] != sizeof(float) ||
        cache->nb[1] % sizeof(float) != 0 || index == nullptr || index->type != GGML_TYPE_I32 ||
        index->data == nullptr || ggml_nelements(index) != 1) {
        return reject(g, at, __LINE__);
    }
    const int i_rows = gi.position(rows);
    if (i_rows < 0 || i_rows >= at || !claimable(g, { i_rows }) || !gi.read_only_by(rows, at) ||
        !untouched_between(g, i_rows, at, {}, cache) || !untouched_between(g, i_rows, at, {}, index)) {
        return reject(g, at, __LINE__);
    }
    plan.roles[i_rows] = fusekit_gdn_role::skip;
    // sabotage (FUSEKIT_GDN_SABOTAGE): every sequence reads row 0 of the cache, wrong wherever the index is not 0
    plan.state_rows[at] = { (const float *) cache->data, (const int32_t *) index->data,
                            FUSEKIT_GDN_SABOTAGE ? 0 : int64_t(cache->nb[1] / sizeof(float)) };
}

}  // namespace

bool fusekit_gdn_chains_state_rows(const ggml_cgraph * cgraph, int node_idx, fusekit_gdn_state_rows & rows) {
    if (plan.graph != cgraph || plan.n_nodes != cgraph->n_nodes) {
        return false;
    }
    const auto it = plan.state_rows.find(node_idx);
    if (it == plan.state_rows.end()) {
        return false;
    }
    rows = it->second;
    return true;
}

void fusekit_gdn_chains_plan(const ggml_cgraph * cgraph, bool enabled) {
    plan.graph   = nullptr;
    plan.n_nodes = 0;
    plan.roles.clear();
    plan.fused.clear();
    plan.state_rows.clear();
    static const bool disabled = getenv("GGML_CUDA_DISABLE_FUSION") != nullptr && atoi(getenv("GGML_CUDA_DISABLE_FUSION"));
    if (!enabled || disabled) {
        return;  // ggml_cuda_try_fuse does not ask for roles then either
    }
    // most graphs have no one-token gated delta net or conv window: leave them at a single pass. A prompt's graph
    // has SSM_CONV too, with a window of 3 + n_tokens columns: planning every prompt graph is the suspected cause of
    // the conv-window experiment's 1.8% slower pp4096 in session 14 (the host plans before the ubatch's launches).
    bool any = false;
    for (int i = 0; i < cgraph->n_nodes && !any; ++i) {
        const ggml_tensor * n = cgraph->nodes[i];
        any = n->op == GGML_OP_GATED_DELTA_NET && n->src[2] != nullptr && n->src[2]->ne[2] == 1;
        any = any || (FUSEKIT_GDN_CONV_WINDOW && n->op == GGML_OP_SSM_CONV && n->src[0] != nullptr &&
                      n->src[0]->ne[0] == fusekit_gdn::kConvWidth);
    }
    if (!any) {
        return;
    }
    plan.graph   = cgraph;
    plan.n_nodes = cgraph->n_nodes;
    plan.roles.assign(cgraph->n_nodes, fusekit_gdn_role::none);

    const GraphIndex gi(cgraph);
    for (int i = 0; i < cgraph->n_nodes; ++i) {
        if (cgraph->nodes[i]->op == GGML_OP_GATED_DELTA_NET) {
            match_prologue(gi, i);
            if (FUSEKIT_GDN_STATE_ROWS) {
                match_state_rows(gi, i);
            }
        } else if (cgraph->nodes[i]->op == GGML_OP_UNARY && plan.roles[i] == fusekit_gdn_role::none) {
            match_gated_norm(gi, i);
        } else if (FUSEKIT_GDN_CONV_WINDOW && cgraph->nodes[i]->op == GGML_OP_SSM_CONV) {
            match_conv_window(gi, i);
        }
    }
}

fusekit_gdn_role fusekit_gdn_chains_role(const ggml_cgraph * cgraph, int node_idx) {
    if (plan.graph != cgraph || plan.n_nodes != cgraph->n_nodes || node_idx < 0 || node_idx >= plan.n_nodes) {
        return fusekit_gdn_role::none;
    }
    return plan.roles[node_idx];
}

int fusekit_gdn_chains_launch(const ggml_cgraph * cgraph, int node_idx, cudaStream_t stream) {
    const auto it = plan.fused.find(node_idx);
    GGML_ASSERT(plan.graph == cgraph && it != plan.fused.end());
    const Fused & f = it->second;
    const bool launched = f.is_prologue ? fusekit_gdn::launch_prologue(f.prologue, stream)
                                        : fusekit_gdn::launch_gated_norm(f.gated_norm, stream);
    GGML_ASSERT(launched);
    CUDA_CHECK(cudaGetLastError());
    return f.covered;
}
