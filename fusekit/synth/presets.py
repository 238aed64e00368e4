"""Preset tables: the shapes and hyperparameters of the models ``fusekit model synth`` writes.

Each preset is one :class:`Preset` row. Options (``--layers``, ``--hidden`` ...) make reduced copies
with :func:`reduced`; every other number stays as in the real model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import FusekitError


@dataclass(frozen=True)
class Preset:
    """Shapes of one model family member, in the terms of llama.cpp's GGUF metadata."""

    name: str
    arch: str  # llama.cpp architecture name (general.architecture)
    description: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_ctx: int
    n_head: int
    n_head_kv: int
    head_dim: int
    rope_base: float
    rope_dims: int
    rms_eps: float
    tokenizer_pre: str
    tied_output: bool = False
    add_bos: bool = False
    n_ff: int = 0  # dense feed-forward width (0: the model has none)
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    rope_sections: tuple[int, ...] = ()
    ssm_conv: int = 0  # gated delta net: conv kernel
    ssm_state: int = 0  # head dimension of keys and values
    ssm_k_heads: int = 0
    ssm_v_heads: int = 0
    full_attn_interval: int = 0  # every N-th layer is full attention, the others gated delta net
    # weight scale of each block's output projection (attention and gated-delta-net out, FFN and expert down): at 1 a
    # block adds as much as the residual holds and 40 layers amplify any fp32 order change into different text; well
    # below 1 the residual keeps the embedding, and such changes stay as small as they are (a "tame" model for KL)
    branch_gain: float = 1.0

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0

    @property
    def is_hybrid(self) -> bool:
        return self.full_attn_interval > 0

    def is_full_attention(self, layer: int) -> bool:
        return not self.is_hybrid or (layer + 1) % self.full_attn_interval == 0

    def summary(self) -> str:
        parts = [f"{self.arch}", f"{self.n_layer} layers", f"hidden {self.n_embd}", f"vocab {self.n_vocab}"]
        if self.is_moe:
            parts.append(f"{self.n_expert} experts of {self.n_ff_exp}, {self.n_expert_used} used")
        if self.n_ff_shexp:
            parts.append(f"shared expert {self.n_ff_shexp}")
        if self.n_ff:
            parts.append(f"ffn {self.n_ff}")
        parts.append(f"attention {self.n_head}/{self.n_head_kv} heads of {self.head_dim}")
        if self.is_hybrid:
            parts.append(
                f"gated delta net {self.ssm_k_heads}k/{self.ssm_v_heads}v heads of {self.ssm_state}, "
                f"conv {self.ssm_conv}, full attention every {self.full_attn_interval}"
            )
        if self.branch_gain != 1.0:
            parts.append(f"branch gain {self.branch_gain:g}")
        return ", ".join(parts)


QWEN36_35B_A3B = Preset(
    name="qwen3.6-35b-a3b",
    arch="qwen35moe",
    description="Qwen3.6-35B-A3B shapes: hybrid gated-delta-net / attention MoE",
    n_layer=40,
    n_embd=2048,
    n_vocab=248320,
    n_ctx=262144,
    n_head=16,
    n_head_kv=2,
    head_dim=256,
    rope_base=10_000_000.0,
    rope_dims=64,
    rope_sections=(11, 11, 10, 0),
    rms_eps=1e-6,
    tokenizer_pre="qwen35",
    n_expert=256,
    n_expert_used=8,
    n_ff_exp=512,
    n_ff_shexp=512,
    ssm_conv=4,
    ssm_state=128,
    ssm_k_heads=16,
    ssm_v_heads=32,
    full_attn_interval=4,
)

QWEN3_1_7B = Preset(
    name="qwen3-1.7b",
    arch="qwen3",
    description="Qwen3-1.7B shapes: dense, QK-norm, tied embeddings",
    n_layer=28,
    n_embd=2048,
    n_vocab=151936,
    n_ctx=40960,
    n_head=16,
    n_head_kv=8,
    head_dim=128,
    rope_base=1_000_000.0,
    rope_dims=128,
    rms_eps=1e-6,
    tokenizer_pre="qwen2",
    tied_output=True,
    n_ff=6144,
)

LLAMA3_8B = Preset(
    name="llama-3-8b",
    arch="llama",
    description="Llama-3-8B shapes: dense, GQA",
    n_layer=32,
    n_embd=4096,
    n_vocab=128256,
    n_ctx=8192,
    n_head=32,
    n_head_kv=8,
    head_dim=128,
    rope_base=500_000.0,
    rope_dims=128,
    rms_eps=1e-5,
    tokenizer_pre="llama-bpe",
    add_bos=True,
    n_ff=14336,
)

PRESETS: dict[str, Preset] = {p.name: p for p in (QWEN36_35B_A3B, QWEN3_1_7B, LLAMA3_8B)}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise FusekitError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})") from None


def reduced(preset: Preset, **changes: int | None) -> Preset:
    """A copy with some sizes changed (``None`` keeps a value); checks that the result is buildable."""
    given = {k: v for k, v in changes.items() if v is not None}
    unknown = set(given) - {f.name for f in dataclasses.fields(Preset)}
    if unknown:
        raise FusekitError(f"unknown preset fields: {', '.join(sorted(unknown))}")
    for key, value in given.items():
        if not isinstance(value, int) or value < 1:
            raise FusekitError(f"{key} must be a positive integer, got {value!r}")
    out = dataclasses.replace(preset, **given)
    if out.rope_dims > out.head_dim:  # a smaller head: rotate all of it
        out = dataclasses.replace(out, rope_dims=out.head_dim)
    if out.rope_sections and 2 * sum(out.rope_sections) > out.rope_dims:
        raise FusekitError(f"head dim {out.head_dim} is too small for rope sections {list(out.rope_sections)}")
    if out.n_embd % 32:
        raise FusekitError(f"hidden size {out.n_embd} must be a multiple of 32 (the quantization block)")
    if out.n_head % out.n_head_kv:
        raise FusekitError(f"{out.n_head} attention heads are not a multiple of {out.n_head_kv} KV heads")
    if out.is_moe and not 1 <= out.n_expert_used <= out.n_expert:
        raise FusekitError(f"experts used ({out.n_expert_used}) must be between 1 and the expert count")
    if out.is_hybrid and out.ssm_v_heads % out.ssm_k_heads:
        raise FusekitError("gated-delta-net value heads must be a multiple of key heads")
    if out.is_hybrid and out.n_layer < out.full_attn_interval:
        # llama.cpp's hybrid memory needs at least one attention layer (it aborts in the first decode)
        raise FusekitError(
            f"{out.name} needs at least {out.full_attn_interval} layers (every {out.full_attn_interval}th is attention)"
        )
    if out.n_vocab < 512:
        raise FusekitError(f"vocab {out.n_vocab} is too small (at least 512: 256 bytes, merges, specials)")
    return out
