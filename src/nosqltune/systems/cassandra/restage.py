"""Restored data brought to a knob's value instead of data loaded with it.

A knob that shapes the SSTables on disk keys the dataset (`reload: true`): every value is a build of its own.
Where the knob file says the node can rebuild the component the knob shapes (`restaged`: the bloom filter's
chance on big SSTables, whose Filter.db Cassandra 5.0 rebuilds with the table's chance when it is missing), the
dataset is built once without the knob, and a trial that sets it:

1. restores the dataset as usual, then moves the table's SSTables out of the data folder into `staged/` beside it
   (same filesystem: a rename), leaving out the rebuilt components (and their lines in TOC.txt);
2. boots the node, which holds the table's schema but none of its SSTables;
3. sets the table's options (the knob among them) with the trial's other table knobs;
4. imports the staged SSTables (`nodetool import`, levels and repair state kept, no verification: the data is
   the dataset's own), and Cassandra opens each one, building the missing component with the table's new value;
5. evicts the page cache of the data again where the trial starts cold (the rebuild read the index through it).

Only a single node restored from a dataset, on Cassandra 5.0 (where the rebuild was read in its classes): a
cluster's nodes are loaded over CQL, and a trial that loads its own data sets the knob before loading."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from ...errors import TrialError
from ...knobs import KnobSpace
from ..settings import TrialSettings
from .config import PlacedConfig

STAGED = "staged"   # the folder beside a node's data folder that holds its table's SSTables until the import


def restages(settings: TrialSettings) -> bool:
    """Whether trials of these settings bring restored data to a restaged knob's value (see the module)."""
    return (settings.cassandra.nodes == 1 and settings.restore_mode != "reload"
            and settings.cassandra.cassandra_version.startswith("5."))


def restaged_columns(space: KnobSpace) -> list[str]:
    """The table options (system_schema.tables columns) of the knobs that may be restaged."""
    return [k.key for k in space if k.restaged and k.applies == "table" and "." not in k.key]


def built_options(session, space: KnobSpace, keyspace: str, table: str) -> dict[str, Any]:
    """What the loading node's table holds for those options (stored with the dataset: a trial that asks for the
    same value restores the data as it is)."""
    columns = restaged_columns(space)
    if not columns:
        return {}
    row = session.execute(f"SELECT {', '.join(columns)} FROM system_schema.tables WHERE keyspace_name = %s AND "
                          "table_name = %s", (keyspace, table)).one()
    return {c: getattr(row, c) for c in columns} if row else {}


def pending(placed: PlacedConfig, space: KnobSpace, built: dict[str, Any]) -> dict[str, str]:
    """The restaged knobs of `placed` whose value differs from the one the dataset was loaded with (`built`:
    built_options, stored in its meta as `table_options`; a dataset stored before has none: all of them)."""
    out = {}
    for name, component in placed.restaged.items():
        key = space[name].key
        have, want = built.get(key), placed.table.get(key)
        if have is None or want is None or not math.isclose(float(have), float(want), rel_tol=1e-9):
            out[name] = component
    return out


def stage(data_dir: Path, components: list[str], keyspace: str, table: str) -> dict[str, Any]:
    """Move the table's SSTable files out of `data_dir` into `staged/<keyspace>/<table>` beside it, without the
    files ending in `-<component>` (and without their TOC.txt lines). The dataset's files are hard links: they
    are renamed or unlinked, never written, so the dataset keeps its own. Returns {"directory", "sstables",
    "dropped": files left out, "bytes"}. TrialError when the table has no SSTable or one lacks a component (the
    node would serve an empty table, or filters that were never rebuilt)."""
    out = data_dir.parent / STAGED / keyspace / table
    out.mkdir(parents=True, exist_ok=False)
    dropped = sstables = size = 0
    suffixes = tuple("-" + c for c in components)
    for folder in sorted((data_dir / keyspace).glob(f"{table}-*")):
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            if path.name.endswith(suffixes):
                path.unlink()
                dropped += 1
            elif path.name.endswith("-TOC.txt"):   # a new file, not the linked one rewritten
                lines = path.read_text().splitlines()
                (out / path.name).write_text("".join(f"{line}\n" for line in lines if line not in components))
                path.unlink()
            else:
                sstables += path.name.endswith("-Data.db")
                size += path.stat().st_size
                os.rename(path, out / path.name)
    if not sstables or dropped != sstables * len(components):
        raise TrialError("internals", f"restaging {keyspace}.{table}: {sstables} SSTables with {dropped} of their "
                         f"{', '.join(components)} files in {data_dir}: the restored dataset is not what it should be")
    return {"directory": str(out), "sstables": sstables, "dropped": dropped, "bytes": size}


def import_staged(staged: dict[str, Any], jmx_port: int, keyspace: str, table: str,
                  evict: list[Path] | None = None) -> dict[str, Any]:
    """Import the staged SSTables into the running node's table, keeping their levels (the node rebuilds the
    components left out as each opens), then evict the page cache of `evict` (a cold trial: the rebuild read the
    index through it). `staged` with "import_s", "seconds" (both steps) and, evicting, "evicted_bytes"."""
    from .bulk import import_sstables

    started = time.monotonic()
    import_sstables(jmx_port, [staged["directory"]], keyspace, table, keep_level=True,
                    timeout=120 + staged["bytes"] / 20e6)
    out = {**staged, "import_s": time.monotonic() - started}
    if evict:
        from ...runtime.page_cache import evict_page_cache

        out["evicted_bytes"] = evict_page_cache(evict)
    out["seconds"] = time.monotonic() - started
    return out
