"""Summarise scripts/graph_aliases.cpp's output: for each residual ADD (or chain of ADDs) whose sum an RMS_NORM+MUL
reads, where the sum and the MUL's output lie against the addends (exactly over one, partly over one, or clear) and
against each other. fusion-1-residual-norm fuses where no output lies partly over an addend and the two are apart.

    python3 scripts/graph_aliases_summary.py decode-graph-aliases.txt   (or a .txt.xz)
"""

from __future__ import annotations

import lzma
import re
import sys
from dataclasses import dataclass
from pathlib import Path

NODE = re.compile(r"(\S+)\s+(.+?)\s+(0x[0-9a-f]+)\+(\d+)$")
SOURCE = re.compile(r"(\S+) (.+) (0x[0-9a-f]+)$")


@dataclass(frozen=True)
class Node:
    op: str
    name: str
    address: int
    nbytes: int
    sources: tuple[tuple[str, str, int], ...]  # (op, name, address)


def parse(text: str) -> list[Node]:
    """The node lines of graph_aliases' output (lines starting with '$' or '#' are commands and comments)."""
    nodes = []
    for line in text.splitlines():
        if not line.strip() or line.startswith(("$", "#")):
            continue
        head, *sources = (part.strip() for part in line.split("|"))
        match = NODE.match(head)
        if match is None:
            raise ValueError(f"not a graph_aliases line: {line!r}")
        parsed = tuple((m.group(1), m.group(2), int(m.group(3), 16)) for m in map(SOURCE.match, sources) if m)
        nodes.append(Node(match.group(1), match.group(2), int(match.group(3), 16), int(match.group(4)), parsed))
    return nodes


def placement(address: int, nbytes: int, addends: list[tuple[str, str, int]]) -> str:
    """'exact NAME', 'PARTLY NAME' or 'clear' for an output of nbytes at address against same-sized addends."""
    found = []
    for _, name, start in addends:
        if start == address:
            found.append(f"exact {name}")
        elif abs(start - address) < nbytes:
            found.append(f"PARTLY {name}")
    return ", ".join(found) or "clear"


def residual_norms(nodes: list[Node]) -> list[str]:
    """One line per ADD chain followed by RMS_NORM of its sum and a MUL."""
    lines = []
    for index, norm in enumerate(nodes):
        if norm.op != "RMS_NORM" or index < 1 or index + 1 >= len(nodes) or nodes[index + 1].op != "MUL":
            continue
        if nodes[index - 1].op != "ADD" or not norm.sources or norm.sources[0][2] != nodes[index - 1].address:
            continue
        first = index - 1
        while first > 0 and nodes[first - 1].op == "ADD" and nodes[first].sources[0][1] == nodes[first - 1].name:
            first -= 1
        chain = nodes[first:index]
        addends = [chain[0].sources[0], *(add.sources[1] for add in chain)]
        total, mul = chain[-1], nodes[index + 1]
        apart = "apart" if abs(total.address - mul.address) >= total.nbytes else "OVERLAPPING"
        lines.append(
            f"{total.name:18s} ADDs {len(chain)}  sum: {placement(total.address, total.nbytes, addends):34s}"
            f"  MUL: {placement(mul.address, mul.nbytes, addends):34s}  sum and MUL {apart}"
        )
    return lines


def read_text(path: Path) -> str:
    """The file's text, decompressed when it ends in .xz (large outputs are committed so)."""
    if path.suffix != ".xz":
        return path.read_text()
    with lzma.open(path, "rt") as stream:
        return stream.read()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: graph_aliases_summary.py GRAPH_ALIASES_OUTPUT", file=sys.stderr)
        return 2
    try:
        nodes = parse(read_text(Path(argv[1])))
    except (OSError, ValueError, lzma.LZMAError) as exc:
        print(f"graph_aliases_summary: {exc}", file=sys.stderr)
        return 1
    print("\n".join(residual_norms(nodes)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
