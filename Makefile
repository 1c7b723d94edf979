# Developer shortcuts; each target is one plain command (see README.md).
PYTHON ?= python
TREE := build/upstream
UPSTREAM_TESTS := $(addprefix $(TREE)/tests/,test_generate_speculatively.py test_api_speculative_decoding.py \
	test_serve.py test_chat.py test_tokenizer.py)
# upstream's tests in those modules that download from the Hugging Face hub, or need upstream's conftest.py, which
# its sdist lacks (a deselected name is a prefix of test ids)
UPSTREAM_OFFLINE := $(addprefix --deselect $(TREE)/tests/,test_serve.py::test_simple test_chat.py::test_main[ \
	test_chat.py::test_merge_lora_if_needed test_chat.py::test_decode test_chat.py::test_litgpt_chat_endtoend \
	test_chat.py::test_litgpt_generate_endtoend test_tokenizer.py::test_tokenizer_against_hf)

.PHONY: test tree patches demo bench

# All tests: the fork's own (tests/) and upstream's patched test module, against the installed litgpt.
test: $(TREE)
	$(PYTHON) -m pytest tests $(UPSTREAM_TESTS) $(UPSTREAM_OFFLINE)

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
