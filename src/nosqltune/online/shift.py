"""Detecting a shift of the workload mix with hysteresis, so that noise never flaps the configuration.

The rule, as `ShiftDetector.observe` applies it to each window:

1. The reference is the mix the running configuration was chosen for: the read, write and scan shares the
   caller gives, or else the first window with traffic.
2. A window's distance to the reference is the total variation distance between the two mixes: half the sum over
   the kinds of the absolute difference of shares. It is the share of the window's operations that would have to
   change kind for the window to match the reference. 90% reads against 50% reads, the rest writes, is 0.40.
3. The window is beyond the reference when that distance exceeds a threshold: the larger of a fixed floor (default
   0.10 in share) and `noise_multiple` (default 3) sampling standard deviations of the distance. Under the
   hypothesis that the mix has not changed, each share of a window of n operations has a binomial standard
   deviation sqrt(p (1 - p) / n) around the reference share p. A reference that is itself the mean of n_ref
   observed operations adds 1/n_ref to 1/n. The distance's scale is half the sum of those deviations over the
   kinds. At production rates (tens of thousands of operations a minute) that is well under 0.01 and the floor
   decides. Real traffic is burstier than binomial draws, which is what the floor is for. The noise term takes over
   only in windows of a few hundred operations, where the shares of a steady mix do wander by several percent.
4. A shift is declared only after `confirm` consecutive windows (default 3) are beyond the reference and agree with
   each other: each new window must be within the same threshold of the pooled mix of the windows counted so far,
   or at least twice as near to that mix as to the reference (a large shift seen through noisy windows). Otherwise
   the count starts again from that window. A window within the threshold of the reference sets the
   count back to zero. Windows with fewer than `min_operations` carry no evidence and neither count nor reset.
   A burst of a minute or two (a batch job, caches warming after a restart, a client's retry storm) is thereby not
   a shift, and neither is noise that alternates around the threshold or scatters to different sides.
5. On a shift, the new reference is the pooled mix of the confirming windows that are within the threshold of the
   last of them, i.e. their operations' shares, and the new mix is taken to have started at the first confirming
   window. A window that straddled the change (half the old mix, half the new) counts towards the shift, being
   nearer the new mix than the reference, but is left out of the new reference, which would otherwise sit
   between the two mixes and put the new mix's own windows beyond it. A shift back has to pass the same test
   against the new reference. The band of +-threshold around whichever mix is current is the hysteresis.
6. After a shift, windows that end within `min_dwell_seconds` (default 180 s) do not count. The configuration
   chosen for a mix thus stands for at least that long plus `confirm` windows before another shift can undo it.
   A configuration change (a live change, a rolling restart) is no shift and leaves the detector as it was: the
   mix is a property of the traffic, not of the configuration, so windows keep being compared with the mix the
   running configuration was chosen for, and a streak under way goes on across the change. (A restart under load
   takes minutes on a slow machine; a shift that arrived in the window a restart was decided in was missed when a
   change started a dwell of its own and cleared the streak.) What a change does reset is the performance
   baseline, which the guard keeps, not the workload's.

The detector also keeps how long each mix lasted, so `mean_dwell_seconds` can estimate how long the current one
will (SOPHIA's concern that a reconfiguration must pay off before the workload changes again).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UsageError
from .window import KINDS, PerKind, Window


@dataclass(frozen=True)
class ShiftSettings:
    """The thresholds of the rule above."""

    floor: float = 0.10             # smallest distance (in share of operations) ever called a shift
    noise_multiple: float = 3.0     # sampling standard deviations of the distance a shift must also exceed
    confirm: int = 3                # consecutive, mutually consistent windows beyond the threshold
    min_dwell_seconds: float = 180.0
    min_operations: float = 100.0   # windows with fewer operations are idle: no evidence either way

    def __post_init__(self) -> None:
        if not 0.0 < self.floor < 1.0:
            raise UsageError(f"the shift floor must be in (0, 1), got {self.floor!r}")
        if not (math.isfinite(self.noise_multiple) and self.noise_multiple >= 0):
            raise UsageError(f"noise_multiple must be >= 0, got {self.noise_multiple!r}")
        if not (isinstance(self.confirm, int) and self.confirm >= 1):
            raise UsageError(f"confirm must be a whole number of windows >= 1, got {self.confirm!r}")
        if not (math.isfinite(self.min_dwell_seconds) and self.min_dwell_seconds >= 0):
            raise UsageError(f"min_dwell_seconds must be >= 0, got {self.min_dwell_seconds!r}")
        if not (math.isfinite(self.min_operations) and self.min_operations >= 1):
            raise UsageError(f"min_operations must be >= 1, got {self.min_operations!r}")


def _as_mix(mix: PerKind) -> PerKind:
    values = [mix.get(k) for k in KINDS]
    if any(v is None or not math.isfinite(v) or v < 0 for v in values) or sum(values) <= 0:
        raise UsageError(f"a mix needs read, write and scan shares >= 0 with a positive sum, got {mix.as_dict()}")
    return mix.shares()


def mix_distance(a: PerKind, b: PerKind) -> float:
    """Total variation distance between two mixes: half the sum of the absolute share differences (0 to 1)."""
    a, b = _as_mix(a), _as_mix(b)
    return 0.5 * sum(abs(a.get(k) - b.get(k)) for k in KINDS)


def _noise(reference: PerKind, n: float, n_ref: float) -> float:
    """The sampling standard-deviation scale of the distance between a window of n operations and a reference
    pooled from n_ref operations (inf: given, not observed), were the mix unchanged."""
    inverse = 1.0 / n + (0.0 if math.isinf(n_ref) else 1.0 / n_ref)
    return 0.5 * sum(math.sqrt(p * (1.0 - p) * inverse) for p in (reference.get(k) for k in KINDS))


def _fmt(mix: PerKind | None) -> str:
    return "-" if mix is None else "/".join(f"{mix.get(k):.2f}" for k in KINDS)


@dataclass(frozen=True)
class ShiftVerdict:
    """What one window told the detector, and why.

    state: "reference" (this window set the first reference), "idle" (too few operations), "dwell" (within the
    dwell time of the last change), "within" (within the threshold of the reference), "beyond" (counted towards a
    shift, `streak` of `confirm`), "shift" (declared; `new_reference` is the new mix)."""

    at: float
    state: str
    mix: PerKind | None
    reference: PerKind | None
    distance: float | None
    threshold: float | None
    floor: float
    noise: float | None            # noise_multiple x the distance's sampling deviation
    operations: float
    streak: int
    confirm: int
    new_reference: PerKind | None = None
    reason: str = ""

    @property
    def shifted(self) -> bool:
        return self.state == "shift"

    def as_dict(self) -> dict:
        return {"at": self.at, "state": self.state, "shifted": self.shifted,
                "mix": None if self.mix is None else self.mix.as_dict(),
                "reference": None if self.reference is None else self.reference.as_dict(),
                "distance": self.distance, "threshold": self.threshold, "floor": self.floor, "noise": self.noise,
                "operations": self.operations, "streak": self.streak, "confirm": self.confirm,
                "new_reference": None if self.new_reference is None else self.new_reference.as_dict(),
                "reason": self.reason}


class ShiftDetector:
    """The rule of this module's docstring, one window at a time.

    `reference`: the mix the running configuration was chosen for (None: the first window with traffic).
    `reference_operations`: how many observed operations that reference pools (inf when it was given rather than
    measured: it then adds no noise). `start`: when observation began (default: the first window's start)."""

    def __init__(self, settings: ShiftSettings = ShiftSettings(), reference: PerKind | None = None, *,
                 reference_operations: float = math.inf, start: float | None = None) -> None:
        self.settings = settings
        self.reference = None if reference is None else _as_mix(reference)
        if not (reference_operations > 0):
            raise UsageError(f"reference_operations must be > 0, got {reference_operations!r}")
        self.reference_operations = float(reference_operations)
        self._since = start                 # when the current mix began
        self._dwells: list[float] = []      # how long each earlier mix lasted, in seconds
        self._last_shift: float | None = None
        self._streak: list[Window] = []

    @property
    def shifts(self) -> int:
        return len(self._dwells)

    @property
    def mix_began(self) -> float | None:
        """When the current mix began (the start of the first window that confirmed it), None before any window."""
        return self._since

    def mean_dwell_seconds(self, now: float) -> float | None:
        """How long a mix lasts, estimated from what was seen: the time observed (every earlier mix's duration
        plus the current one's age) over the number of shifts. That is the exponential model's estimate with the
        current mix counted as still running. None before the first shift: with no mix seen to end there
        is no estimate (the mix's age alone, a window or two at the start, would make every restart look futile),
        so the gain is not discounted."""
        if self._since is None or not self._dwells:
            return None
        observed = sum(self._dwells) + max(0.0, now - self._since)
        return observed / max(1, len(self._dwells))

    # -- the rule
    def _threshold(self, n: float, reference: PerKind, n_ref: float) -> tuple[float, float]:
        noise = self.settings.noise_multiple * _noise(reference, n, n_ref)
        return max(self.settings.floor, noise), noise

    @staticmethod
    def _pooled(windows: list[Window]) -> tuple[PerKind, float]:
        counts = PerKind(*(sum(w.requests.get(k) or 0.0 for w in windows) for k in KINDS))
        return counts.shares(), counts.total

    def observe(self, window: Window) -> ShiftVerdict:
        """Take the next window and say whether the mix has shifted."""
        s = self.settings
        n = window.operations
        if self._since is None:
            self._since = window.start
        base = dict(at=window.end, floor=s.floor, operations=n, confirm=s.confirm)
        if n < s.min_operations:
            return ShiftVerdict(state="idle", mix=None, reference=self.reference, distance=None, threshold=None,
                                noise=None, streak=len(self._streak),
                                reason=f"{n:.0f} operations < {s.min_operations:.0f}: no evidence either way",
                                **base)
        mix = window.mix
        if self.reference is None:
            self.reference, self.reference_operations = mix, n
            return ShiftVerdict(state="reference", mix=mix, reference=mix, distance=0.0, threshold=None, noise=None,
                                streak=0, reason=f"first window with traffic: reference mix {_fmt(mix)}", **base)
        distance = mix_distance(mix, self.reference)
        threshold, noise = self._threshold(n, self.reference, self.reference_operations)
        figures = dict(mix=mix, reference=self.reference, distance=distance, threshold=threshold, noise=noise)
        why = (f"mix {_fmt(mix)} is {distance:.3f} from the reference {_fmt(self.reference)} "
               f"(threshold {threshold:.3f}: floor {s.floor:.3f}, noise {noise:.3f})")
        if self._last_shift is not None and window.end < self._last_shift + s.min_dwell_seconds:
            self._streak = []
            return ShiftVerdict(state="dwell", streak=0, reason=f"{why}; within {s.min_dwell_seconds:.0f} s of the "
                                f"shift at {self._last_shift:.0f}: not counted", **figures, **base)
        if distance <= threshold:
            self._streak = []
            return ShiftVerdict(state="within", streak=0, reason=f"{why}: within", **figures, **base)
        note = ""
        if self._streak:   # the windows counted must agree on one new mix
            pooled, pooled_n = self._pooled(self._streak)
            apart = mix_distance(mix, pooled)
            limit = max(self._threshold(n, pooled, pooled_n)[0], distance / 2)
            if apart > limit:
                note = f"; {apart:.3f} from the {len(self._streak)} window(s) counted before: counting again"
                self._streak = []
        self._streak.append(window)
        if len(self._streak) < s.confirm:
            return ShiftVerdict(state="beyond", streak=len(self._streak),
                                reason=f"{why}: beyond, {len(self._streak)} of {s.confirm} windows{note}",
                                **figures, **base)
        last = self._streak[-1]   # the new mix is the last window's; one that straddled the change is left out
        kept = [w for w in self._streak if mix_distance(w.mix, last.mix) <= self._threshold(w.operations, last.mix,
                                                                                             last.operations)[0]]
        new, pooled_n = self._pooled(kept)
        if len(kept) < len(self._streak):
            note += f"; {len(self._streak) - len(kept)} window(s) of the transition left out of it"
        began = self._streak[0].start
        self._dwells.append(max(0.0, began - self._since))
        self._since = began
        self.reference, self.reference_operations = new, pooled_n
        self._last_shift = window.end
        self._streak = []
        return ShiftVerdict(state="shift", streak=s.confirm, new_reference=new,
                            reason=f"{why}: beyond in {s.confirm} consecutive windows; new reference {_fmt(new)}"
                                   f"{note}",
                            **figures, **base)
