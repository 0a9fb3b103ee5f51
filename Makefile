# The two commands a newcomer needs: `make run` (the service on the local stack) and
# `make test` (lint, the docs and the whole suite). Everything else is set up by the targets
# themselves.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The service's own processes (gunicorn, the runner) run in a virtualenv of their own holding
# requirements.txt only, as the image installs it: see devstack/virtualenvs.py.
SERVICE_VENV := $(VENV)/service
SERVICE_STAMP := $(SERVICE_VENV)/.installed
# The Dask operator the local stack runs, with its own packages, likewise.
OPERATOR_VENV := $(VENV)/dask-operator
OPERATOR_STAMP := $(OPERATOR_VENV)/.installed

.PHONY: run test lint docs pytest setup redis-server haproxy chromium kubectl bench clean hub

# Debian's packages, installed when missing. Another apt-get (a machine's first-boot upgrade,
# say) may hold the package manager's locks: wait for them, up to five minutes, rather than
# fail. `apt-get install` waits by itself (DPkg::Lock::Timeout); `apt-get update` does not wait
# for the lists' lock, so it is tried again while that lock is held.
APT_LOCK_SECONDS := 300
APT_INSTALL = apt_update() { \
	  for i in $$(seq 1 $$(( $(APT_LOCK_SECONDS) / 5 ))); do \
	    out=$$(apt-get update -qq 2>&1) && return 0; \
	    case "$$out" in *"Could not get lock"*) sleep 5;; *) echo "$$out" >&2; return 1;; esac; \
	  done; echo "apt-get update: the package lists stayed locked" >&2; return 1; }; \
	apt_update && apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_SECONDS) install -y -qq

$(STAMP): requirements.txt requirements-dev.txt requirements-dask-operator.txt \
	  fileserver/requirements.txt client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

$(SERVICE_STAMP): requirements.txt
	$(PYTHON) -m venv $(SERVICE_VENV)
	$(SERVICE_VENV)/bin/pip install --quiet --upgrade pip
	$(SERVICE_VENV)/bin/pip install --quiet -r requirements.txt
	touch $@

$(OPERATOR_STAMP): requirements-dask-operator.txt
	$(PYTHON) -m venv $(OPERATOR_VENV)
	$(OPERATOR_VENV)/bin/pip install --quiet --upgrade pip
	$(OPERATOR_VENV)/bin/pip install --quiet -r requirements-dask-operator.txt
	touch $@

# Tests and the local stack start their own redis-server; install it if the machine lacks it.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing redis-server from Debian's packages"; \
	  $(APT_INSTALL) redis-server >/dev/null; }

# Several replicas of the service (`SPAWNER_REPLICAS=3 make run`, and the scale-out tests) sit
# behind HAProxy on loopback.
haproxy:
	@command -v haproxy >/dev/null 2>&1 || test -x /usr/sbin/haproxy || { \
	  echo "installing haproxy from Debian's packages"; \
	  $(APT_INSTALL) haproxy >/dev/null; }

# The browser test drives Debian's Chromium through Playwright (Playwright's own browser
# downloads are not used).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium from Debian's packages"; \
	  $(APT_INSTALL) chromium >/dev/null; }

# The tests of `kubectl get` against the Kubernetes emulator run the machine's kubectl; without
# one, Debian's (kubernetes-client) does.
kubectl:
	@command -v kubectl >/dev/null 2>&1 || { \
	  echo "installing kubectl from Debian's packages (kubernetes-client)"; \
	  $(APT_INSTALL) kubernetes-client >/dev/null; }

# configurable-http-proxy for JupyterHub (the end-to-end test and `make hub`), from npm.
HUB_PROXY := hub/node_modules/.bin/configurable-http-proxy
$(HUB_PROXY): hub/package.json hub/package-lock.json
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	touch $@

# helm-render: Helm's template engine (Go's text/template and sprig, from Debian's packages)
# for the chart's tests, built offline against Debian's Go sources (GOPATH mode; sprig's and
# semver's /v3 import paths are linked into a private GOPATH).
HELM_RENDER := $(BIN)/helm-render
GOSRC := /usr/share/gocode/src
GOWORK := $(VENV)/gopath
$(HELM_RENDER): $(wildcard devstack/helmrender/*.go) | $(STAMP)
	@{ command -v go >/dev/null 2>&1 && test -d $(GOSRC)/github.com/Masterminds/sprig; } || { \
	  echo "installing Go and sprig from Debian's packages"; \
	  $(APT_INSTALL) golang-go golang-github-masterminds-sprig-dev >/dev/null; }
	mkdir -p $(GOWORK)/src/github.com/Masterminds/sprig $(GOWORK)/src/github.com/Masterminds/semver
	ln -sfn $(GOSRC)/github.com/Masterminds/sprig $(GOWORK)/src/github.com/Masterminds/sprig/v3
	ln -sfn $(GOSRC)/github.com/Masterminds/semver $(GOWORK)/src/github.com/Masterminds/semver/v3
	cd devstack/helmrender && GO111MODULE=off GOPROXY=off GOFLAGS= \
	  GOPATH=$(CURDIR)/$(GOWORK):/usr/share/gocode GOCACHE=$(CURDIR)/$(VENV)/gocache \
	  go build -o $(CURDIR)/$(HELM_RENDER) .

setup: $(STAMP) $(SERVICE_STAMP) $(OPERATOR_STAMP) redis-server haproxy kubectl $(HUB_PROXY) $(HELM_RENDER)

run: setup
	$(BIN)/python -m devstack

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site; a warning (a broken link or reference) fails the build.
docs: $(STAMP)
	$(BIN)/sphinx-build -q -W --keep-going -b html -d docs/_build/doctrees docs docs/_build/html

pytest: setup chromium
	$(BIN)/pytest

test: lint docs pytest

# JupyterHub with the lab spawner, against the stack `make run` started (in another terminal).
hub: setup
	cd hub && ../$(BIN)/jupyterhub -f jupyterhub_config.py

# Benchmarks report figures (bench/RESULTS.md); they are not part of the test suite.
# wrk drives the status benchmark (a Python load generator stands in without it).
bench: setup
	@command -v wrk >/dev/null 2>&1 || { $(APT_INSTALL) wrk >/dev/null; }
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .devstack .pytest_cache .mypy_cache .ruff_cache docs/_build
