"""ggml_bridge: run one variant's ggml_mul_mat through cffi, check it against float64 and race it."""

from .bridge import Bridge

__all__ = ["Bridge"]
