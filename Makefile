# k8s-arch-lab — every entry point. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= $(CURDIR)/.venv
PY          := $(VENV)/bin/python
export PATH := $(VENV)/bin:/usr/local/go/bin:$(PATH)
# Where `make artifacts` takes what the cache lacks: auto | cache | mirror | upstream | build (README, Offline artifacts).
SOURCE      ?= auto
PYTEST_ARGS ?=
# The VM run of `make test` (tests/vm, last): single (one libvirt VM, the CI default), default (three VMs, as make
# test-vm), or empty for none.
VM_TEST     ?= single
# make up PROFILE=ha PROVIDER=docker (defaults: settings.yml)
PROFILE     ?=
PROVIDER    ?=
export K8S_LAB_PROFILE  := $(PROFILE)
export K8S_LAB_PROVIDER := $(PROVIDER)
# A second lab from the same checkout has a state folder of its own (K8S_LAB_STATE_DIR); Vagrant's record of its
# machines goes there too, so that the two labs' machines named cp1 never get mixed up.
ifdef K8S_LAB_STATE_DIR
export VAGRANT_DOTFILE_PATH ?= $(K8S_LAB_STATE_DIR)/vagrant
endif

.PHONY: help deps test-tools artifacts artifacts-runtimes test-runtimes node-image box settings up down provision smoke repair status stop start check cis conformance rotate-encryption-key renew-certificates etcd-snapshot etcd-restore test-drills test-security molecule lint unit integration test test-labs test-vm test-topologies test-two-labs test-breaks test-restart test-fresh-host test-controller test-vm-controller lab i18n clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## install host packages, .venv and Go when missing, start Docker; PROVIDER=libvirt adds libvirt (idempotent)
	@tools/deps.sh $(if $(K8S_LAB_IN_CONTROLLER),controller)

artifacts: deps ## fill the artifact cache (python3 -m tools.locations cache); SOURCE=auto|cache|mirror|upstream|build
	@$(PY) -m tools.artifacts --source $(SOURCE)
	@ln -sf "$$($(PY) -m tools.artifacts path --only kubectl)" $(VENV)/bin/kubectl

# CRI-O and cri-dockerd (versions.yml set runtimes): downloaded where their release is reachable and checked,
# else built from the source trees named here (a checkout or snapshot of each upstream repository).
CRIO_TREE        ?=
CRI_DOCKERD_TREE ?=
artifacts-runtimes: deps ## add CRI-O and cri-dockerd to the cache (the runtimes profile); CRIO_TREE=, CRI_DOCKERD_TREE=: source trees to build from
	@$(PY) -m tools.artifacts --source $(SOURCE) --with runtimes \
		$(if $(CRIO_TREE),--tree crio=$(CRIO_TREE)) $(if $(CRI_DOCKERD_TREE),--tree cri_dockerd=$(CRI_DOCKERD_TREE))

test-tools: ## what only the tests need: headless Chromium (and a Cyrillic font), Vagrant's libvirt plugin (make test; not in make deps)
	@tools/deps.sh test-tools

node-image: deps ## build the node container image (only when its inputs changed)
	@tools/node-image/build.sh

box: deps ## build the lab's Debian 12 Vagrant box for libvirt, offline (only when its inputs changed)
	@tools/box/build.sh

lint: deps ## ruff, yamllint, ansible-lint
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/yamllint -s .
	@if compgen -G "roles/*/tasks/main.yml" >/dev/null; then $(VENV)/bin/ansible-lint; fi

unit: deps ## unit tests of pure logic
	@$(VENV)/bin/pytest -q tests/unit $(PYTEST_ARGS)

integration: deps artifacts node-image ## tests on real node containers
	@$(VENV)/bin/pytest -q -m integration tests/integration $(PYTEST_ARGS)

test: deps test-tools artifacts node-image lint ## the whole test suite (what CI runs), the single profile on a libvirt VM last (VM_TEST=single; empty: none); each test's time kept in the cache's reports/
	@if [ -n "$(VM_TEST)" ]; then $(MAKE) --no-print-directory deps PROVIDER=libvirt && \
		$(MAKE) --no-print-directory box; fi
	@reports=$$($(PY) -m tools.locations cache)/reports; mkdir -p "$$reports"; \
		K8S_LAB_TEST_VM="$(VM_TEST)" K8S_LAB_REPORTS="$$reports" \
		$(VENV)/bin/pytest tests --durations=30 --junitxml="$$reports/make-test-$$(date -u +%Y%m%dT%H%M%SZ).xml" $(PYTEST_ARGS)

test-labs: deps artifacts node-image ## the lab checks on both profiles (all of them on each), the disruptive ones twice in a row on ha, falsification and restore tests (ha)
	@K8S_LAB_LABS_FULL=1 $(VENV)/bin/pytest tests/e2e -m labs $(PYTEST_ARGS)

test-vm: ## the default profile on libvirt VMs, end to end, every check (not in CI: half an hour to an hour under emulation)
	@$(MAKE) --no-print-directory deps PROVIDER=libvirt
	@$(MAKE) --no-print-directory artifacts box
	@K8S_LAB_TEST_VM=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/vm $(PYTEST_ARGS)

test-topologies: deps artifacts node-image ## the external-etcd profile end to end: all checks, C31 and its falsification (not in CI)
	@K8S_LAB_TOPOLOGIES=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_topologies.py $(PYTEST_ARGS)

test-runtimes: deps artifacts node-image ## the runtimes profile (containerd, CRI-O, Docker Engine workers) end to end: all checks, C32 and its falsification (not in CI; skips without the runtimes artifacts: make artifacts-runtimes)
	@K8S_LAB_RUNTIMES=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_runtimes.py $(PYTEST_ARGS)

test-breaks: deps artifacts node-image ## default profile: every break-and-fix exercise through `lab` (break, check fails with a hint, undo, status healthy) (not in CI)
	@K8S_LAB_BREAKS=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_break_exercises.py $(PYTEST_ARGS)

test-see: deps artifacts node-image ## default profile: every "see it yourself" command of `lab show` runs as printed and leaves nothing behind (SEE_PROFILE=ha for C09, C28) (not in CI)
	@K8S_LAB_SEE=1 K8S_LAB_SEE_PROFILE=$(or $(SEE_PROFILE),default) $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_see_it_yourself.py $(PYTEST_ARGS)

test-two-labs: deps artifacts node-image ## two labs side by side (other cluster_name, node network, state folder); make down of one leaves the other healthy (not in CI)
	@K8S_LAB_TWO_LABS=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_two_labs.py $(PYTEST_ARGS)

test-restart: deps artifacts node-image ## ha: every machine, one worker, one control-plane node stopped and started, healthy again without provisioning (not in CI)
	@K8S_LAB_RESTART=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_restart.py $(PYTEST_ARGS)

test-controller: deps artifacts node-image ## a clean host (no Python, make, Go, Ansible on PATH): `vagrant up` alone on the docker provider with the controller machine, then lab check --no-disruptive inside it and a second provision (changed=0) (not in CI)
	@K8S_LAB_CONTROLLER_TEST=docker $(VENV)/bin/pytest -p no:cacheprovider -s tests/controller $(PYTEST_ARGS)

test-vm-controller: ## the same on libvirt VMs under emulation: the single profile's VM and the controller VM (CONTROLLER_PROFILE=default for three nodes) (not in CI: about an hour here)
	@$(MAKE) --no-print-directory deps PROVIDER=libvirt
	@$(MAKE) --no-print-directory artifacts box
	@K8S_LAB_CONTROLLER_TEST=libvirt K8S_LAB_CONTROLLER_PROFILE=$(CONTROLLER_PROFILE) \
		$(VENV)/bin/pytest -p no:cacheprovider -s tests/controller $(PYTEST_ARGS)

test-fresh-host: deps ## `make deps` on a clean Debian 12 container without Go, then an image built with its Go
	@$(VENV)/bin/pytest -p no:cacheprovider -s tests/integration/test_fresh_host.py $(PYTEST_ARGS)

settings: deps ## validate settings.yml (PROFILE, PROVIDER)
	@$(PY) -m tools.settings check

up: settings artifacts ## bring the cluster up (PROFILE=default|ha PROVIDER=auto|virtualbox|libvirt|docker)
	@$(PY) -m tools.preflight
	@vagrant up --no-parallel
	@echo "cluster up: export KUBECONFIG=$$($(PY) -m tools.settings kubeconfig)"

provision: settings ## re-run the playbooks against the running machines
	@ANSIBLE_CONFIG=ansible.cfg $(VENV)/bin/ansible-playbook -i inventory playbooks/site.yml

smoke: settings ## the smoke playbook: workload, Service, DNS, logs, exec, encrypted Secret
	@ANSIBLE_CONFIG=ansible.cfg $(VENV)/bin/ansible-playbook -i inventory playbooks/smoke.yml

down: deps ## destroy the machines and everything they left (containers, VMs, volumes, networks, state)
	@vagrant destroy -f || true
	@set -e; resolved=$$($(PY) -m tools.settings resolve); \
		name=$$(echo "$$resolved" | $(PY) -c 'import json,sys; print(json.load(sys.stdin)["cluster_name"])'); \
		tools/node-image/cleanup.sh "$$name" $$(echo "$$resolved" | $(PY) -c 'import json,sys; print(json.load(sys.stdin)["network"]["node_cidr"])'); \
		tools/vm-cleanup.sh "$$name"
	@$(PY) -m tools.settings forget

repair: settings ## take out a break-and-fix exercise's fault, re-run the playbooks, wait (at most 5 min) for `lab status` to say healthy
	@set -e; again=; \
		$(VENV)/bin/lab break --undo --no-wait || { again=1; echo "make repair: the fault's undo is not complete; again after the playbooks"; }; \
		ANSIBLE_CONFIG=ansible.cfg $(VENV)/bin/ansible-playbook -i inventory playbooks/site.yml; \
		if [ -n "$$again" ]; then $(VENV)/bin/lab break --undo --no-wait; fi
	@$(VENV)/bin/lab status --wait 300

status: ## is the lab healthy? machines, API, nodes, every component's unit (exit 1 when not)
	@$(VENV)/bin/lab status

stop: ## stop the machines and keep the cluster (NODES="w1 cp2" for some)
	@vagrant halt $(NODES)

start: ## start stopped machines again, without provisioning: the cluster comes back by itself (NODES=...)
	@vagrant up --no-provision $(NODES)

check: ## run every lab check against the running cluster (CHECKS="C01 C16" for some)
	@$(VENV)/bin/lab check $(if $(CHECKS),$(CHECKS),--all)

rotate-encryption-key: settings ## a new key for Secrets at rest, every Secret rewritten with it, the old one retired (no downtime)
	@ANSIBLE_CONFIG=ansible.cfg $(VENV)/bin/ansible-playbook -i inventory playbooks/rotate-encryption-key.yml

renew-certificates: settings ## reissue every leaf certificate (CAs stay) and restart what uses them one at a time (no downtime with several control-plane nodes)
	@ANSIBLE_CONFIG=ansible.cfg $(VENV)/bin/ansible-playbook -i inventory playbooks/renew-certificates.yml

etcd-snapshot: settings ## a snapshot of etcd from a healthy member, checked with etcdutl, into the state folder's etcd-snapshots/ (with its revision and time)
	@ANSIBLE_CONFIG=ansible.cfg $(VENV)/bin/ansible-playbook -i inventory playbooks/etcd-snapshot.yml

etcd-restore: settings ## restore every etcd member from one snapshot as a new cluster (SNAPSHOT=path; default: the newest); refuses a damaged one before touching anything
	@ANSIBLE_CONFIG=ansible.cfg $(VENV)/bin/ansible-playbook -i inventory playbooks/etcd-restore.yml \
		$(if $(SNAPSHOT),-e etcd_restore_snapshot=$(abspath $(SNAPSHOT)))

test-drills: deps artifacts node-image ## disaster drills on the default profile (DRILL_PROFILE=ha, external-etcd): etcd snapshot and restore, a damaged snapshot refused (not in CI)
	@K8S_LAB_DRILLS=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_drills.py $(PYTEST_ARGS)

test-security: deps artifacts node-image ## default profile: a key rotation and a certificate renewal with the checks passing after each (not in CI)
	@K8S_LAB_SECURITY=1 $(VENV)/bin/pytest -p no:cacheprovider -s tests/e2e/test_security.py $(PYTEST_ARGS)

conformance: settings ## Kubernetes' own conformance tests on the running cluster (FOCUS=regex, PROCS=4); builds the suite and its images first; results in the state folder's conformance/ (not in CI: hours)
	@$(PY) -m tools.artifacts --with conformance
	@$(PY) -m tools.conformance

cis: ## the CIS Kubernetes Benchmark (kube-bench) on the running cluster; results in the state folder's cis/
	@$(PY) -m tools.cis

molecule: deps artifacts node-image ## each role's molecule scenario (ROLES="etcd kubelet" for some)
	@tests/molecule/run.sh $(ROLES)

lab: up smoke check ## bring the lab up and run its checks
	@echo "lab ready: export KUBECONFIG=$$($(PY) -m tools.settings kubeconfig)"

i18n: deps ## re-extract the messages of labs/ into labs/locale/labs.pot and merge them into the ru, nb, es catalogs
	@$(VENV)/bin/pybabel --quiet extract -F babel.cfg --project k8s-arch-lab --copyright-holder "the k8s-arch-lab authors" \
		--add-location file --sort-by-file -w 120 -o labs/locale/labs.pot labs
	@for lang in ru nb es; do [ -f labs/locale/$$lang/LC_MESSAGES/labs.po ] || \
		$(VENV)/bin/pybabel --quiet init -D labs -i labs/locale/labs.pot -d labs/locale -l $$lang -w 120; done
	@$(VENV)/bin/pybabel --quiet update -D labs -i labs/locale/labs.pot -d labs/locale -w 120 \
		--no-fuzzy-matching --ignore-obsolete
	@$(VENV)/bin/pytest -q -p no:cacheprovider tests/unit/test_i18n.py -k "catalog or template" || \
		echo "make i18n: translate the new or changed messages (empty msgstr) in labs/locale/*/LC_MESSAGES/labs.po"

clean: down ## everything `down` removes (the caches stay)
