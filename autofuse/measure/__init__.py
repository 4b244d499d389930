"""Measurement: timing (injected benchmarkers) and output verification against eager."""
from .timing import Benchmarker, CudaEventBenchmarker, FakeBenchmarker, PredictingBenchmarker, Timing, copy_bandwidth
from .verify import compare

__all__ = ["Benchmarker", "CudaEventBenchmarker", "FakeBenchmarker", "PredictingBenchmarker", "Timing",
           "copy_bandwidth", "compare"]
