/* pathdiv: IPv4 checksum update (TTL and ECN changed) and deparser. */
#ifndef PATHDIV_DEPARSER_P4
#define PATHDIV_DEPARSER_P4

/* The headers back onto the wire, in order (invalid ones are skipped). */
control PathdivEmit(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
    }
}

#ifdef PATHDIV_PSA

control PathdivDeparser(packet_out packet, out empty_t clone_i2e_meta,
                        out empty_t resubmit_meta, out empty_t normal_meta,
                        inout headers_t hdr, in metadata_t meta,
                        in psa_ingress_output_metadata_t istd) {
    InternetChecksum() ipv4_checksum;
    PathdivEmit() emit;

    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ihl == IPV4_IHL_NO_OPTIONS) {
            ipv4_checksum.clear();
            ipv4_checksum.add(IPV4_CHECKSUM_FIELDS);
            hdr.ipv4.hdr_checksum = ipv4_checksum.get();
        }
        emit.apply(packet, hdr);
    }
}

#else /* v1model */

control PathdivComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid() && hdr.ipv4.ihl == IPV4_IHL_NO_OPTIONS,
            IPV4_CHECKSUM_FIELDS,
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

control PathdivDeparser(packet_out packet, in headers_t hdr) {
    PathdivEmit() emit;

    apply {
        emit.apply(packet, hdr);
    }
}

#endif /* PATHDIV_PSA */

#endif /* PATHDIV_DEPARSER_P4 */
