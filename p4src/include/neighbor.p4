/* pathdiv: the neighbour's MAC for the port a packet leaves by. Links are point
 * to point, so the port names the next hop. v1model applies it in egress; PSA
 * for eBPF in ingress, right after the port is chosen (its egress pipeline is
 * left empty, so each packet runs one program per switch). The absolute names
 * keep the control-plane names of both architectures the same. */
#ifndef PATHDIV_NEIGHBOR_P4
#define PATHDIV_NEIGHBOR_P4

control PathdivNeighbor(inout headers_t hdr, in port_id_t egress_port) {
    @name(".PathdivEgress.set_macs")
    action set_macs(mac_addr_t src, mac_addr_t dst) {
        hdr.ethernet.src_addr = src;
        hdr.ethernet.dst_addr = dst;
    }

    @name(".PathdivEgress.neighbor_mac")
    table neighbor_mac {
        key = { egress_port: exact; }
        actions = { set_macs; NoAction; }
        default_action = NoAction();
        size = NUM_PORTS;
    }

    apply {
        neighbor_mac.apply();
    }
}

#endif /* PATHDIV_NEIGHBOR_P4 */
