"""Resolve Apache Cassandra (cassandra-all and its dependencies) from Maven into the per-user cache, once."""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import SetupError
from ...runtime.paths import cache_dir
from ...runtime.java import read_classpath, run_maven
from ...runtime.paths import maven_repo
from ..base import CASSANDRA_VERSION as DEFAULT_VERSION

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>nosqltune.runtime</groupId>
  <artifactId>cassandra-{version}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def cassandra_classpath(version: str = DEFAULT_VERSION) -> list[str]:
    """The jars of Cassandra `version`; resolved with Maven on first use, read from the cache after."""
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?(-[A-Za-z0-9.]+)?", version):
        raise SetupError(f"not a Cassandra version: {version!r} (expected e.g. {DEFAULT_VERSION})")
    home = cache_dir() / "cassandra" / version
    cp_file = home / "classpath.txt"
    entries = read_classpath(cp_file)
    for _ in range(2):   # a damaged jar found in the resolved classpath is removed, and fetched again
        if entries is not None:
            return entries
        home.mkdir(parents=True, exist_ok=True)
        pom = home / "pom.xml"
        pom.write_text(_POM.format(version=version))
        run_maven(pom, ["dependency:build-classpath", f"-Dmdep.outputFile={cp_file}"])
        entries = read_classpath(cp_file)
    if entries is None:
        raise SetupError(f"Maven gave no intact classpath for cassandra-all {version} (a jar is missing or damaged "
                         f"in {maven_repo()}): check the network, then run `nosqltune setup`")
    return entries


def jar_named(classpath: list[str], artifact: str) -> str:
    for entry in classpath:
        if Path(entry).name.startswith(artifact + "-"):
            return entry
    raise SetupError(f"{artifact} is not on Cassandra's classpath")
