"""Read the llama.cpp pin from ``pin.toml`` (the single committed place for it)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PIN_FILE = Path(__file__).with_name("pin.toml")


@dataclass(frozen=True)
class Sdist:
    package: str
    version: str
    filename: str
    sha256: str
    vendor_dir: str
    git_dir: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class Pin:
    commit: str
    tree: str
    date: str
    sdist: Sdist
    slim_omit: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.commit[:10]


@lru_cache(maxsize=1)
def load_pin(path: Path = PIN_FILE) -> Pin:
    """Parse the pin file once."""
    data = tomllib.loads(path.read_text())
    lc = data["llama_cpp"]
    return Pin(
        commit=lc["commit"],
        tree=lc["tree"],
        date=lc["date"],
        sdist=Sdist(**data["sdist"]),
        slim_omit=tuple(data["slim"]["omit"]),
    )
