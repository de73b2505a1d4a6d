/* What the kernel's read system calls cost on a cached file, against pread(2).
 *
 *     gcc -O2 -o /tmp/pread_syscalls tools/pread_syscalls.c
 *     taskset -c 0 /tmp/pread_syscalls FILE
 *
 * FILE should be cached (`cat FILE > /dev/null` first) and at least 4 KiB. Each
 * variant reads the same 2,000 random 4 KiB blocks as pread(2) does; the two loops
 * run in turn, 300 pairs, and the median of the pairs' time ratios is printed
 * beside each one's mean time per read: passes milliseconds apart see the same
 * host, so the ratio keeps what separates the calls. ringio serves a cached read
 * with preadv2(RWF_NOWAIT), the only call that reads the page cache without
 * waiting for the device; this measures what that call costs over a plain pread.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096
#define READS 2000
#define PAIRS 300

enum call { PREAD, PREADV2_NOWAIT, PREADV2, PREADV };
static const char *const NAMES[] = {"pread", "preadv2 RWF_NOWAIT", "preadv2 0", "preadv"};

static int fd;
static char buf[BLOCK];
static off_t offsets[READS];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Seconds for one pass of `call` over the offsets; exits on a failed read. */
static double pass(enum call call)
{
    struct iovec v = {buf, BLOCK};
    double start = now();
    for (int i = 0; i < READS; i++) {
        ssize_t n = -1;
        switch (call) {
        case PREAD: n = pread(fd, buf, BLOCK, offsets[i]); break;
        case PREADV2_NOWAIT: n = preadv2(fd, &v, 1, offsets[i], RWF_NOWAIT); break;
        case PREADV2: n = preadv2(fd, &v, 1, offsets[i], 0); break;
        case PREADV: n = preadv(fd, &v, 1, offsets[i]); break;
        }
        if (n != BLOCK) {
            perror(n < 0 ? NAMES[call] : "short read (is the file cached?)");
            exit(1);
        }
    }
    return now() - start;
}

int main(int argc, char **argv)
{
    struct stat st;
    if (argc != 2 || (fd = open(argv[1], O_RDONLY)) < 0 || fstat(fd, &st) < 0 ||
        st.st_size < BLOCK) {
        fprintf(stderr, "usage: %s FILE (a cached file of at least 4 KiB)\n", argv[0]);
        return 2;
    }
    srand(42);
    for (int i = 0; i < READS; i++)
        offsets[i] = (off_t)(rand() % (st.st_size / BLOCK)) * BLOCK;
    for (enum call call = PREADV2_NOWAIT; call <= PREADV; call++) {
        double ratios[PAIRS], plain = 0, other = 0;
        pass(PREAD);
        pass(call);
        for (int p = 0; p < PAIRS; p++) {
            double a, b;
            if (p % 2) {
                a = pass(PREAD);
                b = pass(call);
            } else {
                b = pass(call);
                a = pass(PREAD);
            }
            ratios[p] = a / b;
            plain += a;
            other += b;
        }
        qsort(ratios, PAIRS, sizeof ratios[0], by_value);
        printf("%-19s %5.0f ns a read, pread %5.0f ns: pread's time / its, median %.3f\n",
               NAMES[call], other / PAIRS / READS * 1e9, plain / PAIRS / READS * 1e9,
               ratios[PAIRS / 2]);
    }
    return 0;
}
