"""Prints README.md's table: the product kernel's mean exclusive µs per launch for stock, the stack and the stack +
cap, from this folder's node-profile JSONs (call 4) and those in repeats/ (calls 1 and 3). Run from this folder."""

import glob
import json
from pathlib import Path

STACK, CAP = "407758fe30fb", "531d9f148366"  # the file-name keys of L1 + ZY + M + F and of it + the cap


def exclusive_us(path: str, side: str) -> float:
    """The product kernel's (not the quantize's) exclusive time per launch on side a (stock) or b (the variant)."""
    for kernel in json.loads(Path(path).read_text())["payload"]["comparison"]["kernels"]:
        launches = kernel[f"{side}_launches"]
        if launches >= 10 and "quantize" not in kernel["key"]:
            return kernel[f"{side}_exclusive_ns"] / launches / 1e3
    raise ValueError(f"no product kernel on side {side} of {path}")


print("| shape, setting | source | stock MMVQ | stack (L1 + ZY + M + F) | stack + cap |")
print("|---|---|---:|---:|---:|")
for shape in ("6144x4096", "6144x4096_GGML_CUDA_PDL0", "4096x4096", "4096x4096_GGML_CUDA_PDL0"):
    for source, folder in (("call 1", "repeats/call-1/"), ("call 3", "repeats/call-3/"), ("call 4", "")):
        (stack,) = glob.glob(f"{folder}node-profile-{shape}-{STACK}*.json")
        capped = glob.glob(f"{folder}node-profile-{shape}-{CAP}*.json")
        # calls 1 and 3 ran the cap's first form, whose capped launches (6144 x 4096) failed
        failed = not capped or (folder.startswith("repeats") and shape.startswith("6144"))
        cap = "— (launch failed)" if failed else f"{exclusive_us(capped[0], 'b'):.2f}"
        name = shape.replace("_GGML_CUDA_PDL0", ", PDL off").replace("x4096", " x 4096")
        name += "" if "PDL off" in name else ", PDL on"
        print(f"| {name} | {source} | {exclusive_us(stack, 'a'):.2f} | {exclusive_us(stack, 'b'):.2f} | {cap} |")
