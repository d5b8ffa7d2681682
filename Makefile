# Two entry points for a fresh machine (see README.md):
#   make demo  - set everything up and benchmark default Cassandra on YCSB workload A (cold trials)
#   make test  - set everything up and run the test suite (unit + integration on real Cassandra), within
#                10 minutes on 2 cores; make test-all adds the slow tests
# and make docs: the documentation site (docs/, mkdocs.yml) built into build/site/.
# PYTHON makes the virtual environment (.venv) that every target below runs in: Debian's own Python is externally
# managed (PEP 668) and takes no pip install; scripts/setup.sh makes the venv once and installs the package there.
PYTHON ?= python3
VENV ?= .venv
PY = $(VENV)/bin/python
REPEAT ?= 3

.PHONY: setup demo test test-all unit faults docs reference capture-example

setup:
	PYTHON=$(PYTHON) VENV=$(VENV) ./scripts/setup.sh

demo: setup
	$(PY) -m nosqltune bench --workload ycsb-a --repeat $(REPEAT)

# a full query log and a table's snapshot to try `nosqltune capture` and a replay on (about 2 minutes; build/)
capture-example: setup
	$(PY) scripts/record_capture.py --example build/capture-example

MAVEN_REPO ?= $(or $(NOSQLTUNE_CACHE),$(HOME)/.cache/nosqltune)/maven
# SMAC's suggestions follow Python's string hashing: tests see the same hashing as `nosqltune tune` does
PYTEST = PYTHONHASHSEED=0 $(PY) -m pytest -q -rs -p no:cacheprovider

# The import check (layers import only downward, no circles), the duplicate-code check, the docs site's build (a
# few seconds; warnings fail it), loadgen's JUnit tests, then pytest: the unit tests on both cores (pytest-xdist, a
# test file to a worker: a file's module fixtures are made once), then the integration tests on real Cassandra and
# Redis one at a time (they time real runs). `make test` leaves out the tests marked slow (benchmark quality claims,
# a 3-node cluster, the slowest single runs); `make test-all` runs them too. pytest exits 5 when it collected no
# tests: that is not a failure of the suite, anything else is; both parts run, and either failing fails the target.
UNIT = $(PYTEST) -n 2 --dist loadfile tests/unit
INTEGRATION = $(PYTEST) tests/integration
PASSED = rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi
PASSED_TOO = rc2=$$?; if [ $$rc2 -ne 0 ] && [ $$rc2 -ne 5 ]; then rc=$$rc2; fi

test: setup
	$(VENV)/bin/lint-imports
	$(DUPLICATES)
	$(DOCS_BUILD)
	mvn -B -q -Dmaven.repo.local=$(MAVEN_REPO) -f loadgen/pom.xml test
	$(UNIT) --durations=10; $(PASSED); \
	$(INTEGRATION) --durations=15; $(PASSED_TOO); exit $$rc

test-all: setup
	$(VENV)/bin/lint-imports
	$(DUPLICATES)
	$(DOCS_BUILD)
	mvn -B -q -Dmaven.repo.local=$(MAVEN_REPO) -f loadgen/pom.xml test
	NOSQLTUNE_SLOW=1 $(UNIT) --durations=10; $(PASSED); \
	NOSQLTUNE_SLOW=1 $(INTEGRATION) --durations=25; $(PASSED_TOO); exit $$rc

# pylint's duplicate-code check only (R0801): no block of 6 or more lines written twice in src/, imports, docstrings
# and comments ignored (about 10 s)
DUPLICATES = $(PY) -m pylint --disable=all --enable=R0801 --min-similarity-lines=6 --ignore-imports=y \
	--ignore-docstrings=y --ignore-comments=y --score=n src/nosqltune

# The documentation site. `make docs` first writes docs/reference.md from the command line's parsers, then builds
# the site with warnings as errors (a broken link or anchor fails it) into build/site/. `make test` builds the
# committed pages without regenerating the reference, so tests/unit/test_docs.py can tell when it is stale.
# Both builds take bench/results/'s pages, figures and sample report into the site as results/ (mkdocs.yml's hook,
# scripts/mkdocs_results.py; not the .db stores or .json data), so build/site/index.html opens from the disk whole.
DOCS_BUILD = $(PY) -m mkdocs build --strict

reference:
	$(PY) -m nosqltune.cli.reference docs/reference.md

docs: reference
	$(DOCS_BUILD)

unit:
	$(UNIT)

# The fault and bad-input campaign, slow cases included; every passing case writes its row to
# test-artifacts/faults.jsonl and bench/faults.py makes bench/results/faults.md of it. Needs root (small tmpfs
# mounts for the full-disk cases) and a machine with nothing else measuring.
FAULT_LOG = test-artifacts/faults.jsonl
faults: setup
	mkdir -p test-artifacts && rm -f $(FAULT_LOG)
	NOSQLTUNE_SLOW=1 NOSQLTUNE_FAULT_LOG=$(CURDIR)/$(FAULT_LOG) $(PYTEST) -m faults --durations=10 tests
	$(PY) bench/faults.py $(FAULT_LOG)
