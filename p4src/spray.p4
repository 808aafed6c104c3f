/* pathdiv spray: packet spraying, a new member for every packet.
 *
 * The spray_policy register (index 0) selects at run time:
 *   SPRAY_RANDOM      a uniformly random member;
 *   SPRAY_ROUNDROBIN  members in turn (next_member holds the turn per group);
 * any other value drops the packet.
 *
 * bmv2 seeds each thread's random generator with the thread's id. In the lab kernel
 * (User-Mode Linux lays out every process alike: no address-space randomisation)
 * that id is the same in every switch process, so the 20 switches drew one and the
 * same sequence and sprayed in lock-step. The draw is therefore mixed with the
 * switch's own seed (a `set_group` parameter, as for ecmp) before it picks a member.
 * p4c-ebpf's Random reads the kernel's per-CPU generator, which all switches share.
 */
#include "include/headers.p4"
#include "include/parser.p4"
#ifndef PATHDIV_PSA
#include "include/mix.p4"   /* the random draw mixed with the switch's seed */
#endif

/* values of the spray_policy register */
const bit<8> SPRAY_RANDOM = 0;
const bit<8> SPRAY_ROUNDROBIN = 1;

control SelectMember(inout headers_t hdr,
                     inout metadata_t meta,
                     PATHDIV_INGRESS_STD) {
#ifdef PATHDIV_PSA
    Register<bit<8>, bit<32>>(1) spray_policy;
    Register<member_t, bit<32>>(MAX_GROUPS) next_member;
    Random<bit<32>>(0, 0xFFFFFFFF) draw;   /* reduced modulo the group size */

    apply {
        /* p4c-ebpf passes a register's index and value by address: variables, not
         * expressions */
        bit<32> first = 0;
        bit<8> policy = spray_policy.read(first);
        if (policy == SPRAY_RANDOM) {
            meta.member = (member_t) (draw.read() % (bit<32>) meta.members);
        } else if (policy == SPRAY_ROUNDROBIN) {
            bit<32> slot = (bit<32>) meta.group;
            member_t turn = next_member.read(slot);
            if (turn >= meta.members) {
                turn = 0;
            }
            meta.member = turn;
            member_t next = turn + 1;
            next_member.write(slot, next);
        } else {  /* an unknown policy: no such member, so group_member drops */
            meta.member = meta.members;
        }
    }
#else
    register<bit<8>>(1) spray_policy;
    register<member_t>(MAX_GROUPS) next_member;

    apply {
        bit<8> policy;
        spray_policy.read(policy, 0);
        if (policy == SPRAY_RANDOM) {
            bit<32> draw;
            random(draw, (bit<32>) 0, 0xFFFFFFFF);
            hash_t mixed = (draw ^ meta.seed) * MIX_MULTIPLIER;
            hash(meta.member, HashAlgorithm.identity, (member_t) 0, { mixed[31:16] },
                 meta.members);
        } else if (policy == SPRAY_ROUNDROBIN) {
            member_t turn;
            next_member.read(turn, (bit<32>) meta.group);
            if (turn >= meta.members) {
                turn = 0;
            }
            meta.member = turn;
            next_member.write((bit<32>) meta.group, turn + 1);
        } else {  /* an unknown policy: no such member, so group_member drops */
            meta.member = meta.members;
        }
    }
#endif
}

#include "include/pipeline.p4"
