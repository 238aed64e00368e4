#!/usr/bin/env python3
"""Where a kernel's machine code goes, before any GPU runs it: its SASS instructions by opcode and by source line.

Reads the listing `nvdisasm -g -c` prints for a cubin (plain or .xz/.gz), or runs nvdisasm itself on a `.cubin`
(`nvcc -cubin -lineinfo ...`; nvdisasm is not in every CUDA install: the PyPI wheel `nvidia-cuda-nvdisasm` carries
it, found on PATH or with --nvdisasm). Counts are *static*: each instruction once, however often it runs, so they
compare two versions of the same code (fully unrolled loops count in full; a loop that is not unrolled counts once)
and say which source line made an instruction (a line of an inlined helper counts where the helper is written).
`--kernel REGEX` picks kernels by their mangled name; `--json F` writes the records.

    python3 scripts/sass_static_mix.py /tmp/program.cubin --kernel 'prep_(lean|rounded)' [--top 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

from ncu_raw_table import read_text  # a sibling script: run as scripts/sass_static_mix.py

SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
LINE_INFO = re.compile(r'//## File "([^"]+)", line (\d+)')
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_]*)")


class ListingError(ValueError):
    """The input is not an nvdisasm listing, or nvdisasm could not make one."""


def listing_text(path: Path, nvdisasm: str | None) -> str:
    """The listing's text: read (by suffix, as ncu exports), or made by nvdisasm -g -c from a cubin."""
    if path.suffix != ".cubin":
        return read_text(path)
    tool = nvdisasm or shutil.which("nvdisasm")
    if tool is None:
        raise ListingError("nvdisasm not found (pip download nvidia-cuda-nvdisasm; pass --nvdisasm PATH)")
    done = subprocess.run([tool, "-g", "-c", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ListingError(f"nvdisasm failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
    return done.stdout


def kernel_mixes(text: str, pattern: str | None, top: int) -> list[dict[str, object]]:
    """Per kernel (a .text section) matching pattern: its instruction count, opcodes and source lines."""
    chosen = re.compile(pattern) if pattern else None
    opcodes: dict[str, Counter[str]] = {}
    lines: dict[str, Counter[str]] = {}
    line_ops: dict[str, dict[str, Counter[str]]] = {}
    kernel, where = None, "?"
    for raw in text.splitlines():
        if section := SECTION.match(raw):
            kernel = section.group(1)
            where = "?"
            if chosen is None or chosen.search(kernel):
                opcodes[kernel], lines[kernel], line_ops[kernel] = Counter(), Counter(), defaultdict(Counter)
            continue
        if kernel not in opcodes:
            continue
        if info := LINE_INFO.search(raw):
            where = f"{Path(info.group(1)).name}:{info.group(2)}"
        elif instruction := INSTRUCTION.match(raw):
            op = instruction.group(1)
            opcodes[kernel][op] += 1
            lines[kernel][where] += 1
            line_ops[kernel][where][op] += 1
    if not any(SECTION.match(raw) for raw in text.splitlines()):
        raise ListingError("no '.section .text.<kernel>' line: not an nvdisasm listing")
    if not opcodes:
        raise ListingError(f"no kernel matches {pattern!r}")
    records = []
    for name, ops in opcodes.items():
        total = sum(ops.values())
        records.append(
            {
                "kernel": name,
                "instructions": total,
                "opcodes": dict(ops.most_common(top)),
                "lines": [
                    {"line": where, "instructions": n, "opcodes": dict(line_ops[name][where].most_common(4))}
                    for where, n in lines[name].most_common(top)
                ],
            }
        )
    return records


def markdown(record: dict[str, object]) -> str:
    """One kernel's record as a line of opcodes and a table of source lines."""
    ops = ", ".join(f"{op} {n}" for op, n in record["opcodes"].items())  # type: ignore[union-attr]
    out = [f"**{record['kernel']}**: {record['instructions']:,} instructions (static); {ops}", ""]
    out += ["| source line | instructions | opcodes |", "|---|---:|---|"]
    for r in record["lines"]:  # type: ignore[union-attr]
        out.append(f"| {r['line']} | {r['instructions']} | {', '.join(f'{o} {n}' for o, n in r['opcodes'].items())} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("listing", type=Path, help="a .cubin, or nvdisasm -g -c's listing (plain, .gz or .xz)")
    parser.add_argument("--kernel", help="only kernels whose mangled name matches this regex")
    parser.add_argument("--top", type=int, default=12, help="opcodes and source lines listed (default 12)")
    parser.add_argument("--nvdisasm", help="the nvdisasm to run on a cubin (default: the one on PATH)")
    parser.add_argument("--json", type=Path, help="also write the records as JSON here")
    args = parser.parse_args(argv)
    try:
        records = kernel_mixes(listing_text(args.listing, args.nvdisasm), args.kernel, args.top)
    except (OSError, ValueError, re.error, lzma.LZMAError) as err:  # ValueError: ListingError, bad text
        print(f"sass_static_mix: {args.listing}: {err}", file=sys.stderr)
        return 1
    print("\n\n".join(markdown(r) for r in records))
    if args.json:
        args.json.write_text(json.dumps({"source": str(args.listing), "kernels": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
