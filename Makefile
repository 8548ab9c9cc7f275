# Two commands do everything on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
# The CPU build; a bare or newer torch pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0
# Other interpreters the random/numpy suite runs on (3.12+ uses sys.monitoring).
OTHER_PYTHONS ?= 3.10 3.12 3.13

.PHONY: demo test lint test-versions bench clean

$(VENV)/.installed: pyproject.toml setup.py Makefile $(wildcard src/rngtrace/_speedups/*.c src/rngtrace/_speedups/*.h)
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet $(TORCH)
	$(PIP) install --quiet -e '.[numpy,torch,test]'
	touch $@

# The tests add Lightning, transformers and accelerate (the frameworks extra, about a minute on a fresh
# venv, CPU torch kept): tests/test_restores.py runs them. The demo does without them.
$(VENV)/.frameworks: $(VENV)/.installed
	$(PIP) install --quiet -e '.[numpy,torch,test,frameworks]'
	touch $@

demo: $(VENV)/.installed
	cd examples && ../$(PY) story.py

# The code's habits (ruff's lint and format, mypy), then the suite with the C accelerator (which
# must have been built), then once more on the pure-Python wrappers it stands in front of. Two
# pytest-xdist workers: each run takes about 3.5 minutes on two cores, against 7 one after another.
test: $(VENV)/.frameworks lint
	@$(PY) -c "import rngtrace._speedups" 2>/dev/null || { echo "rngtrace's C accelerator was not built: install gcc and the Python headers, then rm -r $(VENV) and run make test again"; exit 1; }
	$(PY) -m pytest -q -n 2
	RNGTRACE_PURE=1 $(PY) -m pytest -q -n 2 -p no:cacheprovider

LINTED := src tests benchmarks scripts
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

# The suite without torch on each other Python found (pyenv or PATH); a missing one is said and skipped.
test-versions:
	@set -e; for v in $(OTHER_PYTHONS); do \
	  py=$$(ls -d $$HOME/.pyenv/versions/$$v.*/bin/python 2>/dev/null | tail -n 1); \
	  [ -n "$$py" ] || py=$$(command -v python$$v 2>/dev/null && python$$v -c '' 2>/dev/null && command -v python$$v || true); \
	  if [ -z "$$py" ]; then echo "python$$v: not installed, skipped"; continue; fi; \
	  echo "== Python $$v ($$py)"; \
	  [ -x .venv-$$v/bin/python ] || $$py -m venv .venv-$$v; \
	  .venv-$$v/bin/python -m pip install --quiet --disable-pip-version-check -e '.[numpy,test]'; \
	  .venv-$$v/bin/python -m pytest -q -n 2 -p no:cacheprovider; \
	done

bench: $(VENV)/.installed
	$(PY) benchmarks/run.py
	$(PY) benchmarks/pytest_suite.py
	$(PY) benchmarks/distinct_stacks.py
	$(PY) benchmarks/big_log.py

clean:
	rm -rf $(VENV) .venv-* build src/*.egg-info
