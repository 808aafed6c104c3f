"""Let go of the sender at the first switch: one edit to the C that p4c-ebpf writes.

A host's TCP counts every packet it sent as its own until the packet's buffer is freed
or handed over (`skb_orphan`): TCP Small Queues then holds back a socket that has more
than about two packets (or a millisecond of its pacing rate) not yet let go of, which on
a real host means "still in my own qdisc or NIC ring". Between network namespaces the
packet buffer itself travels: veth does not let go of the socket, and neither does a tc
program's `bpf_redirect`. On the nftables plane the first switch's IP stack does
(`ip_rcv_core` orphans every packet it receives), and bmv2 copies each packet out of the
kernel; but on the p4-ebpf plane a packet stayed charged to its sender across the whole
fabric until the receiving host took it, so every sender throttled itself by what waited
in remote switch queues: a back-pressure no wire gives.

Measured on this machine's kernel (docs/p4.md, "Why the noisy plan differed at first";
benchmarks/incast_fairness.py): in a 7-to-1 incast with synchronised starts, senders
were charged 18-50 KB each on p4-ebpf and 0 on the nftables plane, and the receivers'
shares were less even (Jain's index 0.55-0.95 against 0.88-0.99); the nftables plane's
routes forwarded by a plain `bpf_redirect` program showed the same (9 KB, 0.54-0.74), so
the redirect, not P4, was the cause.

The edit: where the PSA ingress hands a packet to its egress port, a packet that still
belongs to a local socket (only at the first switch after its sender; not the dummy
socket of a test run) is cloned to the port instead (a clone belongs to no socket) and
the original is dropped at ingress, which frees it and releases the sender, as the
nftables plane's IP stack does. The drop is the ingress hook's, not a queue's: it is
counted by the clsact qdisc, which the fidelity monitor does not read (it reads root
qdiscs), and a switch still sends exactly what it received less its queue drops.
"""

from __future__ import annotations

# What p4c-ebpf's PSA kernel target ends tc_ingress_func with (backends/ebpf/psa,
# 1.2.5): the unicast hand-over to the chosen port.
REDIRECT = "return bpf_redirect(ostd.egress_port, 0);"
# The dummy socket BPF_PROG_TEST_RUN gives the frames it runs (net/bpf/test_run.c) owns
# no real packet, and test runs must take the plain redirect for tests to see the
# forwarding decision: it is a full socket of type 0 (it has no `struct socket`; its
# family is set from the frame), where every socket a host sends from has a type
# (stream, datagram, raw, packet). A request or time-wait socket is not a full socket:
# its few packets (SYN-ACK, the last ACK) are not what TCP Small Queues counts.
RELEASE = ("{ /* pathdiv: let go of the sender at the first switch (release.py) */\n"
           "        struct bpf_sock *pd_sk = skb->sk;\n"
           "        if (pd_sk)\n"
           "            pd_sk = bpf_sk_fullsock(pd_sk);\n"
           "        if (pd_sk && pd_sk->type != 0) {\n"
           "            bpf_clone_redirect(skb, ostd.egress_port, 0);\n"
           "            return TC_ACT_SHOT;\n"
           "        }\n"
           "    }\n"
           "    " + REDIRECT)


class ReleaseEditError(ValueError):
    """The generated C does not end its ingress the way this edit expects."""


def release_senders(c_source: str) -> str:
    """`c_source` with its unicast redirect releasing local senders first.

    Exactly one hand-over must be found: another p4c version's output is refused with
    a message, never compiled half-edited."""
    count = c_source.count(REDIRECT)
    if count != 1:
        raise ReleaseEditError(
            f"p4c-ebpf's C has {count} copies of `{REDIRECT}` where pathdiv expects one "
            "(experiments/dataplane/p4ebpf/release.py); this p4c version writes its "
            "ingress differently: adapt the edit to it")
    return c_source.replace(REDIRECT, RELEASE)
