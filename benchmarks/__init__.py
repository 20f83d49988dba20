"""Benchmark scripts (run as `python -m benchmarks.<name>`) and their dataset generator."""
