/* The test of the contention run: holds its GPU slot (the lock descriptor it
 * inherited) for argv[1] milliseconds, 100 by default, then exits 0. */
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 100;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
    return 0;
}
