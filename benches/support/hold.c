/* The test of the contention runs: holds its GPU slot (the lock descriptor
 * it inherited) for argv[1] milliseconds, 100 by default, then exits 0.
 * With HOLD_RECORD set, it writes one line there as its last act: the
 * wall-clock nanoseconds of its first act and of its last, and the CPU
 * nanoseconds the process had used at its start (CLOCK_PROCESS_CPUTIME_ID,
 * which an exec does not reset): the wrapper's, before it exec'd this
 * test. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The time the process has spent on a CPU, in nanoseconds. */
static long long cpu_ns(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return -1;
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    long long start = now_ns();
    long long cpu = getenv("HOLD_RECORD") ? cpu_ns() : 0;
    long ms = argc > 1 ? atol(argv[1]) : 100;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
    const char *record = getenv("HOLD_RECORD");
    if (record) {
        char line[128];
        int len = snprintf(line, sizeof line, "%lld %lld %lld\n", start, now_ns(), cpu);
        int fd = open(record, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            if (write(fd, line, len) != len) return 3;
            close(fd);
        }
    }
    return 0;
}
