"""Open-loop Poisson traffic: seeded arrivals whose offered load meets the target, size
distributions from the literature or a file, and the workload keys' error text."""

from __future__ import annotations

import pytest

from pathdiv.experiments.config.load import ConfigError, validate
from pathdiv.experiments.config.sizes import CdfError, read_cdf
from pathdiv.experiments.plan.arrivals import (
    DATAMINING,
    WEBSEARCH,
    arrivals,
    cdf_at,
    mean_size,
    offered_load,
    sample,
    size_cdf,
)
from pathdiv.topologies.fattree import FatTree

HOSTS = FatTree(4).hosts


def problems(raw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    return info.value.problems


@pytest.mark.parametrize("load", [0.3, 0.5, 0.7])
def test_offered_load_is_within_5_percent_of_the_target(load):
    duration = 2000.0  # ~14,000-33,000 web-search flows over 16 hosts
    flows = arrivals(HOSTS, 20, WEBSEARCH, load, duration, seed=1)
    assert offered_load(flows, len(HOSTS), 20, duration) == pytest.approx(load, rel=0.05)


def test_datamining_cut_at_a_max_size_meets_its_load_too():
    cdf = size_cdf("datamining", 10_000_000)
    assert max(x for x, _ in cdf) == 10_000_000
    flows = arrivals(HOSTS, 20, cdf, 0.5, 2000, seed=2)
    assert offered_load(flows, len(HOSTS), 20, 2000) == pytest.approx(0.5, rel=0.05)


def test_arrivals_are_seeded_ordered_and_never_to_oneself():
    a = arrivals(HOSTS, 20, WEBSEARCH, 0.5, 30, seed=4)
    assert a == arrivals(HOSTS, 20, WEBSEARCH, 0.5, 30, seed=4)
    assert a != arrivals(HOSTS, 20, WEBSEARCH, 0.5, 30, seed=5)
    assert [f.at_s for f in a] == sorted(f.at_s for f in a)
    assert [f.flow_id for f in a] == list(range(len(a)))
    assert all(f.client != f.server and 0 <= f.at_s < 30 for f in a)
    assert {f.client for f in a} == set(HOSTS)


def test_partners_fix_each_clients_server():
    partners = {h: HOSTS[(i + 1) % len(HOSTS)] for i, h in enumerate(HOSTS)}
    flows = arrivals(HOSTS, 20, WEBSEARCH, 0.3, 50, 1, "background", partners)
    assert all(f.server == partners[f.client] for f in flows)


def test_distributions_sample_by_inverse_transform():
    assert mean_size(WEBSEARCH) == pytest.approx(1_711_250)
    assert sample(WEBSEARCH, 0.0) == 1  # the first point is 0 bytes: at least one byte
    assert sample(WEBSEARCH, 0.5) == 73_077  # 50KB + 30KB · (0.5 - .40) / (.53 - .40)
    assert sample(DATAMINING, 0.999) == pytest.approx(850_000_000, rel=1e-6)
    assert cdf_at(WEBSEARCH, 20_000) == pytest.approx(0.2)


def test_a_cdf_file_in_percent_or_fractions(tmp_path):
    f = tmp_path / "cache.cdf"
    f.write_text("# memcached-like\n100 0\n1000, 50\n10000 100\n")
    assert read_cdf(f) == [(100, 0), (1000, 0.5), (10000, 1.0)]
    bad = tmp_path / "bad.txt"
    bad.write_text("100 0.5\n50 1\n")
    with pytest.raises(CdfError, match="must not decrease"):
        read_cdf(bad)


def test_workload_keys_are_validated():
    msgs = problems({"workload": {"pattern": "poison", "load": 1.5, "sizes": "webserach",
                                  "duration_s": 0, "max_size": "huge",
                                  "background": {"pattern": "bursty", "load": 0},
                                  "rpc": {"rate_per_s": -1, "connections": 0,
                                          "request_size": "x", "port": 0}}})
    assert msgs == [
        "workload.pattern: 'poison' is not allowed; choose one of silent, noisy, incast, "
        "permutation, poisson",
        "workload.load: 1.5 is not allowed; expected a fraction of the link rate, "
        "0 < load <= 1",
        "workload.sizes: 'webserach' is not allowed; expected websearch, datamining or a "
        "CDF file path ending in .txt, .cdf or .csv",
        "workload.max_size: 'huge' is not allowed; expected a positive size such as 10KB, "
        "500KB, 25MB or 1MiB (KB = 1000 bytes)",
        "workload.duration_s: 0 is not allowed; expected a number > 0 and <= 3600 (s)",
        "workload.background.pattern: 'bursty' is not allowed; choose one of none, "
        "poisson, permutation",
        "workload.background.load: 0 is not allowed; expected a fraction of the link "
        "rate, 0 < load <= 1",
        "workload.rpc.rate_per_s: -1 is not allowed; expected a number >= 0 and <= 10000 "
            "(requests/s)",
        "workload.rpc.connections: 0 is not allowed; expected an integer >= 1 and <= 64",
        "workload.rpc.request_size: 'x' is not allowed; expected a positive size such as "
        "10KB, 500KB, 25MB or 1MiB (KB = 1000 bytes)",
        "workload.rpc.port: 0 is not allowed; expected a TCP port 1..65535",
    ]


def test_background_flows_follow_their_pattern():
    from pathdiv.experiments.traffic.workload import background_flows, poisson_flows

    none = validate({})
    assert background_flows(none, HOSTS, 1, 60) == []
    perm = validate({"workload": {"background": {"pattern": "permutation", "load": 0.2}}})
    flows = background_flows(perm, HOSTS, 1, 600)
    partner = {f.client: f.server for f in flows}
    assert all(f.server == partner[f.client] != f.client for f in flows)
    assert {f.size_bytes for f in flows} == {1_000_000}
    assert offered_load(flows, len(HOSTS), 20, 600) == pytest.approx(0.2, rel=0.05)
    web = validate({"workload": {"pattern": "poisson", "load": 0.4, "max_size": "1MB",
                                 "duration_s": 5}})
    assert max(f.size_bytes for f in poisson_flows(web, HOSTS, 3)) <= 1_000_000
    assert problems({"workload": {"pattern": "poisson"},
                     "topology": {"links": {"host": {"bw_mbps": None}}}}) == [
        "topology.links.host.bw_mbps: null (unshaped) leaves no link rate to offer "
        "workload.load or workload.background.load against; set a rate"]
