"""Cap the I/O a group of processes makes on one block device: a cgroup of the block I/O controller per node.

- cgroup v1 (the blkio controller mounted at /sys/fs/cgroup/blkio): blkio.throttle.{read,write}_{iops,bps}_device,
  one line `MAJ:MIN VALUE` each; what the group did on the device is in blkio.throttle.io_serviced (I/Os) and
  blkio.throttle.io_service_bytes.
- cgroup v2 (the unified hierarchy at /sys/fs/cgroup with the io controller): io.max, one line
  `MAJ:MIN riops=N wiops=N rbps=N wbps=N`; what the group did is in io.stat.

What the controller does not cap: v1 charges a write to the group only where the group's process submits it (an
fsync, O_DIRECT, a sync write); buffered writes the kernel's flusher writes back later are charged to no group and
pass uncapped (v2 charges write-back to the group that dirtied the pages). And each direction is capped on its own,
where a cloud volume caps reads and writes together. v1 keeps no count of the time a group spent throttled: a
cap's use is what the group did per second against the cap.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ..errors import SetupError
from .cgroup import CGROUP_ROOT, PROC_SELF_CGROUP, _NAME, _pids, _read, _words, _write, joiner, remove_group
from . import cgroup as _cgroup

MIB = 1 << 20
_V1_CAPS = {"read_iops": "blkio.throttle.read_iops_device", "write_iops": "blkio.throttle.write_iops_device",
            "read_mbps": "blkio.throttle.read_bps_device", "write_mbps": "blkio.throttle.write_bps_device"}
_V2_CAPS = {"read_iops": "riops", "write_iops": "wiops", "read_mbps": "rbps", "write_mbps": "wbps"}


def _locate(cgroup_root: Path, proc_self_cgroup: Path) -> _cgroup._Place:
    """Where this machine lets us create an I/O group; SetupError saying what is missing otherwise."""
    return _cgroup._locate(cgroup_root, proc_self_cgroup, _cgroup.BLKIO)


def usable(*, cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> str | None:
    """None when `IOGroup.create` can work here, else one line saying what is missing. Creates nothing."""
    try:
        _locate(cgroup_root, proc_self_cgroup)
    except SetupError as e:
        return str(e)
    return None


class IOGroup:
    """A cgroup of our own whose processes' I/O on one device (`major:minor`) is capped; removed by `close()`."""

    def __init__(self, path: Path, version: int, home: Path, device: tuple[int, int], owned: bool = True) -> None:
        self.path = path
        self.version = version
        self.home = home
        self.device = device
        self.owned = owned   # False: the caps were put on another group of ours (v2: the node's memory group)
        self._closed = False

    @property
    def dev(self) -> str:
        return f"{self.device[0]}:{self.device[1]}"

    @classmethod
    def create(cls, name: str, device: tuple[int, int], caps: dict[str, int], *, shared: Path | None = None,
               cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> IOGroup:
        """The group `nosqltune-<name>` with `caps` (read_iops, write_iops: I/Os per second; read_mbps, write_mbps:
        MiB per second) on `device`. An empty group of that name left by a killed run is replaced.

        `shared`: the process's other group of ours (its memory group). On cgroup v2 a process is in one group of
        the one hierarchy, so the caps go on that group (the io controller enabled for it) and `close()` leaves it
        to its owner; on v1 the blkio hierarchy is apart and `shared` is not used."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"cgroup name {name!r}: use letters, digits, '_', '.', '-'")
        unknown = set(caps) - set(_V1_CAPS)
        if unknown or any(int(v) <= 0 for v in caps.values()):
            raise ValueError(f"caps {caps}: positive read_iops, write_iops, read_mbps, write_mbps")
        v1 = (cgroup_root / "blkio" / "blkio.throttle.read_iops_device").exists()
        if not v1 and shared is not None:
            if "io" not in _words(cgroup_root / "cgroup.controllers"):
                raise SetupError(f"cgroup v2 at {cgroup_root} has no io controller: an I/O cap per node needs it")
            try:
                if "io" not in _words(shared.parent / "cgroup.subtree_control"):
                    _write(shared.parent / "cgroup.subtree_control", "+io")
            except OSError as e:
                raise SetupError(f"cannot enable the io controller for {shared}: {e.strerror or e}") from None
            group = cls(shared, 2, shared.parent, device, owned=False)
            group._cap(caps)
            return group
        place = _locate(cgroup_root, proc_self_cgroup)
        path = place.parent / f"nosqltune-{name}"
        try:
            if place.enable:
                _write(place.parent / "cgroup.subtree_control", "+io")
            if path.exists():
                left = _pids(path)
                if left:
                    raise SetupError(f"I/O cgroup {path} is in use by pids {' '.join(map(str, left))}")
                _cgroup._remove_dir(path)
            _cgroup._make_dir(path)
        except OSError as e:
            raise SetupError(f"cannot create I/O cgroup {path}: {e.strerror or e}; run as root") from None
        group = cls(path, place.version, place.home, device)
        try:
            group._cap(caps)
        except BaseException:
            group.close()
            raise
        return group

    def _cap(self, caps: dict[str, int]) -> None:
        def value(kind: str, v: int) -> int:
            return int(v) * MIB if kind.endswith("mbps") else int(v)

        try:
            if self.version == 1:
                for kind, v in caps.items():
                    _write(self.path / _V1_CAPS[kind], f"{self.dev} {value(kind, v)}")
            elif caps:
                _write(self.path / "io.max", f"{self.dev} " + " ".join(f"{_V2_CAPS[k]}={value(k, v)}"
                                                                     for k, v in caps.items()))
        except OSError as e:
            raise SetupError(f"cannot cap the I/O of cgroup {self.path} on device {self.dev}: "
                             f"{e.strerror or e}") from None

    def caps(self) -> dict[str, int]:
        """The caps the kernel holds for the device now (read back), in the units given to `create`."""
        out: dict[str, int] = {}
        if self.version == 1:
            for kind, name in _V1_CAPS.items():
                for line in _read(self.path / name).splitlines():
                    dev, _, v = line.partition(" ")
                    if dev == self.dev and v.strip().isdigit():
                        out[kind] = int(v) // MIB if kind.endswith("mbps") else int(v)
        else:
            for line in _read(self.path / "io.max").splitlines():
                dev, _, rest = line.partition(" ")
                if dev != self.dev:
                    continue
                fields = dict(part.split("=", 1) for part in rest.split() if "=" in part)
                for kind, key in _V2_CAPS.items():
                    if fields.get(key, "max").isdigit():
                        v = int(fields[key])
                        out[kind] = v // MIB if kind.endswith("mbps") else v
        return out

    @contextmanager
    def lifted(self) -> Iterator[None]:
        """The caps are off while the body runs, then put back as they were. Needed on cgroup v2 only, where the
        node's memory group is its I/O group: a process charged to the node's memory is capped with it."""
        held = self.caps()
        if self.version == 1 or not held:
            yield
            return
        _write(self.path / "io.max", f"{self.dev} rbps=max wbps=max riops=max wiops=max")
        try:
            yield
        finally:
            self._cap(held)

    def counters(self) -> dict[str, int]:
        """What the group's processes did on the device so far: read_ios, write_ios, read_bytes, write_bytes."""
        out = {"read_ios": 0, "write_ios": 0, "read_bytes": 0, "write_bytes": 0}
        if self.version == 1:
            for name, unit in (("blkio.throttle.io_serviced", "ios"), ("blkio.throttle.io_service_bytes", "bytes")):
                for line in _read(self.path / name).splitlines():
                    parts = line.split()
                    if len(parts) == 3 and parts[0] == self.dev and parts[1] in ("Read", "Write"):
                        out[f"{parts[1].lower()}_{unit}"] = int(parts[2])
        else:
            for line in _read(self.path / "io.stat").splitlines():
                dev, _, rest = line.partition(" ")
                if dev != self.dev:
                    continue
                fields = dict(part.split("=", 1) for part in rest.split() if "=" in part)
                out.update(read_ios=int(fields.get("rios", 0)), write_ios=int(fields.get("wios", 0)),
                           read_bytes=int(fields.get("rbytes", 0)), write_bytes=int(fields.get("wbytes", 0)))
        return out

    def stat_spec(self) -> str:
        """The group as loadgen's cost.disks reads it: GROUPDIR@MAJ:MIN."""
        return f"{self.path}@{self.dev}"

    def preexec(self) -> Callable[[], None]:
        """For `process.spawn(..., preexec=)`: puts the child into the group between fork and exec."""
        return joiner(self.path)

    def pids(self) -> list[int]:
        return _pids(self.path)

    def close(self) -> None:
        """Move any processes left back to our own group and remove the group (one we own); safe to call twice."""
        if not self._closed and self.owned:
            remove_group(self.path, self.home)
        self._closed = True

    def __enter__(self) -> IOGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"IOGroup({str(self.path)!r}, v{self.version}, {self.dev})"


def remove_empty_groups(fragment: str, *, cgroup_root: Path = CGROUP_ROOT,
                        proc_self_cgroup: Path = PROC_SELF_CGROUP) -> list[Path]:
    """Remove our memory and I/O cgroups whose name holds `fragment` (a trial folder's name) and that hold no
    process: what a killed run left. Returns those removed."""
    parents = set()
    for locate in (_cgroup._locate, _locate):
        try:
            parents.add(locate(cgroup_root, proc_self_cgroup).parent)
        except SetupError:
            continue
    removed = []
    for parent in parents:
        for path in parent.glob(f"nosqltune-*{fragment}*"):
            if path.is_dir() and not _pids(path):
                try:
                    _cgroup._remove_dir(path)
                    removed.append(path)
                except OSError:
                    continue
    return removed
