# Two commands on a fresh machine with Python 3.11+ and pip: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test bench clean

demo: $(VENV)/.installed
	$(BIN)/alk run --lane reference --repeats 20

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/overhead.py

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/bin/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,pydantic-ai,langgraph,openai-agents]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
