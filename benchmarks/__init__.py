"""Benchmarks of jaxpuct, side by side with mctx (``python -m benchmarks.compare_mctx``)."""
