# Two entry points for a fresh machine: `make demo` and `make test`. Both set up .venv first.
# Debian's own Python where it exists: an ordinary user (and the sandbox test user) can run it.
PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: setup demo test build check-build lab

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

demo: setup
	$(BIN)/python -m grader demo

test: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup

build: setup
	$(BIN)/python -m grader build

check-build: setup
	$(BIN)/python -m grader build --check

lab: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/jupyter lab $$([ "$$(id -u)" = 0 ] && echo --allow-root)
