"""Differences between two traces (``--against``): what a fusion removed, per kernel and per category.

Kernels present on one side only are kept (with zeros on the other side), never dropped. Per-token
figures are compared only when both traces know their token counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .categories import CATEGORIES
from .parse import Profile


@dataclass(frozen=True)
class Delta:
    """One kernel or category on both sides; ``b - a`` is the change (negative: removed time or launches)."""

    key: str
    category: str
    a_ns: int
    b_ns: int
    a_launches: int
    b_launches: int
    a_exclusive_ns: int = 0  # the time the launches add to the kernel timeline (Profile.exclusive)
    b_exclusive_ns: int = 0

    @property
    def delta_ns(self) -> int:
        return self.b_ns - self.a_ns

    @property
    def delta_exclusive_ns(self) -> int:
        return self.b_exclusive_ns - self.a_exclusive_ns

    @property
    def delta_launches(self) -> int:
        return self.b_launches - self.a_launches

    @property
    def status(self) -> str:
        if not self.a_launches:
            return "new"
        if not self.b_launches:
            return "gone"
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "delta_ns": self.delta_ns,
            "delta_exclusive_ns": self.delta_exclusive_ns,
            "delta_launches": self.delta_launches,
            "status": self.status,
        }


@dataclass
class Comparison:
    a: Profile
    b: Profile
    kernels: list[Delta]
    categories: list[Delta]

    @property
    def delta_ns(self) -> int:
        return self.b.kernel_ns - self.a.kernel_ns

    @property
    def delta_launches(self) -> int:
        return self.b.launches - self.a.launches

    @property
    def delta_exclusive_ns(self) -> int:
        return self.b.exclusive_ns - self.a.exclusive_ns

    def per_token(self) -> dict[str, float] | None:
        pa, pb = self.a.per_token(), self.b.per_token()
        if pa is None or pb is None:
            return None
        return {key: pb[key] - pa[key] for key in pa if key in pb}

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.path,
            "b": self.b.path,
            "delta_kernel_ns": self.delta_ns,
            "delta_exclusive_ns": self.delta_exclusive_ns,
            "delta_launches": self.delta_launches,
            "delta_per_token": self.per_token(),
            "categories": [d.to_dict() for d in self.categories],
            "kernels": [d.to_dict() for d in self.kernels],
        }


def compare(a: Profile, b: Profile) -> Comparison:
    """Align ``a`` (usually stock) and ``b`` (the variant) by demangled kernel name and by category."""
    left = {k.name: k for k in a.kernels}
    right = {k.name: k for k in b.kernels}
    kernels = []
    for name in left.keys() | right.keys():
        ka, kb = left.get(name), right.get(name)
        category = (ka or kb).category  # type: ignore[union-attr]
        kernels.append(
            Delta(
                name,
                category,
                ka.total_ns if ka else 0,
                kb.total_ns if kb else 0,
                ka.instances if ka else 0,
                kb.instances if kb else 0,
                a.exclusive.get(name, 0),
                b.exclusive.get(name, 0),
            )
        )
    kernels.sort(key=lambda d: (-abs(d.delta_ns), -abs(d.delta_launches), d.key))
    cats_a = {c.category: c for c in a.categories()}
    cats_b = {c.category: c for c in b.categories()}
    categories = [
        Delta(
            name,
            name,
            cats_a[name].total_ns if name in cats_a else 0,
            cats_b[name].total_ns if name in cats_b else 0,
            cats_a[name].instances if name in cats_a else 0,
            cats_b[name].instances if name in cats_b else 0,
            cats_a[name].exclusive_ns if name in cats_a else 0,
            cats_b[name].exclusive_ns if name in cats_b else 0,
        )
        for name in CATEGORIES
        if name in cats_a or name in cats_b
    ]
    return Comparison(a, b, kernels, categories)
