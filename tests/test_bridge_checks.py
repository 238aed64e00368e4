"""Checks against the float64 reference pass on stock's CPU backend, and fail when the weights are sabotaged."""

from __future__ import annotations

import numpy as np
import pytest

from fusekit.build import BuildResult
from ggml_bridge import Bridge
from ggml_bridge.checks import check_mul_mat, check_mul_mat_id, compare, random_weights, sabotage

pytestmark = pytest.mark.slow

TOKENS = (1, 2, 4, 8, 64, 512)
QUANTIZED = ("q8_0", "q4_0", "q2_K", "iq2_xs")
CONTROLS = ("f32", "f16")
M, K = 64, 512  # small, but K holds two 256-element blocks and sixteen 32-element ones


@pytest.fixture(scope="module")
def bridge(stock_build: BuildResult) -> Bridge:
    with Bridge(stock_build.bin_dir, "CPU", threads=2) as b:
        yield b


@pytest.mark.parametrize("type_name", QUANTIZED + CONTROLS)
def test_mul_mat_matches_reference(bridge: Bridge, type_name: str) -> None:
    for i, n in enumerate(TOKENS):
        result, _ = check_mul_mat(bridge, type_name, M, K, n, seed=100 + i)
        assert result.passed, result.line()


@pytest.mark.parametrize("type_name", QUANTIZED)
def test_sabotaged_quantized_weights_fail_every_check(bridge: Bridge, type_name: str) -> None:
    for i, n in enumerate(TOKENS):
        result, _ = check_mul_mat(bridge, type_name, M, K, n, seed=200 + i, corrupt=True)
        assert not result.passed, result.line()


@pytest.mark.parametrize("type_name", CONTROLS)
def test_sabotage_leaves_controls_passing(bridge: Bridge, type_name: str) -> None:
    for i, n in enumerate(TOKENS):
        result, _ = check_mul_mat(bridge, type_name, M, K, n, seed=300 + i, corrupt=True)
        assert result.passed, result.line()


@pytest.mark.parametrize("type_name", ("q4_0", "q2_K", "f16"))
def test_mul_mat_id(bridge: Bridge, type_name: str) -> None:
    args = (bridge, type_name, 32, 256, 6, 8, 4)  # 8 experts, 4 per token, 6 tokens
    assert check_mul_mat_id(*args, seed=1).passed
    assert not check_mul_mat_id(*args, seed=2, wrong_ids=True).passed  # a wrong expert index is caught
    sabotaged = check_mul_mat_id(*args, seed=3, corrupt=True)
    assert sabotaged.passed == (type_name == "f16")


def test_sabotage_moves_every_block() -> None:
    packed = np.arange(2 * 3 * 34, dtype=np.uint8).reshape(2, 3 * 34)  # 2 rows of three q8_0 blocks (34 bytes)
    moved = sabotage("q8_0", packed, 96)
    blocks, moved_blocks = packed.reshape(-1, 34), moved.reshape(-1, 34)
    assert all(not np.array_equal(a, b) for a, b in zip(blocks, moved_blocks, strict=True))
    assert sabotage("f16", packed, 96) is packed


def test_unwritten_output_is_caught() -> None:
    ref = np.ones((2, 4))
    got = ref.astype(np.float32).copy()
    got[1, 3] = np.nan  # what a poisoned element looks like when the kernel skipped it
    nmse, _, nonfinite, passed = compare("q8_0", got, ref, np.ones_like(ref))
    assert not passed and nonfinite == 1 and nmse == float("inf")


def test_outputs_are_poisoned_before_the_run(bridge: Bridge) -> None:
    with bridge._graph(2, 4) as g:
        t = bridge.lib.ggml_new_tensor_1d(g.ctx, 0, 16)
        g.allocate()
        bridge._poison(t)
        assert np.isnan(bridge._get_f32(t, (16,))).all()


def test_quantize_dequantize_round_trip_is_close(bridge: Bridge) -> None:
    w = np.random.default_rng(0).standard_normal((8, 256), dtype=np.float32)
    back = bridge.dequantize("q8_0", bridge.quantize("q8_0", w), 256)
    assert np.abs(back - w).max() < 0.05


def test_every_timed_product_reads_its_own_activation_tensor(bridge: Bridge) -> None:
    """A variant that quantizes a tensor once for all its consumers (fusion-1) would otherwise skip, in the race, the
    per-node quantization stock pays: each node of the timing graph reads its own tensor, all of the same values."""
    packed = bridge.quantize("q8_0", random_weights(7, M, K))
    g = bridge.timing_graph("q8_0", packed, K, 2, copies=3, nodes=5)
    try:
        addresses = {int(bridge.ffi.cast("uintptr_t", t)) for t in g.activations}
        assert len(g.activations) == 5 and len(addresses) == 5
        assert bridge.lib.ggml_graph_n_nodes(g.graph) == 5
        first = bridge._get_f32(g.activations[0], (2, K))
        for act in g.activations[1:]:
            assert np.array_equal(bridge._get_f32(act, (2, K)), first)
        g.compute()
    finally:
        g.close()
