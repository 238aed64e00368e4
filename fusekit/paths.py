"""Where fusekit finds its own data (fusions, patches, kernels) and its workspace."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
_SOURCE_ROOT = PACKAGE_DIR.parent
_PACKAGED_DATA = PACKAGE_DIR / "_data"

DEFAULT_HOME = Path(".fusekit")
HOME_ENV = "FUSEKIT_HOME"


DATA_ENV = "FUSEKIT_DATA"


def data_root() -> Path:
    """The folder holding ``fusions/``, ``patches/`` and ``kernels/``.

    ``$FUSEKIT_DATA`` names another such folder (the tests keep an example fusion there).
    A source checkout (or editable install) uses the repository itself, so edits and
    ``fusekit refresh`` land in the committed files; a wheel carries a copy in ``_data``.
    """
    override = os.environ.get(DATA_ENV)
    if override:
        return Path(override).expanduser().resolve()
    if (_SOURCE_ROOT / "fusions").is_dir() and (_SOURCE_ROOT / "pyproject.toml").is_file():
        return _SOURCE_ROOT
    return _PACKAGED_DATA


def fusions_dir() -> Path:
    return data_root() / "fusions"


def patches_dir() -> Path:
    return data_root() / "patches"


def kernels_dir() -> Path:
    return data_root() / "kernels"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder: ``--home``, else ``$FUSEKIT_HOME``, else ``./.fusekit``."""
    if home:
        return Path(home).expanduser().resolve()
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return DEFAULT_HOME.resolve()
