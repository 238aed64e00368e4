"""One variant's bridge in its own process, driven by JSON lines on stdin (one reply line per request).

``python -m ggml_bridge.worker --lib-dir BUILD/bin --device CPU`` — the sweep starts one per
variant so two libggml copies never share a process, and interleaves their timing rounds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from typing import Any

import numpy as np

from fusekit.errors import FusekitError

from .bridge import Bridge, Graph, timed
from .checks import check_mul_mat_id, check_mul_mat_many, random_weights


class Worker:
    """The requests: info, prepare (quantize + checks), time_setup, time_round, time_release, copy."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.case: dict[str, Any] | None = None
        self.packed: np.ndarray | None = None
        self.timing: Graph | None = None
        self.timing_nodes = 0

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.pop("op")
        handler = getattr(self, f"op_{op}", None)
        if handler is None:
            raise FusekitError(f"unknown worker request {op!r}")
        return handler(**request)

    def op_info(self) -> dict[str, Any]:
        return self.bridge.info().describe()

    def op_prepare(
        self, type_name: str, m: int, k: int, seed: int, checks: list[list[int]], corrupt: bool
    ) -> dict[str, Any]:
        """Quantize seeded weights (identical in every worker), then run MUL_MAT checks [(n, seed), ...]."""
        self.op_time_release()
        self.packed = self.bridge.quantize(type_name, random_weights(seed, m, k))
        self.case = {"type_name": type_name, "m": m, "k": k}
        runs = [(n, s) for n, s in checks]
        results = [r.describe() for r in check_mul_mat_many(self.bridge, type_name, self.packed, k, runs, corrupt)]
        digest = hashlib.sha256(self.packed.tobytes()).hexdigest()
        return {"weights_sha256": digest, "weight_bytes": int(self.packed.nbytes), "checks": results}

    def op_check_id(
        self, type_name: str, m: int, k: int, n_expert: int, n_used: int, tokens: list[int], seed: int, corrupt: bool
    ) -> dict[str, Any]:
        """MUL_MAT_ID checks: ``n_expert`` experts of (m, k), ``n_used`` per token; then ids shifted by one.

        The shifted-ids check is marked ``expect_fail``: it must fail, or a wrong expert index would go unseen.
        """
        found = []
        for j, n in enumerate(tokens):
            args = (self.bridge, type_name, m, k, n, n_expert, n_used)
            found.append(check_mul_mat_id(*args, seed=seed * 10 + j, corrupt=corrupt).describe())
        wrong = check_mul_mat_id(*args, seed=seed * 10 + len(tokens), wrong_ids=True).describe()
        found.append({**wrong, "op": "MUL_MAT_ID (ids shifted)", "expect_fail": True})
        return {"checks": found}

    def op_time_setup(self, n: int, copies: int, nodes: int, warmup: int) -> dict[str, Any]:
        """Build the timed graph (``nodes`` products over ``copies`` weight copies) and warm it up."""
        if self.case is None or self.packed is None:
            raise FusekitError("time_setup before prepare")
        self.op_time_release()
        c = self.case
        g = self.bridge.timing_graph(c["type_name"], self.packed, c["k"], n, copies, nodes)
        try:
            timed(g, nodes, 0, warmup)
        except BaseException:
            g.close()
            raise
        self.timing, self.timing_nodes = g, nodes
        return {"buffer_bytes": int(self.bridge.lib.ggml_backend_buffer_get_size(g.buffer))}

    def op_time_round(self, reps: int) -> dict[str, Any]:
        if self.timing is None:
            raise FusekitError("time_round before time_setup")
        return {"samples": timed(self.timing, self.timing_nodes, reps, 0)}

    def op_time_release(self) -> dict[str, Any]:
        if self.timing is not None:
            self.timing.close()
            self.timing = None
        return {}

    def op_copy_setup(self, nbytes: int, warmup: int) -> dict[str, Any]:
        """Build the roofline copy graph and warm it up; ``time_round`` then times it."""
        self.op_time_release()
        g = self.bridge.copy_graph(nbytes)
        try:
            timed(g, 1, 0, warmup)
        except BaseException:
            g.close()
            raise
        self.timing, self.timing_nodes = g, 1
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ggml_bridge.worker", description=__doc__)
    parser.add_argument("--lib-dir", required=True)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but replies may reach the protocol stream
    try:
        worker = Worker(Bridge(args.lib_dir, args.device, args.threads))
    except FusekitError as exc:
        out.write(json.dumps({"error": exc.message}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "quit":
            break
        try:
            reply = {"ok": worker.handle(request)}
        except FusekitError as exc:
            reply = {"error": exc.message}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    worker.op_time_release()
    worker.bridge.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
