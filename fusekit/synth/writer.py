"""Write a synthetic GGUF: metadata and tensor infos through the pinned gguf-py, then the data streamed.

Types F32, F16, Q8_0 and Q4_0 are written directly. Any other type llama-quantize knows (K and IQ
types) is reached by writing those tensors as Q8_0 first and then running llama-quantize with
``--allow-requantize --pure`` and one ``--tensor-type`` rule per role.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import FusekitError
from . import spec as specs
from .gguflib import load_gguf
from .presets import Preset
from .tokenizer import build_vocab
from .weights import DIRECT_QUANT, FLOAT_TYPES, BlockPools, chunks, nbytes

DIRECT_TYPES = ("f16", "q8_0", "q4_0")
FILE_TYPES = {"f16": "MOSTLY_F16", "q8_0": "MOSTLY_Q8_0", "q4_0": "MOSTLY_Q4_0"}  # general.file_type
# types llama-quantize makes from Q8_0 without an importance matrix
QUANTIZE_TYPES = (
    "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "mxfp4", "bf16",
)  # fmt: skip
ALL_TYPES = DIRECT_TYPES + QUANTIZE_TYPES

Progress = Callable[[str], None]


@dataclass(frozen=True)
class SynthResult:
    path: Path
    bytes: int
    seconds: float
    write_seconds: float
    quantize_seconds: float
    tensors: int


def check_type(name: str, option: str) -> str:
    lowered = name.lower()
    if lowered not in ALL_TYPES:
        raise FusekitError(f"{option} {name!r} is not a type synth can write (known: {', '.join(ALL_TYPES)})")
    return lowered


def tensor_type(role: str, experts_type: str, dense_type: str) -> str:
    if role == "f32":
        return "f32"
    wanted = experts_type if role == "experts" else dense_type
    return wanted if wanted in DIRECT_TYPES else "q8_0"


def write_model(
    preset: Preset,
    out: Path,
    gguf_py: Path,
    experts_type: str = "q4_0",
    dense_type: str = "q8_0",
    seed: int = 0,
    quantize_bin: Path | None = None,
    progress: Progress = lambda _: None,
) -> SynthResult:
    """Write ``preset`` to ``out``; return the size and the time taken."""
    gguf = load_gguf(gguf_py)
    needs_quantize = experts_type not in DIRECT_TYPES or dense_type not in DIRECT_TYPES
    if needs_quantize and (quantize_bin is None or not quantize_bin.is_file()):
        raise FusekitError(
            f"types {experts_type}/{dense_type} need llama-quantize; build stock first ('fusekit build') "
            f"or pass --quantize-bin"
        )
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.with_name(out.name + (".q8_0.part" if needs_quantize else ".part"))
    tensors = specs.tensors(preset, gguf)
    types = [tensor_type(t.role, experts_type, dense_type) for t in tensors]
    try:
        _write_gguf(gguf, preset, stage, tensors, types, seed, progress)
        write_seconds = time.monotonic() - started
        quantize_seconds = 0.0
        if needs_quantize:
            assert quantize_bin is not None
            _quantize(quantize_bin, stage, out, experts_type, dense_type, progress)
            quantize_seconds = time.monotonic() - started - write_seconds
            stage.unlink()
        else:
            os.replace(stage, out)
    finally:
        stage.unlink(missing_ok=True)
    seconds = time.monotonic() - started
    return SynthResult(out, out.stat().st_size, seconds, write_seconds, quantize_seconds, len(tensors))


def _write_gguf(
    gguf: object,
    preset: Preset,
    path: Path,
    tensors: list[specs.TensorSpec],
    types: list[str],
    seed: int,
    progress: Progress,
) -> None:
    g = gguf  # the pinned gguf-py module
    writer = g.GGUFWriter(str(path), preset.arch)  # type: ignore[attr-defined]
    specs.metadata(writer, preset)
    vocab = build_vocab(preset.n_vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(preset.tokenizer_pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    writer.add_token_merges(vocab.merges)
    writer.add_bos_token_id(vocab.eos_id)
    writer.add_eos_token_id(vocab.eos_id)
    writer.add_pad_token_id(vocab.eos_id)
    writer.add_add_bos_token(preset.add_bos)
    writer.add_quantization_version(g.GGML_QUANT_VERSION)  # type: ignore[attr-defined]
    main_type = types[[t.role for t in tensors].index("experts")] if preset.is_moe else types[0]
    writer.add_file_type(int(g.LlamaFileType[FILE_TYPES[main_type]]))  # type: ignore[attr-defined]
    qtypes = g.GGMLQuantizationType  # type: ignore[attr-defined]
    for t, type_name in zip(tensors, types, strict=True):
        raw = qtypes[type_name.upper()]
        dtype = np.dtype(FLOAT_TYPES.get(type_name, np.float32))
        writer.add_tensor_info(t.name, t.shape, dtype, nbytes(t, type_name), raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    fout = writer.fout[0]
    pools = BlockPools(seed)
    total = sum(nbytes(t, ty) for t, ty in zip(tensors, types, strict=True))
    done = 0
    last = time.monotonic()
    for index, (t, type_name) in enumerate(zip(tensors, types, strict=True)):
        writer.write_padding(fout, fout.tell())
        rng = np.random.Generator(np.random.PCG64([seed, 1 + index]))
        for chunk in chunks(t, type_name, rng, pools):
            fout.write(chunk)
        done += nbytes(t, type_name)
        if time.monotonic() - last > 5:
            last = time.monotonic()
            progress(f"written {done / 1e9:.1f} of {total / 1e9:.1f} GB")
    writer.write_padding(fout, fout.tell())
    writer.close()


def quantize_args(experts_type: str, dense_type: str) -> list[str]:
    """llama-quantize options (and, last, its base type) giving each role its requested type.

    The base type is the dense type; expert tensors get a ``--tensor-type`` rule when they differ.
    Tensors already of the base type (a direct dense type) are requantized to the same type.
    """
    args = ["--allow-requantize", "--pure"]
    if experts_type != dense_type:
        for name in ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"):
            args += ["--tensor-type", f"{name}={experts_type}"]
    return [*args, dense_type]


def _quantize(binary: Path, src: Path, dst: Path, experts_type: str, dense_type: str, progress: Progress) -> None:
    args = quantize_args(experts_type, dense_type)
    base = args.pop()
    tmp = dst.with_name(dst.name + ".part")
    cmd = [str(binary), *args, str(src), str(tmp), base, str(os.cpu_count() or 1)]
    progress("quantizing: " + " ".join(cmd[1:]))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        text = done.stdout + done.stderr
        lines = [line for line in text.splitlines() if re.search(r"error|fail|invalid", line, re.I)]
        raise FusekitError("llama-quantize failed", detail="\n".join(lines[-20:]) or done.stderr[-2000:])
    os.replace(tmp, dst)


def find_quantize(bin_dirs: list[Path]) -> Path | None:
    for folder in bin_dirs:
        candidate = folder / "llama-quantize"
        if candidate.is_file():
            return candidate
    found = shutil.which("llama-quantize")
    return Path(found) if found else None


__all__ = ["ALL_TYPES", "DIRECT_QUANT", "SynthResult", "check_type", "find_quantize", "write_model"]
