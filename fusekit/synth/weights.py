"""Random tensor data, produced chunk by chunk so that memory stays bounded whatever the model size.

Quantized types (Q8_0, Q4_0) are written directly: each block holds a fixed fp16 scale ``d`` and
random codes, so the weights have standard deviation ``d * code_std``. Codes come from a 32 MiB
pool of random codes per format (numpy PCG64); each 4 MiB chunk of a tensor copies the pool at a
random block offset and stamps the scale into every block (about 9 GB/s on one core), so the file
streams at disk speed. Neighbouring experts and layers therefore get different slices of the pool;
weights repeat only across slices 32 MiB apart, which no kernel or router can exploit.
Small float tensors (norms, routers, gated-delta-net parameters) are fully random.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .spec import TensorSpec

POOL_BYTES = 32 << 20
CHUNK_BYTES = 4 << 20
FLOAT_CHUNK = 1 << 22  # elements per chunk of a float tensor


@dataclass(frozen=True)
class BlockFormat:
    name: str
    block: int  # weights per block
    nbytes: int  # bytes per block
    code_std: float  # standard deviation of the integer code of a uniformly random byte


# Codes are uniform and symmetric around zero: -127..127 for Q8_0, nibbles 1..15 (minus 8: -7..7) for
# Q4_0. A code mean of -0.5 (all 256 bytes, all 16 nibbles) gives every output of a matrix the same
# offset; through SiLU(gate) * up it adds up coherently over the 512 expert rows, and after a few
# layers the residual stream points along one direction and every position predicts the same token.
DIRECT_QUANT = {
    "q8_0": BlockFormat("q8_0", 32, 34, float(np.sqrt((255**2 - 1) / 12))),
    "q4_0": BlockFormat("q4_0", 32, 18, float(np.sqrt((15**2 - 1) / 12))),
}
FLOAT_TYPES = {"f32": np.float32, "f16": np.float16}


def nbytes(spec: TensorSpec, type_name: str) -> int:
    if type_name in FLOAT_TYPES:
        return spec.elements * np.dtype(FLOAT_TYPES[type_name]).itemsize
    fmt = DIRECT_QUANT[type_name]
    if spec.shape[-1] % fmt.block:
        raise ValueError(f"{spec.name}: row of {spec.shape[-1]} is not a multiple of {fmt.block}")
    return spec.elements // fmt.block * fmt.nbytes


class BlockPools:
    """Pools of random codes per (block format, pool id), made once; chunks are slices of them.

    The input embedding has a pool of its own: were an output-head row the same slice as a token's
    embedding, that token's logit would stand out whenever the residual stream still holds it.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._pools: dict[tuple[str, int], np.ndarray] = {}
        self._buffers: dict[str, np.ndarray] = {}

    def pool(self, fmt: BlockFormat, pool_id: int = 0) -> np.ndarray:
        key = (fmt.name, pool_id)
        if key not in self._pools:
            rng = np.random.Generator(np.random.PCG64([self.seed, len(self._pools)]))
            self._pools[key] = _random_codes(fmt, rng, POOL_BYTES // fmt.nbytes * fmt.nbytes)
        return self._pools[key]

    def buffer(self, fmt: BlockFormat) -> np.ndarray:
        if fmt.name not in self._buffers:
            self._buffers[fmt.name] = np.empty(CHUNK_BYTES // fmt.nbytes * fmt.nbytes, dtype=np.uint8)
        return self._buffers[fmt.name]


def _random_codes(fmt: BlockFormat, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` bytes of blocks of ``fmt`` with zero-mean random codes (the scale bytes are overwritten later)."""
    if fmt.name == "q8_0":
        return rng.integers(-127, 128, size=size, dtype=np.int8).view(np.uint8)
    low = rng.integers(1, 16, size=size, dtype=np.uint8)
    return low | (rng.integers(1, 16, size=size, dtype=np.uint8) << 4)


def chunks(spec: TensorSpec, type_name: str, rng: np.random.Generator, pools: BlockPools) -> Iterator[memoryview]:
    """The bytes of one tensor, in order, in chunks of a few MiB (valid until the next chunk is taken)."""
    if type_name in FLOAT_TYPES:
        yield from _float_chunks(spec, np.dtype(FLOAT_TYPES[type_name]), rng)
        return
    fmt = DIRECT_QUANT[type_name]
    scale = np.float16(spec.std / fmt.code_std)
    if not np.isfinite(scale) or scale == 0:
        raise ValueError(f"{spec.name}: scale {spec.std / fmt.code_std} does not fit fp16")
    pool, buffer = pools.pool(fmt, spec.pool), pools.buffer(fmt)
    pool_blocks = pool.size // fmt.nbytes
    chunk_blocks = buffer.size // fmt.nbytes
    left = spec.elements // fmt.block
    while left:
        take = min(left, chunk_blocks)
        start = int(rng.integers(0, pool_blocks - take + 1)) * fmt.nbytes
        out = buffer[: take * fmt.nbytes]
        out[:] = pool[start : start + out.size]
        out.view(np.uint16).reshape(take, fmt.nbytes // 2)[:, 0] = scale.view(np.uint16)  # the fp16 scale d
        yield memoryview(out)
        left -= take


def _float_chunks(spec: TensorSpec, dtype: np.dtype, rng: np.random.Generator) -> Iterator[memoryview]:
    left = spec.elements
    while left:
        take = min(left, FLOAT_CHUNK)
        if spec.fill == "ones":
            values = np.ones(take, dtype=np.float32)
        elif spec.fill == "uniform":
            values = rng.uniform(spec.low, spec.high, size=take).astype(np.float32)
        else:
            values = rng.standard_normal(take, dtype=np.float32) * np.float32(spec.std)
        yield memoryview(values.astype(dtype, copy=False))
        left -= take
