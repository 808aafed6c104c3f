/* pathdiv: parser and checksum verification (Ethernet, ARP, IPv4, TCP, UDP).
 *
 * PathdivHeaderParser is the parser both architectures share; each wraps it in
 * its own parser signature. L4 ports are copied into metadata so hashing reads
 * one place whatever the protocol. IPv4 with options is forwarded but its L4
 * header is not parsed.
 */
#ifndef PATHDIV_PARSER_P4
#define PATHDIV_PARSER_P4

parser PathdivHeaderParser(packet_in packet, out headers_t hdr, inout metadata_t meta) {
#ifdef PATHDIV_PSA
    /* PSA verifies the IPv4 checksum here (v1model: PathdivVerifyChecksum below); a
     * bad one is a parser error, on which ingress drops (PARSER_ERROR). */
    InternetChecksum() ipv4_checksum;
#endif

    state start {
        meta.l4_src_port = 0;
        meta.l4_dst_port = 0;
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
#ifdef PATHDIV_PSA
        if (hdr.ipv4.ihl == IPV4_IHL_NO_OPTIONS) {
            ipv4_checksum.clear();
            ipv4_checksum.add(IPV4_CHECKSUM_FIELDS);
            verify(hdr.ipv4.hdr_checksum == ipv4_checksum.get(), error.BadIPv4HeaderChecksum);
        }
#endif
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (IPV4_IHL_NO_OPTIONS, 0, IP_PROTO_TCP): parse_tcp;
            (IPV4_IHL_NO_OPTIONS, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition accept;
    }
}

#ifdef PATHDIV_PSA

parser PathdivParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                     in psa_ingress_parser_input_metadata_t istd,
                     in empty_t resubmit_meta, in empty_t recirculate_meta) {
    PathdivHeaderParser() headers;

    state start {
        headers.apply(packet, hdr, meta);
        transition accept;
    }
}

#else /* v1model */

parser PathdivParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    PathdivHeaderParser() headers;

    state start {
        headers.apply(packet, hdr, meta);
        transition accept;
    }
}

/* A bad IPv4 header checksum sets standard_metadata.checksum_error; ingress drops. */
control PathdivVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(
            hdr.ipv4.isValid() && hdr.ipv4.ihl == IPV4_IHL_NO_OPTIONS,
            IPV4_CHECKSUM_FIELDS,
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

#endif /* PATHDIV_PSA */

#endif /* PATHDIV_PARSER_P4 */
