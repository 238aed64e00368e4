// Host-side check of the router's selection by rank (fusekit-moe-router.cuh, fusion-3's default since session 13,
// first the experiment fusion-3-rank-select), for machines without a GPU.
//
//   nvcc -O2 -std=c++17 -Ikernels -o moe_router_host_check kernels/moe_router_host_check.cu && ./moe_router_host_check [--sabotage]
//
// select_experts (stock topk_moe_cuda's order of operations) picks experts in n_used rounds of warp argmax;
// select_experts_by_rank gives each live candidate its round at once (live_rank) and then normalises with the
// lanes' sums in the same order (lane_picked_sum, routing_weight). This program emulates the rounds lane by lane,
// written from select_experts' code and independent of the rank helpers, and runs the helpers in the rank
// kernel's data flow on the same softmax slots. Checked, per case:
//   - ids identical and weights identical bit for bit (the experiment's claim: the same selection, the same
//     arithmetic), on random, heavily tied, zero (underflowed) and -FLT_MAX (NaN in stock) probabilities, with and
//     without normalisation and scale, for every expert count the router supports and k from 1 to 32;
//   - the ranks of the picked candidates are distinct (no two threads write the same output slot);
//   - the pruning (lane_max_rank, can_be_picked, live_rank): every candidate below the bound ranks at least n_pick
//     among all candidates, every live one has the same rank among the live as among all (selection_rank).
// What it cannot see: the softmax itself (both selections start from the same slots on the GPU), shared memory,
// the shuffles, timing. --sabotage runs the rank side with the kernel's sabotage switch (drop the best expert)
// against the honest rounds: it exits 0 only if every value check fails.
#include "fusekit-moe-router.cuh"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace fusekit_moe;

struct Tally {
    int checks = 0, failures = 0;          // all checks
    int value_checks = 0, value_failures = 0;  // the ids/weights checks, which the sabotage switch must break
    void value(bool ok) {
        ++checks;
        ++value_checks;
        failures += ok ? 0 : 1;
        value_failures += ok ? 0 : 1;
    }
    void rule(bool ok, const char * what) {
        ++checks;
        if (!ok) {
            ++failures;
            std::printf("FAIL: %s\n", what);
        }
    }
};

struct Selection {
    std::vector<int>   ids;
    std::vector<float> weights;
};

// warp_sum's butterfly: lane l adds lane l ^ offset for offsets 16, 8, 4, 2, 1; every lane ends with lane 0's sum.
float butterfly_sum(const float (&lanes_in)[kWarp]) {
    float v[kWarp];
    std::memcpy(v, lanes_in, sizeof v);
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
        float next[kWarp];
        for (int l = 0; l < kWarp; ++l) {
            next[l] = v[l] + v[l ^ offset];
        }
        std::memcpy(v, next, sizeof v);
    }
    return v[0];
}

// select_experts' rounds from the softmax slots (slot i * 32 + l is lane l's wt[i]), lane by lane.
Selection by_rounds(const std::vector<float> & slots, int ept, int n_expert, int n_used, bool norm, float clamp,
                    float scale, bool sabotage) {
    float wt[kWarp][kMaxEpt], out_w[kWarp][kMaxEpt] = {}, wt_sum[kWarp] = {};
    for (int l = 0; l < kWarp; ++l) {
        for (int i = 0; i < ept; ++i) {
            wt[l][i] = slots[size_t(i) * kWarp + l];
        }
    }
    Selection s{std::vector<int>(n_used, -1), std::vector<float>(n_used, NAN)};
    const int rounds = n_used + (sabotage ? 1 : 0);
    for (int r = 0; r < rounds; ++r) {
        float max_v[kWarp];
        int   max_e[kWarp];
        for (int l = 0; l < kWarp; ++l) {
            max_v[l] = wt[l][0];
            max_e[l] = l;
            for (int i = 1; i < ept; ++i) {
                const int expert = l + i * kWarp;
                if (expert < n_expert && wt[l][i] > max_v[l]) {
                    max_v[l] = wt[l][i];
                    max_e[l] = expert;
                }
            }
        }
        for (int mask = kWarp / 2; mask > 0; mask /= 2) {
            float nv[kWarp];
            int   ne[kWarp];
            for (int l = 0; l < kWarp; ++l) {
                const float v = max_v[l ^ mask];
                const int   e = max_e[l ^ mask];
                const bool  take = v > max_v[l] || (v == max_v[l] && e < max_e[l]);
                nv[l] = take ? v : max_v[l];
                ne[l] = take ? e : max_e[l];
            }
            std::memcpy(max_v, nv, sizeof nv);
            std::memcpy(max_e, ne, sizeof ne);
        }
        for (int l = 0; l < kWarp; ++l) {
            if ((max_e[l] & (kWarp - 1)) == l) {
                wt[l][max_e[l] / kWarp] = -INFINITY;
            }
        }
        const int k = r - (sabotage ? 1 : 0);
        if (k < 0) {
            continue;
        }
        for (int l = 0; l < kWarp; ++l) {
            if ((k & (kWarp - 1)) == l) {
                out_w[l][k / kWarp] = max_v[l];
            }
            if ((max_e[l] & (kWarp - 1)) == l) {
                s.ids[k] = max_e[l];
                if (norm) {
                    wt_sum[l] += max_v[l];
                }
            }
        }
    }
    if (norm) {
        const float inv = 1.0f / std::fmax(butterfly_sum(wt_sum), clamp);
        for (int l = 0; l < kWarp; ++l) {
            for (int i = 0; i < ept; ++i) {
                out_w[l][i] *= inv;
            }
        }
    }
    for (int l = 0; l < kWarp; ++l) {
        for (int i = 0; i < ept; ++i) {
            const int idx = i * kWarp + l;
            if (idx < n_used) {
                s.weights[idx] = out_w[l][i] * scale;
            }
        }
    }
    return s;
}

// The round in which select_experts picks candidate c of probs[0, n): the number of candidates picked before it
// (every candidate ranked against all; the kernel ranks only the live ones, live_rank, which must agree).
int selection_rank(const float * probs, int n, int c) {
    int rank = 0;
    for (int j = 0; j < n; ++j) {
        rank += picked_before(probs[j], j, probs[c], c) ? 1 : 0;
    }
    return rank;
}

// What the pruning does, per case: how many candidates were ranked, and whether it kept its two promises (a
// pruned candidate ranks at least n_pick among all; a live one's rank among the live equals its rank among all).
struct Pruning {
    int  live  = 0;
    bool sound = true;
};

// select_experts_by_rank's data flow with the kernel's own helpers: the bound from the lanes' maxima (the lowest
// lane of the right rank, as __ffs of the ballot), the live candidates in ballot order (slot i of lanes 0..31, then
// slot i + 1), each ranked among them, the picked ones stored by rank, lane sums butterflied, weights. `distinct` is
// false if two candidates got the same output slot.
Selection by_rank(const std::vector<float> & slots, int n_used, bool norm, float clamp, float scale, bool sabotage,
                  bool & distinct, Pruning & pruning) {
    const int        n_cand  = int(slots.size());
    const int        ept     = n_cand / kWarp;
    const int        dropped = sabotage ? 1 : 0;
    const int        n_pick  = n_used + dropped;
    std::vector<int> picked_id(n_cand, -1);
    Selection        s{std::vector<int>(n_used, -1), std::vector<float>(n_used, NAN)};
    float            lane_max[kWarp];
    for (int l = 0; l < kWarp; ++l) {
        float m = slots[l];
        for (int i = 0; i < ept; ++i) {
            m = slots[i * kWarp + l] > m ? slots[i * kWarp + l] : m;
        }
        lane_max[l] = m;
    }
    float bound = -INFINITY;
    if (n_pick <= kWarp) {
        for (int l = kWarp - 1; l >= 0; --l) {
            bound = lane_max_rank(lane_max, l) == n_pick - 1 ? lane_max[l] : bound;
        }
    }
    std::vector<int> live;
    for (int i = 0; i < ept; ++i) {
        for (int l = 0; l < kWarp; ++l) {
            if (can_be_picked(slots[i * kWarp + l], bound)) {
                live.push_back(i * kWarp + l);
            }
        }
    }
    pruning = { int(live.size()), true };
    for (int c = 0; c < n_cand; ++c) {
        const bool is_live = std::find(live.begin(), live.end(), c) != live.end();
        const int  full    = selection_rank(slots.data(), n_cand, c);
        pruning.sound = pruning.sound && (is_live ? live_rank(live.data(), int(live.size()), slots.data(), c) == full
                                                  : full >= n_pick);
    }
    distinct = true;
    for (const int c : live) {
        const int k = live_rank(live.data(), int(live.size()), slots.data(), c) - dropped;
        if (k >= 0 && k < n_used) {
            distinct = distinct && picked_id[k] < 0;
            picked_id[k] = c;
            s.ids[k]     = c;
        }
    }
    float inv = 1.0f;
    if (norm) {
        float lanes[kWarp];
        for (int l = 0; l < kWarp; ++l) {
            lanes[l] = lane_picked_sum(picked_id.data(), slots.data(), n_used, l);
        }
        inv = 1.0f / std::fmax(butterfly_sum(lanes), clamp);
    }
    for (int k = 0; k < n_used; ++k) {
        s.weights[k] = routing_weight(slots[picked_id[k]], norm, inv, scale);
    }
    return s;
}

enum class Values { random, tied, with_zeros, with_nan_marks };

// Softmax slots as warp 0 holds them: probabilities for the experts, 0 for the slots past n_expert.
std::vector<float> make_slots(int ept, int n_expert, Values kind, std::mt19937 & rng) {
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::uniform_int_distribution<int>    pick(0, 3);
    std::vector<float>                    slots(size_t(ept) * kWarp, 0.0f);
    float                                 total = 0.0f;
    for (int e = 0; e < n_expert; ++e) {
        float v = u(rng);
        if (kind == Values::tied) {
            v = 0.125f * float(1 + pick(rng));  // four distinct values among up to 576 experts
        }
        slots[e] = v;
        total += v;
    }
    for (int e = 0; e < n_expert; ++e) {
        slots[e] /= total;
        if (kind == Values::with_zeros && pick(rng) == 0) {
            slots[e] = 0.0f;  // underflowed expf: ties with the slots past n_expert
        }
        if (kind == Values::with_nan_marks && pick(rng) == 0) {
            slots[e] = -FLT_MAX;  // what softmax_like_topk_moe makes of NaN
        }
    }
    return slots;
}

bool same_bits(const Selection & a, const Selection & b) {
    return a.ids == b.ids && std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * sizeof(float)) == 0;
}

}  // namespace

int main(int argc, char ** argv) {
    const bool   sabotage = argc > 1 && std::strcmp(argv[1], "--sabotage") == 0;
    std::mt19937 rng(20261201);
    Tally        t;
    const int    expert_counts[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 288, 512, 576 };
    const int    k_values[]      = { 1, 2, 3, 7, 8, 9, 16, 32 };
    const Values kinds[] = { Values::random, Values::tied, Values::with_zeros, Values::with_nan_marks };
    int          first_failures = 0;
    int          live_35b = 0, cases_35b = 0;  // candidates ranked at the 35B shape (256 experts, k = 8)
    for (const int n_expert : expert_counts) {
        const int ept = experts_per_lane(n_expert);
        if (ept == 0) {
            std::printf("FAIL: no instantiation for %d experts\n", n_expert);
            return 1;
        }
        for (const int n_used : k_values) {
            if (n_used > n_expert) {
                continue;
            }
            for (const Values kind : kinds) {
                for (int variant = 0; variant < 4; ++variant) {
                    const bool  norm  = variant % 2 == 0;
                    const float scale = variant < 2 ? 1.0f : 2.5f;
                    const float clamp = norm ? 6.103515625e-5f : -INFINITY;
                    const std::vector<float> slots = make_slots(ept, n_expert, kind, rng);
                    const Selection rounds = by_rounds(slots, ept, n_expert, n_used, norm, clamp, scale, false);
                    bool            distinct = false;
                    Pruning         pruning;
                    const Selection rank = by_rank(slots, n_used, norm, clamp, scale, sabotage, distinct, pruning);
                    const bool      ok   = same_bits(rounds, rank);
                    t.value(ok);
                    t.rule(distinct, "two candidates share a rank");
                    t.rule(pruning.sound, "the pruning dropped a candidate that could be picked, or changed a live candidate's rank");
                    if (n_expert == 256 && n_used == 8 && kind == Values::random) {
                        live_35b += pruning.live;
                        cases_35b += 1;
                    }
                    if (!ok && !sabotage && first_failures++ < 5) {
                        std::printf("FAIL: %d experts, k = %d, kind %d, norm %d, scale %g: ids or weights differ\n",
                                    n_expert, n_used, int(kind), int(norm), double(scale));
                    }
                }
            }
        }
    }
    if (sabotage) {
        std::printf("sabotage: %d of %d value checks wrong (all must be)\n", t.value_failures, t.value_checks);
        return t.value_failures == t.value_checks ? 0 : 1;
    }
    std::printf("candidates ranked at 256 experts, k = 8, random probabilities: %.1f of 256 on average\n",
                double(live_35b) / (cases_35b ? cases_35b : 1));
    std::printf("%d of %d host checks passed\n", t.checks - t.failures, t.checks);
    return t.failures == 0 ? 0 : 1;
}
