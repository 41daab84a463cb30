"""The benchmark: suites of languages x systems x seeds, run as cells, summarised as tables."""

from segrl.benchmark.runner import BenchInterrupted, BenchOutcome, run_bench
from segrl.benchmark.suite import Suite, builtin_suites, load_suite

__all__ = ["BenchInterrupted", "BenchOutcome", "Suite", "builtin_suites", "load_suite", "run_bench"]
