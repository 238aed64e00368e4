"""The session report's standalone timing tables, on the committed session-8 H200 files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evals.session_report import render_session
from evals.standalone_timings import (
    TABLE_MAKERS,
    TimingTable,
    chunked_gdn_table,
    glu_handoff_table,
    moe_router_table,
    q8_gemv_table,
    stock_order_timing_table,
)
from fusekit.errors import FusekitError

SESSION8 = Path(__file__).resolve().parent.parent / "results" / "h200-2026-12-01-session8-standalone"
SESSION23C = SESSION8.parent / "h200-2026-12-03-session23c-stock-order-check"  # fusion-5-stock-order without ggml
SESSION30_REUSE = SESSION8.parent / "h200-2026-12-04-session30-reuse-check"  # the stream kernel after a buffer reuse


def _load(name: str) -> dict:
    return json.loads((SESSION8 / name).read_text())


def _chunked_gdn(session: str) -> tuple[dict, list[dict]]:
    """A session's committed chunked-gdn-standalone.json and its step-1 rows (one per case)."""
    data = json.loads((SESSION8.parent / session / "chunked-gdn-standalone.json").read_text())
    return data, [case for case in data["cases"] if "(step 2" not in case["what"]]


def test_q8_gemv_table_sets_experiments_side_by_side_and_bolds_the_fastest() -> None:
    table = q8_gemv_table("q8-gemv-standalone.json", _load("q8-gemv-standalone.json"))
    assert table is not None and table.headers[:3] == ["shape", "floor", "late_u4_m2"]
    assert "packed_late_u2_m4" in table.headers
    down = next(row for row in table.rows if row[0].startswith("35B-A3B experts down (id) (q8_0"))
    column = dict(zip(table.headers, down, strict=True))
    assert column["packed_late_u2_m4"] == "**5.58**" and column["late_u2_m4"] == "9.91"
    assert all(sum("**" in str(cell) for cell in row) == 1 for row in table.rows)


def test_a_failed_check_is_struck_out_and_never_the_fastest() -> None:
    data = _load("q8-gemv-standalone.json")
    data["shapes"] = data["shapes"][:1]
    fastest = data["shapes"][0]["experiments"]["late_u2_m4"]
    fastest.update(ok=False, us=1.0)  # a wrong kernel that is fast must not win
    table = q8_gemv_table("q8-gemv-standalone.json", data)
    assert table is not None
    column = dict(zip(table.headers, table.rows[0], strict=True))
    assert column["late_u2_m4"] == "~~1.00~~"
    assert column["packed_late_u2_m4"] == "**21.18**"


def test_moe_router_table_gives_the_ahead_ratio() -> None:
    table = moe_router_table("moe-router-standalone.json", _load("moe-router-standalone.json"))
    assert table is not None
    first = dict(zip(table.headers, table.rows[0], strict=True))
    assert (first["router"], first["ahead"], first["ahead / router"]) == ("8.39", "9.72", "1.159")


def test_moe_router_table_adds_the_rank_experiment_with_its_bit_check() -> None:
    data = _load("moe-router-standalone.json")
    data["router"] = data["router"][:2]
    data["router"][0]["rank"] = {"us": 4.195, "ok": True, "same_bits_as_plain": True}
    data["router"][1]["rank"] = {"us": 3.0, "ok": False, "same_bits_as_plain": False}
    table = moe_router_table("moe-router-standalone.json", data)
    assert table is not None
    assert table.headers[-3:] == ["rank", "rank / router", "same bits"]
    first, second = (dict(zip(table.headers, row, strict=True)) for row in table.rows)
    assert (first["rank"], first["rank / router"], first["same bits"]) == ("4.20", "0.500", "yes")
    assert (second["rank"], second["same bits"]) == ("~~3.00~~", "**no**")
    assert "picked by rank" in table.caption and "before the grid-dependency wait" in table.caption


def test_programs_without_experiments_give_no_table_and_corrupt_files_one_error(tmp_path: Path) -> None:
    (tmp_path / "moe-router-standalone.json").write_text(json.dumps({"router": [{"what": "x", "us": 1.0, "ok": True}]}))
    assert (
        moe_router_table(
            "moe-router-standalone.json", json.loads((tmp_path / "moe-router-standalone.json").read_text())
        )
        is None
    )
    assert "No standalone program with timed experiments" in render_session(tmp_path)
    (tmp_path / "q8-gemv-standalone.json").write_text("{not json")
    with pytest.raises(FusekitError, match="is not valid JSON"):
        render_session(tmp_path)


def test_chunked_gdn_table_sets_step_2a_beside_step_1() -> None:
    """Step 1's rows as the H200 wrote them (session 12b), each followed by a step-2a row of the new program."""
    data, _ = _chunked_gdn("h200-2026-12-01-session12b-residual-fixed")
    assert chunked_gdn_table("chunked-gdn-standalone.json", data) is None  # step 1 only: no table, reports unchanged
    rows = []
    for case in data["cases"]:
        rows += [
            case,
            {
                **case,
                "what": case["what"] + " (step 2a, TF32 two passes)",
                "median_us": 150.0,
                "median_us_16_columns": 140.0,
                "prep_median_us": 60.0,
                "tolerance": 1e-2,
                "ok": "T=512," not in case["what"],
            },
        ]
    table = chunked_gdn_table("chunked-gdn-standalone.json", {**data, "cases": rows})
    assert table is not None and len(table.rows) == 3
    first, second, third = (dict(zip(table.headers, row, strict=True)) for row in table.rows)
    assert first["case"] == "35B GDN layer, T=512" and first["step 1"] == "1841.40"
    assert second["case"] == "35B GDN layer, T=4096" and (second["step 2a"], second["prep pass"]) == ("150.00", "60.00")
    assert third["step 2a"] == "~~150.00~~"  # its check failed
    assert "279-289" in table.caption and "per 512-token call" in table.caption


def test_chunked_gdn_table_reads_step_2as_first_h200_run() -> None:
    """Session 13's program output as the H200 wrote it: step 2a beside step 1 in every case, the prep pass apart."""
    data, _ = _chunked_gdn("h200-2026-12-01-session13-on-their-own")
    table = chunked_gdn_table("chunked-gdn-standalone.json", data)
    assert table is not None and len(table.rows) == 3
    long_prompt = dict(zip(table.headers, table.rows[1], strict=True))
    assert "T=4096" in long_prompt["case"]
    assert [long_prompt[h] for h in table.headers if h != "case"][:4] == ["14786.85", "2718.12", "2755.99", "1221.44"]


def test_chunked_gdn_table_adds_step_2b_columns_where_the_program_ran_it() -> None:
    """Step 2b rows (prep, chain, output pass) as the program writes them after session 13: four more columns, left
    blank for a case without one; a JSON without step 2b keeps the old table."""
    data, step_1 = _chunked_gdn("h200-2026-12-01-session13-on-their-own")
    split = {
        "what": step_1[1]["what"] + " (step 2b, three passes)",
        "median_us": 400.0,
        "chain_median_us": 90.0,
        "output_median_us": 80.0,
        "err_out": 8e-4,
        "err_state": 2e-4,
        "tolerance": 1e-2,
        "ok": True,
    }
    table = chunked_gdn_table("chunked-gdn-standalone.json", {**data, "cases": [*data["cases"], split]})
    assert table is not None
    assert table.headers[-4:] == ["step 2b", "step 2b chain", "step 2b output pass", "step 2b error out / state"]
    first, second = (dict(zip(table.headers, row, strict=True)) for row in table.rows[:2])
    assert first["step 2b"] == first["step 2b chain"] == ""
    assert (second["step 2b chain"], second["step 2b output pass"], second["step 2b error out / state"]) == (
        "90.00",
        "80.00",
        "8.0e-04 / 2.0e-04",
    )
    assert "400" in second["step 2b"]
    plain = chunked_gdn_table("chunked-gdn-standalone.json", data)
    assert plain is not None and len(plain.headers) == 6


def test_chunked_gdn_table_shows_step_2b_and_the_padded_step_2c_side_by_side() -> None:
    """Session 14's JSON (step 2b with no prep column) plus step 2c rows as the program writes them after session 14
    (each with its own prep pass): every step gets its own columns, named by the step."""
    data, step_1 = _chunked_gdn("h200-2026-12-02-session14-fusion4-ggml")
    padded = {
        "what": step_1[0]["what"] + " (step 2c, padded shared rows)",
        "pad": 4,
        "median_us": 200.0,
        "prep_median_us": 70.0,
        "chain_median_us": 100.0,
        "output_median_us": 30.0,
        "err_out": 7e-4,
        "err_state": 2e-4,
        "tolerance": 1e-2,
        "ok": True,
    }
    table = chunked_gdn_table("chunked-gdn-standalone.json", {**data, "cases": [*data["cases"], padded]})
    assert table is not None
    assert table.headers[6:] == [
        "step 2b",
        "step 2b chain",
        "step 2b output pass",
        "step 2b error out / state",
        "step 2c",
        "step 2c prep pass",
        "step 2c chain",
        "step 2c output pass",
        "step 2c error out / state",
    ]
    rows = [dict(zip(table.headers, row, strict=True)) for row in table.rows]
    assert rows[0]["step 2b chain"] == "156.63" and rows[0]["step 2c prep pass"] == "70.00"
    assert rows[1]["step 2c"] == "" and rows[1]["step 2b chain"] == "839.28"


def test_chunked_gdn_table_adds_a_column_per_step_2d_chain() -> None:
    """Session 15's JSON plus step 2d rows as the program writes them after session 15 (step 2c's passes around another
    chain): one column per chain variant with its CTAs per SM, a failed check struck out, blank where a case has
    none."""
    data, step_1 = _chunked_gdn("h200-2026-12-02-session15-step2c-gluq8")

    def variant(case: dict, name: str, chain_us: float, ok: bool, ctas: int) -> dict:
        what = case["what"] + f" (step 2d, {name})"
        return {"what": what, "chain_median_us": chain_us, "ok": ok, "ctas_per_sm": ctas, "err_out": 7e-4}

    rows = [
        variant(step_1[0], "chain of 16 warps", 101.5, True, 1),
        variant(step_1[0], "chain of 16 columns, one buffer", 88.25, False, 2),
        variant(step_1[1], "chain of 16 warps", 500.0, True, 1),
    ]
    table = chunked_gdn_table("chunked-gdn-standalone.json", {**data, "cases": [*data["cases"], *rows]})
    assert table is not None
    assert table.headers[-2:] == [
        "step 2d chain: chain of 16 warps (1 CTA per SM)",
        "step 2d chain: chain of 16 columns, one buffer (2 CTA per SM)",
    ]
    cells = [row[-2:] for row in table.rows]
    assert cells[0] == ["101.50", "~~88.25~~"]
    assert cells[1] == ["500.00", ""]
    assert "step 2d" in table.caption
    plain = chunked_gdn_table("chunked-gdn-standalone.json", data)
    assert plain is not None and not any("step 2d" in header for header in plain.headers)


def test_chunked_gdn_table_adds_a_column_per_step_3c_output_pass_after_the_chains() -> None:
    """Step 3c's rows (step 2c's prep pass and chain around another output pass) take their output pass's time, not
    the chain's, and follow the step 2d columns."""
    data, step_1 = _chunked_gdn("h200-2026-12-02-session15-step2c-gluq8")
    chain = {"what": step_1[0]["what"] + " (step 2d, chain of 16 warps)", "chain_median_us": 50.0, "ok": True}
    output = {
        "what": step_1[0]["what"] + " (step 3c, output of 64 columns, A in batches of 4)",
        "output_median_us": 17.25,
        "chain_median_us": 999.0,  # not this pass's time: must not be shown
        "ok": True,
        "ctas_per_sm": 4,
    }
    table = chunked_gdn_table("chunked-gdn-standalone.json", {**data, "cases": [*data["cases"], output, chain]})
    assert table is not None
    assert table.headers[-2:] == [
        "step 2d chain: chain of 16 warps",
        "step 3c output: output of 64 columns, A in batches of 4 (4 CTA per SM)",
    ]
    assert table.rows[0][-2:] == ["50.00", "17.25"]
    assert "step 3c: step 2c's prep pass and chain, then another output pass" in table.caption
    mma = {
        **output,
        "what": step_1[0]["what"] + " (step 3f, output of 128 columns on mma.sync)",
        "output_median_us": 18.5,
    }
    with_mma = chunked_gdn_table("chunked-gdn-standalone.json", {**data, "cases": [*data["cases"], output, mma]})
    assert with_mma is not None
    assert with_mma.headers[-1] == "step 3f output: output of 128 columns on mma.sync (4 CTA per SM)"
    assert with_mma.rows[0][-2:] == ["17.25", "18.50"] and "step 3f: " in with_mma.caption


def test_chunked_gdn_table_shows_step_3d_prep_alone_and_whole_by_their_own_keys() -> None:
    """Step 3d's two rows: the prep pass timed alone (prep_median_us) and the three passes timed whole (median_us);
    each column shows its own time, never the other key, and a failed check strikes it out. Step 3e's chain row
    comes before them, by its chain time."""
    data, step_1 = _chunked_gdn("h200-2026-12-02-session15-step2c-gluq8")
    chain = {
        "what": step_1[0]["what"] + " (step 3e, chain on mma.sync from shared memory)",
        "chain_median_us": 41.0,
        "prep_median_us": 999.0,  # not this row's time
        "ok": True,
    }
    alone = {
        "what": step_1[0]["what"] + " (step 3d, prep pass alone, on mma.sync from shared memory)",
        "prep_median_us": 55.5,
        "ok": True,
        "ctas_per_sm": 2,
    }
    whole = {
        "what": step_1[0]["what"] + " (step 3d, whole, with the output of 64 columns, A in batches of 4)",
        "median_us": 131.0,
        "ok": False,
        "ctas_per_sm": 2,
    }
    table = chunked_gdn_table("chunked-gdn-standalone.json", {**data, "cases": [*data["cases"], alone, whole, chain]})
    assert table is not None
    assert table.headers[-3:] == [
        "step 3e chain: chain on mma.sync from shared memory",
        "step 3d: prep pass alone, on mma.sync from shared memory (2 CTA per SM)",
        "step 3d: whole, with the output of 64 columns, A in batches of 4 (2 CTA per SM)",
    ]
    assert table.rows[0][-3:] == ["41.00", "55.50", "~~131.00~~"]
    assert "step 3d: the prep pass on mma.sync" in table.caption


def test_glu_handoff_table_sets_each_hand_off_against_the_gemv_alone() -> None:
    """The shape kernels/glu_handoff_check.cu writes: the GEMV alone first, a cluster variant the device could not
    launch, and one whose q8_1 blocks came out wrong (its time struck out, never read as a result)."""
    data = {
        "device": "NVIDIA H200",
        "sabotage": False,
        "rows": 4096,
        "k": 2048,
        "reps_per_graph": 20,
        "variants": [
            {"name": "GEMV alone (no q8_1 copy)", "rows_per_cta": 2, "cluster": 1, "launchable": True,
             "err_y": 3e-7, "ok_y": True, "median_us": 9.5, "batches_us": [9.5]},
            {"name": "separate: GEMV, then quantize", "rows_per_cta": 2, "cluster": 1, "launchable": True,
             "err_y": 3e-7, "ok_y": True, "bad_blocks": 0, "ok_q": True, "median_us": 11.25, "batches_us": [11.25]},
            {"name": "cluster of 16 CTAs of 2 rows", "rows_per_cta": 2, "cluster": 16, "launchable": False},
            {"name": "cluster of 8 CTAs of 4 rows", "rows_per_cta": 4, "cluster": 8, "launchable": True,
             "err_y": 3e-7, "ok_y": True, "bad_blocks": 3, "ok_q": False, "median_us": 10.0, "batches_us": [10.0]},
        ],
        "checks": 5,
        "failures": 1,
    }  # fmt: skip
    assert TABLE_MAKERS["glu-handoff-standalone.json"] is glu_handoff_table
    table = glu_handoff_table("glu-handoff-standalone.json", data)
    assert table is not None and "4096 rows of 2048" in table.caption
    rows = {row[0]: row for row in table.rows}
    assert rows["GEMV alone (no q8_1 copy)"][3:] == ["9.50", "", "y ok"]
    assert rows["separate: GEMV, then quantize"][3:] == ["11.25", "+1.75", "y ok, q8_1 ok"]
    assert rows["cluster of 16 CTAs of 2 rows"][3] == "not launchable"
    assert rows["cluster of 8 CTAs of 4 rows"][3:] == ["~~10.00~~", "+0.50", "y ok, **3 q8_1 blocks wrong**"]
    assert glu_handoff_table("glu-handoff-standalone.json", {"variants": []}) is None


def test_chunked_gdn_table_adds_step_3h_chain_and_step_3i_rows_by_their_own_keys() -> None:
    """Step 3h's chain row (chain_median_us) follows step 3e's; step 3i's prep-alone and whole rows come after step
    3d's, each column with its own key."""
    data, step_1 = _chunked_gdn("h200-2026-12-02-session15-step2c-gluq8")
    rows = [
        {"what": step_1[0]["what"] + " (step 3e, chain on mma.sync from shared memory)", "chain_median_us": 41.6},
        {
            "what": step_1[0]["what"] + " (step 3h, chain on mma.sync, its B operands from TF32 copies)",
            "chain_median_us": 38.5,
            "median_us": 999.0,
        },
        {
            "what": step_1[0]["what"] + " (step 3d, prep pass alone, on mma.sync from shared memory)",
            "prep_median_us": 50.7,
        },
        {
            "what": step_1[0]["what"] + " (step 3i, prep pass alone, TF32-only operands stored rounded)",
            "prep_median_us": 51.25,
            "chain_median_us": 999.0,
        },
        {
            "what": step_1[0]["what"] + " (step 3i, whole, with step 3h's chain and the output of 128 columns)",
            "median_us": 110.5,
        },
    ]
    table = chunked_gdn_table(
        "chunked-gdn-standalone.json", {**data, "cases": [*data["cases"], *({**r, "ok": True} for r in rows)]}
    )
    assert table is not None
    assert table.headers[-5:] == [
        "step 3e chain: chain on mma.sync from shared memory",
        "step 3h chain: chain on mma.sync, its B operands from TF32 copies",
        "step 3d: prep pass alone, on mma.sync from shared memory",
        "step 3i: prep pass alone, TF32-only operands stored rounded",
        "step 3i: whole, with step 3h's chain and the output of 128 columns",
    ]
    assert table.rows[0][-5:] == ["41.60", "38.50", "50.70", "51.25", "110.50"]
    assert "step 3h: " in table.caption and "step 3i: " in table.caption


def test_stock_order_timing_table_gives_each_kernel_its_ratio_to_the_stacks() -> None:
    """Session 23c's timing as the H200 wrote it (no bytes recorded yet): every kernel of a shape against its first."""
    data = json.loads((SESSION23C / "timing" / "stock-order-timing.json").read_text())
    table = stock_order_timing_table("stock-order-timing.json", data)
    assert table is not None and len(table.rows) == 18
    rows = [dict(zip(table.headers, row, strict=True)) for row in table.rows]
    head = [row for row in rows if row["shape"] == "output 248320x2048"]
    assert [(row["kernel"], row["median µs"], row["ratio"]) for row in head] == [
        ("tile (stack) split 1", "150.16", "1.000"),
        ("mmvq order split 1", "210.93", "1.405"),
    ]
    assert all(row["TB/s"] == "" and row["floor / kernel"] == "" for row in rows)
    assert "9 interleaved rounds" in table.caption and "132 SMs" in table.caption


def test_stock_order_timing_table_sets_bandwidth_and_floor_where_the_bytes_are_known() -> None:
    entry = {"shape": "output", "bytes": 540_262_400, "min_us": 1.0, "max_us": 999.0, "rounds": 9}
    data = {
        "device": "GPU",
        "results": [
            {**entry, "kernel": "tile (stack) split 1", "median_us": 150.0},
            {**entry, "kernel": "mmvq order stream d4", "median_us": 135.0},
            {**entry, "kernel": "floor (16-byte read)", "median_us": 125.0},
        ],
    }
    table = stock_order_timing_table("stock-order-timing.json", data)
    assert table is not None
    tile, stream, floor = (dict(zip(table.headers, row, strict=True)) for row in table.rows)
    assert (stream["ratio"], stream["TB/s"], stream["floor / kernel"]) == ("0.900", "4.00", "93%")
    assert (tile["MB"], tile["TB/s"], tile["floor / kernel"]) == ("540.3", "3.60", "83%")
    assert floor["floor / kernel"] == "" and floor["ratio"] == "0.833"
    assert stock_order_timing_table("stock-order-timing.json", {"results": []}) is None


def test_the_report_counts_the_stock_order_gpu_checks_and_their_sabotage(tmp_path: Path) -> None:
    """A case passes only with every row bit for bit the reference's and within 1e-5 of float64; under sabotage
    a case that stays equal is a check that did not fail."""
    report = render_session(SESSION23C)
    assert "| `stock-order-gpu-check` | NVIDIA H200 | sabotage false | 53 | 0 | all passed |" in report
    assert "| `stock-order-gpu-check-sabotage` | NVIDIA H200 | sabotage true | 0 | 53 | every check failed" in report
    data = json.loads((SESSION23C / "stock-order-gpu-check.json").read_text())
    data["cases"][0]["equal"] -= 1  # one row off the reference's bits
    data["cases"][1]["near"] -= 1  # one row off float64
    (tmp_path / "stock-order-gpu-check.json").write_text(json.dumps(data))
    sabotaged = json.loads((SESSION23C / "stock-order-gpu-check-sabotage.json").read_text())
    sabotaged["cases"][0].update(equal=sabotaged["cases"][0]["rows"], near=sabotaged["cases"][0]["rows"])
    (tmp_path / "stock-order-gpu-check-sabotage.json").write_text(json.dumps(sabotaged))
    report = render_session(tmp_path)
    assert "| 51 | 2 | **2 failed** |" in report
    assert "**1 checks passed under sabotage**" in report


def test_the_report_counts_every_iteration_of_the_stream_reuse_check(tmp_path: Path) -> None:
    """Each iteration's one-row result is a check: one wrong iteration fails the run, one right iteration under
    sabotage is a check that did not fail."""
    report = render_session(SESSION30_REUSE)
    assert "| `stream-reuse-gpu-check-via-l1` | NVIDIA H200 | sabotage false | 12000 | 0 | all passed |" in report
    assert "| `stream-reuse-gpu-check-via-l1-sabotage` | NVIDIA H200 | sabotage true | 0 | 480 | every check" in report
    data = json.loads((SESSION30_REUSE / "stream-reuse-gpu-check-via-l1.json").read_text())
    data["configs"][3]["right"] -= 1  # one stale read
    (tmp_path / "stream-reuse-gpu-check-via-l1.json").write_text(json.dumps(data))
    sabotaged = json.loads((SESSION30_REUSE / "stream-reuse-gpu-check-via-l1-sabotage.json").read_text())
    sabotaged["configs"][0]["right"] = 1
    (tmp_path / "stream-reuse-gpu-check-via-l1-sabotage.json").write_text(json.dumps(sabotaged))
    report = render_session(tmp_path)
    assert "| 11999 | 1 | **1 failed** |" in report
    assert "**1 checks passed under sabotage**" in report


def _chunked_table_columns(data: dict[str, Any]) -> tuple[TimingTable, dict[str, int]]:
    """The chunked-gdn table of data, and its column index by header."""
    table = chunked_gdn_table("chunked-gdn-standalone.json", data)
    assert table is not None
    return table, {header: i for i, header in enumerate(table.headers)}


def test_chunked_gdn_table_has_the_register_chains_of_steps_4a_to_4d() -> None:
    """Session 40's H100 run (steps 4a-4d, chains alone and whole): each experiment is a column holding its own time."""
    folder = SESSION8.parent / "h100-2026-12-05-session40-spread"
    data = json.loads((folder / "chunked-gdn-standalone.json").read_text())
    table, column = _chunked_table_columns(data)
    first = table.rows[0]  # the 35B layer at T = 512
    lean_chain = "step 4c: step 4a's chain with lean addressing, 2 warps of 16 columns a CTA (1 CTA per SM)"
    spread_whole = "step 4d: whole, with step 4d's chain of 4 warps and step 3f's output of 128 columns (2 CTA per SM)"
    assert lean_chain in column and spread_whole in column
    assert "step 4b chain: chain with each slice on a pair of warps, 2 slices a CTA (1 CTA per SM)" in column
    by_what = {case["what"]: case for case in data["cases"]}
    name = first[0]
    lean = by_what[f"{name} (step 4c, step 4a's chain with lean addressing, 2 warps of 16 columns a CTA)"]
    whole = by_what[f"{name} (step 4d, whole, with step 4d's chain of 4 warps and step 3f's output of 128 columns)"]
    assert first[column[lean_chain]] == f"{lean['chain_median_us']:.2f}"
    assert first[column[spread_whole]] == f"{whole['median_us']:.2f}"
    assert "step 4c: " in table.caption and "step 4d: " in table.caption


def test_chunked_gdn_table_has_step_4e_prep_pass_alone_and_whole() -> None:
    """Session 40's lean prep pass: its alone row reads prep_median_us, its whole row median_us."""
    data = json.loads(
        (SESSION8.parent / "h100-2026-12-05-session40-prep-lean" / "chunked-gdn-standalone.json").read_text()
    )
    table, column = _chunked_table_columns(data)
    alone = "step 4e: prep pass alone, lean addressing (2 CTA per SM)"
    whole = "step 4e: whole, with step 4c's chain of 2 warps and step 3f's output of 128 columns (2 CTA per SM)"
    assert table.rows[0][column[alone]] == "44.60" and table.rows[0][column[whole]] == "105.30"


def test_chunked_gdn_table_has_steps_4f_to_5a_and_their_comparisons() -> None:
    """Steps 4f, 4g and 5a (written in session 41, not yet run) get their columns from the program's row names, and the
    rows comparing their outputs with the passes they replace show the floats that differ; a case without such a row
    leaves the cell empty."""
    data = json.loads(
        (SESSION8.parent / "h100-2026-12-05-session40-prep-lean" / "chunked-gdn-standalone.json").read_text()
    )
    first = data["cases"][0]["what"]
    template = next(
        case for case in data["cases"] if case["what"] == f"{first} (step 4e, prep pass alone, lean addressing)"
    )
    alone = {**template, "what": f"{first} (step 4f, prep pass alone, operands rounded once, zero blocks skipped)"}
    alone["prep_median_us"] = 40.25
    output = {**template, "what": f"{first} (step 4g, output of 128 columns, lean staging, stored from the fragments)"}
    output.pop("prep_median_us")
    output["output_median_us"] = 26.5
    comparison = {"what": f"{first} (step 4f record against step 4e's)", "T": 512, "B": 1, "K": 1}
    comparison |= {"differing_floats": 3, "max_abs_difference": 0.0}
    outputs = {**comparison, "what": f"{first} (step 4g output against step 3f's)", "differing_floats": 0}
    last = [case["what"] for case in data["cases"] if "H_k" in case][-1]  # the program's last case
    second_outputs = {**outputs, "what": f"{last} (step 4g output against step 3f's)"}
    second_outputs |= {"differing_floats": 5, "one_sided_floats": 2}
    fused = {**template, "what": f"{first} (step 5a, whole in two passes, with step 4f's prep pass storing Qe and QKm)"}
    fused.pop("prep_median_us")
    fused["median_us"] = 84.0
    data["cases"] += [alone, output, comparison, outputs, fused, second_outputs]
    table, column = _chunked_table_columns(data)
    step_4f = "step 4f: prep pass alone, operands rounded once, zero blocks skipped (2 CTA per SM)"
    record = "step 4f record against step 4e's: floats differing (largest difference)"
    step_4g = "step 4g: output of 128 columns, lean staging, stored from the fragments (2 CTA per SM)"
    same_output = "step 4g output against step 3f's: floats differing (largest difference)"
    assert table.rows[0][column[step_4f]] == "40.25" and table.rows[0][column[step_4g]] == "26.50"
    assert table.rows[0][column[record]] == "3 (0.0e+00)" and table.rows[0][column[same_output]] == "0 (0.0e+00)"
    assert table.rows[1][column[record]] == ""
    assert table.rows[-1][column[same_output]] == "5 (0.0e+00), **2 written by one run only**"
    step_5a = "step 5a: whole in two passes, with step 4f's prep pass storing Qe and QKm (2 CTA per SM)"
    assert table.rows[0][column[step_5a]] == "84.00"
    assert "step 4f: " in table.caption and "step 4g: " in table.caption and "under --sabotage" in table.caption
    assert "step 5a: two passes" in table.caption


@pytest.mark.parametrize(
    ("step", "alone", "whole", "caption"),
    [
        (
            "step 4h",
            "prep pass alone, step 4f's with the values asked into the L2 early",
            "whole in two passes, with step 4h's prep pass storing Qe and QKm in TF32",
            "step 4h: step 4f's prep pass with each chunk's values asked into the L2",
        ),
        (
            "step 4i",
            "prep pass alone, step 4f's with W and U0 leaving by bulk copy",
            "whole in two passes, with step 4i's prep pass storing Qe and QKm in TF32",
            "step 4i: step 4f's prep pass with the record's W and U0 staged in shared memory",
        ),
        (
            "step 4j",
            "prep pass alone, step 4i's with QKm leaving by bulk copy too",
            "whole in two passes, with step 4j's prep pass storing Qe and QKm in TF32",
            "step 4j: step 4i's prep pass with the record's QKm also staged in shared memory",
        ),
    ],
)
def test_chunked_gdn_table_has_a_prep_step_and_its_record_comparison(
    step: str, alone: str, whole: str, caption: str
) -> None:
    """Steps 4h (session 43), 4i and 4j (session 44): the prep pass alone and two passes whole get columns from the
    program's row names (as the program writes them), and the record's comparison with step 4f's a column of its own."""
    data = json.loads(
        (SESSION8.parent / "h100-2026-12-06-session42-two-pass" / "chunked-gdn-standalone.json").read_text()
    )
    first = data["cases"][0]["what"]
    template = next(case for case in data["cases"] if case["what"].startswith(f"{first} (step 4f, prep pass alone"))
    alone_row = {**template, "what": f"{first} ({step}, {alone})"}
    alone_row["prep_median_us"] = 36.5
    whole_row = {key: value for key, value in template.items() if key != "prep_median_us"}
    whole_row |= {"what": f"{first} ({step}, {whole})"}
    whole_row["median_us"] = 75.25
    record = {"what": f"{first} ({step} record against step 4f's)", "T": 512, "B": 1, "K": 1}
    record |= {"differing_floats": 0, "max_abs_difference": 0.0}
    data["cases"] += [alone_row, whole_row, record]
    table, column = _chunked_table_columns(data)
    same = f"{step} record against step 4f's: floats differing (largest difference)"
    alone_column = next(header for header in column if header.startswith(f"{step}: {alone}"))
    two_column = next(header for header in column if header.startswith(f"{step}: {whole}"))
    assert table.rows[0][column[alone_column]] == "36.50" and table.rows[0][column[two_column]] == "75.25"
    assert table.rows[0][column[same]] == "0 (0.0e+00)" and table.rows[1][column[same]] == ""
    assert caption in table.caption


def _rows_reader_variant(name: str, rows: int, us: float, ok: bool = True, same: bool = True) -> dict[str, Any]:
    """One variant as kernels/q8_rows_reader_check.cu writes it."""
    return {
        "name": name,
        "rows_per_cta": rows,
        "err": 1e-7,
        "ok": ok,
        "same_y_as_separate": same,
        "median_us": us,
        "min_us": us - 0.05,
        "max_us": us + 0.1,
    }


def test_rows_reader_table_sets_each_variant_against_ggmls_node_and_strikes_out_a_reader_with_other_bits() -> None:
    data = {
        "device": "NVIDIA H100 80GB HBM3",
        "rounds": 15,
        "reps_per_graph": 20,
        "cases": [
            {
                "what": "512 x 2048 (short table)",
                "bytes": 1114112,
                "variants": [
                    _rows_reader_variant("separate", 0, 3.6),
                    _rows_reader_variant("alone", -1, 2.4),
                    _rows_reader_variant("reader R4", 4, 2.7),
                    _rows_reader_variant("reader R8", 8, 2.5, same=False),
                ],
            }
        ],
    }
    table = TABLE_MAKERS["q8-rows-reader-standalone.json"]("q8-rows-reader-standalone.json", data)
    assert table is not None and table.headers[2:4] == ["variant", "median µs"]
    rows = {row[2]: row for row in table.rows}
    assert rows["separate"][3:6] == ["3.60", "3.55-3.70", "1.000"]
    assert rows["reader R4"][3] == "2.70" and rows["reader R4"][5] == "1.333"
    assert rows["reader R4"][6] == "y ok, bits = separate's"
    assert rows["reader R8"][3] == "~~2.50~~" and "bits differ" in rows["reader R8"][6]
    assert rows["alone"][6] == "y ok" and "H100" in table.caption
    assert TABLE_MAKERS["q8-rows-reader-standalone.json"]("x.json", {"cases": []}) is None
