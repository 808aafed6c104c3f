/* pathdiv: the pipeline after the program's SelectMember control, and the
 * architecture's top level. Included last by every program. */
#ifndef PATHDIV_PIPELINE_P4
#define PATHDIV_PIPELINE_P4

#include "neighbor.p4"
#include "ingress.p4"
#include "deparser.p4"

#ifdef PATHDIV_PSA

/* The egress pipeline is empty, so p4c-ebpf writes no tc egress program: a packet
 * runs the ingress program of its switch once, which redirects it to its port. */
parser PathdivEgressParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                           in psa_egress_parser_input_metadata_t istd,
                           in empty_t normal_meta, in empty_t clone_i2e_meta,
                           in empty_t clone_e2e_meta) {
    state start {
        transition accept;
    }
}

control PathdivEgress(inout headers_t hdr, inout metadata_t meta,
                      in psa_egress_input_metadata_t istd,
                      inout psa_egress_output_metadata_t ostd) {
    apply { }
}

control PathdivEgressDeparser(packet_out packet, out empty_t clone_e2e_meta,
                              out empty_t recirculate_meta, inout headers_t hdr,
                              in metadata_t meta, in psa_egress_output_metadata_t istd,
                              in psa_egress_deparser_input_metadata_t edstd) {
    apply { }
}

IngressPipeline(PathdivParser(), PathdivIngress(), PathdivDeparser()) ingress_pipeline;
EgressPipeline(PathdivEgressParser(), PathdivEgress(), PathdivEgressDeparser())
    egress_pipeline;
PSA_Switch(ingress_pipeline, PacketReplicationEngine(), egress_pipeline,
           BufferingQueueingEngine()) main;

#else /* v1model */

#include "egress.p4"

V1Switch(PathdivParser(), PathdivVerifyChecksum(), PathdivIngress(), PathdivEgress(),
         PathdivComputeChecksum(), PathdivDeparser()) main;

#endif /* PATHDIV_PSA */

#endif /* PATHDIV_PIPELINE_P4 */
