"""Issue 6 benchmarks: this project against a plain harness (see run_all.py, docs/performance.md)."""
