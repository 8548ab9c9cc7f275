# Two commands do everything on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# The CPU build; a bare or newer torch pulls a multi-GB CUDA build.
TORCH  := torch==2.13.0

.PHONY: demo test bench clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check $(TORCH)
	$(PIP) install --quiet --disable-pip-version-check -e '.[numpy,torch,test]'
	touch $@

demo: $(VENV)/.installed
	cd examples && ../$(PY) story.py

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
