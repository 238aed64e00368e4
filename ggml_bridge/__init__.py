"""ggml_bridge: run one variant's ggml_mul_mat through cffi, check it against float64 and race it."""

import os

# The float64 reference runs BLAS on row chunks from a pool of threads (one per core); BLAS's own
# threads on top of those oversubscribe the cores (measured 40x slower on a busy 2-core box).
# Only takes effect when numpy is first imported after this package.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from .bridge import Bridge  # noqa: E402

__all__ = ["Bridge"]
