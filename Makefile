# `make run` plays the quiz in the terminal; `make test` runs the whole suite.
# Both create .venv and install what they need on a fresh Debian machine (with Python 3.11,
# make and python3-venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench check-bank clean sandbox-deps

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory sandbox-deps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[runner,test]'
	touch $(STAMP)

# bubblewrap is the runner's sandbox; install it when missing and we are root.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; \
	  else echo "warning: bubblewrap (bwrap) is missing: install it, or the runner refuses to start"; fi; }

run: $(STAMP)
	$(BIN)/python -m bot console $(ARGS)

test: $(STAMP)
	$(BIN)/ruff check bot questionbank runner
	$(BIN)/mypy bot questionbank runner
	$(BIN)/python -m pytest -q $(ARGS)

bench: $(STAMP)
	$(BIN)/python bench/runner.py
	$(BIN)/python bench/bot.py

check-bank: $(STAMP)
	$(BIN)/python -m questionbank check

clean:
	rm -rf $(VENV) .pytest_cache
