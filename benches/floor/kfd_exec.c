/* The KFD floor: the system calls that counting AMD GPUs through the KFD
 * topology and taking one slot need, and nothing else, then exec. For each
 * node of <sysroot>/sys/class/kfd/kfd/topology/nodes it reads `properties`;
 * for each GPU node (simd_count > 0) it opens and closes its render node
 * read-write, as the wrappers' contract asks; then it takes
 * <lockdir>/gpulock0_0 with flock, sets ROCR_ and HIP_VISIBLE_DEVICES and
 * execs its arguments. Built with `cc -static -O2` like the plain floor.
 *
 * A wrapper's ratio to this floor is what its own code costs on the KFD
 * path; the plain floor's ratio to this one is what the kernel work the
 * KFD source needs costs on the machine at hand. The sysroot and lock
 * directory come from PARALLEL_GPU_EXECUTE_SYSROOT and
 * PARALLEL_GPU_EXECUTE_LOCK_DIR, as the wrapper reads them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
    (void)argc;
    const char *root = getenv("PARALLEL_GPU_EXECUTE_SYSROOT");
    const char *locks = getenv("PARALLEL_GPU_EXECUTE_LOCK_DIR");
    if (root == NULL) root = "";
    if (locks == NULL) locks = "/var/lock";
    char path[4096];
    snprintf(path, sizeof path, "%s/sys/class/kfd/kfd/topology/nodes", root);
    int nodes = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (nodes < 0) return 2;
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
                int node = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
                if (node >= 0) close(node);
            }
        }
    }
    close(nodes);
    mkdir(locks, 0777);
    int dir = open(locks, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int lock = openat(dir, "gpulock0_0", O_RDONLY | O_CREAT, 0666);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0) return 1;
    close(dir);
    setenv("ROCR_VISIBLE_DEVICES", "0", 1);
    setenv("HIP_VISIBLE_DEVICES", "0", 1);
    execv(argv[1], argv + 1);
    return 127;
}
