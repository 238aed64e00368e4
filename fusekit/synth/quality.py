"""Does a random model behave like a model? Measure its next-token distributions with llama-perplexity.

``llama-perplexity --kl-divergence-base FILE`` stores, for the second half of every context window,
each position's full log-softmax over the vocabulary (uint16 codes with a per-row scale and offset;
entries more than 16 nats below the top are stored at that floor). From those rows this module
computes the mean top-1 probability, the mean entropy (nats), and how many distinct top-1 tokens
occur: flat logits give entropy near ln(vocab) and top-1 near 1/vocab; one-hot logits give top-1
near 1 and entropy near 0. Both make KL and text comparisons meaningless.
"""

from __future__ import annotations

import math
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FusekitError
from .tokenizer import SAMPLE_TEXT

# Accepted ranges (tests and `fusekit model synth --quality` check these).
TOP1_RANGE = (0.02, 0.9)
ENTROPY_FRACTION_RANGE = (0.02, 0.8)  # entropy / ln(vocab)
MIN_DISTINCT_TOP1 = 0.2  # distinct top-1 tokens / positions


@dataclass(frozen=True)
class Quality:
    positions: int
    vocab: int
    top1_mean: float
    entropy_mean: float
    entropy_max: float  # ln(vocab)
    distinct_top1: float
    ppl: float | None

    @property
    def entropy_fraction(self) -> float:
        return self.entropy_mean / self.entropy_max

    def problems(self) -> list[str]:
        out = []
        if not (np.isfinite(self.top1_mean) and np.isfinite(self.entropy_mean)):
            out.append("non-finite probabilities (the residual stream overflowed?)")
            return out
        if not TOP1_RANGE[0] <= self.top1_mean <= TOP1_RANGE[1]:
            out.append(f"mean top-1 probability {self.top1_mean:.3f} outside {TOP1_RANGE}")
        if not ENTROPY_FRACTION_RANGE[0] <= self.entropy_fraction <= ENTROPY_FRACTION_RANGE[1]:
            out.append(f"entropy {self.entropy_fraction:.2f} of ln(vocab), outside {ENTROPY_FRACTION_RANGE}")
        if self.distinct_top1 < MIN_DISTINCT_TOP1:
            out.append(f"only {self.distinct_top1:.0%} distinct top-1 tokens (the output ignores the input)")
        return out

    def line(self) -> str:
        ppl = f", ppl {self.ppl:.1f}" if self.ppl else ""
        return (
            f"mean top-1 probability {self.top1_mean:.3f}, mean entropy {self.entropy_mean:.2f} nats "
            f"({self.entropy_fraction:.0%} of ln {self.vocab}), distinct top-1 {self.distinct_top1:.0%} "
            f"over {self.positions} positions{ppl}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "entropy_fraction": self.entropy_fraction, "problems": self.problems()}


def read_logprob_rows(path: Path) -> tuple[int, np.ndarray, np.ndarray]:
    """(vocab, codes, head) of a ``--kl-divergence-base`` file: per position, uint16 codes and
    (scale, min_log_prob); the log-softmax is ``codes * scale + min_log_prob``."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw[:8].tobytes() != b"_logits_":
        raise FusekitError(f"{path} is not a llama-perplexity logits file")
    n_ctx, n_vocab, n_chunk = (int(v) for v in raw[8:20].view(np.int32))
    offset = 20 + 4 * n_chunk * n_ctx
    nv = 2 * ((n_vocab + 1) // 2) + 4
    count = (n_ctx - 1 - n_ctx // 2) * n_chunk
    data = raw[offset : offset + count * nv * 2].view(np.uint16).reshape(count, nv)
    head = np.ascontiguousarray(data[:, :4]).view(np.float32)
    return n_vocab, data[:, 4 : 4 + n_vocab], head


def summarize(n_vocab: int, codes: np.ndarray, head: np.ndarray, ppl: float | None = None, batch: int = 16) -> Quality:
    """Mean top-1 probability, entropy and distinct top-1 share, computed a few rows at a time."""
    top1: list[np.ndarray] = []
    entropy: list[np.ndarray] = []
    tops: list[np.ndarray] = []
    for start in range(0, codes.shape[0], batch):
        logp = codes[start : start + batch].astype(np.float64) * head[start : start + batch, :1]
        logp += head[start : start + batch, 1:2]
        p = np.exp(logp)
        p /= p.sum(axis=1, keepdims=True)
        top1.append(p.max(axis=1))
        tops.append(p.argmax(axis=1))
        entropy.append(-(p * np.log(np.maximum(p, 1e-300))).sum(axis=1))
    positions = codes.shape[0]
    return Quality(
        positions=int(positions),
        vocab=n_vocab,
        top1_mean=float(np.concatenate(top1).mean()) if positions else float("nan"),
        entropy_mean=float(np.concatenate(entropy).mean()) if positions else float("nan"),
        entropy_max=math.log(n_vocab),
        distinct_top1=len(set(np.concatenate(tops).tolist())) / max(1, positions) if positions else 0.0,
        ppl=ppl,
    )


def measure(
    perplexity_bin: Path,
    model: Path,
    ctx: int = 128,
    chunks: int = 4,
    threads: int | None = None,
    extra: tuple[str, ...] = (),
) -> Quality:
    """Run llama-perplexity over the bundled sample text and summarise the stored distributions."""
    with tempfile.TemporaryDirectory(prefix="fusekit-quality-") as tmp:
        logits = Path(tmp) / "logits.bin"
        cmd = [
            str(perplexity_bin), "-m", str(model), "-f", str(SAMPLE_TEXT), "-c", str(ctx), "-b", str(ctx),
            "--chunks", str(chunks), "--kl-divergence-base", str(logits), *extra,
        ]  # fmt: skip
        if threads:
            cmd += ["-t", str(threads)]
        log = Path(tmp) / "perplexity.log"
        with log.open("w") as out:  # a file, not a pipe: llama.cpp's log thread can drop lines at exit
            done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
        text = log.read_text(errors="replace")
        if done.returncode != 0 or not logits.is_file():
            raise FusekitError(f"llama-perplexity failed on {model}", detail=text[-3000:])
        n_vocab, codes, head = read_logprob_rows(logits)
        match = re.search(r"Final estimate: PPL = ([0-9.]+)", text)
        return summarize(n_vocab, codes, head, float(match.group(1)) if match else None)
