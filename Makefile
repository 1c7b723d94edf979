# Developer shortcuts; each target is one plain command (see README.md).
PYTHON ?= python
TREE := build/upstream
# every one of upstream's test modules in its sdist, patched, but for the tests that need what is not at hand: they
# download from the Hugging Face hub (all of test_readme.py, which walks through the README's downloads), need
# bitsandbytes, or read config_hub/, which the sdist lacks; and test_save_load_prompt_style, whose expected class path
# is the module's name as upstream's runner imports it ("test_prompts", here "build.upstream.tests.test_prompts").
# A deselected name is a prefix of test ids; the fixtures they take from upstream's tests/conftest.py, which the sdist
# lacks, are in ./conftest.py. `python backend/topic_ends.py` runs the same at the end of every topic of the series.
UPSTREAM_TESTS := $(TREE)/tests --ignore=$(TREE)/tests/test_config_hub.py
UPSTREAM_OFFLINE := $(addprefix --deselect $(TREE)/tests/,test_readme.py test_serve.py::test_simple \
	test_chat.py::test_decode test_chat.py::test_litgpt_chat_endtoend test_chat.py::test_litgpt_generate_endtoend \
	test_tokenizer.py::test_tokenizer_against_hf test_evaluate.py::test_evaluate_script \
	test_model.py::test_against_original_stablelm_zephyr_3b test_trainer_support.py::test_download_model \
	test_prompts.py::test_save_load_prompt_style \
	$(addprefix test_api.py::,test_llm_load_random_init test_llm_load_hub_init test_model_not_initialized \
	test_sequential_tp_cpu test_initialization_for_trainer test_invalid_accelerator test_returned_benchmark_dir \
	test_state_dict test_save_method test_forward_method test_precision_selection test_quantization_is_applied) \
	test_utils.py::test_instantiate_bnb_optimizer_with_str test_utils.py::test_instantiate_bnb_optimizer_with_dict)
# the real model and its 4-block draft (tools/smollm2.py), and the demo's Zen pair, made once before the tests run
MODELS := build/smollm2/SmolLM2-135M-Instruct-first4/lit_model.pth build/demo/zen/target/lit_model.pth
# two workers, a test module each at a time (its servers and models are made once), one thread each: two workers
# fill the two cores, and more threads than cores cost a third more time; see README.md for the time it takes
PARALLEL ?= -n 2 --dist loadfile
# the slowest tests listed at the end: where a CI run's time goes
DURATIONS := --durations=20
# the longest modules first (pytest collects a module once), so that no worker starts one while the other ends
LONGEST_FIRST := $(addprefix tests/,test_real_model.py test_benchmark_serve_smoke.py test_real_model_speculative.py \
	test_benchmark_smoke.py test_serving_real_model.py test_demo.py test_serving_hostile.py test_serving_openai_api.py) \
	$(addprefix $(TREE)/tests/,test_continuous_batching.py test_draft_head.py test_model.py)

.PHONY: test upstream-tests tree patches demo bench

# All tests: the fork's own (tests/) and upstream's patched test modules, against the installed litgpt.
test: $(TREE) $(MODELS)
	OMP_NUM_THREADS=1 $(PYTHON) -m pytest $(PARALLEL) $(DURATIONS) $(LONGEST_FIRST) tests $(UPSTREAM_TESTS) $(UPSTREAM_OFFLINE)

# Upstream's test modules alone, in $(TREE) (against the litgpt that PYTHONPATH or the installed package gives).
upstream-tests: $(TREE)
	OMP_NUM_THREADS=1 $(PYTHON) -m pytest $(PARALLEL) --rootdir=. -c pyproject.toml $(UPSTREAM_TESTS) $(UPSTREAM_OFFLINE)

build/smollm2/SmolLM2-135M-Instruct-first4/lit_model.pth:
	$(PYTHON) -m tools.smollm2 --draft-layers 4

build/demo/zen/target/lit_model.pth:
	$(PYTHON) -m demo.zen

$(TREE):
	$(PYTHON) backend/devtree.py materialize

# Re-create build/upstream from patches/ (discards work in it that was not exported).
tree:
	$(PYTHON) backend/devtree.py materialize --force

# Write the commits of build/upstream back to patches/ and patches/series.
patches:
	$(PYTHON) backend/devtree.py export

demo:
	$(PYTHON) -m demo.run

# The speed benchmark (not part of the tests; see README.md). QUICK=1 for the tiny smoke configuration.
bench:
	$(PYTHON) -m benchmarks.speculative_speed $(if $(QUICK),--quick --out build/bench-quick,--compile)
