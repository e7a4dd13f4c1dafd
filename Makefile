# k8s-arch-lab — every entry point. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= $(CURDIR)/.venv
PY          := $(VENV)/bin/python
export K8S_LAB_CACHE ?= $(HOME)/.cache/k8s-arch-lab
export PATH := $(VENV)/bin:/usr/local/go/bin:$(PATH)
SOURCE      ?= auto
PYTEST_ARGS ?=

.PHONY: help deps artifacts node-image lint unit integration test lab clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## install host packages and .venv, start Docker (idempotent)
	@tools/deps.sh

artifacts: deps ## fill the artifact cache ($(K8S_LAB_CACHE)); SOURCE=auto|download|build
	@$(PY) -m tools.artifacts --source $(SOURCE)

node-image: deps ## build the node container image (only when its inputs changed)
	@tools/node-image/build.sh

lint: deps ## ruff, yamllint, ansible-lint
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/yamllint -s .
	@if compgen -G "roles/*/tasks/main.yml" >/dev/null; then $(VENV)/bin/ansible-lint; fi

unit: deps ## unit tests of pure logic
	@$(VENV)/bin/pytest -q tests/unit $(PYTEST_ARGS)

integration: deps artifacts node-image ## tests on real node containers
	@$(VENV)/bin/pytest -q -m integration tests/integration $(PYTEST_ARGS)

test: deps artifacts node-image lint ## the whole test suite (what CI runs)
	@$(VENV)/bin/pytest tests $(PYTEST_ARGS)

lab: deps artifacts node-image ## bring the lab up and run its checks
	@echo "lab: artifacts and node image ready"

clean: ## remove lab node containers and volumes (the caches stay)
	@tools/node-image/cleanup.sh
