# Developer shortcuts; each target is one plain command (see README.md).
PYTHON ?= python
TREE := build/upstream
UPSTREAM_TESTS := $(TREE)/tests/test_generate_speculatively.py $(TREE)/tests/test_api_speculative_decoding.py

.PHONY: test tree patches demo bench

# All tests: the fork's own (tests/) and upstream's patched test module, against the installed litgpt.
test: $(TREE)
	$(PYTHON) -m pytest tests $(UPSTREAM_TESTS)

$(TREE):
	$(PYTHON) backend/devtree.py materialize

# Re-create build/upstream from patches/ (discards work in it that was not exported).
tree:
	$(PYTHON) backend/devtree.py materialize --force

# Write the commits of build/upstream back to patches/ and patches/series.
patches:
	$(PYTHON) backend/devtree.py export

demo:
	$(PYTHON) demo/run.py

# The speed benchmark (not part of the tests; see README.md). QUICK=1 for the tiny smoke configuration.
bench:
	$(PYTHON) benchmarks/speculative_speed.py $(if $(QUICK),--quick --out build/bench-quick,--compile)
