"""The edit that lets a packet's sender go at the first p4-ebpf switch (release.py)."""

import pytest

from pathdiv.experiments.dataplane.p4ebpf.release import (
    REDIRECT,
    ReleaseEditError,
    release_senders,
)

INGRESS_END = """    skb->priority = ostd.class_of_service;
    if (!ostd.drop && ostd.egress_port == 0) {
        compiler_meta__->pass_to_kernel = true;
        return bpf_redirect(skb->ifindex, BPF_F_INGRESS);
    }
    return bpf_redirect(ostd.egress_port, 0);
}
"""


def test_a_packet_of_a_local_socket_is_cloned_to_its_port_and_the_original_dropped() -> None:
    out = release_senders(INGRESS_END)
    release = out.index("if (pd_sk && pd_sk->type != 0)")  # a full socket, not a test run's
    clone = out.index("bpf_clone_redirect(skb, ostd.egress_port, 0);")
    shot = out.index("return TC_ACT_SHOT;")
    redirect = out.index(REDIRECT)
    assert release < clone < shot < redirect  # other packets are redirected as before
    assert "return bpf_redirect(skb->ifindex, BPF_F_INGRESS);" in out  # to-kernel path kept
    assert out.count("bpf_redirect(ostd.egress_port, 0)") == 1


@pytest.mark.parametrize("source", ["int f(void) { return 0; }", INGRESS_END * 2])
def test_a_generated_ingress_that_does_not_end_as_expected_is_refused(source: str) -> None:
    with pytest.raises(ReleaseEditError, match=r"release\.py"):
        release_senders(source)
