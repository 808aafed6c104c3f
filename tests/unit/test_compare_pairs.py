"""`analysis.compare` entries have one parser (analysis/stats/compare_pairs.py): `pathdiv
check` and the analysis' spec accept and refuse the same entries, and say so alike."""

from __future__ import annotations

import pytest

from pathdiv.analysis.stats.compare_pairs import ALLOWED, compare_pair, compare_pairs
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.experiments.config.load import ConfigError, validate

GOOD = [["ps-mptcp", "ecmp-mptcp"],
        ["ps-mptcp", "ecmp-mptcp", {"host": "vanilla"}],
        ["rb", "vanilla", {"switching": ["ps-mptcp", "ecmp-mptcp"]}]]
BAD = [
    ["ps-mptcp"],  # one level
    ["a", "b", {"host": "vanilla"}, "extra"],  # four
    ["a", 7],  # not a name
    ["a", ""],  # empty name
    ["a", "x" * 65],  # too long
    ["a", "b", {}],  # holds nothing
    ["a", "b", []],  # not a mapping
    ["a", "b", {"host": []}],  # no level
    ["a", "b", {"host": [True]}],  # YAML's `on`/`yes` is no level name
    ["a", "b", {f"f{i}": "x" for i in range(9)}],  # more than 8 factors
    "ps-mptcp,ecmp-mptcp",  # a string
]


def test_an_entry_parses_to_levels_and_what_it_holds_and_its_parsed_form_again():
    assert [compare_pair(p) for p in GOOD] == [
        ("ps-mptcp", "ecmp-mptcp", ()),
        ("ps-mptcp", "ecmp-mptcp", (("host", ("vanilla",)),)),
        ("rb", "vanilla", (("switching", ("ps-mptcp", "ecmp-mptcp")),))]
    parsed = compare_pairs(GOOD)
    assert compare_pairs(parsed) == parsed  # a spec rebuilt from its own fields
    spec = AnalysisSpec(compare=tuple(GOOD))
    assert spec.compare == parsed
    assert AnalysisSpec(compare=spec.compare).compare == parsed
    assert [compare_pair(p) for p in spec.compare_as_config()] == list(parsed)


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_check_and_the_spec_refuse_the_same_entry_naming_key_value_and_allowed(bad):
    with pytest.raises(ValueError, match="is not a pair"):
        compare_pair(bad)
    with pytest.raises(ValueError) as spec_error:
        AnalysisSpec(compare=(GOOD[0], bad))
    with pytest.raises(ConfigError) as check_error:
        validate({"analysis": {"compare": [GOOD[0], bad]}})
    for said in (str(spec_error.value), str(check_error.value)):
        assert "analysis.compare: " in said and " is not allowed; expected " in said
        assert ALLOWED in said and f"entry 1, {bad!r}, is not one" in said


def test_at_most_twenty_entries_both_ways():
    many = [["ps-mptcp", "ecmp-mptcp"]] * 21
    with pytest.raises(ValueError, match="at most 20 pairs"):
        AnalysisSpec(compare=tuple(many))
    with pytest.raises(ConfigError, match=r"analysis.compare: .* is not allowed; expected a "
                                          "list of at most 20 pairs"):
        validate({"analysis": {"compare": many}})
    assert len(compare_pairs(many[:20])) == 20
