"""Workload specs: the YCSB core workloads as YCSB defines them, read-ratio mixes, properties files."""

import pytest

from nosqltune.workloads.spec import WorkloadError, make_workload, standard_workloads


@pytest.mark.parametrize("name, read, update, scan, insert, rmw, dist", [
    ("ycsb-a", 0.5, 0.5, 0, 0, 0, "zipfian"),
    ("ycsb-b", 0.95, 0.05, 0, 0, 0, "zipfian"),
    ("ycsb-c", 1, 0, 0, 0, 0, "zipfian"),
    ("ycsb-d", 0.95, 0, 0, 0.05, 0, "latest"),
    ("ycsb-e", 0, 0, 0.95, 0.05, 0, "zipfian"),
    ("ycsb-f", 0.5, 0, 0, 0, 0.5, "zipfian"),
])
def test_core_workloads_match_ycsb(name, read, update, scan, insert, rmw, dist):
    p = make_workload(name).properties("run")
    assert (p["readproportion"], p["updateproportion"], p["scanproportion"], p["insertproportion"],
            p.get("readmodifywriteproportion", 0), p["requestdistribution"]) == (read, update, scan, insert, rmw, dist)
    assert p["workload"] == "site.ycsb.workloads.CoreWorkload" and p["readallfields"] is True


def test_workload_e_scan_lengths():
    p = make_workload("ycsb-e").properties("run")
    assert (p["maxscanlength"], p["scanlengthdistribution"]) == (100, "uniform")


def test_the_six_core_workloads_and_the_write_heavy_mix_are_listed():
    assert sorted(standard_workloads()) == ["write90"] + [f"ycsb-{c}" for c in "abcdef"]
    p = make_workload("write90").properties("run")
    assert (p["readproportion"], p["updateproportion"], p["insertproportion"]) == (0.1, 0.45, 0.45)


def test_scenario_sizes_are_defaults_below_a_properties_file_and_flags(tmp_path):
    props = tmp_path / "mine.properties"
    props.write_text("readproportion=1\nrecordcount=777\n")
    scenario = {"records": 2_000_000, "operations": 60_000}
    w = make_workload(str(props), defaults=scenario)
    assert (w.records, w.operations) == (777, 60_000)      # the file's records, the scenario's operations
    assert make_workload(str(props), defaults=scenario, records=5).records == 5    # a flag wins over both
    assert make_workload("ycsb-a", defaults=scenario).records == 2_000_000
    assert "99.9" in make_workload("ycsb-a").properties("run")["hdrhistogram.percentiles"].split(",")


def test_sizes_and_phases():
    w = make_workload("ycsb-a", records=5000, operations=7000, threads=8, warmup_operations=1000)
    load, run = w.properties("load"), w.properties("run")
    assert (load["recordcount"], load["operationcount"], load["threadcount"]) == (5000, 5000, 8)
    assert "warmup.operations" not in load
    assert (run["operationcount"], run["warmup.operations"]) == (7000, 1000)


def test_read_ratio_mix_and_names():
    w = make_workload(None, read_ratio=0.7, distribution="uniform")
    p = w.properties("run")
    assert (p["readproportion"], p["updateproportion"], p["requestdistribution"]) == (0.7, 0.3, "uniform")
    assert make_workload("read90").properties("run")["readproportion"] == 0.9
    assert make_workload("ycsb-b", distribution="uniform").properties("run")["requestdistribution"] == "uniform"


def test_properties_file(tmp_path):
    f = tmp_path / "mine.properties"
    f.write_text("# custom\nreadproportion=0.8\nupdateproportion=0.2\nrequestdistribution=latest\nrecordcount=2000\n")
    w = make_workload(str(f), operations=500)
    assert w.name == "mine" and w.records == 2000 and w.operations == 500
    assert w.properties("run")["requestdistribution"] == "latest"


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "ycsb-z"}, "unknown workload"),
    ({"name": None, "read_ratio": 1.5}, "within 0..1"),
    ({"name": None, "read_ratio": 0.5, "distribution": "gaussian"}, "--distribution"),
    ({"name": "ycsb-a", "records": 0}, "positive"),
])
def test_bad_input_has_one_line_errors(kwargs, message):
    name = kwargs.pop("name")
    with pytest.raises(WorkloadError, match=message) as info:
        make_workload(name, **kwargs)
    assert "\n" not in str(info.value)
