"""Synthetic random-weight GGUF models with real architectures' shapes (``fusekit model synth``)."""
