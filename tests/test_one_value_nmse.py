"""scripts/one_value_nmse.py: the Monte Carlo of test-backend-ops' one-value Q4_0 product (CPU Q8_0 against CUDA Q8_1
arithmetic). Its rates come from the Q8_1 block sum alone: with the quantized sum in its place both sides agree."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "one_value_nmse.py"
spec = importlib.util.spec_from_file_location("one_value_nmse", SCRIPT)
assert spec is not None and spec.loader is not None
one_value_nmse = importlib.util.module_from_spec(spec)
spec.loader.exec_module(one_value_nmse)


def test_q4_0_quantization_follows_ggml_reference() -> None:
    """d is the value of largest magnitude over -8 (fp16); that value lands on nibble 0, zero on 8."""
    w = np.zeros((1, 32))
    w[0, 3], w[0, 7] = -0.8, 0.4
    d, nibbles = one_value_nmse.quantize_q4_0(w)
    assert d[0, 0] == np.float16(0.1)
    assert nibbles[0, 0, 3] == 0 and nibbles[0, 0, 7] == 12 and nibbles[0, 0, 0] == 8


def test_the_difference_is_the_q8_1_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage of the model: with Q8_1's sum replaced by the quantized sum, CPU and CUDA agree (up to rounding),
    so no draw exceeds even 1e-12; with the real sum, about 18% exceed 5e-4."""
    rng = np.random.default_rng(7)
    cpu, cuda = one_value_nmse.one_value_products(rng, 20000, 256)
    assert 0.15 < np.mean((cuda - cpu) ** 2 / cpu**2 > 5e-4) < 0.20
    real = one_value_nmse.quantize_q8

    def quantized_sum(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d, q, _ = real(x)
        return d, q, d * q.sum(axis=-1)

    monkeypatch.setattr(one_value_nmse, "quantize_q8", quantized_sum)
    cpu, cuda = one_value_nmse.one_value_products(np.random.default_rng(7), 20000, 256)
    assert np.max((cuda - cpu) ** 2 / cpu**2) < 1e-12


def test_the_command_line_writes_counts_with_intervals(tmp_path: Path) -> None:
    out = tmp_path / "nmse.json"
    assert one_value_nmse.main(["--draws", "5000", "--threshold", "5e-4", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    row = data["results"][0]
    assert data["command"].endswith("--json " + str(out)) and data["draws"] == 5000
    assert row["ci95"][0] <= row["fraction"] <= row["ci95"][1]
    assert one_value_nmse.main(["--k", "100"]) == 2
