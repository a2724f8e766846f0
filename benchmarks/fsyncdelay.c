/*
 * A disk whose flush costs what cloud block storage costs, for the benchmark.
 *
 * Loaded with LD_PRELOAD, this library sleeps FSYNC_DELAY_MS milliseconds (a decimal,
 * e.g. 2 or 0.5; unset, empty or 0: no sleep) in fsync() and fdatasync() before calling
 * the real function (found with dlsym(RTLD_NEXT)), so every durable commit of every
 * library in the process waits as it would on a network-attached disk (2-5 ms per
 * flush), while the data still reaches this machine's disk. SQLite (3.40, Debian's
 * libsqlite3) flushes with fdatasync() only and calls neither msync() nor
 * sync_file_range(), so those are left alone. The sleep releases the CPU, as a real
 * flush does. Each call adds one to a counter that fsyncdelay_calls() returns (for the
 * tests: a run of N flushes took at least N x the delay).
 *
 * Build: cc -shared -fPIC -O2 -o libfsyncdelay.so fsyncdelay.c -ldl
 * (benchmarks/fsyncdelay.py does it into benchmarks/.build/).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long delay_ns = -1;
static unsigned long calls = 0;

static long delay(void) {
    if (delay_ns < 0) {
        const char *text = getenv("FSYNC_DELAY_MS");
        double ms = text == NULL ? 0.0 : strtod(text, NULL);
        delay_ns = ms > 0.0 ? (long)(ms * 1e6) : 0;
    }
    return delay_ns;
}

static void wait_like_a_cloud_disk(void) {
    long ns = delay();
    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    if (ns == 0)
        return;
    struct timespec left = {ns / 1000000000L, ns % 1000000000L};
    int saved = errno; /* the caller sees the real call's errno only */
    while (nanosleep(&left, &left) == -1 && errno == EINTR)
        ;
    errno = saved;
}

int fsync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    wait_like_a_cloud_disk();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    wait_like_a_cloud_disk();
    return real(fd);
}

unsigned long fsyncdelay_calls(void) {
    return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}
