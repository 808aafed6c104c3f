"""A seven-instruction BPF program that zeroes `skb->cb` before a switch's P4 program runs.

p4c-ebpf's PSA programs keep their per-packet state in the 20 bytes of `skb->cb` a tc
program may use (`struct psa_global_metadata`, backends/ebpf/runtime/psa.h) and read it
before writing it: a packet with `pass_to_kernel` set is handed to the switch's own
network stack instead of being forwarded. The kernel does not clear that area when a
packet crosses a veth pair, and the qdiscs a packet met on the way keep their own state
there (netem writes its 8-byte send time, overlapping `pass_to_kernel`), so a delayed
packet would arrive with stale bytes in it. p4lang's loader leaves that to its XDP helper
path; pathdiv attaches this program first on every switch port (tc filter preference 1,
returning TC_ACT_UNSPEC so the next filter, the P4 program, runs) instead.

Encoding (include/uapi/linux/bpf.h): each instruction is code (8 bits), dst and src
registers (4 bits each), a signed 16-bit offset and a signed 32-bit immediate; R1 holds
the `struct __sk_buff *` context, whose `cb[5]` words start at byte 48.
"""

from __future__ import annotations

import struct

SKB_CB_OFFSET = 48  # offsetof(struct __sk_buff, cb)
SKB_CB_WORDS = 5
TC_ACT_UNSPEC = -1
BPF_MOV64_IMM = 0xB7  # BPF_ALU64 | BPF_MOV | BPF_K
BPF_STX_W = 0x63  # BPF_STX | BPF_MEM | BPF_W
BPF_EXIT = 0x95  # BPF_JMP | BPF_EXIT
R0, R1, R2 = 0, 1, 2
NAME = "pathdiv_clr_cb"  # at most 15 characters (BPF_OBJ_NAME_LEN)


def insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, dst | (src << 4), off, imm)


def clear_cb_program() -> bytes:
    """r2 = 0; skb->cb[0..4] = r2; return TC_ACT_UNSPEC."""
    body = insn(BPF_MOV64_IMM, R2, imm=0)
    for word in range(SKB_CB_WORDS):
        body += insn(BPF_STX_W, R1, R2, off=SKB_CB_OFFSET + 4 * word)
    return body + insn(BPF_MOV64_IMM, R0, imm=TC_ACT_UNSPEC) + insn(BPF_EXIT)
