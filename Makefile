# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# What `make run` needs (a subset of `make install`): the demo's Debian packages, PySpark, the listener,
# the server (the repository's root) and the client distribution (clients/python: the demo's tunnel).
CLIENT := ./clients/python
DEMO_STAMP := $(VENV)/.installed-demo
# `make run S3=1`: the demo's Iceberg table on a local S3 server (moto) instead of the file
# warehouse (docs/iceberg.md, "The demo on S3"); moto's server is installed for it.
S3_DEMO    := $(filter 1 yes true,$(S3))
DEMO_S3_STAMP := $(VENV)/.installed-demo-s3
# `make run KERBEROS=1`: the demo's metastore Kerberized (a local KDC, SASL on HMS; docs/operations.md,
# "Fronting a Kerberized metastore"); the KDC's Debian packages and k5test are installed for it.
KERBEROS_DEMO := $(filter 1 yes true,$(KERBEROS))
DEMO_KERBEROS_STAMP := $(VENV)/.installed-demo-kerberos
STEP   := ./scripts/step.sh

.PHONY: run test unit install certs bench soak fuzz clean fresh

run: $(DEMO_STAMP) $(if $(S3_DEMO),$(DEMO_S3_STAMP)) $(if $(KERBEROS_DEMO),$(DEMO_KERBEROS_STAMP))
	@$(STEP) "development certificates" $(VENV)/bin/hms-gateway certs --out certs
	$(PY) -m demo --config config/gateway.yaml$(if $(S3_DEMO), --storage s3)$(if $(KERBEROS_DEMO), --kerberos)

$(DEMO_S3_STAMP): $(DEMO_STAMP) pyproject.toml
	@$(STEP) "pip: moto's S3 server (S3=1)" $(PY) -m pip install -q -e ".[demo,demo-s3]"
	@touch $(DEMO_S3_STAMP)

$(DEMO_KERBEROS_STAMP): $(DEMO_STAMP) pyproject.toml scripts/install-system-deps.sh
	@$(STEP) "Debian packages for the KDC (KERBEROS=1)" ./scripts/install-system-deps.sh demo-kerberos
	@$(STEP) "pip: k5test (KERBEROS=1)" $(PY) -m pip install -q -e ".[demo,demo-kerberos]"
	@touch $(DEMO_KERBEROS_STAMP)

# Two workers, one test module each at a time (module fixtures start once): most of the suite
# waits on the servers it starts (HMS, Spark, Chromium), so two share the two cores well.
# Modules in collection order (long ones first: tests/conftest.py), not xdist's most-tests-first.
# PYTEST_ARGS="-n 0" runs them in one process.
test: install
	$(PY) -m pytest -ra -n 2 --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The unit tests alone (no HMS, KDC or LDAP started), for the edit loop.
unit: install
	$(PY) -m pytest -q tests/unit $(PYTEST_ARGS)

install: $(STAMP)

# Each long step prints its name before and the time it took after (scripts/step.sh).
$(DEMO_STAMP): pyproject.toml $(CLIENT)/pyproject.toml scripts/install-system-deps.sh scripts/build-listener.sh $(wildcard listener/src/main/*/*/*/*/*.java listener/src/main/resources/*)
	@$(STEP) "Debian packages for the demo (apt-get)" ./scripts/install-system-deps.sh demo
	@test -x $(PY) || $(STEP) "virtual environment $(VENV)" $(PYTHON) -m venv $(VENV)
	@$(STEP) "pip: the gateway, its client and PySpark (about 450 MB the first time)" \
	  sh -c '$(PY) -m pip install -q --upgrade pip "setuptools>=77" && $(PY) -m pip install -q -e ".[demo]" -e "$(CLIENT)[tunnel]"'
	@$(STEP) "notification-log listener (javac)" ./scripts/build-listener.sh $(PY)
	@touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP) tests/node/package-lock.json
	@$(STEP) "Debian packages for the tests (apt-get: KDC, LDAP, ActiveMQ, Chromium, Node.js)" \
	  ./scripts/install-system-deps.sh all
	@$(STEP) "pip: the test tools" $(PY) -m pip install -q -e '.[test,demo]' -e '$(CLIENT)[tunnel,kerberos,spark,iceberg]'
	@$(STEP) "Node.js test client (npm ci)" sh -c 'cd tests/node && npm ci --no-audit --no-fund --silent'
	@touch $(STAMP)

# The README's commands on a clean Debian 12 root (debootstrap, chroot; needs root): `make run`
# until the demo's PyIceberg program reads its rows, then `make unit`, with each step's time.
# Run it before changing dependencies or install scripts (CONTRIBUTING.md).
fresh:
	./scripts/fresh.sh

certs: install
	$(VENV)/bin/hms-gateway certs --out certs

bench: install
	$(PY) bench/run.py
	$(PY) bench/run.py --policy
	$(PY) bench/run.py --datasource
	$(PY) bench/run.py --tunnel
	$(PY) bench/run.py --feed
	$(PY) bench/run.py --iceberg
	$(PY) bench/run.py --memory

# 30 minutes of mixed load; fails when the gateway's RSS grows 10 % or more after warm-up.
soak: install
	$(PY) bench/soak.py $(SOAK_ARGS)

# Hostile bodies against a real gateway + HMS, then the C/Python translator differential.
fuzz: install
	$(PY) bench/fuzz.py $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) build var .pytest_cache
