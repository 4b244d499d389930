"""Benchmarks: memory-bound workloads timed against eager and torch.compile on the GPU."""
