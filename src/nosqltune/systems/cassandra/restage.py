"""Restored data brought to a knob's value instead of data loaded with it (issue 42).

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

import os
import time
from pathlib import Path
from typing import Any

from ..settings import TrialSettings

STAGED = "staged"   # the folder beside a node's data folder that holds its table's SSTables until the import


def restages(settings: TrialSettings) -> bool:
    """Whether trials of these settings bring restored data to a restaged knob's value (see the module)."""
    return (settings.cassandra.nodes == 1 and settings.restore_mode != "reload"
            and settings.cassandra.cassandra_version.startswith("5."))


def stage(data_dir: Path, components: list[str], keyspace: str, table: str) -> dict[str, Any]:
    """Move the table's SSTable files out of `data_dir` into `staged/<keyspace>/<table>` beside it, without the
    files ending in `-<component>` (and without their TOC.txt lines). The dataset's files are hard links: they
    are renamed or unlinked, never written, so the dataset keeps its own. Returns {"directory", "sstables",
    "dropped": files left out}."""
    out = data_dir.parent / STAGED / keyspace / table
    out.mkdir(parents=True, exist_ok=False)
    dropped = sstables = 0
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
                os.rename(path, out / path.name)
    return {"directory": str(out), "sstables": sstables, "dropped": dropped}


def import_staged(staged: dict[str, Any], jmx_port: int, keyspace: str, table: str) -> float:
    """Import the staged SSTables into the running node's table, keeping their levels; seconds taken."""
    from .bulk import import_sstables

    started = time.monotonic()
    import_sstables(jmx_port, [staged["directory"]], keyspace, table, keep_level=True)
    return time.monotonic() - started
