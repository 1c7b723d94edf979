"""The repository's tools, each run as a module from its root: `python -m tools.<name>`."""
