/* The slot floors: the system calls that giving a test one GPU slot needs
 * under this project's contract, and nothing else, then exec; and, on a
 * host with no GPU, those of the pass-through (pass_through, below). Built with
 * `cc -static -O2` like the plain floor; a wrapper's ratio to this floor is
 * what its own code costs on that path, and this floor's ratio to the plain
 * one is what the contract's kernel work costs on the machine at hand.
 *
 * The count: with TF_GPU_COUNT set, no hardware is probed (the
 * `TF_GPU_COUNT floor`). Otherwise (the `KFD floor`), for each node of
 * <sysroot>/sys/class/kfd/kfd/topology/nodes it reads `properties`, and for
 * each GPU node (simd_count > 0) it opens and closes its render node
 * read-write, as the wrappers' contract asks, and asks access(2) whether
 * <sysroot>/dev/kfd may be opened read-write (once).
 *
 * The slot, as the wrapper must take it on either path:
 * - the standard descriptors checked to be open (poll), so that no lock can
 *   land on 0, 1 or 2;
 * - the test checked before any slot is taken: a regular file (stat: a
 *   directory is refused as such) that may be executed (access);
 * - the lock directory opened (created only when missing);
 * - the drained GPUs and the waiters' records looked for (`gpudrain/` and
 *   `gpuqueue/`: absent here, so none is drained and nobody waits);
 * - `gpulock0_0` opened (created when missing), checked to be a regular
 *   file (fstat), flock'ed, then checked to still be the file at its path
 *   (fstatat against that fstat), `gpuqueue/` looked for again with the
 *   lock held (the first look read no clock, so it may be older than the
 *   lock), and its times set (futimens: cleaners see it in use);
 * - one name per physical GPU: no jobs with physical lock names share the
 *   directory (access of `gpulock.physical`);
 * - the annotation `parallel_gpu_execute.part` written into
 *   TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR (created, or rewritten in place
 *   and cut to length only when an fstat says it was longer: an O_TRUNC of
 *   an existing file costs more on ext4, and an ftruncate that changes
 *   nothing still updates the file's times);
 * - the "Running test" line on stderr;
 * - ROCR_ and HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES with
 *   TF_GPU_COUNT) and TF_PER_DEVICE_MEMORY_LIMIT_MB set, then execv, the
 *   lock inherited (opened without O_CLOEXEC, so no fcntl is needed).
 * What it leaves out that the wrapper does: the NVIDIA probe on the KFD
 * path (the mixed-host rule), and every check of a value or error. It
 * opens with openat(2) (musl's open(3) adds an fcntl for O_CLOEXEC) and
 * builds the test's environment on its stack (setenv(3) allocates), so
 * that the C library adds no system call the contract does not need.
 *
 * The sysroot and lock directory come from PARALLEL_GPU_EXECUTE_SYSROOT and
 * PARALLEL_GPU_EXECUTE_LOCK_DIR, as the wrapper reads them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

struct dirent64_raw {
    unsigned long long ino;
    long long off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* The number after `key ` on a line of `text`, or -1. */
static long field(const char *text, const char *key) {
    size_t n = strlen(key);
    for (const char *p = text; (p = strstr(p, key)) != NULL; p += n) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtol(p + n + 1, NULL, 10);
    }
    return -1;
}

/* Reads every KFD node's properties and opens each GPU's render node. */
static int count_kfd(const char *root) {
    char path[4096];
    snprintf(path, sizeof path, "%s/sys/class/kfd/kfd/topology/nodes", root);
    int nodes = openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (nodes < 0) return 0;
    int gpus = 0;
    char dents[4096];
    long got;
    while ((got = syscall(SYS_getdents64, nodes, dents, sizeof dents)) > 0) {
        for (long at = 0; at < got;) {
            struct dirent64_raw *d = (struct dirent64_raw *)(dents + at);
            at += d->reclen;
            if (d->name[0] == '.') continue;
            char rel[512], props[1024];
            snprintf(rel, sizeof rel, "%s/properties", d->name);
            int fd = openat(nodes, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
            if (fd < 0) continue;
            ssize_t n = read(fd, props, sizeof props - 1);
            close(fd);
            props[n > 0 ? n : 0] = '\0';
            long minor = field(props, "drm_render_minor");
            if (field(props, "simd_count") > 0 && minor > 0) {
                snprintf(path, sizeof path, "%s/dev/dri/renderD%ld", root, minor);
                int node = openat(AT_FDCWD, path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
                if (node >= 0) {
                    close(node);
                    gpus++;
                }
            }
        }
    }
    close(nodes);
    snprintf(path, sizeof path, "%s/dev/kfd", root);
    return gpus > 0 && access(path, R_OK | W_OK) == 0 ? gpus : 0;
}

/* The pass-through (the `pass-through floor`): no GPU on the KFD path
 * (its nodes directory looked for by count_kfd), none on the NVIDIA one
 * (<sysroot>/proc/driver/nvidia/gpus opened, <sysroot>/dev/nvidiactl asked
 * about), rocminfo looked for in the runfiles MANIFEST (the classic
 * search: `RUNFILES_MANIFEST_FILE`, else `<RUNFILES_DIR or TEST_SRCDIR>/
 * MANIFEST`, read to its end), the "no GPU" line, then execve. */
static int pass_through(const char *root, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/proc/driver/nvidia/gpus", root);
    int gpus = openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (gpus >= 0) return 3;
    snprintf(path, sizeof path, "%s/dev/nvidiactl", root);
    if (access(path, F_OK) == 0) return 3;
    const char *manifest = getenv("RUNFILES_MANIFEST_FILE");
    const char *runfiles = getenv("RUNFILES_DIR");
    if (runfiles == NULL || *runfiles == '\0') runfiles = getenv("TEST_SRCDIR");
    if ((manifest == NULL || *manifest == '\0') && runfiles != NULL) {
        snprintf(path, sizeof path, "%s/MANIFEST", runfiles);
        manifest = path;
    }
    if (manifest != NULL) {
        static char text[16384];
        int fd = openat(AT_FDCWD, manifest, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        ssize_t n;
        while (fd >= 0 && (n = read(fd, text, sizeof text - 1)) > 0) {
            text[n] = '\0';
            if (strstr(text, "/rocminfo ") != NULL) return 3;
        }
        if (fd >= 0) close(fd);
    }
    static const char line[] = "Execute with no GPU support\n";
    if (write(2, line, sizeof line - 1) < 0) { /* as the wrapper */ }
    execve(argv[1], argv + 1, environ);
    return 127;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *root = getenv("PARALLEL_GPU_EXECUTE_SYSROOT");
    const char *locks = getenv("PARALLEL_GPU_EXECUTE_LOCK_DIR");
    const char *count = getenv("TF_GPU_COUNT");
    const char *notes = getenv("TEST_UNDECLARED_OUTPUTS_ANNOTATIONS_DIR");
    if (root == NULL) root = "";
    if (locks == NULL) locks = "/var/lock";
    int gpus = count != NULL && *count != '\0' ? atoi(count) : count_kfd(root);
    if (gpus < 1) return pass_through(root, argv);
    struct pollfd std[3] = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}};
    if (poll(std, 3, 0) < 0 || (std[0].revents | std[1].revents | std[2].revents) & POLLNVAL) return 2;
    struct stat test;
    if (stat(argv[1], &test) != 0 || !S_ISREG(test.st_mode) || access(argv[1], X_OK) != 0) return 127;

    int dir = openat(AT_FDCWD, locks, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 && errno == ENOENT && mkdir(locks, 0777) == 0)
        dir = openat(AT_FDCWD, locks, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return 2;
    if (openat(dir, "gpudrain", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) >= 0) return 4;
    /* someone waits: not the path this floor measures */
    if (openat(dir, "gpuqueue", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) >= 0) return 4;
    int lock = openat(dir, "gpulock0_0", O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (lock < 0 && errno == ENOENT) lock = openat(dir, "gpulock0_0", O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
    struct stat held, named;
    if (lock < 0 || fstat(lock, &held) != 0 || !S_ISREG(held.st_mode)) return 2;
    if (flock(lock, LOCK_EX | LOCK_NB) != 0) return 1;
    if (fstatat(dir, "gpulock0_0", &named, AT_SYMLINK_NOFOLLOW) != 0 || held.st_dev != named.st_dev ||
        held.st_ino != named.st_ino)
        return 1;
    /* the queue read again with the lock held: the look read no clock, so
       it may be older than the lock (docs/design.md, step 1) */
    if (openat(dir, "gpuqueue", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) >= 0) return 4;
    futimens(lock, NULL);
    if (faccessat(dir, "gpulock.physical", F_OK, 0) == 0) return 2;

    const char *mode = count != NULL && *count != '\0' ? "cuda" : "rocm";
    if (notes != NULL && *notes != '\0') {
        char path[4096], line[256];
        snprintf(path, sizeof path, "%s/parallel_gpu_execute.part", notes);
        int len = snprintf(line, sizeof line, "parallel_gpu_execute: GPU(s) 0 slot 0 mode %s waited 0.0 s\n", mode);
        int fd = openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
        struct stat before;
        if (fd >= 0 && fstat(fd, &before) == 0 && write(fd, line, len) == len && before.st_size > len)
            ftruncate(fd, len);
        if (fd >= 0) close(fd);
    }
    char line[4096];
    int len = snprintf(line, sizeof line, "Running test %s on GPU(s) 0\n", argv[1]);
    if (write(2, line, len) < 0) { /* as the wrapper: a closed stderr does not stop the test */ }
    /* The test's environment, built on the stack: setenv's allocation
     * would be system calls (brk, mmap) that the contract does not need.
     * The benchmark's environment sets none of these already. */
    size_t n = 0;
    while (environ[n] != NULL) n++;
    char *envp[n + 4];
    memcpy(envp, environ, n * sizeof *envp);
    if (count != NULL && *count != '\0') {
        envp[n++] = "CUDA_VISIBLE_DEVICES=0";
        if (getenv("TF_PER_DEVICE_MEMORY_LIMIT_MB") == NULL) envp[n++] = "TF_PER_DEVICE_MEMORY_LIMIT_MB=4200";
    } else {
        envp[n++] = "ROCR_VISIBLE_DEVICES=0";
        envp[n++] = "HIP_VISIBLE_DEVICES=0";
        if (getenv("TF_PER_DEVICE_MEMORY_LIMIT_MB") == NULL) envp[n++] = "TF_PER_DEVICE_MEMORY_LIMIT_MB=4096";
    }
    envp[n] = NULL;
    execve(argv[1], argv + 1, envp);
    return 127;
}
