/* pathdiv ecmp: equal-cost multipath, one path per flow.
 *
 * The member is a hash of the 5-tuple, mixed with the switch's seed (a
 * `set_group` parameter) so that edge, aggregation and core switches choose
 * independently instead of polarising onto the same member index. Both
 * architectures compute the same member: CRC-32 of the 13 bytes of the 5-tuple,
 * XOR seed, times MIX_MULTIPLIER, high 16 bits modulo the group size
 * (experiments/dataplane/p4/hashing.py).
 */
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/mix.p4"

#ifndef PATHDIV_PSA
const bit<64> HASH_SPACE = 0x100000000;   /* keep all 32 bits of the CRC */
#endif

control SelectMember(inout headers_t hdr,
                     inout metadata_t meta,
                     PATHDIV_INGRESS_STD) {
#ifdef PATHDIV_PSA
    Hash<bit<32>>(PSA_HashAlgorithm_t.CRC32) flow_crc;  /* p4c-ebpf: no typedef here */

    apply {
        hash_t flow_hash = flow_crc.get_hash(
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
              meta.l4_src_port, meta.l4_dst_port });
        hash_t mixed = (flow_hash ^ meta.seed) * MIX_MULTIPLIER;
        meta.member = mixed[31:16] % meta.members;
    }
#else
    apply {
        hash_t flow_hash;
        hash(flow_hash, HashAlgorithm.crc32, (hash_t) 0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_src_port, meta.l4_dst_port },
             HASH_SPACE);
        hash_t mixed = (flow_hash ^ meta.seed) * MIX_MULTIPLIER;
        hash(meta.member, HashAlgorithm.identity, (member_t) 0, { mixed[31:16] }, meta.members);
    }
#endif
}

#include "include/pipeline.p4"
