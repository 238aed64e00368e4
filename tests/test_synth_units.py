"""fusekit model synth without llama.cpp binaries: presets, tokenizer, tensor plan, weight scales, bad input."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fusekit.cli import main
from fusekit.errors import FusekitError
from fusekit.synth import spec as specs
from fusekit.synth.gguflib import load_gguf
from fusekit.synth.presets import PRESETS, get_preset, reduced
from fusekit.synth.quality import read_logprob_rows, summarize
from fusekit.synth.tokenizer import SPECIALS, build_vocab, byte_alphabet
from fusekit.synth.weights import DIRECT_QUANT, BlockPools, chunks
from fusekit.synth.writer import check_type, quantize_args


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def gguf(pinned_home: Path):
    return load_gguf(pinned_home / "trees" / "stock" / "gguf-py")


def test_list_names_every_preset() -> None:
    out = invoke("model", "synth", "--list").output
    for name in ("qwen3.6-35b-a3b", "qwen3-1.7b", "llama-3-8b"):
        assert name in out
    assert "256 experts of 512, 8 used" in out


def test_unknown_preset_and_bad_type_are_one_line_errors(tmp_path: Path) -> None:
    result = invoke("--home", str(tmp_path / "h"), "model", "synth", "--preset", "gpt-5", "-o", str(tmp_path / "m"))
    assert result.exit_code == 1
    assert result.output.startswith("fusekit: error: unknown preset 'gpt-5'")
    result = invoke("model", "synth", "--preset", "qwen3-1.7b", "--dense-type", "q9_9", "-o", str(tmp_path / "m"))
    assert result.exit_code == 1 and "--dense-type 'q9_9' is not a type" in result.output
    result = invoke("model", "synth", "--preset", "qwen3-1.7b")
    assert result.exit_code == 1 and "-o FILE" in result.output
    with pytest.raises(FusekitError, match="multiple of 32"):
        reduced(get_preset("llama-3-8b"), n_embd=100)
    with pytest.raises(FusekitError, match="experts used"):
        reduced(get_preset("qwen3.6-35b-a3b"), n_expert=4)
    with pytest.raises(FusekitError, match="at least 4 layers"):
        reduced(get_preset("qwen3.6-35b-a3b"), n_layer=2)  # no attention layer: llama.cpp aborts
    assert check_type("Q4_K", "--experts-type") == "q4_k"


def test_qwen35moe_preset_matches_the_issue(gguf) -> None:
    p = PRESETS["qwen3.6-35b-a3b"]
    assert (p.n_layer, p.n_embd, p.n_vocab, p.n_expert, p.n_expert_used, p.n_ff_exp, p.n_ff_shexp) == (
        40, 2048, 248320, 256, 8, 512, 512,
    )  # fmt: skip
    assert [i for i in range(8) if p.is_full_attention(i)] == [3, 7]
    tensors = {t.name: t for t in specs.tensors(p, gguf)}
    assert tensors["blk.0.attn_qkv.weight"].shape == (2 * 16 * 128 + 32 * 128, 2048)
    assert tensors["blk.3.attn_q.weight"].shape == (2 * 16 * 256, 2048)  # query and gate
    assert tensors["blk.3.attn_k.weight"].shape == (2 * 256, 2048)
    assert tensors["blk.0.ffn_gate_exps.weight"].shape == (256, 512, 2048)
    assert tensors["blk.0.ffn_down_exps.weight"].shape == (256, 2048, 512)
    assert tensors["output.weight"].shape == (248320, 2048)
    assert "blk.3.attn_qkv.weight" not in tensors and "blk.0.attn_q.weight" not in tensors
    assert len(tensors) == 3 + 30 * 19 + 10 * 16  # embd, norm, head; gated-delta-net and attention layers


def test_tokenizer_covers_bytes_and_pads_to_size() -> None:
    vocab = build_vocab(5000)
    assert len(vocab) == 5000 and len(set(vocab.tokens)) == 5000
    assert vocab.tokens[:256] == list(byte_alphabet())
    assert vocab.tokens[vocab.eos_id] == SPECIALS[0]
    assert len(vocab.merges) > 200
    for merge in vocab.merges:
        a, b = merge.split(" ")
        assert a + b in vocab.tokens
    with pytest.raises(ValueError):
        build_vocab(258)  # 256 bytes and 3 specials do not fit


def test_quantized_chunks_have_the_planned_standard_deviation() -> None:
    pools = BlockPools(0)
    for type_name, fmt in DIRECT_QUANT.items():
        spec = specs.TensorSpec("w", (64, 4096), "dense", std=1 / math.sqrt(4096))
        data = np.concatenate(
            [np.frombuffer(c, np.uint8) for c in chunks(spec, type_name, np.random.default_rng(1), pools)]
        )
        blocks = data.reshape(-1, fmt.nbytes)
        scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)[:, 0]
        if type_name == "q8_0":
            codes = blocks[:, 2:].view(np.int8).astype(np.float32)
        else:
            low, high = blocks[:, 2:] & 15, blocks[:, 2:] >> 4
            codes = np.concatenate([low, high], axis=1).astype(np.float32) - 8
        weights = codes * scale[:, None]
        assert weights.size == spec.elements
        assert weights.std() == pytest.approx(spec.std, rel=0.05)
        assert abs(weights.mean()) < 0.01 * spec.std  # zero-mean codes: no common offset on every output


def test_quantize_args_give_each_role_its_type() -> None:
    assert quantize_args("q4_k", "q8_0") == [
        "--allow-requantize", "--pure",
        "--tensor-type", "ffn_gate_exps=q4_k",
        "--tensor-type", "ffn_up_exps=q4_k",
        "--tensor-type", "ffn_down_exps=q4_k",
        "q8_0",
    ]  # fmt: skip
    assert quantize_args("q5_k", "q5_k") == ["--allow-requantize", "--pure", "q5_k"]


def _logits_file(path: Path, logp: np.ndarray, n_ctx: int) -> None:
    """Write rows the way llama-perplexity --kl-divergence-base stores them."""
    rows, n_vocab = logp.shape
    n_chunk = rows // (n_ctx - 1 - n_ctx // 2)
    nv = 2 * ((n_vocab + 1) // 2) + 4
    out = bytearray(b"_logits_" + struct.pack("<iii", n_ctx, n_vocab, n_chunk))
    out += np.zeros(n_chunk * n_ctx, dtype=np.int32).tobytes()
    for row in logp:
        top = row.max()
        low = max(row.min(), top - 16)
        scale = (top - low) / 65535
        codes = np.zeros(n_vocab, np.uint16)
        if scale:
            codes = np.rint(np.maximum(row - low, 0) / scale).astype(np.uint16)
        head = np.array([scale, low], dtype=np.float32).view(np.uint16)
        padded = np.zeros(nv, dtype=np.uint16)
        padded[:4] = head
        padded[4 : 4 + n_vocab] = codes
        out += padded.tobytes()
    path.write_bytes(bytes(out))


def test_quality_reads_llama_perplexity_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n_ctx, n_vocab = 16, 1000
    rows = 2 * (n_ctx - 1 - n_ctx // 2)
    for std, flat in ((0.0, True), (3.0, False)):
        logits = rng.standard_normal((rows, n_vocab)) * std
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        _logits_file(tmp_path / "l.bin", logp.astype(np.float32), n_ctx)
        q = summarize(*read_logprob_rows(tmp_path / "l.bin"))
        assert q.positions == rows
        p = np.exp(logp)
        expected_entropy = float(-(p * logp).sum(axis=1).mean())
        assert q.entropy_mean == pytest.approx(expected_entropy, abs=0.05)
        assert q.top1_mean == pytest.approx(float(p.max(axis=1).mean()), rel=0.02)
        assert bool(q.problems()) == flat  # flat logits are a problem; std 3 is a model-like spread


def test_same_seed_same_file(pinned_home: Path, tmp_path: Path) -> None:
    from fusekit.synth.writer import write_model

    preset = reduced(get_preset("llama-3-8b"), n_layer=1, n_embd=128, n_vocab=1024, n_ff=256, n_head=2, n_head_kv=1)
    gguf_py = pinned_home / "trees" / "stock" / "gguf-py"
    paths = [tmp_path / f"{i}.gguf" for i in range(3)]
    for path, seed in zip(paths, (1, 1, 2), strict=True):
        write_model(preset, path, gguf_py, seed=seed)
    assert paths[0].read_bytes() == paths[1].read_bytes() != paths[2].read_bytes()


def test_branch_gain_scales_only_the_blocks_output_projections(gguf) -> None:
    import dataclasses

    p = PRESETS["qwen3.6-35b-a3b"]
    plain = {t.name: t.std for t in specs.tensors(p, gguf)}
    tame = {t.name: t.std for t in specs.tensors(dataclasses.replace(p, branch_gain=0.05), gguf)}
    scaled = sorted({n.split(".", 2)[2] for n in plain if not math.isclose(tame[n], plain[n])})
    assert scaled == ["attn_output.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight", "ssm_out.weight"]
    assert math.isclose(tame["blk.0.ssm_out.weight"], 0.05 * plain["blk.0.ssm_out.weight"])
    assert "branch gain 0.05" in dataclasses.replace(p, branch_gain=0.05).summary()
    assert "branch gain" not in p.summary()
