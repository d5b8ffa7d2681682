# Two entry points for a fresh machine (see README.md):
#   make demo  - set everything up and benchmark default Cassandra on YCSB workload A (cold trials)
#   make test  - set everything up and run the whole test suite (unit + integration on real Cassandra)
PYTHON ?= python3
REPEAT ?= 3

.PHONY: setup demo test unit

setup:
	./scripts/setup.sh

demo: setup
	$(PYTHON) -m nosqltune bench --workload ycsb-a --repeat $(REPEAT)

MAVEN_REPO ?= $(or $(NOSQLTUNE_CACHE),$(HOME)/.cache/nosqltune)/maven

# loadgen's JUnit tests, then pytest (unit, then integration on real Cassandra). pytest exits 5 when it
# collected no tests: that is not a failure of the suite, anything else is.
test: setup
	mvn -B -q -Dmaven.repo.local=$(MAVEN_REPO) -f loadgen/pom.xml test
	$(PYTHON) -m pytest -q -rs tests; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

unit:
	$(PYTHON) -m pytest -q tests/unit
