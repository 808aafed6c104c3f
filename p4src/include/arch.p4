/* pathdiv: the architecture's words.
 *
 * Every program is written once for two architectures: v1model (bmv2's
 * simple_switch, compiled by p4c-bm2-ss) and PSA (compiled by p4c-ebpf with
 * -DPATHDIV_PSA and attached at tc in each switch namespace). The shared files
 * (headers, parser, ingress, deparser) name what differs between them only
 * through the few words defined here: the port type, the ingress control's
 * architecture parameters, the ingress port, sending, dropping and whether the
 * parser found an error (a bad IPv4 checksum).
 */
#ifndef PATHDIV_ARCH_P4
#define PATHDIV_ARCH_P4

#include <core.p4>

#ifdef PATHDIV_PSA
#include <psa.p4>

/* PSA for eBPF: a port is its interface's ifindex in the switch's namespace. */
typedef bit<32> port_id_t;

struct empty_t {}

error { BadIPv4HeaderChecksum }

#define PATHDIV_INGRESS_STD in psa_ingress_input_metadata_t istd, \
                            inout psa_ingress_output_metadata_t ostd
#define PATHDIV_INGRESS_ARGS istd, ostd
#define INGRESS_PORT istd.ingress_port
#define SEND_TO(port) send_to_port(ostd, (PortId_t) (port))
#define DROP_PACKET() ingress_drop(ostd)
/* The parser verifies the IPv4 checksum (include/parser.p4). Written with `!=`:
 * p4c-ebpf 1.2.5.16 compiles a comparison of two `error` values to a bare memcmp(),
 * true when they differ, for `==` as for `!=`. */
#define PARSER_ERROR (istd.parser_error != error.NoError)

#else /* v1model */
#include <v1model.p4>

typedef bit<9> port_id_t;   /* v1model egress_spec / ingress_port width */

#define PATHDIV_INGRESS_STD inout standard_metadata_t standard_metadata
#define PATHDIV_INGRESS_ARGS standard_metadata
#define INGRESS_PORT standard_metadata.ingress_port
#define SEND_TO(port) standard_metadata.egress_spec = (port)
#define DROP_PACKET() mark_to_drop(standard_metadata)
/* PathdivVerifyChecksum (include/parser.p4) sets checksum_error */
#define PARSER_ERROR (standard_metadata.checksum_error != 0)

#endif /* PATHDIV_PSA */

#endif /* PATHDIV_ARCH_P4 */
