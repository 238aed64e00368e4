"""A variant's KL divergence read against a control's: how far the model moves for a pure fp32 order change.

A control is a variant whose label starts with ``control-`` (a patch from ``patches/controls/``): stock with a
change that only rounds the same sums in another order. Random-weight test models can amplify such a change
to a large KL, so a fusion that reorders sums is judged against the control measured in the same eval, not
against zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

CONTROL_PREFIX = "control-"  # the one place that says what a control is (patches/controls/README.md)
SIGMAS = 2.0  # "like the control" when the means differ by at most this many combined standard errors


def is_control(label: str) -> bool:
    """A control variant (its first entry is a control patch)."""
    return label.startswith(CONTROL_PREFIX)


@dataclass(frozen=True)
class MeanKld:
    """llama-perplexity's mean KLD and its standard error over tokens."""

    value: float
    error: float

    @classmethod
    def of(cls, entry: dict[str, Any]) -> MeanKld | None:
        stat = entry.get("statistics", {}).get("Mean KLD")
        if not stat or stat.get("value") is None:
            return None
        return cls(float(stat["value"]), float(stat.get("error") or 0.0))


def against_control(variant: MeanKld, control: MeanKld, control_name: str) -> str:
    """One cell: the variant's mean KLD as a multiple of the control's, and whether it is like the control.

    The combined error treats the two means as independent. They are taken on the same tokens and are
    positively correlated, so the true error of their difference is smaller: the test leans towards "like".
    """
    ratio = variant.value / control.value if control.value > 0 else math.inf
    spread = math.hypot(variant.error, control.error)
    gap = variant.value - control.value
    if gap <= SIGMAS * spread:
        verdict = "like the control" if gap >= -SIGMAS * spread else "below the control"
    else:
        verdict = f"above the control ({gap / spread:.1f} σ)" if spread > 0 else "above the control"
    return f"{ratio:.3f}× {control_name}: {verdict}"


def control_cells(kl: dict[str, dict[str, Any]]) -> dict[str, str]:
    """For each non-control variant, its reading against every control of the same eval ('' without controls)."""
    controls = {name: MeanKld.of(entry) for name, entry in kl.items() if is_control(name)}
    controls = {name: m for name, m in controls.items() if m is not None}
    cells: dict[str, str] = {}
    for name, entry in kl.items():
        mean = MeanKld.of(entry)
        if is_control(name) or mean is None or entry.get("logprobs_identical"):
            cells[name] = ""
            continue
        cells[name] = "; ".join(against_control(mean, m, c) for c, m in controls.items())
    return cells
