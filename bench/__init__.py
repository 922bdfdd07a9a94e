"""Speed and quality benchmarks (results in bench/results/, summarized in BENCHMARKS.md)."""
