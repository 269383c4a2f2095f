# Everything the service and its tests need is installed from here, never by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEBIAN_PACKAGES := chromium chromium-driver redis-server curl nginx
BENCH_PACKAGES := wrk

.PHONY: install system-deps lint test demo bench bench-deps bench-feed bench-mcp bench-store clean

install: system-deps $(STAMP)

# Debian's Chromium and its driver (the browser gateway), redis-server (the throttle's redis:// test) and
# nginx (the reverse-proxy test, deploy/nginx/).
system-deps:
	@missing=""; \
	for pkg in $(DEBIAN_PACKAGES); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "installing Debian packages:$$missing"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -U pip
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q -p no:cacheprovider

demo: install
	$(BIN)/community-api demo

bench-deps: install
	@command -v wrk >/dev/null || { sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $(BENCH_PACKAGES) >/dev/null; }

bench: bench-deps
	$(BIN)/python scripts/bench/api_overhead.py

bench-feed: install
	$(BIN)/python scripts/bench/feed.py

bench-mcp: bench-deps
	$(BIN)/python scripts/bench/mcp_vs_rest.py

bench-store: install
	$(BIN)/python scripts/bench/store_scale.py

clean:
	rm -rf $(VENV) build var
