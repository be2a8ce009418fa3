# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test install certs bench soak fuzz clean

run: install certs
	$(VENV)/bin/hms-gateway demo --config config/gateway.yaml

test: install
	$(PY) -m pytest -ra $(PYTEST_ARGS)

install: $(STAMP)

$(STAMP): pyproject.toml scripts/install-system-deps.sh tests/node/package-lock.json scripts/build-listener.sh $(wildcard listener/src/main/*/*/*/*/*.java listener/src/main/resources/*)
	./scripts/install-system-deps.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,demo]'
	./scripts/build-listener.sh $(PY)
	cd tests/node && npm ci --no-audit --no-fund --silent
	touch $(STAMP)

certs: install
	$(VENV)/bin/hms-gateway certs --out certs

bench: install
	$(PY) bench/run.py
	$(PY) bench/run.py --policy
	$(PY) bench/run.py --datasource
	$(PY) bench/run.py --tunnel
	$(PY) bench/run.py --feed

# 30 minutes of mixed load; fails when the gateway's RSS grows 10 % or more after warm-up.
soak: install
	$(PY) bench/soak.py $(SOAK_ARGS)

# Hostile bodies against a real gateway + HMS, then the C/Python translator differential.
fuzz: install
	$(PY) bench/fuzz.py $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) build var .pytest_cache
