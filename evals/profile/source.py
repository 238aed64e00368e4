"""Open an Nsight Systems SQLite export read-only, refusing bad input with one clear line."""

from __future__ import annotations

import contextlib
import gzip
import lzma
import shutil
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from fusekit.errors import FusekitError

from . import schema

RECORD_HINT = "record with 'nsys profile -t cuda --cuda-graph-trace=node' and 'nsys export --type sqlite'"


def _check_header(path: Path) -> None:
    """Refuse files that are not SQLite, or shorter than their header says (a truncated copy)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        raise FusekitError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not header.startswith(schema.SQLITE_MAGIC):
        raise FusekitError(f"{path} is not a SQLite file (expected an Nsight Systems export: {RECORD_HINT})")
    if len(header) < 100:
        raise FusekitError(f"{path} is truncated (shorter than a SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    change_counter = header[24:28]
    version_valid_for = header[92:96]
    # The in-header page count is only trusted when "version-valid-for" equals the change counter
    # (https://www.sqlite.org/fileformat.html, section 1.3.7).
    if pages and change_counter == version_valid_for and path.stat().st_size < page_size * pages:
        raise FusekitError(
            f"{path} is truncated ({path.stat().st_size} bytes, its header says {page_size * pages}); copy it again"
        )


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection to a checked export (kernel table and string table present)."""
    path = Path(path)
    if not path.is_file():
        raise FusekitError(f"{path} does not exist")
    _check_header(path)
    uri = urllib.parse.urlunsplit(("file", "", str(path.resolve()), "mode=ro&immutable=1", ""))
    try:
        conn = sqlite3.connect(uri, uri=True)
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    except sqlite3.DatabaseError as exc:
        raise FusekitError(f"{path} is a damaged SQLite file ({exc})") from exc
    if schema.STRING_IDS not in tables or not any(t.startswith(("CUPTI_", "NVTX_", "TARGET_INFO")) for t in tables):
        conn.close()
        raise FusekitError(f"{path} is a SQLite file but not an Nsight Systems export ({RECORD_HINT})")
    if schema.KERNEL not in tables:
        conn.close()
        raise FusekitError(f"{path} has no CUDA kernel table ({schema.KERNEL}); {RECORD_HINT}")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute("PRAGMA cache_size = -262144")  # KiB: room for the sorter of a million-row trace
    return conn


def tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


PACKED_OPENERS = {".gz": (gzip.open, "gzip"), ".xz": (lzma.open, "xz")}  # suffix: opener, its name in errors


@contextlib.contextmanager
def prepared(path: Path) -> Iterator[Path]:
    """A checked, plain export for ``path`` (``.sqlite``, or ``.sqlite.gz`` / ``.sqlite.xz`` unpacked to a temporary
    file)."""
    path = Path(path)
    with contextlib.ExitStack() as stack:
        if path.suffix in PACKED_OPENERS:
            if not path.is_file():
                raise FusekitError(f"{path} does not exist")
            opener, packing = PACKED_OPENERS[path.suffix]
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fusekit-profile-")))
            plain = folder / path.with_suffix("").name
            try:
                with opener(path, "rb") as src, plain.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            except (OSError, EOFError, lzma.LZMAError) as exc:
                raise FusekitError(f"{path} is not a readable {packing} file ({exc})") from exc
            path = plain
        connect(path).close()
        yield path
