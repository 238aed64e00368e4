"""What a synthetic model holds: its metadata and its tensors, each with a role and a weight scale.

Scales: a matrix with ``k`` inputs gets weights of standard deviation ``gain / sqrt(k)``, so each
projection roughly keeps the variance of its (RMS-normalised) input; norms are 1. The output head
gets ``LOGIT_STD / sqrt(n_embd)`` so logits have a standard deviation of about ``LOGIT_STD``: with a
vocab of 10^5 that gives a peaked but not one-hot next-token distribution (see quality.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .presets import Preset

LOGIT_STD = 3.0
ROUTER_STD = 1.5  # router logits: varied top-k choices
EMBD_STD = 1.0


@dataclass(frozen=True)
class TensorSpec:
    """One tensor: name, numpy-order shape (rows last dim = ggml ne0), role and how to fill it."""

    name: str
    shape: tuple[int, ...]
    role: str  # "experts", "dense" (quantizable matrices), "f32" (kept in float32)
    std: float = 0.0  # random normal / random codes of this standard deviation
    fill: str = "random"  # "random", "ones", "uniform" (values uniform in [low, high])
    low: float = 0.0
    high: float = 0.0
    pool: int = 0  # which pool of random codes quantized data comes from (see weights.BlockPools)

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


def _mat(name: str, n_in: int, n_out: int, role: str = "dense", gain: float = 1.0) -> TensorSpec:
    return TensorSpec(name, (n_out, n_in), role, gain / math.sqrt(n_in))


def _ones(name: str, n: int) -> TensorSpec:
    return TensorSpec(name, (n,), "f32", fill="ones")


def tensors(p: Preset, gguf: ModuleType) -> list[TensorSpec]:
    """Every tensor the pinned llama.cpp loads for this preset, in file order."""
    names = gguf.TENSOR_NAMES
    T = gguf.MODEL_TENSOR

    def n(t: Any, bid: int | None = None, suffix: str = ".weight") -> str:
        return names[t].format(bid=bid) + suffix

    # A tied model's embedding is also its output head: scale it for the logits (the first
    # RMS norm makes the input side independent of the scale).
    embd_std = LOGIT_STD / math.sqrt(p.n_embd) if p.tied_output else EMBD_STD
    embd = TensorSpec(n(T.TOKEN_EMBD), (p.n_vocab, p.n_embd), "dense", embd_std, pool=0 if p.tied_output else 1)
    out = [embd, _ones(n(T.OUTPUT_NORM), p.n_embd)]
    if not p.tied_output:
        out.append(_mat(n(T.OUTPUT), p.n_embd, p.n_vocab, gain=LOGIT_STD))
    q_width = p.n_head * p.head_dim
    kv_width = p.n_head_kv * p.head_dim
    for i in range(p.n_layer):
        out.append(_ones(n(T.ATTN_NORM, i), p.n_embd))
        if p.is_full_attention(i):
            gated = 2 if p.arch == "qwen35moe" else 1  # qwen3.5 attention: query and output gate
            out += [
                _mat(n(T.ATTN_Q, i), p.n_embd, q_width * gated),
                _mat(n(T.ATTN_K, i), p.n_embd, kv_width),
                _mat(n(T.ATTN_V, i), p.n_embd, kv_width),
                _mat(n(T.ATTN_OUT, i), q_width, p.n_embd, gain=p.branch_gain),
            ]
            if p.arch in ("qwen3", "qwen35moe"):
                out += [_ones(n(T.ATTN_Q_NORM, i), p.head_dim), _ones(n(T.ATTN_K_NORM, i), p.head_dim)]
        else:
            out += _gated_delta_net(p, i, n, T)
        out += _ffn(p, i, n, T)
    return out


def _gated_delta_net(p: Preset, i: int, n: Any, T: Any) -> list[TensorSpec]:
    key_dim = p.ssm_state * p.ssm_k_heads
    value_dim = p.ssm_state * p.ssm_v_heads
    conv_dim = 2 * key_dim + value_dim
    return [
        _mat(n(T.ATTN_QKV, i), p.n_embd, conv_dim),
        _mat(n(T.ATTN_GATE, i), p.n_embd, value_dim),
        TensorSpec(n(T.SSM_CONV1D, i), (conv_dim, p.ssm_conv), "f32", 1.0 / math.sqrt(p.ssm_conv)),
        TensorSpec(n(T.SSM_DT, i, ".bias"), (p.ssm_v_heads,), "f32", fill="uniform", low=-1.0, high=1.0),
        # ssm_a = -exp(A_log): decays per step between exp(-0.1*0.7) and exp(-2*0.7)
        TensorSpec(n(T.SSM_A, i, ""), (p.ssm_v_heads,), "f32", fill="uniform", low=-2.0, high=-0.1),
        TensorSpec(n(T.SSM_BETA, i), (p.ssm_v_heads, p.n_embd), "f32", 1.0 / math.sqrt(p.n_embd)),
        TensorSpec(n(T.SSM_ALPHA, i), (p.ssm_v_heads, p.n_embd), "f32", 1.0 / math.sqrt(p.n_embd)),
        _ones(n(T.SSM_NORM, i), p.ssm_state),
        _mat(n(T.SSM_OUT, i), value_dim, p.n_embd, gain=p.branch_gain),
    ]


def _ffn(p: Preset, i: int, n: Any, T: Any) -> list[TensorSpec]:
    if not p.is_moe:
        return [
            _ones(n(T.FFN_NORM, i), p.n_embd),
            _mat(n(T.FFN_GATE, i), p.n_embd, p.n_ff),
            _mat(n(T.FFN_UP, i), p.n_embd, p.n_ff),
            _mat(n(T.FFN_DOWN, i), p.n_ff, p.n_embd, gain=p.branch_gain),
        ]
    e, ff = p.n_expert, p.n_ff_exp
    out = [
        _ones(n(T.ATTN_POST_NORM, i), p.n_embd),
        TensorSpec(n(T.FFN_GATE_INP, i), (e, p.n_embd), "f32", ROUTER_STD / math.sqrt(p.n_embd)),
        TensorSpec(n(T.FFN_GATE_EXP, i), (e, ff, p.n_embd), "experts", 1.0 / math.sqrt(p.n_embd)),
        TensorSpec(n(T.FFN_UP_EXP, i), (e, ff, p.n_embd), "experts", 1.0 / math.sqrt(p.n_embd)),
        TensorSpec(n(T.FFN_DOWN_EXP, i), (e, p.n_embd, ff), "experts", p.branch_gain / math.sqrt(ff)),
    ]
    if p.n_ff_shexp:
        out += [
            TensorSpec(n(T.FFN_GATE_INP_SHEXP, i), (p.n_embd,), "f32", 1.0 / math.sqrt(p.n_embd)),
            _mat(n(T.FFN_GATE_SHEXP, i), p.n_embd, p.n_ff_shexp),
            _mat(n(T.FFN_UP_SHEXP, i), p.n_embd, p.n_ff_shexp),
            _mat(n(T.FFN_DOWN_SHEXP, i), p.n_ff_shexp, p.n_embd, gain=p.branch_gain),
        ]
    return out


def metadata(w: Any, p: Preset) -> None:
    """Add the architecture's hyperparameters to a ``gguf.GGUFWriter``."""
    w.add_name(f"fusekit synthetic {p.name}")
    w.add_context_length(p.n_ctx)
    w.add_embedding_length(p.n_embd)
    w.add_block_count(p.n_layer)
    w.add_head_count(p.n_head)
    w.add_head_count_kv(p.n_head_kv)
    w.add_key_length(p.head_dim)
    w.add_value_length(p.head_dim)
    w.add_rope_freq_base(p.rope_base)
    w.add_rope_dimension_count(p.rope_dims)
    w.add_layer_norm_rms_eps(p.rms_eps)
    if p.n_ff:
        w.add_feed_forward_length(p.n_ff)
    if p.rope_sections:
        w.add_rope_dimension_sections(list(p.rope_sections))
    if p.is_moe:
        w.add_expert_count(p.n_expert)
        w.add_expert_used_count(p.n_expert_used)
        w.add_expert_feed_forward_length(p.n_ff_exp)
        if p.n_ff_shexp:
            w.add_expert_shared_feed_forward_length(p.n_ff_shexp)
    if p.is_hybrid:
        w.add_ssm_conv_kernel(p.ssm_conv)
        w.add_ssm_state_size(p.ssm_state)
        w.add_ssm_group_count(p.ssm_k_heads)
        w.add_ssm_time_step_rank(p.ssm_v_heads)
        w.add_ssm_inner_size(p.ssm_state * p.ssm_v_heads)
        w.add_full_attention_interval(p.full_attn_interval)
