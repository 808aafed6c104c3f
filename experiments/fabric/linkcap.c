// SPDX-License-Identifier: GPL-2.0
/*
 * linkcap: the link captures of a whole network from one process.
 *
 *   linkcap SNAPLEN BUFFER_KB NETNS IFNAME COUNT PATH [NETNS IFNAME COUNT PATH]...
 *
 * For each quadruple, a packet socket is opened in the network namespace NETNS (a
 * /proc/PID/ns/net file), bound to IFNAME, and every frame it sees in either direction
 * that is TCP (IPv4 or IPv6) or ICMP is written, cut to SNAPLEN bytes, to PATH as classic
 * pcap (microseconds, Ethernet), until COUNT frames. This is what one
 * `tcpdump -i IFNAME -s SNAPLEN -B BUFFER_KB -c COUNT -w PATH 'tcp or icmp'` per link does,
 * without one process per link: in User-Mode Linux each process start costs tens of
 * milliseconds, and each wake-up of a process a host context switch.
 *
 * The kernel fills a ring of blocks per socket (TPACKET_V3) and hands a block over when it
 * is full or BLOCK_TIMEOUT_MS after it began, as libpcap's does; blocks are larger than
 * libpcap's (one page for short snaplens), so a busy link wakes this process once per
 * some thousand frames. A frame the ring had no room for is counted as dropped by the
 * kernel. A frame is in a file only once its block was handed over: the caller waits
 * longer than BLOCK_TIMEOUT_MS after the last packet before it stops the captures.
 *
 * Standard error: "linkcap: listening on N interfaces" once every socket is open; after
 * SIGTERM or SIGINT, one line per interface,
 * "linkcap: IFNAME: C captured, D dropped by kernel, full|open", then exit 0. An
 * interface that reached COUNT is closed at once ("full"). Any setup error is one line
 * "linkcap: error: ..." and exit 2; a write error closes that file and exits 1 at the
 * end.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define BLOCK_SIZE (256 * 1024)
#define BLOCK_TIMEOUT_MS 1000
#define FRAME_SIZE 2048
#define WRITE_BUFFER (256 * 1024)
#define PCAP_MAGIC 0xa1b2c3d4u
#define LINKTYPE_ETHERNET 1
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct link_capture {
	const char *ifname;
	const char *path;
	unsigned long count;
	unsigned long captured;
	unsigned long dropped;
	int fd;
	FILE *out;
	char *buffer;
	uint8_t *ring;
	unsigned int blocks;
	unsigned int next;
	int full;
	int failed;
};

/* set only inside ppoll() and sigsuspend(): the stop signals are blocked elsewhere */
static sig_atomic_t stopping;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static void die(const char *what, const char *name)
{
	fprintf(stderr, "linkcap: error: %s %s: %s\n", what, name, strerror(errno));
	exit(2);
}

/* "tcp or icmp" on Ethernet: IPv4 protocol 6 or 1; IPv6 next header 6, or 6 after a
 * fragment header (44). Accepted frames are cut to the snap length.
 */
static void attach_filter(int fd, unsigned int snaplen, const char *name)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 3),
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 7, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMP, 6, 7),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IPV6, 0, 6),
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 20),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_FRAGMENT, 0, 3),
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 54),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, snaplen),
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = { .len = ARRAY_SIZE(code), .filter = code };

	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
		die("cannot attach the filter on", name);
}

static void write_u32s(FILE *out, const uint32_t *words, size_t n)
{
	fwrite(words, sizeof(*words), n, out);
}

static void open_file(struct link_capture *c, unsigned int snaplen)
{
	/* magic, version 2.4, zone 0, sigfigs 0, snap length, link type */
	uint32_t header[6] = { PCAP_MAGIC, 2 | (4u << 16), 0, 0, snaplen, LINKTYPE_ETHERNET };
	int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		die("cannot create", c->path);
	c->out = fdopen(fd, "wb");
	c->buffer = malloc(WRITE_BUFFER);
	if (!c->out || !c->buffer)
		die("cannot open", c->path);
	/* a buffer of our own: given none, glibc ignores the size and takes the file's
	 * block size (4 KB here), one write per 4 KB, each a host call in User-Mode Linux
	 */
	setvbuf(c->out, c->buffer, _IOFBF, WRITE_BUFFER);
	write_u32s(c->out, header, 6);
}

/* A socket on IFNAME in the namespace NETNS, its ring mapped; back in `home` after. */
static void open_socket(struct link_capture *c, const char *netns, int home,
			unsigned int snaplen, unsigned int buffer_kb)
{
	struct tpacket_req3 req = { 0 };
	struct sockaddr_ll where = { 0 };
	int version = TPACKET_V3;
	int ns = open(netns, O_RDONLY | O_CLOEXEC);

	if (ns < 0)
		die("cannot open the namespace", netns);
	if (setns(ns, CLONE_NEWNET) < 0)
		die("cannot enter the namespace", netns);
	close(ns);
	/* protocol 0: no frame arrives before the filter and the ring are in place */
	c->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		die("cannot open a packet socket for", c->ifname);
	attach_filter(c->fd, snaplen, c->ifname);
	if (setsockopt(c->fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) < 0)
		die("TPACKET_V3 is not available for", c->ifname);
	c->blocks = (buffer_kb * 1024u) / BLOCK_SIZE;
	if (c->blocks < 2)
		c->blocks = 2;
	req.tp_block_size = BLOCK_SIZE;
	req.tp_block_nr = c->blocks;
	req.tp_frame_size = FRAME_SIZE;
	req.tp_frame_nr = (BLOCK_SIZE / FRAME_SIZE) * c->blocks;
	req.tp_retire_blk_tov = BLOCK_TIMEOUT_MS;
	if (setsockopt(c->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0)
		die("cannot set up the ring for", c->ifname);
	c->ring = mmap(NULL, (size_t)BLOCK_SIZE * c->blocks, PROT_READ | PROT_WRITE,
		       MAP_SHARED, c->fd, 0);
	if (c->ring == MAP_FAILED)
		die("cannot map the ring for", c->ifname);
	where.sll_family = AF_PACKET;
	where.sll_protocol = htons(ETH_P_ALL);
	where.sll_ifindex = (int)if_nametoindex(c->ifname);
	if (where.sll_ifindex == 0)
		die("no interface", c->ifname);
	if (bind(c->fd, (struct sockaddr *)&where, sizeof(where)) < 0)
		die("cannot bind to", c->ifname);
	if (setns(home, CLONE_NEWNET) < 0)
		die("cannot return to the namespace", "of this process");
}

static void close_capture(struct link_capture *c)
{
	struct tpacket_stats_v3 stats = { 0 };
	socklen_t len = sizeof(stats);

	if (c->fd < 0)
		return;
	if (getsockopt(c->fd, SOL_PACKET, PACKET_STATISTICS, &stats, &len) == 0)
		c->dropped += stats.tp_drops;
	munmap(c->ring, (size_t)BLOCK_SIZE * c->blocks);
	close(c->fd);
	c->fd = -1;
	if (fclose(c->out) != 0 && !c->failed) {
		fprintf(stderr, "linkcap: error: writing %s: %s\n", c->path, strerror(errno));
		c->failed = 1;
	}
	c->out = NULL;
	free(c->buffer);
	c->buffer = NULL;
}

/* One frame as a pcap record; a VLAN tag the kernel took off is put back, as libpcap does. */
static void write_frame(struct link_capture *c, const struct tpacket3_hdr *h)
{
	const uint8_t *frame = (const uint8_t *)h + h->tp_mac;
	uint32_t caplen = h->tp_snaplen, wirelen = h->tp_len;
	int tagged = (h->tp_status & TP_STATUS_VLAN_VALID) && caplen >= 12;
	uint32_t record[4] = { h->tp_sec, h->tp_nsec / 1000, caplen + 4 * tagged,
			       wirelen + 4 * tagged };

	write_u32s(c->out, record, 4);
	if (tagged) {
		uint16_t tag[2] = { htons(ETH_P_8021Q), htons(h->hv1.tp_vlan_tci) };

		fwrite(frame, 1, 12, c->out);
		fwrite(tag, 2, 2, c->out);
		fwrite(frame + 12, 1, caplen - 12, c->out);
	} else {
		fwrite(frame, 1, caplen, c->out);
	}
	if (ferror(c->out) && !c->failed) {
		fprintf(stderr, "linkcap: error: writing %s: %s\n", c->path, strerror(errno));
		c->failed = 1;
	}
}

/* Write every block the kernel has handed over, in ring order. */
static void drain(struct link_capture *c)
{
	while (c->fd >= 0) {
		struct tpacket_block_desc *block =
			(void *)(c->ring + (size_t)c->next * BLOCK_SIZE);
		struct tpacket3_hdr *h;
		uint32_t i;

		if (!(__atomic_load_n(&block->hdr.bh1.block_status, __ATOMIC_ACQUIRE) &
		      TP_STATUS_USER))
			return;
		h = (void *)((uint8_t *)block + block->hdr.bh1.offset_to_first_pkt);
		for (i = 0; i < block->hdr.bh1.num_pkts && !c->failed; i++) {
			write_frame(c, h);
			if (++c->captured == c->count) {
				c->full = 1;
				break;
			}
			h = (void *)((uint8_t *)h + h->tp_next_offset);
		}
		__atomic_store_n(&block->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
		c->next = (c->next + 1) % c->blocks;
		if (c->full || c->failed)
			close_capture(c);
	}
}

static unsigned long number(const char *text, const char *what)
{
	char *end;
	unsigned long value;

	errno = 0;
	value = strtoul(text, &end, 10);
	if (errno || *end || end == text || value == 0) {
		fprintf(stderr, "linkcap: error: %s must be a positive integer, not %s\n", what,
			text);
		exit(2);
	}
	return value;
}

int main(int argc, char **argv)
{
	struct sigaction stop = { .sa_handler = on_stop };
	sigset_t stops, waiting;
	struct link_capture *caps;
	struct pollfd *fds;
	unsigned int snaplen, buffer_kb;
	int n, i, home, failed = 0;

	if (argc < 7 || (argc - 3) % 4) {
		fputs("usage: linkcap SNAPLEN BUFFER_KB NETNS IFNAME COUNT PATH [NETNS IFNAME COUNT PATH]...\n",
		      stderr);
		return 2;
	}
	snaplen = (unsigned int)number(argv[1], "SNAPLEN");
	buffer_kb = (unsigned int)number(argv[2], "BUFFER_KB");
	if (snaplen > 65535) {
		fprintf(stderr, "linkcap: error: SNAPLEN %u is beyond 65535\n", snaplen);
		return 2;
	}
	n = (argc - 3) / 4;
	caps = calloc((size_t)n, sizeof(*caps));
	fds = calloc((size_t)n, sizeof(*fds));
	if (!caps || !fds)
		die("out of memory for", "the captures");
	/* The stop signals are blocked except inside ppoll() and sigsuspend(), so one that
	 * comes between the check of `stopping` and the wait still ends the wait.
	 */
	sigemptyset(&stops);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGINT);
	sigprocmask(SIG_BLOCK, &stops, &waiting);
	sigdelset(&waiting, SIGTERM);
	sigdelset(&waiting, SIGINT);
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGINT, &stop, NULL);
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		die("cannot open", "/proc/self/ns/net");
	for (i = 0; i < n; i++) {
		char **q = argv + 3 + 4 * i;

		caps[i].ifname = q[1];
		caps[i].count = number(q[2], "COUNT");
		caps[i].path = q[3];
		open_file(&caps[i], snaplen);
		open_socket(&caps[i], q[0], home, snaplen, buffer_kb);
	}
	fprintf(stderr, "linkcap: listening on %d interfaces\n", n);
	while (!stopping) {
		int open_ones = 0;

		for (i = 0; i < n; i++) {
			fds[i].fd = caps[i].fd;
			fds[i].events = POLLIN;
			fds[i].revents = 0;
			open_ones += caps[i].fd >= 0;
		}
		if (!open_ones) {
			sigsuspend(&waiting);
			continue;
		}
		if (ppoll(fds, (nfds_t)n, NULL, &waiting) < 0 && errno != EINTR)
			die("poll failed", "");
		for (i = 0; i < n; i++)
			if (fds[i].revents)
				drain(&caps[i]);
	}
	for (i = 0; i < n; i++) {
		drain(&caps[i]);
		close_capture(&caps[i]);
		failed |= caps[i].failed;
		fprintf(stderr, "linkcap: %s: %lu captured, %lu dropped by kernel, %s\n",
			caps[i].ifname, caps[i].captured, caps[i].dropped,
			caps[i].full ? "full" : "open");
	}
	return failed;
}
