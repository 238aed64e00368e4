"""fusekit: patch, build and measure CUDA fusions for a pinned llama.cpp."""

__version__ = "0.1.0"
