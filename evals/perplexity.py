"""llama-perplexity: command lines for perplexity and KL divergence, and parsers for what it prints.

KL divergence needs a stock run that saves its token log-probabilities (``--kl-divergence-base``); each
variant then runs with ``--kl-divergence`` against that file. llama-perplexity stores the base log-probs
as 16-bit integers, so even identical code shows a tiny KLD floor; a variant's own base file, compared
byte for byte with stock's, tells exactly whether the logits are identical.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fusekit.errors import FusekitError

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf"
_FINAL = re.compile(rf"Final estimate: PPL = ({_NUMBER}) \+/- ({_NUMBER})")
_CHUNK = re.compile(rf"\[(\d+)\]({_NUMBER}),")
# what llama-perplexity prints, and then stops, when a chunk's log-probs are NaN (their variance is then not >= 0)
_NOT_FINITE = "Unexpected negative standard deviation of log(prob)"
_TOO_SHORT = re.compile(r"you need at least (\d+) tokens .* context of (\d+)")
_TOKENIZED = re.compile(r"tokenizes to only (\d+) tokens")
_SECTION = re.compile(r"^====== (.+) ======$")
_STAT = re.compile(rf"^(?P<name>[^:]+?)\s*:\s*(?P<value>{_NUMBER})\s*(?:±\s*(?P<unc>{_NUMBER}))?\s*(?P<pct>%)?\s*$")


@dataclass(frozen=True)
class PplSettings:
    """What decides llama-perplexity's numbers besides the model, the corpus and the code."""

    ctx: int = 512
    chunks: int = 8
    batch: int = 512
    threads: int = 1
    gpu_layers: int = 0
    ubatch: int = 0  # 0: llama's default (the whole batch); 1: every token through the one-token kernels

    def args(self) -> list[str]:
        args = ["-c", str(self.ctx), "--chunks", str(self.chunks), "-b", str(self.batch), "-t", str(self.threads)]
        args += ["-ub", str(self.ubatch)] if self.ubatch else []
        return args + (["-ngl", str(self.gpu_layers)] if self.gpu_layers else [])

    def key(self) -> dict[str, Any]:
        """The settings that a KL base must share with the runs compared against it (threads too: a different
        split of the work may change the low bits, and the byte-for-byte log-prob check must not see that)."""
        return asdict(self)


def ppl_command(tool: Path, model: Path, corpus: Path, settings: PplSettings, save_base: Path | None) -> list[str]:
    cmd = [str(tool), "-m", str(model), "-f", str(corpus), *settings.args()]
    if save_base is not None:
        cmd += ["--kl-divergence-base", str(save_base)]
    return cmd


def kld_command(tool: Path, model: Path, base: Path, settings: PplSettings) -> list[str]:
    return [str(tool), "-m", str(model), *settings.args(), "--kl-divergence-base", str(base), "--kl-divergence"]


def _number(text: str | None) -> float | None:
    """A printed number; NaN and infinities become None (JSON has no NaN), the raw line keeps the text."""
    if text is None:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def too_short_message(output: str, corpus: Path) -> str | None:
    """llama-perplexity's complaint about a corpus with fewer than 2 x ctx tokens, as one line; else None."""
    need = _TOO_SHORT.search(output)
    if not need:
        return None
    have = _TOKENIZED.search(output)
    got = f"it tokenizes to {have.group(1)} tokens" if have else "it is too short"
    return (
        f"corpus {corpus} is too short: {got}, llama-perplexity needs at least {need.group(1)} "
        f"(2 x context {need.group(2)}); use a longer corpus or a smaller --ctx"
    )


def parse_final_estimate(output: str) -> dict[str, Any]:
    """``Final estimate: PPL = X +/- Y`` (a log line, on stderr) and the running estimate after each chunk."""
    match = _FINAL.search(output)
    if not match and _NOT_FINITE in output:
        raise FusekitError(
            f"llama-perplexity stopped at '{_NOT_FINITE}': the build's log-probs are NaN, it computes wrong values"
        )
    if not match:
        raise FusekitError("llama-perplexity printed no 'Final estimate: PPL = X +/- Y' line")
    chunks = [_number(value) for _, value in _CHUNK.findall(output)]
    return {"ppl": _number(match.group(1)), "ppl_error": _number(match.group(2)), "running_ppl": chunks}


def parse_kld_statistics(stdout: str) -> dict[str, dict[str, Any]]:
    """Every ``name : value [± error] [%]`` line of the summary sections, keyed by the name (spaces squeezed)."""
    stats: dict[str, dict[str, Any]] = {}
    section = None
    for raw in stdout.splitlines():
        line = raw.strip()
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1)
            continue
        if section is None:
            continue
        match = _STAT.match(line)
        if not match:
            continue
        name = " ".join(match.group("name").split())
        stats[name] = {
            "value": _number(match.group("value")),
            "error": _number(match.group("unc")),
            "unit": "%" if match.group("pct") else "",
            "section": section,
            "text": line,
        }
    if "Mean KLD" not in stats:
        raise FusekitError(
            "llama-perplexity printed no KL divergence statistics (it prints them only past 100 scored tokens; "
            "raise --ctx or --chunks)"
        )
    return stats
