/* pathdiv flowlet: flowlet switching (Kandula et al., "Dynamic load balancing
 * without packet reordering", CCR 2007).
 *
 * A flow keeps its member while its packets come closer together than the gap
 * (register flowlet_gap_us, index 0, microseconds); after an idle gap at least
 * that long the next packet starts a new flowlet on a random member. State is
 * kept per hash slot of the 5-tuple, so colliding flows share a flowlet.
 */
#include "include/headers.p4"
#include "include/parser.p4"

#ifdef PATHDIV_PSA
#error "flowlet.p4 is v1model only (it reads bmv2's ingress timestamp in microseconds)"
#endif

typedef bit<48> time_us_t;          /* bmv2 timestamps are in microseconds */
typedef bit<32> slot_t;
const bit<32> FLOWLET_SLOTS = 4096; /* flowlet state is kept per hash slot */

control SelectMember(inout headers_t hdr,
                     inout metadata_t meta,
                     PATHDIV_INGRESS_STD) {
    register<time_us_t>(1) flowlet_gap_us;
    register<time_us_t>(FLOWLET_SLOTS) last_seen_us;
    register<member_t>(FLOWLET_SLOTS) slot_member;

    apply {
        slot_t slot;
        hash(slot, HashAlgorithm.crc32, (slot_t) 0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_src_port, meta.l4_dst_port },
             FLOWLET_SLOTS);
        time_us_t gap;
        flowlet_gap_us.read(gap, 0);
        time_us_t last;
        last_seen_us.read(last, slot);
        member_t member;
        slot_member.read(member, slot);
        time_us_t now = standard_metadata.ingress_global_timestamp;
        if (now - last >= gap || member >= meta.members) {
            random(member, (member_t) 0, meta.members - 1);
            slot_member.write(slot, member);
        }
        last_seen_us.write(slot, now);
        meta.member = member;
    }
}

#include "include/pipeline.p4"
