#!/usr/bin/env bash
# Install everything nosqltune needs on a fresh Debian machine, idempotently:
# Java 17 + Maven, gcc with libfuse 3's headers (delayfs), R's irace, redis-server, PostgreSQL 15's server binaries, chromium (apt-get, only if missing), the Python package with its test extras (pip: psycopg and Ray among them),
# Cassandra's jars (Maven, into ~/.cache/nosqltune) and the loadgen YCSB client (Maven build).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
if ! command -v java >/dev/null 2>&1 || ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|2[0-9])'; then
  need_apt+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v taskset >/dev/null 2>&1 || need_apt+=(util-linux)
# mkfs.ext4 makes the filesystem of a node's own volume (--volume, the cloud scenarios)
command -v mkfs.ext4 >/dev/null 2>&1 || need_apt+=(e2fsprogs)
# delayfs, a latency per I/O of a node's volume (--disk-latency-ms), is built from its C source on first use with
# libfuse 3 (runtime/delayfs.c)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
{ command -v pkg-config >/dev/null 2>&1 && pkg-config --exists fuse3; } || need_apt+=(libfuse3-dev)
# irace, the R package (seed 001), from Debian; without recommends it is about 56 MB instead of 650 MB
[ -x /usr/lib/R/site-library/irace/bin/irace ] || need_apt+=(r-base-core r-cran-irace)
# Debian's redis-server (Redis 7.0), the second datastore (issue 7); no service is started for it
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# Debian's PostgreSQL 15 server binaries: the store tests start a throwaway server (initdb + postgres in a temporary
# folder); no cluster is created or started by the package (see below)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need_apt+=(postgresql-15)
# Debian's chromium: the tests open the HTML report in a real headless browser
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt-get" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if [[ " ${need_apt[*]} " == *" postgresql-15 "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    # the package would otherwise create and start a system-wide cluster that nothing here uses
    $SUDO mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi

PYTHON=${PYTHON:-python3}
# the versions bench/results was made with (scripts/constraints.txt; scripts/lock_constraints.py refreshes it)
"$PYTHON" -m pip install -q --disable-pip-version-check -c scripts/constraints.txt -e '.[test]'
"$PYTHON" -m nosqltune setup
