"""The studies' claims as data: every figure of seed 001 is stored, each claim is scoped
as the paper scopes it, and a malformed reference names what is wrong."""

import pandas as pd
import pytest

from pathdiv.analysis.stats.claims import (
    ReferenceError,
    available,
    in_study,
    load_reference,
    parse_reference,
    scoped,
    side_rows,
)


@pytest.fixture(scope="module")
def seed001():
    return load_reference("seed001")


def _claim(ref, claim_id):
    (claim,) = [c for c in ref.claims if c.id == claim_id]
    return claim


def test_shipped_references_are_listed():
    assert {"seed000", "seed001"} <= set(available())


def test_seed001_holds_all_of_table_iv_the_ve_figures_and_its_directions(seed001):
    cells = seed001.of_kind("excess")
    assert len(cells) == 24
    by_cell = {(c.where[0]["condition"][0], c.where[0]["flow_type"][0],
                c.compare[0][0]["switching"]): c.paper_pct for c in cells}
    assert by_cell[("silent", "query", "static-tcp")] == 8.99
    assert by_cell[("noisy", "long", "ps-mptcp")] == 58.10
    assert by_cell[("noisy", "short", "ps-tcp")] == 43.71
    figures = sorted(c.paper_pct for c in seed001.of_kind("figure"))
    assert figures == [-1.86, -1.70, 0.15, 1.01, 1.38, 1.65, 4.27, 21.84]
    assert len(seed001.directions()) >= 16
    assert all(c.section for c in seed001.claims)


def test_seed001_says_where_it_is_silent(seed001):
    silent = " ".join(s["item"] for s in seed001.silent_on)
    assert "repetitions" in silent and "queue sizes" in silent


def test_juggler_claims_are_scoped_to_mptcp_levels_and_named_in_our_terms(seed001):
    claim = _claim(seed001, "juggler-slower-silent")
    assert claim.within == {"switching": ("ecmp-mptcp", "ps-mptcp")}
    assert claim.compare[0] == ({"host": "vanilla"}, {"host": "juggler"})
    assert claim.applies_to({"condition": "silent", "flow_type": "query"})
    assert claim.applies_to({"condition": "silent", "flow_type": "short"})
    assert not claim.applies_to({"condition": "silent", "flow_type": "long"})
    assert not claim.applies_to({"condition": "noisy", "flow_type": "short"})


def test_a_claim_over_two_named_clusters_applies_to_those_only(seed001):
    claim = _claim(seed001, "juggler-no-throughput-gain")
    hits = [(c, f) for c in ("silent", "noisy") for f in ("query", "short", "long")
            if claim.applies_to({"condition": c, "flow_type": f})]
    assert hits == [("silent", "query"), ("noisy", "long")]


def test_spraying_claims_compare_mptcp_levels_only(seed001):
    for claim_id in ("spray-raises-utilisation", "spray-never-significantly-worse"):
        claim = _claim(seed001, claim_id)
        assert claim.compare == (({"switching": "ps-mptcp"}, {"switching": "ecmp-mptcp"}),)
        assert claim.where == ({},)  # every cluster: "in all significant cases"


def test_the_study_universe_drops_levels_the_study_did_not_have(seed001):
    data = pd.DataFrame({"switching": ["ecmp-tcp", "ps-mptcp", "ps-mptcp"],
                         "host": ["vanilla", "rb", "vanilla"], "fct_s": [1.0, 2.0, 3.0]})
    kept = in_study(seed001, data)
    assert list(kept.fct_s) == [3.0]
    claim = _claim(seed001, "fct-better-without-juggler")
    assert list(scoped(claim, data).fct_s) == [2.0, 3.0]
    assert list(side_rows(data, {"switching": "ps-mptcp", "host": "rb"}).fct_s) == [2.0]
    assert side_rows(data, {"transport": "tcp"}).empty


def test_seed000_scopes_rb_to_concurrent_mptcp_flows():
    claims = load_reference("seed000").claims
    assert {c.metrics for c in claims} == {("fct_s",), ("burstiness",), ("retrans_pct",)}
    for claim in claims:
        assert claim.kind == "better"
        assert claim.compare[0] == ({"host": "rb"}, {"host": "vanilla"})
        assert claim.within == {"switching": ("ecmp-mptcp", "ps-mptcp")}
        assert claim.where == ({"condition": ("noisy",)},)


def _minimal(**claim):
    base = {"id": "x", "section": "V", "kind": "better", "claim": "a beats b",
            "compare": [[{"switching": "a"}, {"switching": "b"}]], "metrics": ["fct_s"]}
    return {"name": "t", "study": "t", "source": "t", "claims": [{**base, **claim}]}


def test_malformed_references_name_the_problem():
    with pytest.raises(ReferenceError, match="kind"):
        parse_reference(_minimal(kind="bigger"))
    with pytest.raises(ReferenceError, match="paper_pct"):
        parse_reference(_minimal(kind="figure"))
    with pytest.raises(ReferenceError, match=r"compare\[0\]"):
        parse_reference(_minimal(compare=[[{"switching": "a"}]]))
    bad_level = {**_minimal(), "levels": {"switching": {"a": "a"}}}
    with pytest.raises(ReferenceError, match="not one of the study's levels"):
        parse_reference(bad_level)
    with pytest.raises(ReferenceError, match="used twice"):
        data = _minimal()
        data["claims"] = data["claims"] * 2
        parse_reference(data)
    with pytest.raises(ReferenceError, match="choose one of"):
        load_reference("seed9")
