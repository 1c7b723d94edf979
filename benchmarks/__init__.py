"""The benchmarks, each run as a module from the repository's root: `python -m benchmarks.<name>`."""
