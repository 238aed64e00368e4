"""fusion-3's expert selection, emulated on the host: the warp argmax of stock topk_moe_cuda (which
kernels/fusekit-moe-router.cuh mirrors) picks the same experts, in the same order, as a sort by
value descending then expert id ascending, including ties, -inf entries and counts that are not a
multiple of 32. Pure logic: no GPU, no compiler."""

from __future__ import annotations

import math
import random

import pytest

WARP = 32


def warp_topk(values: list[float], k: int) -> list[int]:
    """Lane l owns experts l, l+32, ...; each round: in-lane scan (strictly greater), then an xor
    butterfly keeping the larger value or, on equal values, the lower expert id; the winner's owner
    marks it -inf. As in select_experts() / topk_moe_cuda."""
    n = len(values)
    per_lane = 1 if n <= WARP else n // WARP
    wt = [
        [values[i * WARP + lane] if i * WARP + lane < n else -math.inf for i in range(per_lane)] for lane in range(WARP)
    ]
    chosen = []
    for _ in range(k):
        best = []
        for lane in range(WARP):
            v, e = wt[lane][0], lane
            for i in range(1, per_lane):
                expert = lane + i * WARP
                if expert < n and wt[lane][i] > v:
                    v, e = wt[lane][i], expert
            best.append((v, e))
        mask = WARP // 2
        while mask:
            best = [
                best[lane ^ mask]
                if best[lane ^ mask][0] > best[lane][0]
                or (best[lane ^ mask][0] == best[lane][0] and best[lane ^ mask][1] < best[lane][1])
                else best[lane]
                for lane in range(WARP)
            ]
            mask //= 2
        assert len(set(best)) == 1, "every lane must agree on the winner"
        winner = best[0][1]
        wt[winner % WARP][winner // WARP] = -math.inf
        chosen.append(winner)
    return chosen


def reference(values: list[float], k: int) -> list[int]:
    return sorted(range(len(values)), key=lambda e: (-values[e], e))[:k]


@pytest.mark.parametrize("n_expert", [2, 4, 8, 16, 32, 64, 128, 256, 288, 512, 576])
@pytest.mark.parametrize("levels", [3, 1000, None])
def test_warp_argmax_matches_sort_by_value_then_id(n_expert: int, levels: int | None) -> None:
    rng = random.Random(n_expert * 7919 + (levels or 0))
    for _ in range(5):
        # few distinct levels: many ties; None: distinct values
        values = [float(rng.randrange(levels)) if levels else rng.uniform(-3, 3) for _ in range(n_expert)]
        for k in sorted({1, min(8, n_expert), n_expert // 2 or 1, n_expert}):
            assert warp_topk(values, k) == reference(values, k)


def test_ties_go_to_the_lower_expert_id() -> None:
    values = [0.0] * 256
    values[200] = values[7] = values[71] = 1.0
    assert warp_topk(values, 2) == [7, 71]
    assert warp_topk(values, 4) == [7, 71, 200, 0]
