/* pathdiv: ingress. Answer ARP for the switch's address, route IPv4 by longest
 * prefix to a port or to an equal-cost group, let the program's SelectMember
 * control pick the group member, decrement TTL, count every received packet.
 *
 * The including program defines, before this file:
 *   control SelectMember(inout headers_t hdr, inout metadata_t meta,
 *                        inout standard_metadata_t standard_metadata)
 * which sets meta.member in [0, meta.members).
 */
#ifndef PATHDIV_INGRESS_P4
#define PATHDIV_INGRESS_P4

control PathdivIngress(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    /* Every packet that arrives on a port, whatever happens to it next. */
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx;

    SelectMember() select_member;

    action drop() {
        mark_to_drop(standard_metadata);
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
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    action forward(port_id_t port) {
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action set_group(group_id_t group, member_t members, seed_t seed) {
        meta.group = group;
        meta.members = members;
        meta.seed = seed;
    }

    table arp_responder {
        key = {
            standard_metadata.ingress_port: exact;
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
        port_rx.count((port_index_t) standard_metadata.ingress_port);
        if (hdr.arp.isValid()) {
            if (hdr.arp.oper == ARP_OPER_REQUEST && hdr.arp.htype == ARP_HTYPE_ETHERNET
                    && hdr.arp.ptype == ARP_PTYPE_IPV4) {
                arp_responder.apply();
            } else {
                drop();
            }
        } else if (hdr.ipv4.isValid() && standard_metadata.checksum_error == 0
                   && hdr.ipv4.ttl > TTL_EXPIRED) {
            meta.members = 0;
            ipv4_lpm.apply();
            if (meta.members != 0) {
                select_member.apply(hdr, meta, standard_metadata);
                group_member.apply();
            }
        } else {
            drop();
        }
    }
}

#endif /* PATHDIV_INGRESS_P4 */
