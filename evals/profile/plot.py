"""A stacked bar of kernel time per category, one bar per trace (needs matplotlib, which is optional)."""

from __future__ import annotations

from pathlib import Path

from fusekit.errors import FusekitError

from .categories import CATEGORIES
from .parse import Profile


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_categories(profiles: list[Profile], labels: list[str], path: Path) -> Path:
    """Write a PNG: per trace, kernel time by category (µs per token when every trace knows its tokens)."""
    if not have_matplotlib():
        raise FusekitError("--png needs matplotlib (pip install 'fusekit[plot]')")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_token = all(p.tokens for p in profiles)
    fig, ax = plt.subplots(figsize=(2.5 + 1.6 * len(profiles), 5))
    bottoms = [0.0] * len(profiles)
    for category in CATEGORIES:
        heights = []
        for p in profiles:
            ns = sum(c.total_ns for c in p.categories() if c.category == category)
            heights.append(ns / 1000.0 / (p.tokens if per_token and p.tokens else 1))
        if any(heights):
            ax.bar(labels, heights, bottom=bottoms, label=category)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_ylabel("kernel µs per token" if per_token else "kernel µs (whole trace)")
    ax.set_title("kernel time by category")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
