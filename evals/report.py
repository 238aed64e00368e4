"""Markdown tables (and an optional PNG) made from eval result files; nothing here runs a measurement."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

from .clock_spread import Span, side_spreads
from .extensions import extensions
from .kl_control import SIGMAS, control_cells, is_control
from .stack_parts import stacks_against_parts
from .stats import RESOLVE, WELCH, paired_rounds_estimate, recorded_method, round_pairs

FEW_SAMPLES = 5
SPEED_ROUND = re.compile(r"speed round (?P<k>\d+) of (?P<n>\d+)")  # evals.runner's names of speed checkpoints
KL_HEADLINE = ("Mean KLD", "99.0% KLD", "Maximum KLD", "RMS Δp", "Same top p")


def _pandas():
    """pandas, imported on first use: the CLI starts without it (``fusekit build`` stays fast)."""
    import pandas

    return pandas


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` (cells as given, ``|`` escaped)."""
    headers = [str(c) for c in frame.columns]
    rows = [[str(v).replace("|", "\\|").replace("\n", "\\n") for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _fmt(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _sides(result: dict[str, Any]) -> list[str]:
    return [v["name"] for v in result["variants"]]


def _paired_text(result: dict[str, Any], row: dict[str, Any]) -> str:
    """The ratio paired by round, from the eval's raw runs (older result files render it too)."""
    speed = result["payload"].get("speed", {})
    stock = _sides(result)[0]
    estimate = paired_rounds_estimate(round_pairs(speed.get("runs", []), row["test"], stock, row["variant"]))
    if estimate is None:
        return "-"
    return f"{_fmt(estimate.ratio)} [{_fmt(estimate.low)}, {_fmt(estimate.high)}] {estimate.verdict}"


def speed_frame(result: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for row in result["payload"].get("speed", {}).get("summary", []):
        notes = []
        if min(row["n_stock"], row["n_variant"]) < FEW_SAMPLES:
            notes.append(f"fewer than {FEW_SAMPLES} samples a side: the interval is rough")
        if row["rounds_for_1pct"] is None:
            notes.append("one sample a side: no interval; run more rounds and repetitions")
        elif not row["resolves_1pct"]:
            notes.append(
                f"interval ±{100 * row['half_width']:.1f}% cannot resolve a {100 * RESOLVE:.0f}% change; "
                f"about {row['rounds_for_1pct']} rounds would"
            )
        spread = row.get("process_spread", 0.0)
        if row.get("rounds") == 1 and row["rounds_for_1pct"] is not None:
            notes.append(
                "one process a side: the interval covers its repetitions, not the drift between processes; "
                "only a run of several rounds can call this faster or slower"
            )
        elif spread > max(2 * row["half_width"], 0.05):
            notes.append(
                f"per-process medians of one side differ by {100 * spread:.0f}%: the machine's speed drifted "
                "between processes, the interval (over repetitions) may be too narrow"
            )
        note = "; ".join(notes)
        rows.append(
            {
                "test": row["test"],
                "variant": row["variant"],
                "stock t/s": _fmt(row["stock_median"], 2),
                "variant t/s": _fmt(row["variant_median"], 2),
                "ratio": _fmt(row["ratio"]),
                "95% CI": f"[{_fmt(row['low'])}, {_fmt(row['high'])}]",
                "samples": f"{row['n_stock']}+{row['n_variant']}",
                "verdict": row["verdict"],
                "paired by round": _paired_text(result, row),
                "note": note,
            }
        )
    return _pandas().DataFrame(rows)


def stack_parts_frame(result: dict[str, Any]) -> pd.DataFrame:
    """Each stack next to the product of its parts' ratios and the sum of their savings per token."""
    rows = [
        {
            "test": found.test,
            "stack": found.stack,
            "parts": ", ".join(found.parts),
            "stack / stock": _fmt(found.measured),
            "product of the parts": _fmt(found.product),
            "parts' savings added": _fmt(found.additive),
            "stack / added": _fmt(found.measured / found.additive),
        }
        for found in stacks_against_parts(result)
    ]
    return _pandas().DataFrame(rows)


def extensions_frame(result: dict[str, Any]) -> pd.DataFrame:
    """Each variant against the variant it extends (an experiment against the stack it goes on)."""
    rows = []
    for found in extensions(result):
        est, paired = found.estimate, found.paired
        rows.append(
            {
                "test": found.test,
                "variant": found.variant,
                "extends": found.base,
                "added": ", ".join(found.added),
                "base t/s": _fmt(est.stock_median, 2),
                "variant t/s": _fmt(est.variant_median, 2),
                "ratio": _fmt(est.ratio),
                "95% CI": f"[{_fmt(est.low)}, {_fmt(est.high)}]",
                "verdict": est.verdict if found.processes > 1 else f"{est.verdict} (one process a side)",
                "paired by round": "-"
                if paired is None
                else f"{_fmt(paired.ratio)} [{_fmt(paired.low)}, {_fmt(paired.high)}] {paired.verdict}",
            }
        )
    return _pandas().DataFrame(rows)


def _span_text(span: Span, digits: int = 0) -> str:
    return f"{span.low:.{digits}f}" if span.low == span.high else f"{span.low:.{digits}f}–{span.high:.{digits}f}"


def clocks_frame(result: dict[str, Any]) -> pd.DataFrame:
    """Per side and test: the spread of its per-process medians, and the clocks nvidia-smi saw while they ran."""
    rows = []
    for entry in side_spreads(result["payload"]):
        several = len(entry.gpus) > 1

        def cell(text_of: Any, gpus: Any = entry.gpus, several: bool = several) -> str:
            parts = [(f"GPU {g.index}: " if several else "") + text_of(g) for g in gpus]
            return "; ".join(parts) or "no busy sample"

        rows.append(
            {
                "side": entry.side,
                "test": entry.test,
                "processes": len(entry.medians),
                "per-process medians t/s": _span_text(Span(min(entry.medians), max(entry.medians)), 2),
                "spread": f"{100 * entry.spread:.1f}%",
                "SM MHz": cell(lambda g: _span_text(g.sm_mhz)),
                "memory MHz": cell(lambda g: _span_text(g.mem_mhz)),
                "°C": cell(lambda g: _span_text(g.temperature_c)),
                "throttle reasons besides idle": cell(lambda g: ", ".join(g.reasons) or "none"),
                "busy samples": cell(lambda g: str(g.samples)),
            }
        )
    return _pandas().DataFrame(rows)


def ppl_frame(result: dict[str, Any]) -> pd.DataFrame:
    ppl = result["payload"].get("quality", {}).get("ppl", {})
    if not ppl:
        return _pandas().DataFrame()
    sides = _sides(result)
    stock = ppl[sides[0]]
    rows = []
    for name in sides:
        entry = ppl[name]
        if name == sides[0]:
            verdict, delta = "baseline", ""
        else:
            same = entry["ppl"] == stock["ppl"] and entry["running_ppl"] == stock["running_ppl"]
            verdict = "identical" if same else "different"
            delta = _fmt(None if entry["ppl"] is None or stock["ppl"] is None else entry["ppl"] - stock["ppl"])
        rows.append(
            {
                "side": name,
                "PPL": _fmt(entry["ppl"]),
                "±": _fmt(entry["ppl_error"], 5),
                "Δ vs stock": delta,
                "verdict": verdict,
            }
        )
    return _pandas().DataFrame(rows)


def _stat_text(stat: dict[str, Any] | None) -> str:
    """The statistic exactly as llama-perplexity printed it (its own rounding), without the name."""
    if stat is None:
        return "n/a"
    return " ".join(stat["text"].split(":", 1)[1].split())


def kl_verdict(entry: dict[str, Any]) -> str:
    stats = entry["statistics"]
    if entry["logprobs_identical"]:
        return "identical (log-probs byte for byte)"
    top = stats.get("Same top p", {}).get("value")
    mean = stats.get("Mean KLD", {}).get("value")
    return f"different (mean KLD {_fmt(mean, 6)}, same top p {_fmt(top, 3)} %)"


def kl_frame(result: dict[str, Any]) -> pd.DataFrame:
    kl = result["payload"].get("quality", {}).get("kl", {})
    against = control_cells(kl) if _has_control(result) else {}
    rows = []
    for name, entry in kl.items():
        row = {"variant": name}
        row.update({key: _stat_text(entry["statistics"].get(key)) for key in KL_HEADLINE})
        row["verdict"] = kl_verdict(entry)
        if against:
            row["mean KLD against the control"] = against[name]
        rows.append(row)
    return _pandas().DataFrame(rows)


def _has_control(result: dict[str, Any]) -> bool:
    return any(is_control(name) for name in result["payload"].get("quality", {}).get("kl", {}))


def kl_full_frame(result: dict[str, Any]) -> pd.DataFrame:
    """Every statistic llama-perplexity printed, one row each, one column per variant."""
    kl = result["payload"].get("quality", {}).get("kl", {})
    if not kl:
        return _pandas().DataFrame()
    names: list[str] = []
    for entry in kl.values():
        names += [n for n in entry["statistics"] if n not in names]
    return _pandas().DataFrame(
        [{"statistic": n, **{v: _stat_text(e["statistics"].get(n)) for v, e in kl.items()}} for n in names]
    )


def text_frame(result: dict[str, Any]) -> pd.DataFrame:
    text = result["payload"].get("text")
    if not text:
        return _pandas().DataFrame()
    rows = []
    for name, comparisons in text["comparisons"].items():
        for index, comp in enumerate(comparisons):
            if comp["identical"]:
                rows.append({"variant": name, "prompt": index + 1, "verdict": "identical", "first difference": ""})
                continue
            where = (
                f"byte {comp['first_difference']}: …{comp['context_before']!r} then "
                f"stock {comp['stock_after']!r} / variant {comp['variant_after']!r}"
            )
            rows.append({"variant": name, "prompt": index + 1, "verdict": "different", "first difference": where})
    return _pandas().DataFrame(rows)


def partial_text(partial: dict[str, Any]) -> str:
    """What a partial result holds, one line: "completed quality, text, speed rounds 1-2 of 3; stopped by: ..."."""
    parts: list[str] = []
    rounds: list[int] = []
    of = ""
    for step in partial.get("completed", []):
        match = SPEED_ROUND.fullmatch(step)
        if match:
            rounds.append(int(match["k"]))
            of = match["n"]
            continue
        parts.append(step)
    if rounds:
        span = f"rounds {min(rounds)}-{max(rounds)}" if len(rounds) > 1 else f"round {rounds[0]}"
        parts.append(f"speed {span} of {of}")
    stopped = partial.get("stopped_by") or "not recorded (the process was killed, or is still running)"
    return f"completed {', '.join(parts) or 'nothing'}; stopped by: {stopped}"


def _partial_lines(result: dict[str, Any]) -> list[str]:
    """The warning a partial result opens with (nothing for a complete one)."""
    if "partial" not in result:
        return []
    return [
        f"**Partial result: {partial_text(result['partial'])}.** The eval did not finish: only its completed "
        "checks are shown, and speed comes from the completed rounds.",
        "",
    ]


def _header(result: dict[str, Any], path: str | None) -> list[str]:
    payload = result["payload"]
    machine = result["machine"]
    gpus = ", ".join(f"{g.get('name')} (driver {g.get('driver_version')})" for g in machine.get("gpus", [])) or "none"
    title = "Partial eval" if "partial" in result else "Eval"
    lines = [
        f"## {title} {result['created']}" + (f" ({path})" if path else ""),
        "",
        *_partial_lines(result),
        f"- fusekit {result['fusekit_version']}, llama.cpp {result['llama_cpp']['commit'][:10]}, "
        f"backend {payload['settings']['backend']}",
        f"- machine: {machine['cpu']} ({machine['cores']} cores), GPUs: {gpus}",
        f"- model: {Path(result['inputs']['model']['path']).name} (sha256 {result['inputs']['model']['sha256'][:12]})",
    ]
    corpus = result["inputs"].get("corpus")
    if corpus:
        lines.append(f"- corpus: {Path(corpus['path']).name} (sha256 {corpus['sha256'][:12]}, {corpus['bytes']} bytes)")
    for v in result["variants"]:
        hashes = ", ".join(f"{e['name']} {e['sha256'][:12]}" for e in v["entries"]) or "no patches"
        lines.append(f"- {v['name']}: {hashes}; build {v['build']['build_commit']}")
        if v.get("touches_only_uncompiled_backends"):
            lines.append(
                f"  - note: {v['name']} patches only backends this {payload['settings']['backend']} build does not "
                "compile; the comparison runs identical code"
            )
    timings = payload.get("timings", {})
    lines.append("- wall time: " + ", ".join(f"{k.removesuffix('_s')} {v:.1f}s" for k, v in timings.items()))
    return lines


def _rounds_text(result: dict[str, Any]) -> str:
    """The rounds of the speed check: "3", or "2 of 3" for a partial result."""
    rounds = result["payload"]["settings"]["rounds"]
    if "partial" not in result:
        return str(rounds)
    done = len({run["round"] for run in result["payload"]["speed"].get("runs", [])})
    return f"{done} of {rounds}"


def _uses_welch(result: dict[str, Any]) -> bool:
    return recorded_method(result["payload"].get("speed", {}).get("summary", [])) == WELCH


def _ratio_text(result: dict[str, Any]) -> str:
    """How the speed table's ratio and interval were computed, as the result recorded it."""
    if _uses_welch(result):
        return (
            "ratio = variant/stock of the geometric means of process medians, 95% Welch t interval over processes "
            "(each process counts once)"
        )
    return "ratio = variant/stock of medians, 95% percentile-bootstrap interval"


def _extension_ratio_text(result: dict[str, Any]) -> str:
    if _uses_welch(result):
        return "ratio of the geometric means of process medians with a Welch t interval over processes"
    return "median ratio with a two-level bootstrap interval"


def render(result: dict[str, Any], path: str | None = None) -> str:
    """The Markdown of one eval result: a header and one table per check."""
    out = _header(result, path)
    sections = [
        ("Perplexity", ppl_frame(result)),
        ("KL divergence against stock", kl_frame(result)),
        ("KL divergence: every statistic", kl_full_frame(result)),
        ("Text identity (greedy)", text_frame(result)),
        ("Speed (llama-bench, median tokens/s)", speed_frame(result)),
    ]
    for title, frame in sections:
        if frame.empty:
            continue
        out += ["", f"### {title}", "", markdown_table(frame)]
        if title.startswith("KL divergence against") and _has_control(result):
            out += [
                "",
                "A `control-` variant is stock with a pure fp32 order change (`patches/controls/`): how far this model "
                "moves when only rounding changes. A variant is like the control when its mean KLD exceeds the "
                f"control's by at most {SIGMAS:g} combined standard errors (taken as independent; both are measured "
                "on the same tokens, so this leans towards 'like').",
            ]
    if "speed" in result["payload"]:
        rounds = _rounds_text(result)
        reps = result["payload"]["settings"]["bench"]["repetitions"]
        out += [
            "",
            f"Speed: {rounds} rounds interleaved (stock and variants alternate), {reps} repetitions per process; "
            f"{_ratio_text(result)}; same = interval contains 1.0. "
            "Paired by round: the geometric mean of each round's variant/stock ratio of process medians with a 95% "
            "t interval over rounds (3+ rounds); drift that moves both sides of a round together cancels there.",
        ]
    parts = stack_parts_frame(result)
    if not parts.empty:
        out += [
            "",
            "### The stacks against their parts",
            "",
            markdown_table(parts),
            "",
            "Medians of this eval. A part holds one fusion (with the patches it was measured with), a stack two or "
            "more; parts' savings added: stock's time per token less the sum of what each part saves, as a ratio to "
            "stock. Savings add where the parts remove different work from one token, and a fixed saving is a larger "
            "share of a token others have shortened, so the stack can beat the product of its parts.",
        ]
    extended = extensions_frame(result)
    if not extended.empty:
        out += [
            "",
            "### Variants against the variant they extend",
            "",
            markdown_table(extended),
            "",
            "A variant extends another when that one's entries (names and content hashes) come first in it; each is "
            "shown against the longest it extends, from the same interleaved processes as the table against stock: "
            f"{_extension_ratio_text(result)}, and paired by round.",
        ]
    clocks = clocks_frame(result)
    if not clocks.empty:
        out += [
            "",
            "### Clocks and spread during the timed runs",
            "",
            markdown_table(clocks),
            "",
            "nvidia-smi sampled every 500 ms, each sample tagged with the process it fell in; samples flagged GPU idle "
            "(before a process has loaded its model) are left out. A spread between processes while the SM clock stays "
            "flat and no throttle reason shows is not the clock's doing.",
        ]
    return "\n".join(out) + "\n"


def speed_plot(results: list[tuple[str, dict[str, Any]]], target: Path) -> Path | None:
    """A PNG of every tok/s ratio with its interval; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = []
    for name, result in results:
        for row in result["payload"].get("speed", {}).get("summary", []):
            rows.append((f"{Path(name).stem}: {row['variant']} {row['test']}", row["ratio"], row["low"], row["high"]))
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.2))
    for i, (_, ratio, low, high) in enumerate(rows):
        ax.errorbar([ratio], [i], xerr=[[ratio - low], [high - ratio]], fmt="o", capsize=4, color="black")
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.set_xlabel("variant / stock, tokens/s (95% interval)")
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target


def render_many(results: list[tuple[str, dict[str, Any]]]) -> str:
    return "# fusekit report\n\n" + "\n".join(render(result, name) for name, result in results)
