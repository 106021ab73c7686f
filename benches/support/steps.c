/* Where a wrapper's time goes before the test starts: runs argv[1..] (an
 * absolute path) single-stepped under ptrace, with stdin, stdout and stderr
 * on /dev/null, up to the moment it execs its test (or exits), then lets the
 * rest run untraced and waits for it. Prints one line on stdout:
 *
 *     <steps> <cpuid> <syscalls> <exec|exit> <exit status>
 *
 * - steps: instructions executed, each counted as one single step (a `rep`
 *   string instruction counts once per iteration, as the CPU traps on each);
 * - cpuid: how many of them were CPUID, which traps to the hypervisor on a
 *   virtual machine (glibc's static start-up probes the CPU with it);
 * - syscalls: how many were SYSCALL, the exec itself included;
 * - exec: the process exec'd a program (the test), and the counts stop
 *   there; exit: it ended without one (a direct exec of the test);
 * - exit status: of the whole run, the test's included (128+n for signal n).
 *
 * Instructions are classified by their first two bytes (0F A2 is CPUID,
 * 0F 05 SYSCALL), read at the instruction pointer before each step. No
 * timing and no hardware counters (these virtual machines expose none):
 * the same run counts the same, within a few dozen instructions (paths
 * that depend on addresses or on files left by an earlier run).
 *
 * Exit 125 when the tracing itself fails (no ptrace here, a program that
 * cannot be run), with one line on stderr. */
#if !defined(__x86_64__)
#error "steps.c reads x86-64 registers and opcodes (the benchmark runs on x86_64-unknown-linux-gnu)"
#endif
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *what) {
    fprintf(stderr, "steps: %s: %s\n", what, strerror(errno));
    return 125;
}

static int exit_status(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "steps: usage: steps /absolute/program [args...]\n");
        return 125;
    }
    pid_t pid = fork();
    if (pid < 0) return fail("fork");
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(125);
        if (null > 2) close(null);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) _exit(126);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    /* The first stop is the SIGTRAP of the traced execv: the program is
     * loaded and about to run its first instruction. */
    if (waitpid(pid, &status, 0) != pid) return fail("waitpid");
    if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) {
        if (WIFSTOPPED(status)) {
            kill(pid, SIGKILL);
            fprintf(stderr, "steps: %s stopped with signal %d before it started\n", argv[1], WSTOPSIG(status));
        } else {
            fprintf(stderr, "steps: %s did not start under ptrace (exit status %d: 126 no ptrace, 127 no exec)\n",
                    argv[1], exit_status(status));
        }
        return 125;
    }
    if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)(PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL)) != 0)
        return fail("PTRACE_SETOPTIONS");

    unsigned long steps = 0, cpuid = 0, syscalls = 0;
    int deliver = 0;
    for (;;) {
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) != 0) return fail("PTRACE_GETREGS");
        errno = 0;
        long word = ptrace(PTRACE_PEEKTEXT, pid, (void *)regs.rip, NULL);
        if (errno == 0 && (word & 0xff) == 0x0f) {
            unsigned op = ((unsigned long)word >> 8) & 0xff;
            cpuid += op == 0xa2;
            syscalls += op == 0x05;
        }
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)deliver) != 0) return fail("PTRACE_SINGLESTEP");
        deliver = 0;
        if (waitpid(pid, &status, 0) != pid) return fail("waitpid");
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            printf("%lu %lu %lu exit %d\n", steps + 1, cpuid, syscalls, exit_status(status));
            return 0;
        }
        if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_EXEC << 8))) break;
        if (WSTOPSIG(status) == SIGTRAP) {
            steps++;
        } else {
            deliver = WSTOPSIG(status); /* a signal of its own: passed on, no step taken */
        }
    }
    /* Stopped inside the execve of the test: that SYSCALL was the last
     * instruction counted. The test runs on untraced. */
    steps++;
    if (ptrace(PTRACE_DETACH, pid, NULL, NULL) != 0) return fail("PTRACE_DETACH");
    if (waitpid(pid, &status, 0) != pid) return fail("waitpid");
    printf("%lu %lu %lu exec %d\n", steps, cpuid, syscalls, exit_status(status));
    return 0;
}
