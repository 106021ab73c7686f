/* Runs argv[1..] (an absolute path) with stdout and stderr on /dev/null,
 * waits for it, and prints "<ru_maxrss in KiB> <wait status>" on stdout.
 *
 * Why a separate program: a child's ru_maxrss starts from the memory of the
 * process that forked (or vforked) it, because execve folds the old address
 * space's high-water mark into the process's maximum. Launched from the
 * benchmark itself, every case would show the benchmark's own few MiB. This
 * launcher is a small static C program, so the figure is the wrapper's (or
 * the test's) own peak, at least this launcher's few hundred KiB; the
 * "direct" row shows that floor. The figure includes the children a process
 * waited for (rocminfo, for the rows that run it). */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv) {
    posix_spawn_file_actions_t actions;
    pid_t pid;
    int status;
    struct rusage usage;
    if (argc < 2) return 125;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid, argv[1], &actions, NULL, argv + 1, environ) != 0) return 125;
    if (wait4(pid, &status, 0, &usage) != pid) return 125;
    printf("%ld %d\n", usage.ru_maxrss, status);
    return 0;
}
