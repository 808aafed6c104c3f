/* pathdiv: ingress. Answer ARP for the switch's address, route IPv4 by longest
 * prefix to a port or to an equal-cost group, let the program's SelectMember
 * control pick the group member, decrement TTL, count every received packet
 * (v1model; on PSA for eBPF the interfaces' own counters count).
 *
 * The including program defines, before this file:
 *   control SelectMember(inout headers_t hdr, inout metadata_t meta, PATHDIV_INGRESS_STD)
 * which sets meta.member in [0, meta.members). The architecture's words
 * (PATHDIV_INGRESS_STD, INGRESS_PORT, SEND_TO, DROP_PACKET, PARSER_ERROR)
 * are defined in arch.p4.
 */
#ifndef PATHDIV_INGRESS_P4
#define PATHDIV_INGRESS_P4

control PathdivIngress(inout headers_t hdr,
                       inout metadata_t meta,
                       PATHDIV_INGRESS_STD) {
#ifndef PATHDIV_PSA
    /* Every packet that arrives on a port, whatever happens to it next. */
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx;
#else
    PathdivNeighbor() neighbor;
#endif

    SelectMember() select_member;

    action drop() {
        DROP_PACKET();
    }

    /* Reply out of the port the request came in on, as that port's MAC. */
    action arp_reply(mac_addr_t port_mac) {
        hdr.arp.oper = ARP_OPER_REPLY;
        hdr.arp.target_hw_addr = hdr.arp.sender_hw_addr;
        ipv4_addr_t asked = hdr.arp.target_proto_addr;
        hdr.arp.target_proto_addr = hdr.arp.sender_proto_addr;
        hdr.arp.sender_proto_addr = asked;
        hdr.arp.sender_hw_addr = port_mac;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = port_mac;
        SEND_TO(INGRESS_PORT);
    }

    action forward(port_id_t port) {
        SEND_TO(port);
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action set_group(group_id_t group, member_t members, seed_t seed) {
        meta.group = group;
        meta.members = members;
        meta.seed = seed;
    }

    table arp_responder {
        key = {
            INGRESS_PORT: exact;
            hdr.arp.target_proto_addr: exact;
        }
        actions = { arp_reply; drop; }
        default_action = drop();
        size = NUM_PORTS;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { forward; set_group; drop; }
        default_action = drop();
        size = 4096;
    }

    table group_member {
        key = {
            meta.group: exact;
            meta.member: exact;
        }
        actions = { forward; drop; }
        default_action = drop();
        size = MAX_GROUPS * NUM_PORTS;
    }

    apply {
#ifndef PATHDIV_PSA
        port_rx.count((port_index_t) standard_metadata.ingress_port);
#endif
        if (PARSER_ERROR) {  /* a bad IPv4 checksum */
            drop();
        } else if (hdr.arp.isValid()) {
            if (hdr.arp.oper == ARP_OPER_REQUEST && hdr.arp.htype == ARP_HTYPE_ETHERNET
                    && hdr.arp.ptype == ARP_PTYPE_IPV4) {
                arp_responder.apply();
            } else {
                drop();
            }
        } else if (hdr.ipv4.isValid() && hdr.ipv4.ttl > TTL_EXPIRED) {
            meta.members = 0;
            ipv4_lpm.apply();
            if (meta.members != 0) {
                select_member.apply(hdr, meta, PATHDIV_INGRESS_ARGS);
                group_member.apply();
            }
#ifdef PATHDIV_PSA
            if (!ostd.drop) {
                neighbor.apply(hdr, (port_id_t) ostd.egress_port);
            }
#endif
        } else {
            drop();
        }
    }
}

#endif /* PATHDIV_INGRESS_P4 */
