"""Benchmarks (make bench): workloads in scheduler_perf shape and the runner."""
