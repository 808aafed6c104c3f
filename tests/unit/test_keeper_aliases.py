"""A network built for TCP has no alias addresses: an MPTCP run cannot reuse it."""

from __future__ import annotations

from pathdiv.experiments.config.load import load
from pathdiv.experiments.execute.keeper import missing_aliases
from tests.conftest import REPO


def config(transport: str, subflows: int = 4):
    """A run's resolved config (the factor levels of noisy.yaml set the transport)."""
    return load(REPO / "configs/class-probe.yaml").with_overrides(
        [("hosts.transport", transport), ("hosts.subflows", subflows)])


def test_a_tcp_network_cannot_serve_mptcp_subflows_but_the_other_way_round_it_can():
    tcp, mptcp = config("tcp"), config("mptcp")
    assert tcp.topology().aliases_per_host == 0 and mptcp.topology().aliases_per_host == 3
    why = missing_aliases(tcp.topology(), mptcp)
    assert "needs 3 alias address(es)" in why and "built with 0" in why
    assert missing_aliases(mptcp.topology(), tcp) == ""
    assert missing_aliases(mptcp.topology(), config("mptcp", 2)) == ""
    assert missing_aliases(config("mptcp", 2).topology(), mptcp) != ""
