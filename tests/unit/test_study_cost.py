"""A study's machine time split into phases (tuning/cost.py): the phases add up to the trials' own totals, what no
phase names is `other`, trials without timings (running, or stored before timings were kept) are left out, and the
best found is followed against the machine hours spent."""

import pytest

from nosqltune.tuning.cost import (PHASES, best_by_machine_time, format_split, hours_at_result, result_hours, time_split,
                                  trial_phases)


def _row(number, total, value=None, tag="tune", **timings):
    return {"number": number, "tag": tag, "state": "COMPLETE" if value is not None else "FAIL",
            "started_at": 1000.0 + 100 * number, "finished_at": 1000.0 + 100 * number + total,
            "timings": {"total_s": total, **timings}, "value": value}


ROWS = [
    _row(0, 100.0, 5.0, dataset_build_s=60.0, restore_s=1.0, boot_s=9.0, apply_s=1.0, warmup_s=8.0, measure_s=20.0),
    _row(1, 40.0, 7.0, restore_s=0.5, volume_s=0.5, boot_s=9.0, warm_cache_s=2.0, warmup_s=8.0, measure_s=19.0),
    _row(2, 70.0, None, dataset_build_s=65.0),                       # a build, then the node failed to boot
    _row(3, 45.0, 6.0, tag="confirm", boot_s=10.0, warmup_s=8.0, measure_s=20.0),
    {"number": 4, "tag": "tune", "state": "RUNNING", "started_at": 1400.0, "finished_at": None, "timings": None},
]


def test_the_phases_add_up_to_the_trials_totals_and_other_takes_the_rest():
    split = time_split(ROWS)
    assert split["trials"] == 4 and split["builds"] == 2
    assert split["machine_s"] == pytest.approx(100 + 40 + 70 + 45)
    assert sum(split["seconds"].values()) == pytest.approx(split["machine_s"])
    assert split["seconds"]["build"] == pytest.approx(125.0)
    assert split["seconds"]["restore"] == pytest.approx(2.0)
    assert split["seconds"]["boot"] == pytest.approx(29.0)
    assert split["seconds"]["warm-up"] == pytest.approx(26.0)
    assert split["seconds"]["measure"] == pytest.approx(59.0)
    assert split["seconds"]["other"] == pytest.approx(255 - 125 - 2 - 29 - 26 - 59)
    assert sum(split["shares"].values()) == pytest.approx(1.0)
    assert split["wall_s"] == pytest.approx(1345.0 - 1000.0)
    line = format_split(split)
    assert "4 trials (2 dataset builds)" in line and "build 49%" in line and "measure 23%" in line


def test_every_timing_a_trial_writes_falls_in_one_phase_or_other():
    named = [k for _, keys in PHASES for k in keys]
    assert len(named) == len(set(named))
    phases = trial_phases({"total_s": 10.0, "client_s": 7.0, "stop_s": 1.0, "measure_s": 5.0})
    assert phases["measure"] == 5.0 and phases["other"] == pytest.approx(5.0)   # client_s overlaps the phases
    assert trial_phases({"dataset_build_s": 3.0}) is None                        # no total: not counted
    assert time_split([])["trials"] == 0 and format_split(time_split([])).endswith("no trial with timings")


def test_the_best_against_machine_hours_counts_failed_and_confirmation_trials_time():
    curve = best_by_machine_time(ROWS, lambda r: r.get("value") if r["tag"] == "tune" else None, maximize=True)
    hours = [round(h * 3600) for h, _ in curve]
    assert hours == [100, 140, 210, 255, 255]   # the running trial adds nothing
    assert [v for _, v in curve] == [5.0, 7.0, 7.0, 7.0, 7.0]
    low = best_by_machine_time(ROWS, lambda r: r.get("value"), maximize=False)
    assert [v for _, v in low] == [5.0, 5.0, 5.0, 5.0, 5.0]


def test_a_confirmed_result_is_placed_at_the_hours_of_its_search_and_confirmation_only():
    confirm = {**_row(5, 30.0, 6.0, tag="compare", measure_s=20.0), "meta": {"group": "confirm-after-4:ycsb-b"}}
    later = {**_row(6, 500.0, 6.0, tag="compare", measure_s=20.0), "meta": {"group": "ycsb-b-x1:best+latest"}}
    # the search's 3 finished trials (100 + 40 + 70 s, the failed one too) and the confirmation's 30 s; neither the
    # comparison run after it nor a trial of another tag
    assert result_hours([*ROWS, confirm, later]) * 3600 == pytest.approx(240.0)
    assert result_hours([later]) == 0.0
    # a resumed search not confirmed again: its trials came after the result
    resumed = _row(7, 60.0, 8.0)
    assert result_hours([*ROWS, confirm, later, resumed]) * 3600 == pytest.approx(240.0)
    assert result_hours(ROWS) * 3600 == pytest.approx(210.0)   # no confirmation: the search's hours
    # on the axis of best_by_machine_time (every trial in the order started), where the confirmation ended: the
    # search, the trial tagged confirm, the confirmation; not the later comparison nor the resumed search
    assert hours_at_result([*ROWS, confirm, later, resumed]) * 3600 == pytest.approx(285.0)
    assert hours_at_result(ROWS) is None


def test_best_says_after_how_many_machine_hours_its_confirmed_result_came():
    from nosqltune.tuning.results import format_summary

    result = {"optimizer": "smac", "workloads": ["ycsb-b"], "objective": "throughput (maximize)", "unit": "ops/s",
              "trials": 3, "failed_trials": 0, "configurations": 3, "changed": {}, "speedup": 1.1,
              "result_hours": 2.125,
              "default": {"value": 100.0, "trials": 3},
              "best": {"value": 110.0, "trials": 3, "confirmed": True, "interval": [105.0, 115.0]}}
    text = format_summary(result)
    assert "+10.0% vs the default's mean in the same rounds, after 2.12 machine hours (search and confirmation)" \
        in text


# ------------------------------------------------------------------------------------------------ build pacing
def _shaped_space():
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace

    return TuningSpace(load_space("cassandra").subset(["compression", "compression_chunk_length", "sstable_format",
                                                       "bloom_filter_fp_chance", "concurrent_reads"]))


def _shaped_runner(space, build_s=150.0, run_s=50.0):
    """A trial's time as the harness spends it: a build the first time a dataset shape is asked for; the value
    from the shape and the threads (analytic, for the optimizer's sake)."""
    from nosqltune.tuning.loop import Outcome

    built = set()

    def run(config, workload):
        shape = space.dataset_shape(config)
        timings = {"total_s": run_s, "restore_s": 1.0}
        if shape not in built:
            built.add(shape)
            timings = {"total_s": run_s + build_s, "dataset_build_s": build_s, "restore_s": 1.0}
        value = 1000.0 * (1.2 if config["compression"] == "none" else 1.0) * (1.0 - abs(config["concurrent_reads"]
                                                                                       - 40) / 200)
        return Outcome("COMPLETE", summary={"throughput_ops_s": value}, timings=timings)
    return run


def test_the_pacer_builds_while_the_share_allows_and_otherwise_runs_the_nearest_built_data():
    from nosqltune.tuning.cost import BuildPacer

    space = _shaped_space()
    pacer = BuildPacer(space, 0.2, start=10)
    default = space.default()
    pacer.seen({**default, "compression": "none"}, [{"total_s": 5.0}])   # refused before it had data: no dataset
    pacer.seen(default, [{"total_s": 200.0, "dataset_build_s": 150.0, "restore_s": 1.0}])
    zstd = {**default, "compression": "ZstdCompressor", "compression_chunk_length": 64, "concurrent_reads": 64}
    # one build of 150 s against 55 s of other time over 2 trials, counted over 10: 300 s would pass 0.25 x 275 s
    assert not pacer.allows_build()
    assert pacer.place({**default, "compression": "none"})[0]["compression"] == default["compression"]
    placed, replaced = pacer.place(zstd)
    assert placed == {**zstd, "compression": default["compression"],
                      "compression_chunk_length": default["compression_chunk_length"]}
    assert replaced == {"compression": "ZstdCompressor", "compression_chunk_length": 64}
    # a bloom filter chance is brought to the restored big SSTables: it needs no build, nothing is replaced
    assert pacer.place({**default, "bloom_filter_fp_chance": 0.05}) == ({**default, "bloom_filter_fp_chance": 0.05},
                                                                        {})
    # on bti it shapes the data, and bti was never built: big it is, where the chance is brought to the data
    bti = {**default, "sstable_format": "bti", "bloom_filter_fp_chance": 0.05}
    assert pacer.place(bti) == ({**default, "bloom_filter_fp_chance": 0.05}, {"sstable_format": "bti"})
    for _ in range(30):   # trials that built nothing earn the next build: 150 + 150 <= 0.25 x (50 x 31 + 50)
        pacer.seen(default, [{"total_s": 50.0, "restore_s": 1.0}])
    assert pacer.allows_build() and pacer.place(zstd) == (zstd, {})
    pacer.seen(zstd, [{"total_s": 200.0, "dataset_build_s": 150.0, "restore_s": 1.0}])
    lz4_16 = {**default, "compression_chunk_length": 16}
    assert pacer.place(lz4_16)[0]["compression_chunk_length"] == default["compression_chunk_length"]   # nearest
    with pytest.raises(ValueError):
        BuildPacer(space, 1.0)


def test_a_paced_study_keeps_its_build_share_and_resumes_to_the_same_trials(tmp_path):
    from nosqltune.store import open_store
    from nosqltune.tuning.loop import TuneSpec, TuningLoop

    space = _shaped_space()

    def study(store, budget, share, runner=None):
        spec = TuneSpec(optimizer="random", workloads=["w"], budget=budget, seed=5,
                        objective={"metric": "throughput", "constraints": []}, build_share=share)
        loop = TuningLoop(store, store.study("paced" if share else "plain"), spec, space,
                          runner or _shaped_runner(space), workdir=tmp_path)
        loop.run()
        return store.trials(store.study("paced" if share else "plain"))

    store = open_store(str(tmp_path / "s.db"))
    plain = study(store, 40, None)
    paced = study(store, 40, 0.2)
    share = lambda rows: time_split(rows)["shares"]["build"]  # noqa: E731
    assert share(plain) > 0.5 and share(paced) < 0.3, (share(plain), share(paced))
    replaced = [r for r in paced if r["meta"].get("replaced")]
    assert time_split(paced)["replaced"] == len(replaced) and f"{len(replaced)} suggestions run on data built " \
        "before" in format_split(time_split(paced))
    assert replaced and all(space.dataset_shape(r["config"]) in {space.dataset_shape(o["config"]) for o in paced
                                                                 if o["number"] < r["number"]} for r in replaced)
    # the same study stopped after 20 trials and resumed: the same configurations, replaced the same way
    resumed_store, datasets = open_store(str(tmp_path / "r.db")), _shaped_runner(space)   # datasets kept between
    study(resumed_store, 20, 0.2, datasets)
    again = study(resumed_store, 40, 0.2, datasets)
    assert [(r["config"], r["meta"].get("replaced")) for r in again] == \
        [(r["config"], r["meta"].get("replaced")) for r in paced]


@pytest.mark.parametrize("name", ["smac", "gp", "rafiki"])
def test_a_model_learns_the_configuration_the_pacer_ran_not_the_one_it_asked(tmp_path, name):
    from nosqltune.optimizers import make_optimizer

    space = _shaped_space()
    opt = make_optimizer(name, space, seed=3, budget=20, workloads=["w"], workdir=tmp_path)
    try:
        asked = opt.ask()
        ran = {**asked.config, "compression": "none" if asked.config["compression"] != "none" else "LZ4Compressor"}
        opt.tell_ran(asked, ran, 2.5)
        if name == "smac":
            rh = opt.smac.runhistory
            told = [(dict(rh.get_config(k.config_id)), v.cost) for k, v in rh.items() if v.status.name == "SUCCESS"]
            assert [(opt._to_config(c), cost) for c, cost in told] == [(space.canonical(ran), 2.5)]
            assert [opt._to_config(c) for c in rh.get_running_configs()] == [asked.config]   # left unanswered
            assert len({k.seed for k in rh.keys()}) == 1   # on the seed of SMAC's own trials: compared with them
        elif name == "gp":
            assert opt._configs == [space.canonical(ran)] and opt._costs == [2.5] and not opt._pending
            assert space.key(asked.config) in opt._seen()   # never suggested again
        else:
            assert list(opt._observed.values()) == [(space.canonical(ran), 2.5)] and not opt._pending
            assert opt._taken(asked.config)
        # it goes on asking, and neither for what it asked nor for what ran
        later = [space.key(opt.ask().config) for _ in range(5)]
        assert space.key(asked.config) not in later and space.key(ran) not in later
    finally:
        opt.close()


def test_a_paced_smac_study_resumes_to_the_same_trials(tmp_path):
    from nosqltune.store import open_store
    from nosqltune.tuning.loop import TuneSpec, TuningLoop

    space = _shaped_space()

    def study(store, budget, runner):
        spec = TuneSpec(optimizer="smac", workloads=["w"], budget=budget, seed=5,
                        objective={"metric": "throughput", "constraints": []}, build_share=0.2)
        TuningLoop(store, store.study("paced"), spec, space, runner, workdir=tmp_path).run()
        return store.trials(store.study("paced"))

    whole = study(open_store(str(tmp_path / "s.db")), 16, _shaped_runner(space))
    assert any(r["meta"].get("replaced") for r in whole)
    # the same study stopped in its ninth trial (SMAC's initial design follows the budget: the same budget resumes)
    resumed_store, datasets, calls = open_store(str(tmp_path / "r.db")), _shaped_runner(space), []

    def stopping(config, workload):
        calls.append(1)
        if len(calls) == 9:
            raise KeyboardInterrupt
        return datasets(config, workload)

    with pytest.raises(KeyboardInterrupt):
        study(resumed_store, 16, stopping)
    again = study(resumed_store, 16, datasets)
    ran = lambda rows: [(r["config"], r["meta"].get("replaced")) for r in rows  # noqa: E731
                        if r["state"] == "COMPLETE"]
    assert ran(again) == ran(whole)


def test_a_paced_study_stored_before_pacer_tells_resumes_telling_the_projection():
    from nosqltune.tuning.loop import TuneSpec

    spec = TuneSpec(optimizer="smac", workloads=["w"], budget=60, objective={"metric": "throughput"}, build_share=0.2)
    assert spec.pacer_tells == "ran" and TuneSpec.from_stored(spec.to_dict()).pacer_tells == "ran"
    before = {k: v for k, v in spec.to_dict().items() if k != "pacer_tells"}   # as the first paced study stored it
    assert TuneSpec.from_stored(before).pacer_tells == "projection"
    assert TuneSpec.from_stored({**before, "build_share": None}).pacer_tells == "ran"   # not paced: no matter
    with pytest.raises(ValueError, match="pacer_tells"):
        TuneSpec(optimizer="smac", workloads=["w"], budget=6, objective={}, pacer_tells="both")
