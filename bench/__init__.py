"""The side-by-side benchmark: this project against a plain harness (README.md here, run_all.py)."""
