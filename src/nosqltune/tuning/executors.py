"""Where a parallel study's trials run. The coordinator (tuning.parallel) queues trials in the store; an
executor starts workers (tuning.workers.run_one), each of which claims one waiting trial, runs it and stores
the result. Two executors:

- `local`: threads of this process (for targets that can run side by side on one machine, such as the
  surrogate; real datastores on one machine share its cores and disturb each other's measurements).
- `ray`: Ray tasks on a Ray cluster (`--address`). Each task needs one unit of the custom resource
  `nosqltune_slot`: give each machine one (`ray start ... --resources '{"nosqltune_slot": 1}'`), so that two
  trials never share a machine. A task that dies with its worker is not retried by Ray: its trial goes stale
  in the store and the coordinator queues it again (once). Ray is imported only here, when this executor is
  chosen (`pip install 'nosqltune[ray]'`)."""

from __future__ import annotations

import concurrent.futures
import os
from typing import Any, Callable

from ..errors import SetupError, UsageError

SLOT = "nosqltune_slot"


class Executor:
    """Starts workers; `start` returns a handle, `finished` the handles that ended (with an error text or
    None) since the last call."""

    slots = 1

    def start(self) -> Any:
        raise NotImplementedError

    def finished(self, handles: list[Any], wait_s: float) -> list[tuple[Any, str | None]]:
        raise NotImplementedError

    def close(self) -> None: ...


class LocalExecutor(Executor):
    def __init__(self, work: Callable[[], Any], slots: int) -> None:
        self.slots = slots
        self._work = work
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=slots, thread_name_prefix="trial-worker")

    def start(self) -> concurrent.futures.Future:
        return self._pool.submit(self._work)

    def finished(self, handles, wait_s):
        done, _ = concurrent.futures.wait(handles, timeout=wait_s, return_when=concurrent.futures.FIRST_COMPLETED)
        return [(h, None if h.exception() is None else f"{type(h.exception()).__name__}: {h.exception()}")
                for h in done]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor(Executor):
    def __init__(self, store_url: str, study_name: str, slots: int, address: str | None, ttl_s: float) -> None:
        try:
            import ray
        except ImportError:
            raise SetupError("--executor ray needs Ray: pip install 'nosqltune[ray]'") from None
        self.ray = ray
        self.slots = slots
        # the workers reach the store as this process does: libpq's password, if given, goes with the job
        env = {k: os.environ[k] for k in ("PGPASSWORD", "PGUSER", "PGHOST", "PGPORT") if k in os.environ}
        try:
            ray.init(address=address or "auto", runtime_env={"env_vars": env} if env else None,
                     log_to_driver=False, logging_level="ERROR", configure_logging=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(f"cannot reach the Ray cluster at {address or 'auto'}: {str(exc).splitlines()[0]} "
                             "(start one with `ray start --head --resources '{\"nosqltune_slot\": 1}'`)") from None
        _ray_messages_to_stderr()
        total = ray.cluster_resources().get(SLOT, 0)
        if total < 1:
            ray.shutdown()
            raise UsageError(f"the Ray cluster at {address or 'auto'} has no '{SLOT}' resource: start each machine's "
                             f"node with --resources '{{\"{SLOT}\": 1}}'")
        self.cluster_slots = int(total)
        from .workers import run_one

        self._task = ray.remote(num_cpus=0, resources={SLOT: 1}, max_retries=0)(run_one)
        self._args = (store_url, study_name)
        self._ttl_s = ttl_s

    def start(self) -> Any:
        return self._task.remote(*self._args, ttl_s=self._ttl_s)

    def finished(self, handles, wait_s):
        if not handles:
            return []
        done, rest = self.ray.wait(handles, num_returns=1, timeout=wait_s)
        if done and rest:
            done += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        out = []
        for ref in done:
            try:
                self.ray.get(ref)
                out.append((ref, None))
            except Exception as exc:   # the worker died (killed, machine gone) or the task failed
                out.append((ref, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
        return out

    def close(self) -> None:
        self.ray.shutdown()


def _ray_messages_to_stderr() -> None:
    """Ray prints the cluster's error messages (e.g. "a worker died") on the driver's stdout, where our commands
    write their result for scripts: send them to stderr. Ray has no setting for it; this wraps its printer (if a
    later Ray moves it, the messages simply stay on stdout)."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "nosqltune_wrapped", False):
        return

    def to_stderr(data, *args, **kwargs):
        return original({**data, "is_err": True}, *args, **kwargs)

    to_stderr.nosqltune_wrapped = True
    ray_worker.print_to_stdstream = to_stderr
