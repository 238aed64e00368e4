"""The stacks against their parts: which variants count, and the two predictions made from the parts."""

from __future__ import annotations

import math
from typing import Any

import pytest

from evals.report import stack_parts_frame
from evals.stack_parts import stacks_against_parts


def _variant(name: str, fusions: list[str], patches: tuple[str, ...] = ()) -> dict[str, Any]:
    entries = [{"kind": "fusion", "name": f} for f in fusions] + [{"kind": "patch", "name": p} for p in patches]
    return {"name": name, "entries": entries}


def _row(test: str, variant: str, stock_ts: float, variant_ts: float) -> dict[str, Any]:
    return {
        "test": test,
        "variant": variant,
        "stock_median": stock_ts,
        "variant_median": variant_ts,
        "ratio": variant_ts / stock_ts,
    }


def _result() -> dict[str, Any]:
    variants = [
        _variant("stock", []),
        _variant("fusion-1+extra", ["fusion-1"], ("extra",)),
        _variant("fusion-5", ["fusion-5"]),
        _variant("fusion-1+fusion-5", ["fusion-1", "fusion-5"]),
        _variant("fusion-1+fusion-3", ["fusion-1", "fusion-3"]),  # fusion-3 has no part: not compared
    ]
    # stock 100 t/s (10 ms per token); fusion-1 saves 1 ms, fusion-5 saves 2 ms, the stack measures 7 ms
    summary = [
        _row("tg128", "fusion-1+extra", 100.0, 1000 / 9),
        _row("tg128", "fusion-5", 100.0, 1000 / 8),
        _row("tg128", "fusion-1+fusion-5", 100.0, 1000 / 7),
        _row("tg128", "fusion-1+fusion-3", 100.0, 120.0),
        _row("pp512", "fusion-1+fusion-5", 100.0, 101.0),  # no part measured at pp512: not compared
    ]
    return {"variants": variants, "payload": {"speed": {"summary": summary}}}


def test_a_stack_is_compared_with_the_parts_of_its_fusions() -> None:
    (found,) = stacks_against_parts(_result())
    assert (found.test, found.stack, found.parts) == ("tg128", "fusion-1+fusion-5", ("fusion-1+extra", "fusion-5"))
    assert found.measured == pytest.approx(10 / 7)
    assert found.product == pytest.approx(10 / 9 * 10 / 8)
    assert found.additive == pytest.approx(10 / 7)  # 10 ms less 1 and 2 ms


def test_savings_larger_than_the_token_give_no_finite_prediction() -> None:
    result = _result()
    result["payload"]["speed"]["summary"][1] = _row("tg128", "fusion-5", 100.0, 1000 / 0.5)
    (found,) = stacks_against_parts(result)
    assert math.isinf(found.additive)


def test_the_report_renders_one_row_per_compared_stack() -> None:
    frame = stack_parts_frame(_result())
    assert list(frame["stack"]) == ["fusion-1+fusion-5"]
    assert list(frame["stack / added"]) == ["1.0000"]
