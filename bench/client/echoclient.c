/*
 * echoclient: a closed-loop TCP echo load generator in the style of vmbench's
 * echo_client, compiled C so that the client costs little next to the server.
 *
 * Every connection sends one message of --size bytes, waits until the whole
 * echo has come back, records the latency, and sends the next one. Connections
 * are driven by epoll (level-triggered), one thread by default, --threads N to
 * spread them across N threads. Partial reads and writes are handled.
 *
 * Timeline: --warmup seconds whose requests are not recorded, then either
 * --duration seconds or --requests N recorded requests (whichever is given;
 * --requests wins). A hard --timeout ends the run in any case.
 *
 * Output: one JSON line on stdout. On a connection error (e.g. refused) a JSON
 * line with "ok": false and an "error" is printed, the message goes to stderr
 * too, and the exit status is 2. Bad arguments exit with status 64.
 *
 * Build: gcc -O2 -Wall -Wextra -o echoclient echoclient.c -pthread  (make bench-peers)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ histogram */
/* Log-linear buckets over nanoseconds: values below 256 exactly, then 128
 * sub-buckets per power of two (relative error < 0.8 %). */
#define SUB_BITS 7
#define SUB 128
#define NBUCKETS (256 + 56 * SUB)

typedef struct {
    uint64_t counts[NBUCKETS];
    uint64_t total, min, max;
    double sum;
} hist_t;

static int bucket_of(uint64_t v) {
    if (v < 256) return (int)v;
    int msb = 63 - __builtin_clzll(v);
    int shift = msb - SUB_BITS;
    int idx = 256 + (shift - 1) * SUB + (int)((v >> shift) - SUB);
    return idx < NBUCKETS ? idx : NBUCKETS - 1;
}

static double bucket_mid(int idx) {
    if (idx < 256) return (double)idx;
    int shift = (idx - 256) / SUB + 1;
    uint64_t mant = (uint64_t)((idx - 256) % SUB) + SUB;
    uint64_t lo = mant << shift;
    uint64_t width = (uint64_t)1 << shift;
    return (double)lo + (double)width / 2.0;
}

static void hist_add(hist_t *h, uint64_t v) {
    h->counts[bucket_of(v)]++;
    if (h->total == 0 || v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    h->total++;
    h->sum += (double)v;
}

static void hist_merge(hist_t *into, const hist_t *h) {
    for (int i = 0; i < NBUCKETS; i++) into->counts[i] += h->counts[i];
    if (h->total) {
        if (into->total == 0 || h->min < into->min) into->min = h->min;
        if (h->max > into->max) into->max = h->max;
    }
    into->total += h->total;
    into->sum += h->sum;
}

/* value (ns) at quantile q, clamped to the observed min/max */
static double hist_quantile(const hist_t *h, double q) {
    if (h->total == 0) return 0.0;
    uint64_t rank = (uint64_t)(q * (double)h->total + 0.999999);
    if (rank < 1) rank = 1;
    uint64_t seen = 0;
    for (int i = 0; i < NBUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            double v = bucket_mid(i);
            if (v < (double)h->min) v = (double)h->min;
            if (v > (double)h->max) v = (double)h->max;
            return v;
        }
    }
    return (double)h->max;
}

/* ------------------------------------------------------------ config */
typedef struct {
    const char *host;
    int port;
    size_t size;
    int concurrency;
    int threads;
    double duration;
    double warmup;
    long long requests; /* 0: run for duration */
    double timeout;
} config_t;

static config_t cfg = {"127.0.0.1", 0, 1024, 10, 1, 5.0, 1.0, 0, 0.0};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* shared run state */
static uint64_t t_start, t_measure, t_end, t_hard;
static atomic_llong recorded_total;   /* recorded requests across threads */
static atomic_int stop_flag;
static struct sockaddr_storage peer;
static socklen_t peer_len;
static unsigned char *txbuf;

/* ------------------------------------------------------------ connections */
typedef struct {
    int fd;
    int alive;
    int want_out;      /* EPOLLOUT registered */
    size_t sent, recvd;
    uint64_t t0;
    long long replies; /* recorded completions: a server can starve some connections */
} conn_t;

typedef struct {
    int id;
    int nconns;
    conn_t *conns;
    hist_t hist;
    long long requests;       /* recorded */
    long long warm_requests;  /* completed during warm-up */
    long long errors;
    char errmsg[256];
    int fatal;                /* connect failed */
    uint64_t last_done;       /* time of last recorded completion */
} worker_t;

static int set_events(int ep, conn_t *c, int out) {
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    c->want_out = out;
    return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_fail(worker_t *w, int ep, conn_t *c, const char *what, int err) {
    if (!c->alive) return;
    w->errors++;
    if (!w->errmsg[0])
        snprintf(w->errmsg, sizeof w->errmsg, "%s: %s", what, err ? strerror(err) : "closed by peer");
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->alive = 0;
}

/* write as much of the current message as the socket takes */
static void conn_write(worker_t *w, int ep, conn_t *c) {
    while (c->sent < cfg.size) {
        ssize_t n = send(c->fd, txbuf + c->sent, cfg.size - c->sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->sent += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->want_out) set_events(ep, c, 1);
            return;
        } else {
            conn_fail(w, ep, c, "send", errno);
            return;
        }
    }
    if (c->want_out) set_events(ep, c, 0);
}

static int keep_going(uint64_t t) {
    if (atomic_load(&stop_flag)) return 0;
    if (t >= t_hard) return 0;
    if (cfg.requests > 0) return atomic_load(&recorded_total) < cfg.requests;
    return t < t_end;
}

static void conn_start(worker_t *w, int ep, conn_t *c, uint64_t t) {
    c->sent = 0;
    c->recvd = 0;
    c->t0 = t;
    conn_write(w, ep, c);
}

static void conn_read(worker_t *w, int ep, conn_t *c, unsigned char *scratch, size_t scratch_len) {
    for (;;) {
        ssize_t n = recv(c->fd, scratch, scratch_len, 0);
        if (n > 0) {
            c->recvd += (size_t)n;
            if (c->recvd > c->sent) {
                conn_fail(w, ep, c, "protocol: peer sent more than was echoed", 0);
                return;
            }
            if (c->recvd == cfg.size) {
                uint64_t t = now_ns();
                if (c->t0 >= t_measure && (cfg.requests > 0 || t <= t_end)) {
                    long long prev = atomic_fetch_add(&recorded_total, 1);
                    if (cfg.requests == 0 || prev < cfg.requests) {
                        hist_add(&w->hist, t - c->t0);
                        w->requests++;
                        c->replies++;
                        w->last_done = t;
                    }
                } else if (c->t0 < t_measure) {
                    w->warm_requests++;
                }
                if (!keep_going(t)) {
                    /* finished: stop issuing on this connection */
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    c->alive = 0;
                    return;
                }
                conn_start(w, ep, c, t);
                if (!c->alive) return;
            }
        } else if (n == 0) {
            conn_fail(w, ep, c, "recv", 0);
            return;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            conn_fail(w, ep, c, "recv", errno);
            return;
        }
    }
}

static int fcntl_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    /* clear the connect-time send timeout too */
    struct timeval tv = {0, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int connect_one(worker_t *w, conn_t *c) {
    int fd = socket(peer.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(w->errmsg, sizeof w->errmsg, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* blocking connect (loopback), bounded by a send timeout */
    struct timeval tv = {.tv_sec = 10, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&peer, peer_len) != 0) {
        char addr[128];
        int err = errno;
        snprintf(addr, sizeof addr, "%s:%d", cfg.host, cfg.port);
        snprintf(w->errmsg, sizeof w->errmsg, "connect %s: %s", addr, strerror(err));
        close(fd);
        return -1;
    }
    if (fcntl_nonblock(fd) != 0) {
        snprintf(w->errmsg, sizeof w->errmsg, "fcntl: %s", strerror(errno));
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->alive = 1;
    return 0;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    size_t scratch_len = cfg.size < 65536 ? 65536 : cfg.size;
    unsigned char *scratch = malloc(scratch_len);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event *evs = calloc((size_t)w->nconns, sizeof *evs);
    if (!scratch || ep < 0 || !evs) {
        snprintf(w->errmsg, sizeof w->errmsg, "out of resources");
        w->fatal = 1;
        goto out;
    }
    for (int i = 0; i < w->nconns; i++) {
        conn_t *c = &w->conns[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        c->want_out = 0;
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    uint64_t t = now_ns();
    for (int i = 0; i < w->nconns; i++) conn_start(w, ep, &w->conns[i], t);

    for (;;) {
        int alive = 0;
        for (int i = 0; i < w->nconns; i++) alive += w->conns[i].alive;
        if (!alive) break;
        t = now_ns();
        if (t >= t_hard || atomic_load(&stop_flag)) break;
        if (cfg.requests == 0 && t >= t_end) break; /* in-flight requests are not counted */
        if (cfg.requests > 0 && atomic_load(&recorded_total) >= cfg.requests) break;
        int n = epoll_wait(ep, evs, w->nconns, 50);
        if (n < 0) {
            if (errno == EINTR) continue;
            snprintf(w->errmsg, sizeof w->errmsg, "epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            if (!c->alive) continue;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_read(w, ep, c, scratch, scratch_len);
            if (c->alive && (evs[i].events & EPOLLOUT)) conn_write(w, ep, c);
        }
    }
out:
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].alive) {
            close(w->conns[i].fd);
            w->conns[i].alive = 0;
        }
    if (ep >= 0) close(ep);
    free(evs);
    free(scratch);
    return NULL;
}

/* ------------------------------------------------------------ main */
static void usage(FILE *f) {
    fprintf(f,
            "usage: echoclient [--host H] --port P [--size BYTES] [--concurrency N]\n"
            "                  [--duration SEC | --requests N] [--warmup SEC]\n"
            "                  [--threads N] [--timeout SEC]\n"
            "Closed-loop echo client; prints one JSON line.\n");
}

static void json_error(const char *msg) {
    fprintf(stderr, "echoclient: %s\n", msg);
    printf("{\"ok\":false,\"error\":\"");
    for (const char *p = msg; *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        if ((unsigned char)*p >= 0x20) putchar(*p);
    }
    printf("\",\"host\":\"%s\",\"port\":%d}\n", cfg.host, cfg.port);
    fflush(stdout);
}

int main(int argc, char **argv) {
    static struct option opts[] = {
        {"host", required_argument, 0, 'H'},     {"port", required_argument, 0, 'p'},
        {"size", required_argument, 0, 's'},     {"concurrency", required_argument, 0, 'c'},
        {"duration", required_argument, 0, 'd'}, {"requests", required_argument, 0, 'n'},
        {"warmup", required_argument, 0, 'w'},   {"threads", required_argument, 0, 't'},
        {"timeout", required_argument, 0, 'T'},  {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "H:p:s:c:d:n:w:t:T:h", opts, NULL)) != -1) {
        switch (o) {
        case 'H': cfg.host = optarg; break;
        case 'p': cfg.port = atoi(optarg); break;
        case 's': cfg.size = (size_t)strtoull(optarg, NULL, 10); break;
        case 'c': cfg.concurrency = atoi(optarg); break;
        case 'd': cfg.duration = atof(optarg); break;
        case 'n': cfg.requests = atoll(optarg); break;
        case 'w': cfg.warmup = atof(optarg); break;
        case 't': cfg.threads = atoi(optarg); break;
        case 'T': cfg.timeout = atof(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 64;
        }
    }
    if (cfg.port <= 0 || cfg.port > 65535 || cfg.size == 0 || cfg.concurrency <= 0 ||
        cfg.threads <= 0 || cfg.duration <= 0 || cfg.warmup < 0 || cfg.requests < 0 ||
        cfg.timeout < 0 || cfg.size > (1u << 30)) {
        usage(stderr);
        return 64;
    }
    if (cfg.threads > cfg.concurrency) cfg.threads = cfg.concurrency;
    if (cfg.timeout == 0) cfg.timeout = cfg.warmup + (cfg.requests ? 60.0 : cfg.duration) + 10.0;

    /* enough descriptors for the connections */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", cfg.port);
    int gai = getaddrinfo(cfg.host, portstr, &hints, &ai);
    if (gai != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "resolve %s: %s", cfg.host, gai_strerror(gai));
        json_error(msg);
        return 2;
    }
    memcpy(&peer, ai->ai_addr, ai->ai_addrlen);
    peer_len = ai->ai_addrlen;
    freeaddrinfo(ai);

    txbuf = malloc(cfg.size);
    if (!txbuf) {
        json_error("out of memory");
        return 2;
    }
    for (size_t i = 0; i < cfg.size; i++) txbuf[i] = (unsigned char)('a' + i % 26);

    worker_t *ws = calloc((size_t)cfg.threads, sizeof *ws);
    conn_t *conns = calloc((size_t)cfg.concurrency, sizeof *conns);
    if (!ws || !conns) {
        json_error("out of memory");
        return 2;
    }
    /* connect everything up front; any failure is fatal */
    int per = cfg.concurrency / cfg.threads, extra = cfg.concurrency % cfg.threads, k = 0;
    for (int i = 0; i < cfg.threads; i++) {
        ws[i].id = i;
        ws[i].nconns = per + (i < extra);
        ws[i].conns = conns + k;
        k += ws[i].nconns;
    }
    for (int i = 0; i < cfg.concurrency; i++) {
        worker_t *w = &ws[0];
        if (connect_one(w, &conns[i]) != 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s", w->errmsg);
            json_error(msg);
            for (int j = 0; j < i; j++) close(conns[j].fd);
            return 2;
        }
    }

    t_start = now_ns();
    t_measure = t_start + (uint64_t)(cfg.warmup * 1e9);
    t_end = t_measure + (uint64_t)(cfg.duration * 1e9);
    t_hard = t_start + (uint64_t)(cfg.timeout * 1e9);

    pthread_t *tids = calloc((size_t)cfg.threads, sizeof *tids);
    for (int i = 1; i < cfg.threads; i++) pthread_create(&tids[i], NULL, worker_main, &ws[i]);
    worker_main(&ws[0]);
    for (int i = 1; i < cfg.threads; i++) pthread_join(tids[i], NULL);
    uint64_t t_stop = now_ns();

    hist_t *all = calloc(1, sizeof *all);
    long long requests = 0, errors = 0, warm = 0;
    uint64_t last = 0;
    const char *firsterr = "";
    for (int i = 0; i < cfg.threads; i++) {
        hist_merge(all, &ws[i].hist);
        requests += ws[i].requests;
        errors += ws[i].errors;
        warm += ws[i].warm_requests;
        if (ws[i].last_done > last) last = ws[i].last_done;
        if (!firsterr[0] && ws[i].errmsg[0]) firsterr = ws[i].errmsg;
    }
    /* Latencies are those of the requests that completed: connections a server
       leaves waiting for the whole window add none (survivorship), so say how
       many there were. By Little's law the mean latency of a fair server is
       about concurrency / req_per_s. */
    int without_reply = 0;
    long long min_replies = -1;
    for (int i = 0; i < cfg.concurrency; i++) {
        if (conns[i].replies == 0) without_reply++;
        if (min_replies < 0 || conns[i].replies < min_replies) min_replies = conns[i].replies;
    }
    /* measured window: the fixed duration, or until the last recorded request */
    uint64_t t_win = cfg.requests > 0 ? (last > t_measure ? last : t_stop)
                                      : (t_stop < t_end ? t_stop : t_end);
    double elapsed = t_win > t_measure ? (double)(t_win - t_measure) / 1e9 : 0.0;
    double rate_den = elapsed > 0 ? elapsed : 1e-9;
    int timed_out = t_stop >= t_hard;
    double rps = (double)requests / rate_den;
    double mbps = rps * (double)cfg.size / 1e6;

    printf("{\"ok\":%s,\"host\":\"%s\",\"port\":%d,\"size\":%zu,\"concurrency\":%d,"
           "\"threads\":%d,\"warmup_s\":%.3f,\"duration_s\":%.6f,\"requests\":%lld,"
           "\"warmup_requests\":%lld,\"req_per_s\":%.3f,\"mb_per_s\":%.3f,"
           "\"latency_us\":{\"min\":%.3f,\"mean\":%.3f,\"p50\":%.3f,\"p90\":%.3f,"
           "\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f},\"errors\":%lld,\"timed_out\":%s",
           (requests > 0 && !timed_out) ? "true" : "false", cfg.host, cfg.port, cfg.size,
           cfg.concurrency, cfg.threads, cfg.warmup, elapsed, requests, warm, rps, mbps,
           all->total ? (double)all->min / 1e3 : 0.0,
           all->total ? all->sum / (double)all->total / 1e3 : 0.0,
           hist_quantile(all, 0.50) / 1e3, hist_quantile(all, 0.90) / 1e3,
           hist_quantile(all, 0.99) / 1e3, hist_quantile(all, 0.999) / 1e3,
           (double)all->max / 1e3, errors, timed_out ? "true" : "false");
    printf(",\"conns_without_reply\":%d,\"min_replies_per_conn\":%lld", without_reply,
           min_replies < 0 ? 0 : min_replies);
    if (firsterr[0]) {
        printf(",\"first_error\":\"");
        for (const char *p = firsterr; *p; p++) {
            if (*p == '"' || *p == '\\') putchar('\\');
            putchar(*p);
        }
        putchar('"');
    }
    printf(",\"mb_per_s_note\":\"payload bytes one way per second, 1 MB = 1e6 B\"}\n");
    fflush(stdout);
    return (requests > 0 && !timed_out) ? 0 : 3;
}

