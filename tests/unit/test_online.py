"""Online re-tuning's decision logic (nosqltune.online, issue 39): windows from cumulative counters (a restarted
node's counters going backwards), shift detection and its hysteresis, the guard after a live change, SOPHIA's
cost-benefit of a restart or rewrite, and the split of a recommendation on Cassandra's real knob space."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nosqltune.errors import UsageError
from nosqltune.knobs import KnobError, load_space
from nosqltune.online import (CostSettings, GuardSettings, NodeCounters, PerKind, ShiftDetector, ShiftSettings,
                              Snapshot, Window, decide_restart, judge_change, mix_distance, plan_changes,
                              window_between)
from nosqltune.online.decide import expected_gain, lost_share
from nosqltune.online.guard import successive_noise
from nosqltune.online.window import NodeWindow

MINUTE = 60.0


def window(start: float, reads: float, writes: float, scans: float = 0.0, *, seconds: float = MINUTE,
           p99_read: float | None = 2000.0, p99_write: float | None = 800.0, failures: float = 0.0,
           restarted: tuple[str, ...] = ()) -> Window:
    """A one-node window with the given operation counts and p99s (microseconds)."""
    node = NodeWindow("n1", PerKind(reads, writes, scans), PerKind(failures, 0, 0), PerKind(0, 0, 0),
                      PerKind(None, None, None), PerKind(p99_read, p99_write, None))
    return Window(start, start + seconds, (node,), restarted=restarted)


def mix_window(start: float, read_share: float, operations: int, rng: np.random.Generator | None = None,
               scan_share: float = 0.0) -> Window:
    """A window of `operations` drawn from the mix (multinomial sampling noise when rng is given)."""
    shares = [read_share, 1.0 - read_share - scan_share, scan_share]
    counts = rng.multinomial(operations, shares) if rng is not None else [operations * s for s in shares]
    return window(start, *map(float, counts))


# ------------------------------------------------------------------------------------------------ window

def counters(reads, writes, scans=0, *, p99=(2000.0, 900.0, None), failures=(0, 0, 0), uptime=None):
    return NodeCounters(PerKind(reads, writes, scans), failures=PerKind(*failures),
                        p99=PerKind(*p99), uptime_seconds=uptime)


def test_a_window_is_the_difference_of_two_snapshots_with_its_rate_mix_and_p99():
    before = Snapshot(100.0, {"a": counters(10_000, 5_000), "b": counters(20_000, 1_000)})
    after = Snapshot(160.0, {"a": counters(16_000, 7_000, p99=(3000.0, 700.0, None), failures=(5, 1, 0)),
                             "b": counters(23_600, 1_400, p99=(2500.0, 1200.0, None))})
    w = window_between(before, after)
    assert (w.start, w.end, w.seconds) == (100.0, 160.0, 60.0)
    assert w.requests.as_dict() == {"read": 9600, "write": 2400, "scan": 0}
    assert w.ops_per_second == pytest.approx(12_000 / 60)
    assert w.mix.read == pytest.approx(0.8) and w.mix.write == pytest.approx(0.2) and w.mix.scan == 0
    assert w.failures == 6
    assert not w.partial
    # the worst node's p99 among those with a real share: b has 3600 / 9600 reads, a has 6000
    assert w.p99_read == 3000.0 and w.p99_write == 1200.0
    assert w.p99("scan") is None


def test_the_p99_skips_a_node_that_served_a_sliver_of_the_kind():
    before = Snapshot(0.0, {"a": counters(0, 0), "b": counters(0, 0), "c": counters(0, 0)})
    after = Snapshot(60.0, {"a": counters(9_400, 100, p99=(2000.0, 500.0, None)),
                            "b": counters(500, 100, p99=(9000.0, 500.0, None)),       # 5% of reads: counts
                            "c": counters(100, 100, p99=(50_000.0, 500.0, None))})    # 1% of reads: noise
    w = window_between(before, after)
    assert w.p99_read == 9000.0


def test_a_restarted_nodes_counters_going_backwards_make_a_partial_window_never_a_negative_one():
    before = Snapshot(0.0, {"a": counters(50_000, 10_000), "b": counters(80_000, 20_000, failures=(3, 0, 0))})
    # b restarted during the window: its counters start again from zero
    after = Snapshot(60.0, {"a": counters(56_000, 11_000), "b": counters(1_500, 400)})
    w = window_between(before, after)
    assert w.restarted == ("b",) and w.partial
    b = next(n for n in w.nodes if n.node == "b")
    assert b.restarted and b.requests.as_dict() == {"read": 1500, "write": 400, "scan": 0}
    assert b.failures.total == 0   # since the restart, not 0 - 3
    assert w.operations == 6_000 + 1_000 + 1_500 + 400
    assert all((n.requests.get(k) or 0) >= 0 for n in w.nodes for k in ("read", "write", "scan"))


def test_an_uptime_shorter_than_the_window_shows_a_restart_the_counters_hide():
    before = Snapshot(0.0, {"a": counters(1_000, 100)})
    after = Snapshot(60.0, {"a": counters(2_500, 300, uptime=40.0)})   # grew past its old value after restarting
    w = window_between(before, after)
    assert w.restarted == ("a",) and w.requests.read == 2_500
    # a node young at the start (up 10 s), restarted 5 s into the window: 55 s of uptime is more than its old
    # 10 s but clearly less than 10 + 60
    young = window_between(Snapshot(0.0, {"a": counters(100, 10, uptime=10.0)}),
                           Snapshot(60.0, {"a": counters(2_500, 300, uptime=55.0)}))
    assert young.restarted == ("a",)
    # a node up all the window, read a few seconds late or early, did not restart
    steady = window_between(Snapshot(0.0, {"a": counters(100, 10, uptime=10.0)}),
                            Snapshot(60.0, {"a": counters(2_500, 300, uptime=66.0)}))
    assert steady.restarted == () and steady.requests.read == 2_400


def test_missing_and_unmatched_nodes_are_named_and_left_out():
    before = Snapshot(0.0, {"a": counters(1_000, 100), "b": counters(1_000, 100)})
    after = Snapshot(60.0, {"a": counters(2_000, 200), "c": counters(90_000, 100)})
    w = window_between(before, after)
    assert w.missing == ("b",) and w.unmatched == ("c",) and w.partial
    assert w.operations == 1_100


def test_bad_snapshots_are_refused_in_one_line():
    with pytest.raises(UsageError, match="end after its start"):
        window_between(Snapshot(60.0, {}), Snapshot(60.0, {}))
    with pytest.raises(UsageError, match="requests of reads"):
        window_between(Snapshot(0.0, {}), Snapshot(60.0, {"a": counters(-1, 0, uptime=10.0)}))


# ------------------------------------------------------------------------------------------------ shift

def test_mix_distance_is_the_share_of_operations_that_changed_kind():
    assert mix_distance(PerKind(0.9, 0.1, 0.0), PerKind(0.5, 0.5, 0.0)) == pytest.approx(0.4)
    assert mix_distance(PerKind(9, 1, 0), PerKind(0.9, 0.1, 0)) == pytest.approx(0.0)
    with pytest.raises(UsageError):
        mix_distance(PerKind(0, 0, 0), PerKind(1, 0, 0))


def steady(rng: np.random.Generator, count: int, start: float = 0.0, read_share: float = 0.9,
           jitter: float = 0.025) -> list[Window]:
    """Windows of a steady mix as real traffic gives it: the clients' mix wanders a little from minute to minute
    (jitter, over-dispersion beyond sampling) and the traffic varies from a few hundred to ~100k operations."""
    windows = []
    for i in range(count):
        share = float(np.clip(rng.normal(read_share, jitter), 0.0, 1.0))
        operations = int(rng.choice([300, 2_000, 30_000, 120_000]))
        windows.append(mix_window(start + i * MINUTE, share, operations, rng))
    return windows


def test_a_steady_mix_with_realistic_noise_never_declares_a_shift_in_200_windows():
    rng = np.random.default_rng(39)
    windows = steady(rng, 200)
    detector = ShiftDetector(ShiftSettings(), PerKind(0.9, 0.1, 0.0))
    verdicts = [detector.observe(w) for w in windows]
    assert not any(v.shifted for v in verdicts)
    assert detector.shifts == 0
    distances = [v.distance for v in verdicts]
    assert max(distances) > 0.05           # the noise is there: a lower floor with no confirmation would flap
    flappy = ShiftDetector(ShiftSettings(floor=0.04, noise_multiple=0.0, confirm=1, min_dwell_seconds=0),
                           PerKind(0.9, 0.1, 0.0))
    assert sum(flappy.observe(w).shifted for w in windows) >= 3


def test_in_sparse_windows_the_sampling_noise_raises_the_threshold_above_the_floor():
    # a 50/50 mix seen through windows of 100-160 operations: each share wanders by ~5% (binomial)
    rng = np.random.default_rng(7)
    windows = [mix_window(i * MINUTE, 0.5, int(rng.integers(100, 160)), rng) for i in range(200)]
    detector = ShiftDetector(ShiftSettings(), PerKind(0.5, 0.5, 0.0))
    verdicts = [detector.observe(w) for w in windows]
    assert not any(v.shifted for v in verdicts)
    assert all(v.threshold > v.floor for v in verdicts)          # 3 x 0.5 x 2 x sqrt(0.25 / 160) = 0.119 > 0.10
    n = windows[0].operations
    assert verdicts[0].noise == pytest.approx(3 * 0.5 * 2 * math.sqrt(0.25 / n))
    # the floor alone, unconfirmed, would be fooled by that noise
    floor_only = ShiftDetector(ShiftSettings(noise_multiple=0.0, confirm=1, min_dwell_seconds=0),
                               PerKind(0.5, 0.5, 0.0))
    assert sum(floor_only.observe(w).shifted for w in windows) >= 1


def test_a_real_shift_from_90_to_50_percent_reads_is_declared_after_confirm_windows():
    rng = np.random.default_rng(2)
    settings = ShiftSettings(confirm=3)
    detector = ShiftDetector(settings, PerKind(0.9, 0.1, 0.0))
    for w in steady(rng, 20, read_share=0.9):
        assert not detector.observe(w).shifted
    after = steady(rng, 10, start=20 * MINUTE, read_share=0.5)
    verdicts = [detector.observe(w) for w in after]
    assert [v.state for v in verdicts[:3]] == ["beyond", "beyond", "shift"]
    assert [v.streak for v in verdicts[:3]] == [1, 2, 3]
    shift = verdicts[2]
    assert shift.distance == pytest.approx(0.4, abs=0.08) and shift.distance > shift.threshold
    assert shift.new_reference.read == pytest.approx(0.5, abs=0.04)
    assert detector.reference == shift.new_reference
    assert not any(v.shifted for v in verdicts[3:])     # staying at the new mix: no more shifts
    assert detector.shifts == 1


def test_a_window_straddling_the_change_counts_towards_the_shift_but_not_the_new_reference():
    """Measured on the shifting trace (bench/online.py, 20 s windows): the first window of the scan phase held
    half writes, half scans; pooled into the new reference it put the phase's own windows beyond it."""
    detector = ShiftDetector(ShiftSettings(confirm=3, min_dwell_seconds=0), PerKind(0.1, 0.9, 0.0))
    assert detector.observe(window(-60.0, 5_000, 45_000)).state == "within"
    straddling = window(0.0, 1_000, 17_000, 20_000)               # 0.03/0.45/0.53 reads/writes/scans
    verdicts = [detector.observe(w) for w in (straddling, window(60.0, 0, 1_400, 26_000),
                                              window(120.0, 0, 1_700, 31_000))]
    assert [v.state for v in verdicts] == ["beyond", "beyond", "shift"]
    assert verdicts[-1].new_reference.scan == pytest.approx(0.95, abs=0.01)
    assert "1 window(s) of the transition left out" in verdicts[-1].reason
    after = detector.observe(window(180.0, 0, 1_600, 30_000))      # the scan phase goes on: within, not beyond
    assert after.state == "within" and after.distance < 0.01
    assert detector.mix_began == 0.0                                # the mix still began with the straddling window


def test_noise_alternating_around_the_threshold_does_not_flap():
    detector = ShiftDetector(ShiftSettings(confirm=2), PerKind(0.9, 0.1, 0.0))
    verdicts = [detector.observe(mix_window(i * MINUTE, 0.78 if i % 2 else 0.86, 50_000)) for i in range(100)]
    assert not any(v.shifted for v in verdicts)
    assert {v.state for v in verdicts} == {"beyond", "within"} and max(v.streak for v in verdicts) == 1


def test_windows_beyond_the_threshold_on_different_sides_do_not_add_up():
    detector = ShiftDetector(ShiftSettings(confirm=2), PerKind(0.9, 0.1, 0.0))
    # 12 points of reads turn into writes, then into scans: each 0.12 from the reference, 0.12 from each other
    more_writes, more_scans = (lambda s: window(s, 39_000, 11_000)), (lambda s: window(s, 39_000, 5_000, 6_000))
    verdicts = [detector.observe((more_writes if i % 2 else more_scans)(i * MINUTE)) for i in range(50)]
    assert all(v.state == "beyond" and v.streak == 1 for v in verdicts)
    assert "counting again" in verdicts[1].reason


def test_the_dwell_time_after_a_change_is_honoured():
    settings = ShiftSettings(confirm=2, min_dwell_seconds=300)
    detector = ShiftDetector(settings, PerKind(0.9, 0.1, 0.0))
    t = 0.0
    for _ in range(2):                               # the shift to 50% reads: declared at the end of 120 s
        v = detector.observe(mix_window(t, 0.5, 50_000))
        t += MINUTE
    assert v.shifted and v.at == 120.0
    states = []
    while True:                                      # straight back to 90% reads
        v = detector.observe(mix_window(t, 0.9, 50_000))
        states.append(v.state)
        t += MINUTE
        if v.shifted:
            break
    # windows ending before 120 + 300 s do not count; then two windows beyond the threshold
    assert states == ["dwell"] * 4 + ["beyond", "shift"]
    assert v.at == 120.0 + 300.0 + 2 * MINUTE - MINUTE
    # the dwell runs from the shift just declared: the next window does not count
    assert detector.observe(mix_window(t, 0.5, 50_000)).state == "dwell"
    assert not hasattr(detector, "note_change")   # a configuration change is no shift: the detector never hears of it


def test_idle_windows_are_no_evidence_and_the_mean_dwell_counts_the_mixes_seen():
    detector = ShiftDetector(ShiftSettings(confirm=2, min_dwell_seconds=0), PerKind(0.9, 0.1, 0.0), start=0.0)
    t, plan = 0.0, [0.9] * 10 + [0.5] * 10 + [0.9] * 10
    for i, share in enumerate(plan):
        if i == 5:   # no mix has ended yet: no estimate, so a restart's gain is not discounted by a short age
            assert detector.shifts == 0 and detector.mean_dwell_seconds(t) is None
        if i == 21:   # an idle minute in the middle of the streak neither counts nor resets it
            assert detector.observe(window(t, 20, 10)).state == "idle"
            t += MINUTE
        detector.observe(mix_window(t, share, 50_000))
        t += MINUTE
    assert detector.shifts == 2
    # the 50% mix began at 600 s (the first confirming window's start) and the 90% again at 1200 s: the window
    # at 1200 s still counted after the idle one, so the streak survived it
    assert t == 1_860.0
    assert detector.mean_dwell_seconds(t) == pytest.approx((600 + 600 + (t - 1_200)) / 2)
    with pytest.raises(UsageError, match="confirm"):
        ShiftSettings(confirm=0)
    with pytest.raises(UsageError, match="floor"):
        ShiftSettings(floor=1.5)


# ------------------------------------------------------------------------------------------------ guard

def before_windows(throughput=(10_000, 10_100, 9_950, 10_050, 10_000), p99=(2000, 2040, 1980, 2010, 2000)):
    return [window(i * MINUTE, t * MINUTE * 0.8, t * MINUTE * 0.2, p99_read=p, p99_write=800.0)
            for i, (t, p) in enumerate(zip(throughput, p99))]


def test_successive_noise_ignores_a_slow_drift():
    assert successive_noise([10, 10, 10]) == 0.0
    drift = [100 + i for i in range(10)]
    assert successive_noise(drift) == pytest.approx(math.sqrt(0.5))   # the plain std would be ~3.0
    assert successive_noise([1.0]) == 0.0


def test_the_guard_rolls_back_a_p99_worse_beyond_its_tolerance():
    before = before_windows()
    after = window(5 * MINUTE, 10_000 * MINUTE * 0.8, 10_000 * MINUTE * 0.2, p99_read=2600.0)
    verdict = judge_change(before, after)
    assert verdict.rollback
    p99 = verdict.check("p99_read")
    assert p99.worse and p99.baseline == pytest.approx(2006.0) and p99.change == pytest.approx(2600 / 2006 - 1)
    assert p99.tolerance == pytest.approx(0.212)      # one histogram bucket: this baseline's noise is ~1.7%
    assert not verdict.check("p99_write").worse
    assert "p99_read" in verdict.reason


def test_a_p99_one_histogram_bucket_higher_is_within_tolerance_and_two_are_not():
    """Cassandra reports a p99 as a bucket's bound (EstimatedHistogram, each bucket 1.2 times the one below): a
    steady baseline of 179 us has no noise, and 215 us is the next value it can report."""
    before = before_windows(p99=(179,) * 5)
    one = judge_change(before, window(5 * MINUTE, 10_000 * MINUTE * 0.8, 10_000 * MINUTE * 0.2, p99_read=215.0))
    assert one.keep and one.check("p99_read").change == pytest.approx(0.201, abs=1e-3)
    two = judge_change(before, window(5 * MINUTE, 10_000 * MINUTE * 0.8, 10_000 * MINUTE * 0.2, p99_read=258.0))
    assert two.rollback and two.check("p99_read").worse
    exact = GuardSettings(p99_bucket_ratio=1.0)   # percentiles measured exactly: the fixed 10% alone
    assert judge_change(before, window(5 * MINUTE, 10_000 * MINUTE * 0.8, 10_000 * MINUTE * 0.2, p99_read=215.0),
                        exact).rollback


def test_the_guard_keeps_a_change_within_noise():
    after = window(5 * MINUTE, 10_020 * MINUTE * 0.8, 10_020 * MINUTE * 0.2, p99_read=2080.0)
    verdict = judge_change(before_windows(), after)
    assert verdict.keep and not any(c.worse for c in verdict.checks)


def test_the_guards_tolerance_grows_with_the_noise_measured_before():
    noisy = before_windows(p99=(2000, 2500, 1800, 2400, 1900))
    after = window(5 * MINUTE, 10_000 * MINUTE * 0.8, 10_000 * MINUTE * 0.2, p99_read=2500.0)   # +16%
    kept = judge_change(noisy, after)
    assert kept.keep and kept.check("p99_read").tolerance > 0.3
    assert kept.check("p99_read").noise == pytest.approx(successive_noise([2000, 2500, 1800, 2400, 1900]) / 2120)
    assert judge_change(before_windows(), after).rollback          # the same +18% on a steady baseline
    higher = window(5 * MINUTE, 10_000 * MINUTE * 0.8, 10_000 * MINUTE * 0.2, p99_read=2700.0)
    few = judge_change(noisy[-2:], higher)     # 2 windows: noise unknown, the fixed floor (one bucket, 21.2%)
    assert few.rollback and few.check("p99_read").noise is None and "noise unknown" in few.reason
    assert few.check("p99_read").tolerance == pytest.approx(0.212)


def test_the_guard_rolls_back_a_throughput_drop_at_full_speed():
    after = window(5 * MINUTE, 8_500 * MINUTE * 0.8, 8_500 * MINUTE * 0.2, p99_read=1900.0)
    verdict = judge_change(before_windows(), after)
    assert verdict.rollback and not verdict.fixed_rate
    assert verdict.check("throughput").worse and verdict.check("throughput").change == pytest.approx(-0.15, abs=0.01)


def test_at_a_fixed_offered_rate_only_p99_decides_and_the_guard_says_so():
    flat = before_windows(throughput=(5_000,) * 5)
    worse_tail = window(5 * MINUTE, 5_000 * MINUTE * 0.8, 5_000 * MINUTE * 0.2, p99_read=2600.0)
    verdict = judge_change(flat, worse_tail)
    assert verdict.rollback and verdict.fixed_rate and "p99" in verdict.judged_on
    assert "fixed offered rate" in verdict.reason
    same_tail = window(5 * MINUTE, 5_000 * MINUTE * 0.8, 5_000 * MINUTE * 0.2, p99_read=2050.0)
    kept = judge_change(flat, same_tail)
    assert kept.keep and kept.fixed_rate
    # with the rate known, falling behind it is a rollback even when p99 looks fine
    behind = window(5 * MINUTE, 4_000 * MINUTE * 0.8, 4_000 * MINUTE * 0.2, p99_read=2000.0)
    lagging = judge_change(flat, behind, offered_rate=5_000)
    assert lagging.rollback and lagging.fixed_rate and lagging.check("throughput").worse


def test_the_guard_waits_for_a_full_window_and_counts_new_failures():
    after = window(5 * MINUTE, 600_000 * 0.8, 600_000 * 0.2, restarted=("n1",))
    assert judge_change(before_windows(), after).verdict == "wait"
    failing = window(5 * MINUTE, 600_000 * 0.8, 600_000 * 0.2, failures=3_000)   # 0.5% of requests fail
    verdict = judge_change(before_windows(), failing)
    assert verdict.rollback and verdict.check("failure_share").worse
    with pytest.raises(UsageError, match="at least one full window"):
        judge_change([], failing)
    with pytest.raises(UsageError, match="min_windows_for_noise"):
        GuardSettings(min_windows_for_noise=1)


# ------------------------------------------------------------------------------------------------ decide

def test_a_large_gain_over_a_long_lasting_mix_pays_for_a_rolling_restart():
    d = decide_restart(predicted_now=10_000, predicted_new=13_000, current_ops_per_second=10_000, nodes=3,
                       replication_factor=3, dwell_seconds=7_200)
    rollout = 3 * 120.0
    gain = 3_000 * 7_200 * (math.exp(-rollout / 7_200) - math.exp(-1_800 / 7_200))
    cost = rollout * (1 / 3) * 10_000
    assert d.act and d.verdict == "act" and d.action == "rolling restart"
    assert d.takes_effect_seconds == rollout and d.restart_seconds_source == "default"
    assert d.expected_gain_operations == pytest.approx(gain) and d.cost_operations == pytest.approx(cost)
    assert d.lost_share == pytest.approx(1 / 3) and not d.unavailable
    assert d.expected_gain_operations > 1.5 * d.cost_operations
    record = d.as_dict()
    assert record["act"] and record["horizon_seconds"] == 1_800 and record["dwell_seconds"] == 7_200


def test_a_small_gain_does_not_pay_for_a_restart():
    d = decide_restart(predicted_now=10_000, predicted_new=10_300, current_ops_per_second=10_000, nodes=3,
                       replication_factor=3, dwell_seconds=7_200)
    assert not d.act and d.verdict == "hold" and "<=" in d.reason
    assert d.expected_gain_operations < (1 + d.margin) * d.cost_operations


def test_a_gain_must_clear_the_cost_by_the_margin():
    # no dwell estimate: gain 1100 ops/s x (1800 - 360) s = 1.58M operations against a cost of 1.2M
    kwargs = dict(predicted_now=10_000, predicted_new=11_100, current_ops_per_second=10_000, nodes=3,
                  replication_factor=3, dwell_seconds=None)
    d = decide_restart(**kwargs)
    assert d.expected_gain_operations == pytest.approx(1_100 * 1_440)
    assert d.cost_operations < d.expected_gain_operations < 1.5 * d.cost_operations and not d.act
    assert decide_restart(settings=CostSettings(margin=0.0), **kwargs).act


def test_the_gain_is_the_models_relative_gain_at_the_pace_measured_now():
    # the model was fitted where the cluster served 10,000 ops/s; the cluster watched serves a tenth of that
    kwargs = dict(predicted_now=10_000, predicted_new=13_000, nodes=3, replication_factor=3, dwell_seconds=7_200)
    fast = decide_restart(current_ops_per_second=10_000, **kwargs)
    slow = decide_restart(current_ops_per_second=1_000, **kwargs)
    assert fast.gain_ops_per_second == pytest.approx(3_000) and slow.gain_ops_per_second == pytest.approx(300)
    assert slow.expected_gain_operations == pytest.approx(fast.expected_gain_operations / 10)
    assert slow.cost_operations == pytest.approx(fast.cost_operations / 10)
    assert slow.act and fast.act   # gain and cost scale alike: the pace alone decides nothing
    assert "+30.0% of 1000 ops/s measured" in slow.reason
    # the trace's 8th repeat (2026-11-28): +0.5% predicted at the model's pace, 1,278 ops/s measured, 21 s per
    # node; the difference of the predictions (+36 ops/s, 63K operations against 1.5 x 26.8K) rolled out a restart
    d = decide_restart(predicted_now=6_895, predicted_new=6_931, current_ops_per_second=1_278, nodes=2,
                       replication_factor=2, dwell_seconds=None, measured_restart_seconds=[21])
    assert d.gain_ops_per_second == pytest.approx(1_278 * 36 / 6_895)
    assert not d.act and d.expected_gain_operations < d.cost_operations


def test_a_mix_that_shifts_every_few_minutes_does_not_pay_for_a_restart():
    kwargs = dict(predicted_now=10_000, predicted_new=13_000, current_ops_per_second=10_000, nodes=3,
                  replication_factor=3)
    lasting = decide_restart(dwell_seconds=7_200, **kwargs)
    fleeting = decide_restart(dwell_seconds=180, **kwargs)
    assert lasting.act and not fleeting.act
    assert fleeting.expected_gain_operations == pytest.approx(
        3_000 * 180 * (math.exp(-360 / 180) - math.exp(-1_800 / 180)))
    assert fleeting.cost_operations == lasting.cost_operations
    # a change that takes effect only after the horizon earns nothing
    slow = decide_restart(dwell_seconds=7_200, measured_restart_seconds=[700, 700], **kwargs)
    assert not slow.act and slow.expected_gain_operations == 0 and "beyond" in slow.reason


def test_measured_restarts_replace_the_default_and_rewrites_cost_their_io():
    d = decide_restart(predicted_now=8_000, predicted_new=9_000, current_ops_per_second=8_000, nodes=2,
                       replication_factor=2, dwell_seconds=None, measured_restart_seconds=[30, 40],
                       rewrite_bytes_per_node=10 * 2**30, rewrite_bytes_per_second=64 * 2**20)
    assert d.restart_seconds_per_node == 35 and d.restart_seconds_source == "measured (2)"
    assert d.rewrite_seconds == pytest.approx(160.0)
    assert d.rewrite_cost_operations == pytest.approx(160 * 0.25 * 8_000)
    assert d.restart_cost_operations == pytest.approx(2 * 35 * 0.5 * 8_000)
    assert d.takes_effect_seconds == pytest.approx(70 + 160)
    assert d.expected_gain_operations == pytest.approx(1_000 * (1_800 - 230))   # no dwell estimate: no discount
    assert d.action == "rolling restart and rewrite" and d.act
    rewrite_only = decide_restart(predicted_now=8_000, predicted_new=9_000, current_ops_per_second=8_000, nodes=2,
                                  replication_factor=2, dwell_seconds=3_600, restart=False,
                                  rewrite_bytes_per_node=2**30, rewrite_bytes_per_second=2**20)
    assert rewrite_only.action == "rewrite" and rewrite_only.restart_cost_operations == 0


def test_the_share_lost_while_a_node_restarts_follows_nodes_rf_and_consistency():
    assert lost_share(3, 3, 1) == (pytest.approx(1 / 3), False)
    assert lost_share(2, 1, 1) == (pytest.approx(0.5), True)        # RF 1: its ranges are unavailable
    assert lost_share(3, 2, 2) == (pytest.approx(2 / 3), True)      # QUORUM with RF 2: both replicas needed
    assert lost_share(1, 1, 1) == (1.0, True)                        # one node: everything
    assert expected_gain(100, 0, 1_800, None) == 180_000
    assert expected_gain(100, 2_000, 1_800, 60) == 0.0


def test_bad_cost_settings_and_inputs_are_refused_in_one_line():
    with pytest.raises(UsageError, match="horizon_seconds"):
        CostSettings(horizon_seconds=0)
    with pytest.raises(UsageError, match="nothing to decide"):
        decide_restart(predicted_now=1, predicted_new=2, current_ops_per_second=1, nodes=1, replication_factor=1,
                       dwell_seconds=60, restart=False)
    with pytest.raises(UsageError, match="nodes"):
        decide_restart(predicted_now=1, predicted_new=2, current_ops_per_second=1, nodes=0, replication_factor=1,
                       dwell_seconds=60)


# ------------------------------------------------------------------------------------------------ plan

@pytest.fixture(scope="module")
def cassandra():
    return load_space("cassandra")


def test_the_plan_splits_a_recommendation_on_the_real_cassandra_knob_space(cassandra):
    running = {"concurrent_reads": 32, "compaction_throughput": 64}
    recommended = {"concurrent_reads": 64, "compaction_throughput": 128, "heap_size": 3072,
                   "compression": "ZstdCompressor", "compression_chunk_length": 64, "memtable": "trie",
                   "sstable_format": "bti", "num_tokens": 32, "nodes": 3, "concurrent_writes": 32,
                   "lcs_sstable_size": 256}
    plan = plan_changes(cassandra, running, recommended)
    routes = plan.routes()
    assert routes == {"concurrent_reads": "live", "compaction_throughput": "live", "heap_size": "restart",
                      "compression": "rewrite", "compression_chunk_length": "rewrite", "memtable": "live",
                      "sstable_format": "restart+rewrite", "num_tokens": "fixed", "nodes": "fixed",
                      "lcs_sstable_size": "inert"}       # concurrent_writes 32 is its running default: no change
    assert [c.knob for c in plan.live] == ["concurrent_reads", "compaction_throughput", "memtable"]
    assert {c.knob for c in plan.restart} == {"heap_size", "sstable_format"}
    assert {c.knob for c in plan.rewrite} == {"compression", "compression_chunk_length", "sstable_format"}
    assert plan.needs_restart and plan.needs_rewrite
    reads = next(c for c in plan.live if c.knob == "concurrent_reads")
    assert (reads.before, reads.after) == (32, 64) and reads.how == cassandra["concurrent_reads"].live


def test_every_knob_of_the_space_gets_a_route_from_its_metadata(cassandra):
    from nosqltune.online.plan import ROUTES, route_of

    routes = {k.name: route_of(k)[0] for k in cassandra}
    assert set(routes.values()) <= set(ROUTES)
    for knob in cassandra:
        if knob.applies == "jvm":
            assert routes[knob.name] == "restart"
        if knob.applies == "yaml" and knob.live and not knob.reload:
            assert routes[knob.name] == "live"
        if knob.applies == "table" and knob.key.split(".")[0] in ("compaction", "compression"):
            assert routes[knob.name] == "rewrite"
    assert routes["caching_rows_per_partition"] == "live" and routes["bloom_filter_fp_chance"] == "rewrite"
    assert routes["file_cache_size"] == "restart" and routes["read_ahead_kb"] == "fixed"


def test_an_unchanged_or_unknown_knob_is_handled(cassandra):
    assert plan_changes(cassandra, {"heap_size": 2048}, {"heap_size": "2048"}).changes == ()
    with pytest.raises(KnobError):
        plan_changes(cassandra, {}, {"no_such_knob": 1})
