/*
 * LD_PRELOAD library for the allocation-free checks (tests/alloc_free.rs).
 *
 * Counts every heap allocation a dynamically linked process makes, from the
 * moment this library is initialised (before main), and appends one line to
 * $ALLOC_COUNT_FILE when the process calls execve ("<pid> execve <n> <path>")
 * or exits ("<pid> exit <n>"). Allocation calls are forwarded to glibc's own
 * implementations, so behaviour is otherwise unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static unsigned long allocations;

void *malloc(size_t n) { allocations++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { allocations++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { allocations++; return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { allocations++; return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { allocations++; return __libc_memalign(a, n); }
void *valloc(size_t n) { allocations++; return __libc_memalign(4096, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    allocations++;
    void *p = __libc_memalign(a, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void free(void *p) { __libc_free(p); }

/* Formats and appends a line without allocating (no stdio). */
static void report(const char *event, const char *path) {
    const char *file = getenv("ALLOC_COUNT_FILE");
    if (!file) return;
    char line[4200];
    int len = snprintf(line, sizeof line, "%ld %s %lu %s\n", (long)getpid(), event, allocations, path ? path : "");
    if (len < 0) return;
    if ((size_t)len > sizeof line) len = sizeof line;
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    (void)!write(fd, line, (size_t)len);
    close(fd);
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    report("execve", path);
    return (int)syscall(SYS_execve, path, argv, envp);
}

__attribute__((constructor)) static void start(void) {
    /* Whatever the loader and libc did before this point is not the program's. */
    allocations = 0;
}

__attribute__((destructor)) static void finish(void) { report("exit", 0); }
