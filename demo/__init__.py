"""The demo, run as a module from the repository's root: `python -m demo.run`."""
