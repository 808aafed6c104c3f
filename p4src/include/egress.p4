/* pathdiv: egress (v1model). Rewrite MACs for the neighbour on the egress port
 * (neighbor.p4), mark ECN-capable packets CE when the egress queue is deeper
 * than a threshold, count every sent packet. PSA for eBPF has no egress program:
 * the MAC rewrite runs in its ingress, ECN marking in the egress qdiscs.
 */
#ifndef PATHDIV_EGRESS_P4
#define PATHDIV_EGRESS_P4

typedef bit<19> qdepth_t;
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE = 3;

control PathdivEgress(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    /* Every packet that leaves on a port. */
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_tx;

    /* Index 0: queue depth in packets at which ECT packets are marked CE; 0 = off.
     * Only meaningful when bmv2's queue rate is set near the link rate. */
    register<qdepth_t>(1) ecn_threshold;

    PathdivNeighbor() neighbor;

    apply {
        if (hdr.ipv4.isValid()) {
            neighbor.apply(hdr, standard_metadata.egress_port);
            qdepth_t threshold;
            ecn_threshold.read(threshold, 0);
            if (threshold != 0 && standard_metadata.enq_qdepth >= threshold
                    && hdr.ipv4.ecn != ECN_NOT_ECT) {
                hdr.ipv4.ecn = ECN_CE;
            }
        }
        port_tx.count((port_index_t) standard_metadata.egress_port);
    }
}

#endif /* PATHDIV_EGRESS_P4 */
