/* pathdiv static: one deterministic next hop per destination.
 *
 * The control plane installs no group here: every remote host has its own /32
 * route to one uplink (the fat-tree paper's two-level table, computed in
 * topologies/forwarding.py), so one destination always takes one path. Should a
 * group be installed anyway, its first member is used.
 */
#include "include/headers.p4"
#include "include/parser.p4"

control SelectMember(inout headers_t hdr,
                     inout metadata_t meta,
                     PATHDIV_INGRESS_STD) {
    apply {
        meta.member = 0;
    }
}

#include "include/pipeline.p4"
