#!/usr/bin/env bash
# Install everything nosqltune needs on a fresh Debian 12 machine, idempotently:
# - with apt-get, only what is missing: Java 17 + Maven, gcc with libfuse 3's headers (delayfs), R's irace,
#   redis-server, PostgreSQL's server binaries, chromium, and python3-venv when Python cannot make a virtual
#   environment (stock Debian);
# - a virtual environment, .venv (VENV), made with $PYTHON (python3 unless given): Debian's own Python is
#   "externally managed" (PEP 668) and takes no pip install, so the package and its test extras go there, at the
#   versions of scripts/constraints.txt; a venv whose install matches pyproject.toml and the constraints is left as
#   it is;
# - Cassandra's jars (Maven, into ~/.cache/nosqltune) and the loadgen YCSB client (Maven build).
# Root (or sudo) is asked for only when apt-get has something to install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

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
# irace, the R package, from Debian; without recommends it is about 56 MB instead of 650 MB
[ -x /usr/lib/R/site-library/irace/bin/irace ] || need_apt+=(r-base-core r-cran-irace)
# Debian's redis-server (Redis 7.0), the second datastore; no service is started for it
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# Debian's PostgreSQL server binaries (15 on Debian 12, 17 on 13: the versionless package picks the release's own):
# the store tests start a throwaway server (initdb + postgres in a temporary folder); no cluster is created or
# started by the package (see below)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need_apt+=(postgresql)
# Debian's chromium: the tests open the HTML report in a real headless browser
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# a virtual environment needs venv and ensurepip, which stock Debian splits off into python3-venv
if [ ! -x "$VENV/bin/python" ] && ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need_apt+=(python3-venv)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt-get" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: apt-get needs root: sudo asks for your password once (nothing else in the setup does)" >&2
    SUDO="sudo"
  fi
  if [[ " ${need_apt[*]} " == *" postgresql "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    # the package would otherwise create and start a system-wide cluster that nothing here uses
    $SUDO mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi

# the virtual environment, and the package in it at the versions bench/results was made with (scripts/constraints.txt;
# scripts/lock_constraints.py refreshes it). The stamp holds the hash of what was installed: a venv already made
# from the same pyproject.toml and constraints is not touched again.
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: making the virtual environment $VENV with $("$PYTHON" -c 'import sys; print(sys.executable)')" >&2
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.nosqltune-installed"
want=$(cat pyproject.toml scripts/constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing nosqltune and its test extras into $VENV (pip, scripts/constraints.txt)" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c scripts/constraints.txt -e '.[test]'
  echo "$want" > "$stamp"
fi
"$VENV/bin/python" -m nosqltune setup
