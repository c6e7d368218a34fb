/*
 * echo.c: the c-liburing arm of spindle's benchmark harness (package bench).
 *
 * A plain C io_uring echo server that spindle's uring engine is measured
 * against: if the engine costs more server CPU per request than this, the
 * difference is the engine's own overhead.
 *
 * What it does, and nothing more:
 *   - one thread, one io_uring set up with SINGLE_ISSUER|DEFER_TASKRUN
 *     (COOP_TASKRUN where the kernel refuses that, or with -no-defer-taskrun;
 *     the hello line says which and why);
 *   - multishot accept, re-armed after a back-off (5 ms doubling to 1 s) when
 *     it fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
 *     ENOMEM), at once otherwise;
 *   - multishot recv on a provided buffer ring registered
 *     with io_uring_register_buf_ring, re-armed when it ends (ENOBUFS, or a
 *     CQE without IORING_CQE_F_MORE);
 *   - one SEND per batch of replies ready on a connection, at most one SEND in
 *     flight per connection so that replies leave in order; replies that are
 *     ready while a SEND is in flight queue behind it;
 *   - one io_uring_submit_and_wait(ring, 1) per loop iteration.
 *
 * Protocol: the harness's RPC framing (bench/proto.go), a 4-byte big-endian
 * payload length and the payload, each frame echoed whole once it is complete.
 * A frame may span receives and a receive may hold several frames; a payload
 * above 1 MiB closes the connection. There is no HTTP/1.1 mode: a request
 * starting with "GET " reads as a length far above 1 MiB and is closed as
 * malformed.
 *
 * The harness starts this program exactly as it starts its Go server children
 * ("-arm c-liburing -listen ADDR -loops 1 -cpus LIST -spare-cpus LIST
 * -compute-us N -control") and it answers the same way: it pins itself to
 * -cpus, checks that it echoes one request of its own, prints one JSON hello
 * line {"addr","pid","arm","note"} and, with -control, answers each "usage"
 * line on stdin with the ServerUsage JSON (getrusage(RUSAGE_SELF) and every
 * thread's /proc/self/task stat and schedstat, the same figures the Go
 * children report) and exits at EOF on stdin.
 *
 * Built by the harness with: cc -O2 -Wall -Wextra -Werror echo.c -luring
 * (liburing 2.3 or later; newer constants are defined below when missing).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#ifndef IORING_RECV_MULTISHOT
#define IORING_RECV_MULTISHOT (1U << 1)
#endif
#ifndef IORING_ACCEPT_MULTISHOT
#define IORING_ACCEPT_MULTISHOT (1U << 0)
#endif

#define ARM_NAME "c-liburing"

enum {
	FRAME_HEADER = 4,
	MAX_PAYLOAD = 1 << 20,
	SQ_ENTRIES = 1024,
	CQ_ENTRIES = 8192,
	/* The receive buffers match the spindle engine's defaults (512 of
	 * 16 KiB), so both arms receive in the same sizes. */
	NBUFS = 512,
	BUF_SIZE = 16 << 10,
	BGID = 0,
	/* Replies queued on a connection whose peer does not read: past this
	 * the connection is closed instead of growing without bound. */
	MAX_QUEUED = 16 << 20,
	CHECK_LEN = FRAME_HEADER + 16,
};

/* user_data: the operation in the high 32 bits, the fd in the low 32. A
 * connection's fd is closed only when no operation on it is in flight, so
 * no completion can name a reused fd. */
enum op { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_CTRL, OP_CHECK, OP_ACCEPT_LATER };

static inline uint64_t udata(enum op op, int fd) { return (uint64_t)op << 32 | (uint32_t)fd; }

struct buf {
	unsigned char *p;
	size_t len, cap;
};

struct conn {
	int fd;
	bool recv_armed; /* a multishot recv is in flight */
	bool sending;    /* a SEND is in flight */
	bool eof;        /* the peer closed its side: close once replies are sent */
	bool closing;    /* error: close once nothing is in flight, drop replies */
	int send_bid;    /* >= 0: the SEND in flight is from this ring buffer */
	const unsigned char *send_p;
	size_t send_left;
	struct buf in; /* an incomplete request */
	struct buf tx; /* bytes of the SEND in flight (when send_bid < 0) */
	struct buf q;  /* replies queued behind it */
};

static struct io_uring ring;
static struct io_uring_buf_ring *br;
static unsigned char *bufs;
static int br_pending; /* buffers added to the ring since the last publish */
static int held;       /* ring buffers held by SENDs in flight */
static struct conn **conns;
static int nconns;
static int lfd = -1;
static long long compute_ns;
static const char *setup_mode;

static struct {
	uint64_t waits, submits, sqes, cqes, enobufs, accepts, accept_errors, closes;
} st;

/* Self-check: one request sent to ourselves before the hello line. */
static int chk_fd = -1;
static unsigned char chk_req[CHECK_LEN], chk_got[CHECK_LEN];
static size_t chk_n;
static bool control;
static char ctl_buf[4096];
static size_t ctl_len;

static void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, ARM_NAME ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static struct io_uring_sqe *get_sqe(void)
{
	struct io_uring_sqe *sqe;
	while ((sqe = io_uring_get_sqe(&ring)) == NULL) {
		/* The SQ is full: flush it without waiting. */
		int ret = io_uring_submit(&ring);
		st.submits++;
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			die("io_uring_submit: %s", strerror(-ret));
	}
	st.sqes++;
	return sqe;
}

/* Buffer ring. Buffers go back with recycle and become visible to the
 * kernel at the next publish, once per loop iteration (one store-release of
 * the tail instead of one per buffer). */
static void recycle(int bid)
{
	io_uring_buf_ring_add(br, bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
			      io_uring_buf_ring_mask(NBUFS), br_pending);
	br_pending++;
}

static void publish(void)
{
	if (br_pending) {
		io_uring_buf_ring_advance(br, br_pending);
		br_pending = 0;
	}
}

static void setup_buf_ring(void)
{
	/* liburing 2.3 has no io_uring_setup_buf_ring: map the ring (page
	 * aligned, as the kernel requires) and register it. */
	size_t ring_size = NBUFS * sizeof(struct io_uring_buf);
	void *m = mmap(NULL, ring_size, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (m == MAP_FAILED)
		die("mmap buffer ring: %s", strerror(errno));
	br = m;
	struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)m, .ring_entries = NBUFS, .bgid = BGID};
	int ret = io_uring_register_buf_ring(&ring, &reg, 0);
	if (ret < 0)
		die("io_uring_register_buf_ring: %s", strerror(-ret));
	io_uring_buf_ring_init(br);
	bufs = mmap(NULL, (size_t)NBUFS * BUF_SIZE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (bufs == MAP_FAILED)
		die("mmap receive buffers: %s", strerror(errno));
	for (int i = 0; i < NBUFS; i++)
		recycle(i);
	publish();
}

/* setup_ring creates the ring with the first flag set this kernel takes:
 * SINGLE_ISSUER|DEFER_TASKRUN (6.1), else SINGLE_ISSUER|COOP_TASKRUN (6.0),
 * else COOP_TASKRUN (5.19). setup_mode names the one it got, and why it is
 * not the first. no_defer (-no-defer-taskrun) starts at the second, so that
 * the fallback can be measured, and tested, on a kernel that has the first. */
static void setup_ring(bool no_defer)
{
	static const struct {
		unsigned flags;
		const char *name;
	} modes[] = {
		{IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, "SINGLE_ISSUER|DEFER_TASKRUN"},
		{IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN, "SINGLE_ISSUER|COOP_TASKRUN"},
		{IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN"},
	};
	static char mode[160];
	const char *why = no_defer ? "-no-defer-taskrun" : NULL;
	int ret = -EINVAL;
	for (size_t i = no_defer ? 1 : 0; i < sizeof modes / sizeof modes[0]; i++) {
		struct io_uring_params p = {0};
		p.flags = IORING_SETUP_CQSIZE | modes[i].flags;
		p.cq_entries = CQ_ENTRIES;
		ret = io_uring_queue_init_params(SQ_ENTRIES, &ring, &p);
		if (ret == 0) {
			if (why)
				snprintf(mode, sizeof mode, "%s (%s)", modes[i].name, why);
			else
				snprintf(mode, sizeof mode, "%s", modes[i].name);
			setup_mode = mode;
			break;
		}
		if (ret != -EINVAL)
			break;
		if (!why)
			why = i == 0 ? "kernel refused SINGLE_ISSUER|DEFER_TASKRUN: EINVAL" : "kernel refused SINGLE_ISSUER: EINVAL";
	}
	if (ret < 0)
		die("io_uring_queue_init_params: %s", strerror(-ret));
	setup_buf_ring();
}

/* Growable byte buffers. */
static void buf_reserve(struct buf *b, size_t more)
{
	if (b->cap - b->len >= more)
		return;
	size_t cap = b->cap ? b->cap : BUF_SIZE;
	while (cap - b->len < more)
		cap *= 2;
	unsigned char *p = realloc(b->p, cap);
	if (!p)
		die("out of memory (%zu bytes)", cap);
	b->p = p;
	b->cap = cap;
}

static void buf_append(struct buf *b, const unsigned char *p, size_t n)
{
	if (n == 0)
		return;
	buf_reserve(b, n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_swap(struct buf *a, struct buf *b)
{
	struct buf t = *a;
	*a = *b;
	*b = t;
}

/* spin burns the thread's CPU for compute_ns, like bench.Spin: wall time
 * on the monotonic clock, without sleeping or yielding. */
static void spin(unsigned frames)
{
	if (compute_ns <= 0)
		return;
	for (unsigned i = 0; i < frames; i++) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < compute_ns);
	}
}

/* whole_frames returns the length of the longest prefix of p made of
 * complete frames and sets *count to their number; -1 if a header announces
 * a payload above MAX_PAYLOAD. */
static long whole_frames(const unsigned char *p, size_t len, unsigned *count)
{
	size_t off = 0;
	*count = 0;
	while (len - off >= FRAME_HEADER) {
		uint32_t n = (uint32_t)p[off] << 24 | (uint32_t)p[off + 1] << 16 | (uint32_t)p[off + 2] << 8 | p[off + 3];
		if (n > MAX_PAYLOAD)
			return -1;
		if (len - off < FRAME_HEADER + (size_t)n)
			break;
		off += FRAME_HEADER + n;
		(*count)++;
	}
	return (long)off;
}

static void arm_recv(struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	io_uring_sqe_set_data64(sqe, udata(OP_RECV, c->fd));
	c->recv_armed = true;
}

static void arm_accept(void)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_multishot_accept(sqe, lfd, NULL, NULL, 0);
	io_uring_sqe_set_data64(sqe, udata(OP_ACCEPT, lfd));
}

/* accept_later re-arms the accept after a back-off, 5 ms doubling to 1 s
 * (as the go-net arm and net/http do): an accept that failed for want of
 * descriptors or memory fails again at once until connections close, and
 * re-arming it at once spins the loop on it. */
static long long accept_backoff_ns;

static void accept_later(void)
{
	static struct __kernel_timespec ts;
	accept_backoff_ns = accept_backoff_ns ? accept_backoff_ns * 2 : 5000000;
	if (accept_backoff_ns > 1000000000)
		accept_backoff_ns = 1000000000;
	ts.tv_sec = accept_backoff_ns / 1000000000;
	ts.tv_nsec = accept_backoff_ns % 1000000000;
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_timeout(sqe, &ts, 0, 0);
	io_uring_sqe_set_data64(sqe, udata(OP_ACCEPT_LATER, lfd));
}

static void arm_ctl(void)
{
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_read(sqe, 0, ctl_buf + ctl_len, (unsigned)(sizeof ctl_buf - ctl_len), (uint64_t)-1);
	io_uring_sqe_set_data64(sqe, udata(OP_CTRL, 0));
}

static void start_send(struct conn *c, const unsigned char *p, size_t n, int bid)
{
	/* MSG_WAITALL: on a stream socket the kernel retries a short send
	 * itself until all n bytes are out, so a reply is never interleaved
	 * with the next one. */
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_send(sqe, c->fd, p, n, MSG_WAITALL | MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, udata(OP_SEND, c->fd));
	c->sending = true;
	c->send_bid = bid;
	c->send_p = p;
	c->send_left = n;
}

/* flush sends the queued replies when no SEND is in flight. */
static void flush(struct conn *c)
{
	if (c->sending || c->closing || c->q.len == 0)
		return;
	buf_swap(&c->tx, &c->q);
	c->q.len = 0;
	start_send(c, c->tx.p, c->tx.len, -1);
}

/* fail marks c for closing after an error; a recv still armed is ended by
 * shutting the socket down, and its last completion then closes c. */
static void fail(struct conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	if (c->recv_armed)
		shutdown(c->fd, SHUT_RDWR);
}

static void maybe_close(struct conn *c)
{
	if (c->recv_armed || c->sending || !(c->closing || c->eof))
		return;
	close(c->fd);
	conns[c->fd] = NULL;
	free(c->in.p);
	free(c->tx.p);
	free(c->q.p);
	free(c);
	st.closes++;
}

static void on_accept(struct io_uring_cqe *cqe)
{
	bool more = cqe->flags & IORING_CQE_F_MORE;
	if (cqe->res < 0) {
		st.accept_errors++;
		if (more)
			return;
		if (cqe->res == -EMFILE || cqe->res == -ENFILE || cqe->res == -ENOBUFS || cqe->res == -ENOMEM)
			accept_later();
		else
			arm_accept(); /* ECONNABORTED and the like: the next accept goes on */
		return;
	}
	accept_backoff_ns = 0;
	if (!more)
		arm_accept();
	int fd = cqe->res;
	st.accepts++;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* as the engine does */
	if (fd >= nconns) {
		int n = nconns ? nconns : 1024;
		while (n <= fd)
			n *= 2;
		struct conn **t = realloc(conns, (size_t)n * sizeof *t);
		if (!t)
			die("out of memory");
		memset(t + nconns, 0, (size_t)(n - nconns) * sizeof *t);
		conns = t;
		nconns = n;
	}
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		die("out of memory");
	c->fd = fd;
	c->send_bid = -1;
	conns[fd] = c;
	arm_recv(c);
}

/* on_data answers the complete requests received so far on c; data is ring
 * buffer bid. */
static void on_data(struct conn *c, int bid, size_t len)
{
	const unsigned char *data = bufs + (size_t)bid * BUF_SIZE;
	unsigned frames;
	long whole;
	if (c->closing) {
		recycle(bid);
		return;
	}
	if (c->in.len == 0) {
		whole = whole_frames(data, len, &frames);
		if (whole < 0)
			goto bad;
		spin(frames);
		if ((size_t)whole == len && !c->sending && c->q.len == 0 && held < NBUFS / 2) {
			/* The common case: the buffer is whole requests and is
			 * their echo. Send it as it is; it goes back to the ring
			 * when the SEND completes. At most half the ring is held
			 * this way, so receives always find buffers. */
			held++;
			start_send(c, data, len, bid);
			return;
		}
		buf_append(&c->q, data, (size_t)whole);
		buf_append(&c->in, data + whole, len - (size_t)whole);
	} else {
		buf_append(&c->in, data, len);
		whole = whole_frames(c->in.p, c->in.len, &frames);
		if (whole < 0)
			goto bad;
		spin(frames);
		if ((size_t)whole == c->in.len && c->q.len == 0) {
			/* A large frame completed: its bytes become the reply
			 * without a copy. */
			buf_swap(&c->in, &c->q);
			c->in.len = 0;
		} else if (whole > 0) {
			buf_append(&c->q, c->in.p, (size_t)whole);
			memmove(c->in.p, c->in.p + whole, c->in.len - (size_t)whole);
			c->in.len -= (size_t)whole;
		}
	}
	recycle(bid);
	if (c->q.len > MAX_QUEUED) {
		fail(c);
		return;
	}
	flush(c);
	return;
bad:
	recycle(bid);
	fail(c);
}

static void on_recv(struct conn *c, struct io_uring_cqe *cqe)
{
	if (!(cqe->flags & IORING_CQE_F_MORE))
		c->recv_armed = false;
	if (cqe->res > 0) {
		if (!(cqe->flags & IORING_CQE_F_BUFFER))
			die("recv completion without a buffer");
		on_data(c, (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT), (size_t)cqe->res);
	} else if (cqe->res == -ENOBUFS) {
		st.enobufs++; /* the ring ran dry: re-armed below */
	} else if (cqe->res == 0) {
		c->eof = true;
	} else {
		fail(c);
	}
	if (!c->recv_armed && !c->eof && !c->closing)
		arm_recv(c);
	maybe_close(c);
}

static void on_send(struct conn *c, struct io_uring_cqe *cqe)
{
	c->sending = false;
	if (cqe->res >= 0 && (size_t)cqe->res < c->send_left && !c->closing) {
		/* Short despite MSG_WAITALL (a signal, say): send the rest. */
		start_send(c, c->send_p + cqe->res, c->send_left - (size_t)cqe->res, c->send_bid);
		return;
	}
	if (c->send_bid >= 0) {
		recycle(c->send_bid);
		held--;
		c->send_bid = -1;
	}
	if (cqe->res < 0)
		fail(c);
	else
		flush(c);
	maybe_close(c);
}

/* Control protocol (-control): the same as ServeMain's. */

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static bool read_file(const char *path, char *b, size_t n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t got = fread(b, 1, n - 1, f);
	fclose(f);
	b[got] = 0;
	return got > 0;
}

/* write_task writes one TaskStat (bench/procfs.go) for thread tid, or
 * nothing if the thread is gone. Returns whether it wrote. */
static bool write_task(FILE *f, const char *tid, bool first)
{
	char path[128], b[2048], sched[256];
	snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
	if (!read_file(path, b, sizeof b))
		return false;
	char *open = strchr(b, '('), *close_ = strrchr(b, ')');
	if (!open || !close_ || close_ < open)
		die("malformed %s", path);
	*close_ = 0;
	/* Fields after the comm start at field 3 (state); utime is field 14,
	 * stime 15, processor 39 (proc(5)). */
	unsigned long long field[40] = {0};
	int i = 3;
	for (char *save, *tok = strtok_r(close_ + 2, " ", &save); tok && i < 40; tok = strtok_r(NULL, " ", &save), i++)
		field[i] = strtoull(tok, NULL, 10);
	if (i < 40)
		die("%s has %d fields", path, i - 1);
	unsigned long long run = 0, wait = 0, slices = 0;
	snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", tid);
	if (read_file(path, sched, sizeof sched))
		sscanf(sched, "%llu %llu %llu", &run, &wait, &slices);
	fprintf(f, "%s{\"tid\":%s,\"comm\":", first ? "" : ",", tid);
	json_string(f, open + 1);
	fprintf(f, ",\"utime_ticks\":%llu,\"stime_ticks\":%llu,\"cpu\":%llu,\"run_ns\":%llu,\"timeslices\":%llu}",
		field[14], field[15], field[39], run, slices);
	return true;
}

/* write_usage writes one ServerUsage JSON line (bench/child.go): the
 * process's getrusage(RUSAGE_SELF) with the CLOCK_MONOTONIC time it was read,
 * every thread from /proc/self/task and the loop's counters. */
static void write_usage(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		die("getrusage: %s", strerror(errno));
	struct timespec mono;
	if (clock_gettime(CLOCK_MONOTONIC, &mono) < 0)
		die("clock_gettime: %s", strerror(errno));
	long long user = ru.ru_utime.tv_sec * 1000000000LL + ru.ru_utime.tv_usec * 1000LL;
	long long sys = ru.ru_stime.tv_sec * 1000000000LL + ru.ru_stime.tv_usec * 1000LL;
	long long mono_ns = mono.tv_sec * 1000000000LL + mono.tv_nsec;
	printf("{\"user_ns\":%lld,\"sys_ns\":%lld,\"nvcsw\":%ld,\"nivcsw\":%ld,\"mono_ns\":%lld,\"threads\":[", user, sys,
	       ru.ru_nvcsw, ru.ru_nivcsw, mono_ns);
	DIR *d = opendir("/proc/self/task");
	if (!d)
		die("/proc/self/task: %s", strerror(errno));
	bool first = true;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (e->d_name[0] == '.')
			continue;
		if (write_task(stdout, e->d_name, first))
			first = false;
	}
	closedir(d);
	printf("],\"counters\":{\"waits\":%llu,\"submits\":%llu,\"sqes\":%llu,\"cqes\":%llu,\"enobufs\":%llu,"
	       "\"accepts\":%llu,\"accept_errors\":%llu,\"closes\":%llu}}\n",
	       (unsigned long long)st.waits, (unsigned long long)st.submits, (unsigned long long)st.sqes,
	       (unsigned long long)st.cqes, (unsigned long long)st.enobufs, (unsigned long long)st.accepts,
	       (unsigned long long)st.accept_errors, (unsigned long long)st.closes);
	if (fflush(stdout) != 0)
		die("write usage: %s", strerror(errno));
}

static void on_ctl(struct io_uring_cqe *cqe)
{
	if (cqe->res == 0)
		exit(0); /* EOF on stdin: the harness is done with us */
	if (cqe->res < 0)
		die("read control input: %s", strerror(-cqe->res));
	ctl_len += (size_t)cqe->res;
	char *nl;
	while ((nl = memchr(ctl_buf, '\n', ctl_len)) != NULL) {
		*nl = 0;
		if (strcmp(ctl_buf, "usage") != 0)
			die("unknown control command \"%s\"", ctl_buf);
		write_usage();
		size_t used = (size_t)(nl + 1 - ctl_buf);
		memmove(ctl_buf, nl + 1, ctl_len - used);
		ctl_len -= used;
	}
	if (ctl_len == sizeof ctl_buf)
		die("control line longer than %zu bytes", sizeof ctl_buf);
	arm_ctl();
}

/* Listening, the self-check and the hello line. */

static void format_addr(const struct sockaddr_storage *ss, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN];
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
		snprintf(out, n, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		const struct sockaddr_in *a = (const void *)ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
		snprintf(out, n, "%s:%u", host, ntohs(a->sin_port));
	}
}

static struct sockaddr_storage listen_on(const char *addr)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= sizeof host)
		die("bad -listen address \"%s\" (want host:port)", addr);
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	char *h = host;
	if (h[0] == '[' && h[strlen(h) - 1] == ']') {
		h[strlen(h) - 1] = 0;
		h++;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
	struct addrinfo *ai;
	int ret = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &ai);
	if (ret != 0)
		die("-listen %s: %s", addr, gai_strerror(ret));
	lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket: %s", strerror(errno));
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("bind %s: %s", addr, strerror(errno));
	freeaddrinfo(ai);
	if (listen(lfd, SOMAXCONN) < 0)
		die("listen: %s", strerror(errno));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getsockname(lfd, (struct sockaddr *)&ss, &sl) < 0)
		die("getsockname: %s", strerror(errno));
	return ss;
}

/* start_check connects to the listener and sends one request, as
 * bench.AppendRequest(nil, 0xffff, 1, 16) makes it; its echo is read
 * through the ring while the loop serves, and only then is the server
 * ready. The handshake completes in the kernel without accept. */
static void start_check(const struct sockaddr_storage *ss)
{
	chk_fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (chk_fd < 0)
		die("self-check socket: %s", strerror(errno));
	socklen_t sl = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (connect(chk_fd, (const struct sockaddr *)ss, sl) < 0)
		die("self-check connect: %s", strerror(errno));
	const uint64_t seq = 1;
	const uint32_t id = 0xffff;
	unsigned char *p = chk_req;
	p[0] = 0, p[1] = 0, p[2] = 0, p[3] = 16;
	for (int i = 0; i < 8; i++)
		p[4 + i] = (unsigned char)(seq >> (8 * i));
	for (int i = 0; i < 4; i++)
		p[12 + i] = (unsigned char)(id >> (8 * i));
	for (int i = 12; i < 16; i++)
		p[4 + i] = (unsigned char)(seq * 31 + (uint64_t)i * 7 + id);
	if (send(chk_fd, chk_req, sizeof chk_req, MSG_NOSIGNAL) != (ssize_t)sizeof chk_req)
		die("self-check send: %s", strerror(errno));
	struct io_uring_sqe *sqe = get_sqe();
	io_uring_prep_recv(sqe, chk_fd, chk_got, sizeof chk_got, 0);
	io_uring_sqe_set_data64(sqe, udata(OP_CHECK, chk_fd));
}

static void on_check(struct io_uring_cqe *cqe, const char *addr)
{
	if (cqe->res <= 0)
		die("self-check: %s", cqe->res == 0 ? "connection closed without a reply" : strerror(-cqe->res));
	chk_n += (size_t)cqe->res;
	if (chk_n < sizeof chk_got) {
		struct io_uring_sqe *sqe = get_sqe();
		io_uring_prep_recv(sqe, chk_fd, chk_got + chk_n, sizeof chk_got - chk_n, 0);
		io_uring_sqe_set_data64(sqe, udata(OP_CHECK, chk_fd));
		return;
	}
	if (memcmp(chk_got, chk_req, sizeof chk_req) != 0)
		die("self-check: the reply differs from the request");
	close(chk_fd);
	chk_fd = -1;
	printf("{\"addr\":\"%s\",\"pid\":%d,\"arm\":\"" ARM_NAME "\",\"note\":\"io_uring %s\"}\n", addr, (int)getpid(),
	       setup_mode);
	if (fflush(stdout) != 0)
		die("write hello: %s", strerror(errno));
	if (control)
		arm_ctl();
}

/* Command line: the flags ServeMain takes. */

static void pin(const char *list)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	const char *s = list;
	while (*s) {
		char *end;
		long lo = strtol(s, &end, 10), hi = lo;
		if (end == s || lo < 0)
			die("bad CPU list \"%s\"", list);
		if (*end == '-') {
			s = end + 1;
			hi = strtol(s, &end, 10);
			if (end == s || hi < lo)
				die("bad CPU list \"%s\"", list);
		}
		if (hi >= CPU_SETSIZE)
			die("CPU %ld out of range", hi);
		for (long c = lo; c <= hi; c++)
			CPU_SET((int)c, &set);
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			die("bad CPU list \"%s\"", list);
	}
	if (CPU_COUNT(&set) == 0)
		return;
	if (sched_setaffinity(0, sizeof set, &set) < 0)
		die("pin server to CPUs %s: %s", list, strerror(errno));
	/* sched_setaffinity leaves out of the mask, without an error, the CPUs
	 * outside the caller's cpuset (it fails only when none is left): the
	 * report would name CPUs the server never ran on. */
	cpu_set_t got;
	if (sched_getaffinity(0, sizeof got, &got) < 0)
		die("sched_getaffinity: %s", strerror(errno));
	if (!CPU_EQUAL(&got, &set)) {
		char have[256] = "";
		size_t n = 0;
		for (int c = 0; c < CPU_SETSIZE && n + 8 < sizeof have; c++)
			if (CPU_ISSET(c, &got))
				n += (size_t)snprintf(have + n, sizeof have - n, "%s%d", n ? "," : "", c);
		die("pin server: asked for CPUs %s, the kernel let it run on CPU%s %s only (a cpuset without the others?)", list,
		    CPU_COUNT(&got) == 1 ? "" : "s", have);
	}
}

static long parse_int(const char *name, const char *v)
{
	char *end;
	long n = strtol(v, &end, 10);
	if (*v == 0 || *end != 0 || n < 0)
		die("bad -%s value \"%s\"", name, v);
	return n;
}

int main(int argc, char **argv)
{
	const char *listen_addr = "127.0.0.1:0", *cpus = "";
	long loops = 1;
	bool no_defer = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-')
			die("unexpected argument \"%s\"", a);
		a += a[1] == '-' ? 2 : 1;
		char name[32];
		const char *val = strchr(a, '=');
		size_t nl = val ? (size_t)(val - a) : strlen(a);
		if (nl >= sizeof name)
			die("unknown flag %s", argv[i]);
		memcpy(name, a, nl);
		name[nl] = 0;
		if (strcmp(name, "control") == 0) {
			control = !val || strcmp(val + 1, "true") == 0;
			continue;
		}
		if (strcmp(name, "no-defer-taskrun") == 0) {
			no_defer = !val || strcmp(val + 1, "true") == 0;
			continue;
		}
		if (val)
			val++;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			die("flag -%s needs a value", name);
		if (strcmp(name, "arm") == 0) {
			if (strcmp(val, ARM_NAME) != 0)
				die("this program serves only the " ARM_NAME " arm, not \"%s\"", val);
		} else if (strcmp(name, "listen") == 0) {
			listen_addr = val;
		} else if (strcmp(name, "loops") == 0) {
			loops = parse_int(name, val);
		} else if (strcmp(name, "cpus") == 0) {
			cpus = val;
		} else if (strcmp(name, "compute-us") == 0) {
			compute_ns = parse_int(name, val) * 1000LL;
		} else if (strcmp(name, "spare-cpus") == 0 || strcmp(name, "body") == 0) {
			/* No helper threads; no HTTP mode. */
		} else {
			die("unknown flag -%s", name);
		}
	}
	if (loops != 1)
		die("-loops %ld: the C reference server is one thread with one ring (-loops 1 only)", loops);
	signal(SIGPIPE, SIG_IGN);
	/* Raise the soft fd limit to the hard one, as the Go runtime does for
	 * the Go arms (and undoes for the children it starts, this one too):
	 * otherwise accepts fail with EMFILE past about a thousand
	 * connections. */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	/* Pin before the ring exists, so that every thread the kernel may
	 * start for it inherits the mask (as the Go children pin first). */
	pin(cpus);
	setup_ring(no_defer);
	struct sockaddr_storage ss = listen_on(listen_addr);
	char addr[INET6_ADDRSTRLEN + 16];
	format_addr(&ss, addr, sizeof addr);
	arm_accept();
	start_check(&ss);
	for (;;) {
		publish();
		int ret = io_uring_submit_and_wait(&ring, 1);
		st.waits++;
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME)
			die("io_uring_submit_and_wait: %s", strerror(-ret));
		unsigned head, n = 0;
		struct io_uring_cqe *cqe;
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			uint64_t ud = io_uring_cqe_get_data64(cqe);
			int fd = (int)(uint32_t)ud;
			enum op op = (enum op)(ud >> 32);
			if ((op == OP_RECV || op == OP_SEND) && (fd >= nconns || !conns[fd]))
				die("completion for fd %d, which has no connection", fd);
			switch (op) {
			case OP_ACCEPT:
				on_accept(cqe);
				break;
			case OP_ACCEPT_LATER:
				arm_accept();
				break;
			case OP_RECV:
				on_recv(conns[fd], cqe);
				break;
			case OP_SEND:
				on_send(conns[fd], cqe);
				break;
			case OP_CTRL:
				on_ctl(cqe);
				break;
			case OP_CHECK:
				on_check(cqe, addr);
				break;
			default:
				die("completion with unknown user_data %llx", (unsigned long long)ud);
			}
			n++;
		}
		io_uring_cq_advance(&ring, n);
		st.cqes += n;
	}
}
