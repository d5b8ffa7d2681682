"""Online re-tuning of a running datastore: the decision logic, free of I/O.

RAFIKI (Mahgoub et al., Middleware 2017) watches the read/write mix of a running datastore and re-applies the
configuration its surrogate predicts best for the mix it now sees; SOPHIA (Mahgoub et al., USENIX ATC 2019) makes
that safe: a change that needs a restart is made only when the gain predicted over the coming window outweighs
what the restart costs, nodes restarting one at a time. This package holds the rules those steps follow, each a
pure function or a small state machine over numbers the caller measured:

- window.py: a `Window` of observed traffic made from two snapshots of each node's cumulative ClientRequest
  counters (`window_between`), with its operations per second, mix and p99 latencies;
- shift.py: `ShiftDetector`, which declares a shift of the mix only after it holds for several windows, beyond a
  threshold set by a floor and by the windows' sampling noise, and not within a dwell time of the last change;
- guard.py: `judge_change`, which keeps a live change only if the window after it is not worse than the windows
  before it by more than their own noise;
- decide.py: `decide_restart`, SOPHIA's cost-benefit of a rolling restart or an SSTable rewrite;
- plan.py: `plan_changes`, which splits a recommended configuration into live, restart and rewrite changes from
  the knob space's own metadata.

These modules read no JMX, start no process and talk to no network: the `online` command does, and feeds them.
The one exception is observe.py, the node side (imported on its own, not from this package): it reads each
node's ClientRequest counters over JMX into a `Snapshot` and applies a plan's live changes, reading them back.

The loop of `online` is in modules imported on their own too: advisor.py (the fitted model, checked against the
cluster, asked for the best configuration of an observed mix), controller.py (the loop over a node reader and a
live applier), settings.py (its typed settings and summary), record.py (the run's study in the trial store) and
run.py (the JMX reader and applier, and `run_online`).
"""

from .decide import CostSettings, Decision, decide_restart
from .guard import GuardSettings, GuardVerdict, judge_change
from .plan import Change, Plan, plan_changes
from .shift import ShiftDetector, ShiftSettings, ShiftVerdict, mix_distance
from .window import KINDS, NodeCounters, NodeWindow, PerKind, Snapshot, Window, WindowSettings, window_between

__all__ = ["KINDS", "PerKind", "NodeCounters", "Snapshot", "NodeWindow", "Window", "WindowSettings", "window_between",
           "ShiftSettings", "ShiftVerdict", "ShiftDetector", "mix_distance", "GuardSettings", "GuardVerdict",
           "judge_change", "CostSettings", "Decision", "decide_restart", "Change", "Plan", "plan_changes"]
