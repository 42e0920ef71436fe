/*
 * A virtual monotonic clock for `cargo xtask instr`, preloaded into the
 * measured program (LD_PRELOAD). Code whose path depends on the clock's
 * value (comparing two Instants, tokio's timer wheel) made the instruction
 * counts of the sequential cells move by a few per call between runs; with
 * this clock every run sees the same times: CLOCK_MONOTONIC starts at
 * 1000 s and advances 1 us per read. The real clock is still read first,
 * so a read costs what it costs; xtask subtracts this file's own
 * instructions (callgrind keeps them apart by source file).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

static int (*real_clock_gettime)(clockid_t, struct timespec *);
static unsigned long long reads;

int clock_gettime(clockid_t id, struct timespec *ts) {
    if (!real_clock_gettime)
        real_clock_gettime =
            (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int r = real_clock_gettime(id, ts);
    if (r == 0 && id == CLOCK_MONOTONIC) {
        unsigned long long n = __atomic_add_fetch(&reads, 1, __ATOMIC_RELAXED);
        unsigned long long ns = 1000ULL * 1000000000ULL + n * 1000ULL;
        ts->tv_sec = (time_t)(ns / 1000000000ULL);
        ts->tv_nsec = (long)(ns % 1000000000ULL);
    }
    return r;
}
