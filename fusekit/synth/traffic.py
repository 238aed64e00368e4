"""Bytes of weights one decode token reads, from a preset's tensor plan (the roofline's numerator)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from . import spec
from .presets import Preset
from .writer import tensor_type


@dataclass(frozen=True)
class TokenTraffic:
    """Weight bytes read per decode token, split by what reads them."""

    dense: int  # every non-expert matrix and vector, read whole
    experts: int  # the routed experts' share: n_expert_used of n_expert per expert tensor
    embedding_row: int  # one row of the token embedding (a gather, not a whole read)
    file_bytes: int  # all tensor data in the file

    @property
    def total(self) -> int:
        return self.dense + self.experts + self.embedding_row


def token_traffic(preset: Preset, gguf: ModuleType, experts_type: str, dense_type: str) -> TokenTraffic:
    """Weights read by one token of decode: dense tensors whole, experts in proportion, one embedding row."""
    sizes = gguf.GGML_QUANT_SIZES
    dense = experts = embedding_row = file_bytes = 0
    for tensor in spec.tensors(preset, gguf):
        kind = gguf.GGMLQuantizationType[tensor_type(tensor.role, experts_type, dense_type).upper()]
        block, block_bytes = sizes[kind]
        nbytes = tensor.elements // block * block_bytes
        file_bytes += nbytes
        if tensor.name.startswith("token_embd"):
            embedding_row += nbytes // tensor.shape[0]
        elif tensor.role == "experts":
            experts += nbytes * preset.n_expert_used // preset.n_expert
        else:
            dense += nbytes
    return TokenTraffic(dense, experts, embedding_row, file_bytes)
