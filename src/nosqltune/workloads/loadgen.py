"""Build and locate the project's loadgen Maven module (YCSB client with our bindings and JMX tools)."""

from __future__ import annotations

import functools
import os

from ..errors import SetupError
from ..runtime.paths import loadgen_dir, loadgen_sources
from ..runtime.java import read_classpath, require_java, run_maven


@functools.lru_cache(maxsize=None)
def loadgen_classpath() -> tuple[str, ...]:
    """Jar + dependencies of loadgen; rebuilt with Maven when a source is newer than the jar."""
    root = loadgen_dir()
    jar = root / "target" / "nosqltune-loadgen.jar"
    cp_file = root / "target" / "classpath.txt"
    deps = read_classpath(cp_file)
    newest_source = max(f.stat().st_mtime for f in loadgen_sources(root))
    for _ in range(2):   # a damaged jar found in the resolved classpath is removed, and fetched again
        if deps is not None and jar.exists() and jar.stat().st_mtime >= newest_source:
            break
        run_maven(root / "pom.xml", ["package", "dependency:build-classpath",
                                     f"-Dmdep.outputFile={cp_file}", "-DskipTests"])
        deps = read_classpath(cp_file)
    if deps is None or not jar.exists():
        raise SetupError("building loadgen gave no jar or no intact classpath (a dependency is missing or damaged "
                         "in the Maven cache): check the network, then run `nosqltune setup`")
    return (str(jar), *deps)


def loadgen_java_command(main_class: str, args: list[str], jvm_flags: list[str] | None = None) -> list[str]:
    return [require_java(17), *(jvm_flags or []), "-cp", os.pathsep.join(loadgen_classpath()), main_class, *args]
