"""The GPU-host fusion-session report: one Markdown page generated from a session folder's raw results.

It reads, never runs: the machine and pin, the builds, the correctness checks (test-backend-ops, smoke
runs, standalone kernel programs, the bridge's mul_mat checks), the decode profiles against stock, the
eval results (rendered by ``evals.report``) and the single-kernel race. A missing file skips its section
with one line; a corrupt JSON file stops the report with one clear error.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from fusekit.errors import FusekitError
from ggml_bridge.report import (
    check_counts,
    control_lines,
    estimate_of,
    expected_to_fail,
    interval_text,
    process_lines,
    speedup_estimates,
)

from .baseline_report import fmt_us
from .checkpoint import final_name_of
from .extensions import bases
from .floor_trace_report import render_floor_traces
from .node_profile_report import render_node_profiles
from .profile.categories import CATEGORIES, categorize
from .profile.compare import compare
from .profile.saved import profile_from_dict
from .report import render as render_eval
from .results import read_result
from .standalone_timings import TABLE_MAKERS
from .stats import RatioEstimate
from .tbo_perf import paired_files, perf_rows

BUILDS = "builds.json"
CHECKS = "checks.txt"
SMOKE = "smoke.txt"
_SMOKE_VALUES = re.compile(r'values="([^"]*)"')
FLAKE = "flake.txt"  # scripts/h200_session.sh's flake step: one selection repeated per variant and setting
GPU = "gpu.csv"
PIN = "pin.txt"
CLOCKS = "clocks.csv"
MODELS = ("model.json", "model-llama.json")
RACE = "bench-mulmat-fusion-5.json"
RACE_MM = "race-mm.json"  # h200_session.sh race-mm: stock against every measured variant over the whole shape table
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CHECK_LINE = re.compile(
    r"^(?P<name>\S+) expect=(?P<expect>\S+) rc=(?P<rc>-?\d+) failed_lines=(?P<failed>\d+) "
    r"verdict=(?P<verdict>\S+)\s*::\s*(?P<rest>.*)$"
)
TESTS_PASSED = re.compile(r"(\d+)/(\d+) tests passed")
FLAKE_LINE = re.compile(
    r"^(?P<variant>\S+) (?P<setting>\S+) op=(?P<op>\S+) params=(?P<params>\S*) runs=(?P<runs>\d+) "
    r"failed=(?P<failed>\d+) last: (?P<last>.*)$"
)
TIMESTAMP = re.compile(r"^\d{4}/\d{2}/\d{2} ")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
NUMERIC_CELL = re.compile(r"[-+]?[\d,.]+")


# ---------------------------------------------------------------- reading


def _skipped(name: str) -> list[str]:
    """The one line a section prints when its file is not in the folder."""
    return [f"_No `{name}` in this folder: section skipped._"]


def _json(path: Path) -> Any:
    """A plain JSON file; a corrupt one is a one-line FusekitError."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FusekitError(f"{path} is not valid JSON: {exc}") from exc


def _result(path: Path, kind: str) -> dict[str, Any]:
    """A fusekit result file of ``kind`` (read_result refuses corrupt files and other schemas)."""
    data = read_result(path)
    if data.get("kind") != kind:
        raise FusekitError(f"{path} is a {data.get('kind')} result, not {kind}")
    return data


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table; columns whose every cell is a number are right-aligned."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in headers]
    align = ["---:" if col and all(NUMERIC_CELL.fullmatch(str(c)) for c in col) else "---" for col in columns]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


# ---------------------------------------------------------------- header


def _gpu_line(folder: Path) -> str:
    """GPUs from nvidia-smi's CSV (header plus one line per GPU), identical lines counted once."""
    path = folder / GPU
    if not path.is_file():
        return f"- GPU: no `{GPU}` in this folder"
    rows = list(csv.reader(path.read_text().splitlines(), skipinitialspace=True))
    if len(rows) < 2:
        return f"- GPU: `{GPU}` holds no GPU line"
    header = [h.strip() for h in rows[0]]
    counts = Counter(tuple(cell.strip() for cell in row) for row in rows[1:] if row)
    parts = []
    for row, count in counts.items():
        fields = dict(zip(header, row, strict=False))
        name = fields.get("name", row[0])
        details = ", ".join(f"{key} {value}" for key, value in fields.items() if key != "name")
        parts.append(f"{count} × {name} ({details})")
    return "- GPU: " + "; ".join(parts)


def _pin_line(folder: Path) -> str:
    """The llama.cpp pin, its lines joined."""
    path = folder / PIN
    if not path.is_file():
        return f"- llama.cpp pin: no `{PIN}` in this folder"
    return "- llama.cpp pin: " + "; ".join(line.strip() for line in path.read_text().splitlines() if line.strip())


def clock_samples(text: str) -> tuple[list[list[float]], list[str]]:
    """nvidia-smi lines (timestamp, SM MHz, memory MHz, °C, W; or timestamp, GPU name and the same four, as
    scripts/stock_order_gpu_check.sh queries them) and the label lines between them.

    Lines that are neither (errors, ``[N/A]`` values, blank lines) are ignored.
    """
    samples: list[list[float]] = []
    labels: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if TIMESTAMP.match(line) and len(fields) in (5, 6):
            values = [NUMBER.search(f) for f in fields[-4:]]
            if all(values):
                samples.append([float(v.group()) for v in values if v])
        elif "," not in line:
            labels.append(line)
    return samples, labels


def _clocks_line(folder: Path) -> str:
    """The range of clocks, temperature and power seen over the session."""
    path = folder / CLOCKS
    if not path.is_file():
        return f"- clocks: no `{CLOCKS}` in this folder"
    samples, labels = clock_samples(path.read_text())
    if not samples:
        return f"- clocks: `{CLOCKS}` holds no readable nvidia-smi line"
    columns = list(zip(*samples, strict=True))

    def span(index: int, spec: str) -> str:
        return f"{min(columns[index]):{spec}}–{max(columns[index]):{spec}}"

    return (
        f"- clocks seen ({len(samples)} nvidia-smi lines, all GPUs, at {len(labels)} labelled steps): "
        f"SM {span(0, '.0f')} MHz, memory {span(1, '.0f')} MHz, temperature {span(2, '.0f')} °C, "
        f"power {span(3, '.1f')} W"
    )


def _model_line(name: str, model: dict[str, Any]) -> str:
    """One synthetic model: preset, architecture, types, size."""
    shapes = model.get("shapes", {})
    types = f"{model.get('dense_type', '?')} dense"
    if shapes.get("n_expert"):
        experts = f"{shapes['n_expert_used']} of {shapes['n_expert']}"
        types = f"{model.get('experts_type', '?')} experts ({experts}), {types}"
    size = f"{model['bytes'] / 1e9:.2f} GB" if "bytes" in model else "size unknown"
    what = shapes.get("description", shapes.get("arch", "?"))
    gain = shapes.get("branch_gain", 1.0)
    tame = f", branch gain {gain:g} (a tame model: blocks' output projections scaled down)" if gain != 1.0 else ""
    return (
        f"- model (`{name}`): synthetic {model.get('preset', '?')}: {what}; "
        f"{shapes.get('n_layer', '?')} layers, {types}, {size}, seed {model.get('seed', '?')}{tame}"
    )


def _model_lines(folder: Path) -> list[str]:
    """Every model record present."""
    lines = [_model_line(name, _json(folder / name)) for name in MODELS if (folder / name).is_file()]
    return lines or [f"- models: none of {', '.join(MODELS)} in this folder"]


def _header(folder: Path) -> list[str]:
    """Title, provenance and the machine."""
    return [
        f"# Fusion session: {folder.name}",
        "",
        f"Generated by `fusekit report --session {folder}` from the files in that folder; no number here is "
        "typed by hand.",
        "",
        _gpu_line(folder),
        _pin_line(folder),
        _clocks_line(folder),
        *_model_lines(folder),
    ]


# ---------------------------------------------------------------- builds


def _builds(folder: Path) -> list[str]:
    """One row per build: variant, seconds, ok or its error."""
    out = ["## Builds", ""]
    path = folder / BUILDS
    if not path.is_file():
        return [*out, *_skipped(BUILDS)]
    records = _json(path)
    if not isinstance(records, list):
        raise FusekitError(f"{path} is not a list of build records")
    rows = [
        [
            f"`{r.get('variant', '?')}`",
            f"{r['seconds']:.1f}" if "seconds" in r else "-",
            f"error: {r['error']}" if "error" in r else "ok",
        ]
        for r in records
    ]
    failed = sum(1 for r in records if "error" in r)
    return [*out, f"{len(records)} builds, {failed} failed.", "", *_table(["variant", "seconds", "result"], rows)]


# ---------------------------------------------------------------- correctness


def parse_checks(text: str) -> tuple[list[dict[str, str]], list[str]]:
    """checks.txt: one dict per check line (ANSI colours stripped), and the other lines as notes."""
    checks: list[dict[str, str]] = []
    notes: list[str] = []
    for raw in text.splitlines():
        line = ANSI.sub("", raw).strip()
        if not line:
            continue
        match = CHECK_LINE.match(line)
        if not match:
            notes.append(line)
            continue
        rest = match["rest"]
        tests = TESTS_PASSED.search(rest)
        outcome = rest.rsplit(":", 1)[-1].strip() if ":" in rest else rest
        checks.append({**match.groupdict(), "tests": tests.group(0) if tests else rest, "outcome": outcome})
    return checks, notes


def _checks(folder: Path) -> list[str]:
    """test-backend-ops checks, UNEXPECTED counted first."""
    out = [f"### test-backend-ops checks (`{CHECKS}`)", ""]
    path = folder / CHECKS
    if not path.is_file():
        return [*out, *_skipped(CHECKS)]
    checks, notes = parse_checks(path.read_text())
    unexpected = [c for c in checks if c["verdict"] != "ok"]
    out.append(f"**{len(unexpected)} UNEXPECTED** of {len(checks)} checks" + (":" if unexpected else "."))
    out += [f"- `{c['name']}` (expected {c['expect']}, {c['tests']})" for c in unexpected]
    empty = [c["name"] for c in checks if c["tests"].startswith("0/0 ")]
    if empty:
        out += ["", "Checks that ran no test at all (counted ok): " + ", ".join(f"`{n}`" for n in empty)]
    repeated = sorted(name for name, n in Counter(c["name"] for c in checks).items() if n > 1)
    if repeated:
        out += ["", "Names that appear more than once: " + ", ".join(f"`{n}`" for n in repeated)]
    rows = [
        [
            f"`{c['name']}`",
            c["expect"],
            f"{c['outcome']} (rc {c['rc']})",
            c["tests"],
            "ok" if c["verdict"] == "ok" else f"**{c['verdict']}**",
        ]
        for c in checks
    ]
    out += ["", *_table(["check", "expected", "outcome", "tests", "verdict"], rows)]
    if notes:
        out += ["", "Other lines:", "", *(f"- {n}" for n in notes)]
    return out


def _flake(folder: Path) -> list[str]:
    """Repeated runs of one test-backend-ops selection (flake.txt); nothing at all when the session had none."""
    path = folder / FLAKE
    if not path.is_file():
        return []
    rows, notes = [], []
    for line in path.read_text().splitlines():
        match = FLAKE_LINE.match(ANSI.sub("", line).strip())
        if not match:
            if line.strip():
                notes.append(line.strip())
            continue
        failed = int(match["failed"])
        rows.append([
            f"`{match['variant']}`", match["setting"], f"`{match['op']}` `{match['params']}`", int(match["runs"]),
            f"**{failed}**" if failed else "0", match["last"],
        ])  # fmt: skip
    out = [f"### Repeated runs of one selection (`{FLAKE}`)", ""]
    out += _table(["variant", "setting", "op and params", "runs", "failed", "last run"], rows)
    if notes:
        out += ["", "Other lines:", "", *(f"- {n}" for n in notes)]
    return ["", *out]


def _smoke(folder: Path) -> list[str]:
    """Smoke runs: variant ok/fail, exit status, and the one-chunk perplexity at one token per batch where recorded."""
    out = [f"### Smoke runs (`{SMOKE}`)", ""]
    path = folder / SMOKE
    if not path.is_file():
        return [*out, *_skipped(SMOKE)]
    rows = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2:
            rc = next((f.removeprefix("rc=") for f in fields[2:3] if f.startswith("rc=")), "?")
            values = _SMOKE_VALUES.search(line)
            rows.append(
                [
                    f"`{fields[0]}`",
                    fields[1] if fields[1] == "ok" else f"**{fields[1]}**",
                    rc,
                    values.group(1) if values else "(not recorded)",
                ]
            )
    return [*out, *_table(["variant", "smoke", "rc", "values (one chunk, one token per batch)"], rows)]


def standalone_counts(data: dict[str, Any]) -> tuple[int, int]:
    """(passed, failed) checks of one standalone program's JSON, whichever way it counts them."""
    if "checks" in data and "failures" in data:
        return data["checks"] - data["failures"], data["failures"]
    if "cases" in data and all("equal" in case for case in data["cases"]):  # stock order: bits and float64 per case
        passed = sum(1 for case in data["cases"] if case["equal"] == case["rows"] == case["near"])
        return passed, len(data["cases"]) - passed
    if "configs" in data and all("iterations" in c and "right" in c for c in data["configs"]):
        # stream reuse check: every iteration's one-row result against float64
        passed = sum(c["right"] for c in data["configs"])
        return passed, sum(c["iterations"] for c in data["configs"]) - passed
    if "shapes_failing_a" in data:  # norm-quantize: check A and checks B-E per shape
        total = 2 * len(data.get("shapes", []))
        failed = data["shapes_failing_a"] + data.get("shapes_failing_bcde", 0)
        return total - failed, failed
    oks = [row["ok"] for value in data.values() if isinstance(value, list) for row in value if "ok" in row]
    return sum(oks), len(oks) - sum(oks)


def _standalone_json(path: Path) -> dict[str, Any]:
    """A standalone program's JSON object; anything else is a one-line FusekitError."""
    data = _json(path)
    if not isinstance(data, dict):
        raise FusekitError(f"{path} is not a standalone program's JSON object")
    return data


def _standalone_row(path: Path) -> list[Any]:
    """Program, counts, and whether a sabotage run failed every check as it must."""
    data = _standalone_json(path)
    passed, failed = standalone_counts(data)
    if data.get("sabotage"):
        verdict = "every check failed, as it must" if passed == 0 else f"**{passed} checks passed under sabotage**"
    else:
        verdict = "all passed" if failed == 0 else f"**{failed} failed**"
    flags = ", ".join(f"{key} {str(data[key]).lower()}" for key in ("sabotage", "fast_math") if key in data)
    return [f"`{path.stem}`", data.get("device", "?"), flags, passed, failed, verdict]


def _standalone(folder: Path) -> list[str]:
    """The standalone kernel programs (each ``*-standalone*.json``; ``*-gpu-check*.json``: the stock-order and the
    stream reuse checks)."""
    out = ["### Standalone kernel programs", ""]
    found = [*folder.glob("*-standalone*.json"), *folder.glob("*-gpu-check*.json")]
    paths = sorted(found, key=lambda p: (p.stem.replace("-sabotage", ""), len(p.stem)))
    if not paths:
        return [*out, "_No `*-standalone*.json` in this folder: section skipped._"]
    rows = [_standalone_row(p) for p in paths]
    return [*out, *_table(["program", "device", "flags", "passed", "failed", "verdict"], rows)]


def _standalone_timings(folder: Path) -> list[str]:
    """The standalone programs' experiments side by side (evals/standalone_timings.py)."""
    out = ["### Standalone timings", ""]
    tables = []
    for name, make in TABLE_MAKERS.items():
        if (folder / name).is_file() and (table := make(name, _standalone_json(folder / name))) is not None:
            tables.append(table)
    if not tables:
        return [*out, "_No standalone program with timed experiments in this folder: section skipped._"]
    for table in tables:
        out += [f"`{table.source}`: {table.caption}.", "", *_table(table.headers, table.rows), ""]
    return out[:-1]


def _tbo_perf(folder: Path) -> list[str]:
    """test-backend-ops perf of each variant beside stock's (``tbo-perf-*.txt``, evals/tbo_perf.py)."""
    out = ["### test-backend-ops perf (`tbo-perf-*.txt`)", ""]
    pairs = paired_files(folder)
    if not pairs:
        return [*out, "_No `tbo-perf-*.txt` with timed cases beside a stock file: section skipped._"]
    for stock, variant in pairs:
        out += [
            f"`{variant.name}` against `{stock.name}`: µs per run (test-backend-ops chooses the run count); "
            "ratio = stock / variant, above 1 the variant is faster. One process per side, not repeated: cases the "
            "variant does not change show this table's noise.",
            "",
            *_table(["case", "stock µs", f"{variant.label} µs", "ratio"], perf_rows(stock, variant)),
            "",
        ]
    return out[:-1]


def _bridge_rows(result: dict[str, Any]) -> list[list[Any]]:
    """Bridge checks per contender and token count: passed, failed, of which must-fail."""
    builds = {v["label"]: v.get("build", {}).get("variant", v["label"]) for v in result["variants"]}
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for check in result["payload"]["checks"]:
        groups.setdefault((check["contender"], check["n"]), []).append(check)
    rows = []
    for (label, n), checks in sorted(groups.items()):
        passed = sum(1 for c in checks if c["passed"])
        must_fail = sum(1 for c in checks if expected_to_fail(c))
        rows.append([f"`{label}` ({builds.get(label, '?')})", n, len(checks), passed, len(checks) - passed, must_fail])
    return rows


def _bridge_checks(folder: Path) -> list[str]:
    """The mul_mat checks the bridge ran next to (or instead of) its race."""
    out = ["### Bridge mul_mat checks (`bench-mulmat-*.json`)", ""]
    paths = sorted(folder.glob("bench-mulmat-*.json"))
    if not paths:
        return [*out, "_No `bench-mulmat-*.json` in this folder: section skipped._"]
    headers = ["contender (build)", "tokens", "checks", "passed", "failed", "must fail"]
    for path in paths:
        result = _result(path, "bench-mulmat")
        counts = check_counts(result["payload"])
        sabotaged = [v["label"] for v in result["variants"] if "sabotage" in v.get("build", {}).get("variant", "")]
        out += [
            f"`{path.name}`: {len(counts['passed'])} passed, {len(counts['failed'])} failed, "
            f"{len(counts['unexpected'])} not as the bridge expects (it expects only shifted expert ids, and "
            "weights it corrupts itself under --sabotage, to fail)",
        ]
        if sabotaged:
            out.append(
                f"(contender {', '.join(f'`{s}`' for s in sabotaged)} is a sabotaged build: its failures are the "
                "point wherever the sabotaged kernel runs)"
            )
        out += ["", *_table(headers, _bridge_rows(result)), ""]
    return out[:-1]


def _correctness(folder: Path) -> list[str]:
    """Every correctness section."""
    return [
        "## Correctness",
        "",
        *_checks(folder),
        *_flake(folder),
        "",
        *_smoke(folder),
        "",
        *_standalone(folder),
        "",
        *_standalone_timings(folder),
        "",
        *_tbo_perf(folder),
        "",
        *_bridge_checks(folder),
    ]


# ---------------------------------------------------------------- decode profiles


def _profile_paths(folder: Path) -> list[Path]:
    """Profile comparisons, single fusions first, stacks after."""
    return sorted(folder.glob("profile-*-vs-stock.json"), key=lambda p: (p.name.count("+"), p.name))


def _variant_name(path: Path, result: dict[str, Any]) -> str:
    """The compared variant as the JSON names it (a long stack's file name is shortened), else from the file name."""
    variants = result.get("variants") or []
    if len(variants) == 2 and isinstance(variants[1], dict) and variants[1].get("name"):
        return str(variants[1]["name"])
    return path.name.removeprefix("profile-").removesuffix("-vs-stock.json")


EXCLUSIVE = "exclusive_us_per_token"  # in profiles recorded since 2026-12-01 (evals/profile/parse.py)


def _has_exclusive(results: list[tuple[str, dict[str, Any]]]) -> bool:
    return all(EXCLUSIVE in (p["per_token"] or {}) for _, r in results for p in r["payload"]["profiles"][:2])


def _before_after(a: float, b: float, delta: float | None = None) -> str:
    return f"{a:,.1f} → {b:,.1f} ({b - a if delta is None else delta:+,.1f})"


def _summary_row(name: str, result: dict[str, Any], exclusive: bool) -> list[str]:
    """Kernels and kernel µs per token (and exclusive µs), stock → variant (Δ as the comparison computed it)."""
    stock, variant = (p["per_token"] for p in result["payload"]["profiles"][:2])
    delta = result["payload"]["comparison"].get("delta_per_token") or {}
    keys = ["kernels_per_token", "kernel_us_per_token"] + ([EXCLUSIVE] if exclusive else [])
    return [f"`{name}`", *(_before_after(stock[k], variant[k], delta.get(k)) for k in keys)]


def recategorized(profile: dict[str, Any]) -> dict[str, tuple[float, int, float]]:
    """Kernel ns, launches and exclusive ns per category, by today's rule table (evals/profile/categories.py)."""
    totals: dict[str, tuple[float, int, float]] = {}
    for kernel in profile["kernels"]:
        category = categorize(kernel["name"])
        ns, launches, exclusive = totals.get(category, (0.0, 0, 0.0))
        exclusive += kernel.get("exclusive_ns", 0)
        totals[category] = (ns + kernel["total_ns"], launches + kernel["instances"], exclusive)
    return totals


def _category_table(result: dict[str, Any], exclusive: bool) -> list[str]:
    """Per category: µs (and exclusive µs) and launches per token, before/after/Δ, from each trace's kernel rows."""
    profiles = result["payload"]["profiles"]
    ta, tb = profiles[0]["tokens"] or 1, profiles[1]["tokens"] or 1
    a, b = recategorized(profiles[0]), recategorized(profiles[1])
    rows = []
    for category in [c for c in CATEGORIES if c in a or c in b]:
        a_ns, a_n, a_x = a.get(category, (0.0, 0, 0.0))
        b_ns, b_n, b_x = b.get(category, (0.0, 0, 0.0))
        time_cells = [fmt_us(a_ns / ta), fmt_us(b_ns / tb), f"{(b_ns / tb - a_ns / ta) / 1000:+,.1f}"]
        if exclusive:
            time_cells += [fmt_us(a_x / ta), fmt_us(b_x / tb), f"{(b_x / tb - a_x / ta) / 1000:+,.1f}"]
        rows.append([category, *time_cells, f"{a_n / ta:,.1f}", f"{b_n / tb:,.1f}", f"{b_n / tb - a_n / ta:+,.1f}"])
    headers = ["category", "µs/token stock", "variant", "Δ µs"]
    headers += ["exclusive µs/token stock", "variant", "Δ exclusive µs"] if exclusive else []
    headers += ["launches/token stock", "variant", "Δ launches"]
    return _table(headers, rows)


def _profiles(folder: Path) -> list[str]:
    """Decode profiles against stock: one summary table, then one category table each."""
    out = ["## Decode profiles against stock", ""]
    paths = _profile_paths(folder)
    if not paths:
        return [*out, "_No `profile-*-vs-stock.json` in this folder: section skipped._"]
    loaded = [(path, _result(path, "profile")) for path in paths]
    results = [(_variant_name(path, result), result) for path, result in loaded]
    first = results[0][1]["payload"]["profiles"][0]
    out += [
        f"Kernel launches and kernel time per decode token, stock → variant (Δ); {first['tokens']} tokens "
        f"({first.get('tokens_source', '?')}), node-level CUDA graph tracing (slows launches; the tok/s tables "
        "below are measured without the profiler). Categories follow today's rule table "
        "(`evals/profile/categories.py`), recomputed from each trace's kernel rows.",
    ]
    exclusive = _has_exclusive(results)
    if exclusive:
        out += [
            "",
            "Exclusive µs: what a kernel's launches add to the kernel timeline (`end - max(start, latest end "
            "before it)`). A kernel launched early, as under programmatic dependent launch, waits inside its own "
            "traced duration; its exclusive time leaves that wait out, and all exclusive times add up to the "
            "timeline's busy time.",
        ]
    headers = ["variant", "kernels per token", "kernel µs per token"]
    headers += ["exclusive µs per token"] if exclusive else []
    out += ["", *_table(headers, [_summary_row(n, r, exclusive) for n, r in results])]
    out += _profile_extensions(results)
    for name, result in results:
        out += ["", f"### `{name}` against stock, per category", "", *_category_table(result, exclusive)]
    return out


def _profile_extensions(results: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each profiled variant against the profiled variant it extends (evals/extensions.py's rule): whether the
    entries it adds changed any kernel's launch count (evals/profile/compare.py's per-kernel deltas). Session 37's
    residual norm passed all its cases and fused nothing in the model; this table says so at once."""
    sides = [
        {"name": name, "entries": r["variants"][1].get("entries", []), "env": r["variants"][1].get("env") or {}}
        for name, r in results
    ]
    found = bases({"variants": [{"name": "stock", "entries": []}, *sides]})
    if not found:
        return []
    variant_of = {name: r["payload"]["profiles"][1] for name, r in results}
    rows = []
    for name, (base, added) in sorted(found.items()):
        a, b = variant_of[base], variant_of[name]
        if a["tokens"] != b["tokens"]:
            verdict = f"recorded over {a['tokens']} and {b['tokens']} tokens: launch counts not compared"
        else:
            deltas = compare(profile_from_dict(a, Path(base)), profile_from_dict(b, Path(name))).kernels
            changed = sum(1 for delta in deltas if delta.delta_launches)
            verdict = (
                "**no kernel's launch count changed: what it adds fused nothing here**"
                if changed == 0
                else f"{changed} kernels' launch counts changed"
            )
        per_a, per_b = a["per_token"], b["per_token"]
        rows.append(
            [
                f"`{name}`",
                f"`{base}`",
                ", ".join(added),
                _before_after(per_a["kernels_per_token"], per_b["kernels_per_token"]),
                _before_after(per_a["kernel_us_per_token"], per_b["kernel_us_per_token"]),
                verdict,
            ]
        )
    headers = ["variant", "extends", "added", "kernels per token", "kernel µs per token", "launch counts"]
    intro = (
        "A profiled variant against the profiled variant it extends (that one's entries first in it), each from "
        "its own recording: launch counts are exact, kernel times carry each recording's noise."
    )
    return ["", "### Profiles against the variant they extend", "", intro, "", *_table(headers, rows)]


# ---------------------------------------------------------------- evals


def _evals(folder: Path) -> list[str]:
    """Each eval result, rendered by evals.report (the same tables `fusekit report FILE` prints).

    A partial result (``eval-x.partial.json``, an eval that did not finish) is rendered as such, unless
    the final ``eval-x.json`` is here too: then only the final one is.
    """
    out = ["## Speed and quality", ""]
    paths = sorted(folder.glob("eval-*.json"))
    if not paths:
        return [*out, "_No `eval-*.json` in this folder: section skipped._"]
    names = {path.name for path in paths}
    for path in paths:
        final = final_name_of(path)
        if final in names:
            out += [f"_`{path.name}` left out: the finished eval's `{final}` is here._", ""]
            continue
        out += [render_eval(_result(path, "eval"), path.name).rstrip("\n"), ""]
    return out[:-1]


# ---------------------------------------------------------------- race


def _race_row(case: dict[str, Any], labels: list[str], estimates: dict[tuple[str, str], RatioEstimate]) -> list[str]:
    """One shape and token count: both contenders' µs, the speed-up, GB/s where the JSON has it, and with
    ``estimates`` (a race of 2+ processes a contender) the speed-up over processes with its interval."""
    entries = [case["contenders"].get(label, {}) for label in labels]
    times = [e.get("us") for e in entries]
    ratio = f"{times[0] / times[1]:.3f}" if all(times) else "-"
    gb_s = [f"{e['gb_s']:,.0f}" if e.get("gb_s") is not None else "-" for e in entries]
    return [
        f"{case.get('model', '?')}: {case.get('table', '?')}",
        f"{case['m']}×{case['k']}",
        str(case["n"]),
        *(f"{t:.2f}" if t is not None else "-" for t in times),
        ratio,
        *gb_s,
        *([_interval(estimate_of(estimates, case, labels[1]))] if estimates else []),
    ]


def _interval(estimate: RatioEstimate | None) -> str:
    if estimate is None:
        return "-"
    text = interval_text(estimate)
    return text if estimate.verdict == "same" else f"{text} {estimate.verdict}"


def _race_summary(rows: list[list[str]], labels: list[str]) -> list[str]:
    """How often the second contender wins, overall and per token count, with the geometric-mean speed-up."""
    by_tokens: dict[str, list[float]] = {}
    for row in rows:
        if row[5] != "-":
            by_tokens.setdefault(row[2], []).append(float(row[5]))

    def summary(ratios: list[float]) -> str:
        mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        return f"faster in {sum(1 for r in ratios if r > 1)} of {len(ratios)}, geometric-mean speed-up {mean:.3f}"

    every = [r for ratios in by_tokens.values() for r in ratios]
    if not every:
        return ["No case has both contenders' times."]
    lines = [f"Speed-up = {labels[0]} µs / {labels[1]} µs. {labels[1]} overall: {summary(every)}."]
    lines += [f"- {n} token{'s' if n != '1' else ''}: {summary(r)}" for n, r in by_tokens.items()]
    return lines


def _race_pair(
    cases: list[dict[str, Any]], labels: list[str], estimates: dict[tuple[str, str], RatioEstimate]
) -> list[str]:
    """The first contender (stock) against one other: the summary, then one row per shape and token count."""
    rows = [_race_row(case, labels, estimates) for case in cases]
    headers = ["shape", "M×K", "tokens", f"{labels[0]} µs", f"{labels[1]} µs", "speed-up"]
    headers += [f"{labels[0]} GB/s", f"{labels[1]} GB/s"]
    headers += ["over processes [95% interval]"] if estimates else []
    return [*_race_summary(rows, labels), "", *_table(headers, rows)]


def _race_of(path: Path, title: str) -> list[str]:
    """One bridge race file: the first contender (stock) against each of the others, in the run's order."""
    out = [f"## {title} (`{path.name}`)", ""]
    if not path.is_file():
        return [*out, *_skipped(path.name)]
    result = _result(path, "bench-mulmat")
    payload, labels = result["payload"], [v["label"] for v in result["variants"]]
    if len(labels) < 2:
        return [*out, f"`{path.name}` has only one contender: nothing to race."]
    spec, roof = payload["spec"], payload.get("roofline") or {}
    out += [
        f"{labels[0]} against {', '.join(labels[1:])} on {payload['device']['description']}, "
        f"{', '.join(spec['types'])} weights; "
        f"{spec['rounds']} rounds × {spec['reps']} graph runs; cache to defeat {payload['cache_bytes'] >> 20} MiB "
        f"({payload['cache_source']}).",
        f"Time per node = {payload['timing_includes']}.",
    ]
    if roof:
        copies = ", ".join(f"{label} {roof[label]['gb_s']:,.0f} GB/s" for label in labels if label in roof)
        out.append(f"Copy roofline (read + write) measured in the same run: {copies}.")
    # with --control: the A/A spread, and each variant's cases beyond it; with --processes N: the spread between
    # each contender's processes, and each variant's verdicts by its interval over them
    estimates = speedup_estimates(result)  # empty with one process a contender
    spread = control_lines(result) + process_lines(result, estimates)
    out += [*spread, ""] if spread else []
    if estimates:
        out += [
            "Over processes: the ratio of stock's and the contender's geometric means of process medians, with its "
            "95% Welch t interval (evals.stats); faster or slower where the interval excludes 1.",
            "",
        ]
    out += _race_pair(payload["cases"], labels[:2], estimates)
    for other in labels[2:]:
        pair = _race_pair(payload["cases"], [labels[0], other], estimates)
        out += ["", f"### `{labels[0]}` against `{other}`", "", *pair]
    return out


def _race(folder: Path) -> list[str]:
    """The single-kernel race (always a section), then the shape-table race where the session ran one."""
    out = _race_of(folder / RACE, "Single-kernel race")
    if (folder / RACE_MM).is_file():
        out += ["", *_race_of(folder / RACE_MM, "Race over the shape table")]
    return out


# ---------------------------------------------------------------- the page


def render_session(folder: Path) -> str:
    """The whole Markdown report of one fusion-session folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FusekitError(f"{folder} is not a folder (a fusion session's results folder was expected)")
    sections = [_header(folder), _builds(folder), _correctness(folder), _profiles(folder), _evals(folder)]
    sections.append(_race(folder))
    node_profiles = render_node_profiles(folder, _result, _table)
    if node_profiles:
        sections.append(node_profiles)
    floor_traces = render_floor_traces(folder, _table)
    if floor_traces:
        sections.append(floor_traces)
    return "\n\n".join("\n".join(section) for section in sections) + "\n"
