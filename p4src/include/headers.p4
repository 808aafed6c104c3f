/* pathdiv: types, constants, headers and metadata shared by every program.
 *
 * Nothing here emits code; it only names things so the programs read without
 * bare literals.
 */
#ifndef PATHDIV_HEADERS_P4
#define PATHDIV_HEADERS_P4

#include "arch.p4"

/* ---- types ------------------------------------------------------------------ */
typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<16> group_id_t;     /* equal-cost group (one per switch: the up group) */
typedef bit<16> member_t;       /* index of a member inside its group */
typedef bit<32> seed_t;         /* per-switch hash seed, so tiers do not polarise */
/* port_id_t, the port type of the architecture, is defined in arch.p4 */
#ifndef PATHDIV_PSA
typedef bit<32> port_index_t;   /* index into v1model's per-port counter arrays */
#endif

/* ---- sizes ------------------------------------------------------------------ */
const bit<32> NUM_PORTS = 64;        /* bmv2 port N is interface <switch>-eth<N> */
const bit<32> MAX_GROUPS = 16;

/* ---- protocol numbers ------------------------------------------------------- */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP = 0x0806;
const bit<8> IP_PROTO_TCP = 6;
const bit<8> IP_PROTO_UDP = 17;
const bit<4> IPV4_IHL_NO_OPTIONS = 5;
const bit<8> TTL_EXPIRED = 1;        /* a packet arriving with TTL <= 1 is dropped */
const bit<16> ARP_HTYPE_ETHERNET = 1;
const bit<16> ARP_PTYPE_IPV4 = ETHERTYPE_IPV4;
const bit<16> ARP_OPER_REQUEST = 1;
const bit<16> ARP_OPER_REPLY = 2;

/* ---- headers ---------------------------------------------------------------- */
header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header arp_t {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sender_hw_addr;
    ipv4_addr_t sender_proto_addr;
    mac_addr_t  target_hw_addr;
    ipv4_addr_t target_proto_addr;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* The IPv4 header's fields in checksum order (RFC 791), for verification and update. */
#define IPV4_CHECKSUM_FIELDS \
    { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, \
      hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags, \
      hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, \
      hdr.ipv4.src_addr, hdr.ipv4.dst_addr }

struct headers_t {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    tcp_t      tcp;
    udp_t      udp;
}

struct metadata_t {
    bit<16>    l4_src_port;   /* 0 unless TCP or UDP */
    bit<16>    l4_dst_port;
    group_id_t group;         /* set by the route lookup when it hits a group */
    member_t   members;       /* group size; 0 = the route named a port directly */
    member_t   member;        /* chosen by the program's SelectMember control */
    seed_t     seed;
}

#endif /* PATHDIV_HEADERS_P4 */
