"""Import gguf-py from the pinned llama.cpp tree, so metadata keys and tensor names match the pin."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from ..errors import FusekitError


def load_gguf(gguf_py: Path) -> ModuleType:
    """The ``gguf`` package found in ``gguf_py`` (a tree's ``gguf-py`` folder), never another copy."""
    package = gguf_py / "gguf" / "__init__.py"
    if not package.is_file():
        raise FusekitError(f"no gguf-py in {gguf_py}; run 'fusekit init' first (synth uses the pinned tree's gguf-py)")
    loaded = sys.modules.get("gguf")
    if loaded is not None:
        if Path(loaded.__file__ or "").resolve() == package.resolve():
            return loaded
        for name in [n for n in sys.modules if n == "gguf" or n.startswith("gguf.")]:
            del sys.modules[name]
    sys.path.insert(0, str(gguf_py))
    try:
        module = importlib.import_module("gguf")
    except ImportError as exc:
        raise FusekitError(f"cannot import gguf-py from {gguf_py}: {exc}") from exc
    finally:
        sys.path.remove(str(gguf_py))
    return module
