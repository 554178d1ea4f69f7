/* Preloaded into a node: stalls or fails its fsync/fdatasync and write calls on files under one
 * directory (the node's data dir, never its log files), as a control file says.
 *
 * Environment:
 *   KCHAOS_DISK_CONTROL  the control file (CONTROL_BYTES long), mapped shared and read on every call
 *   KCHAOS_DISK_DIR      only files whose path starts with this directory + "/" are affected
 *
 * Control file: byte 0 is '1' while a fault is active, anything else means healthy. From byte 2 on,
 * "OPS ACTION DELAY_US ERRNO PROB_PPM": OPS a bit mask (1 fsync/fdatasync, 2 write/pwrite/writev/
 * pwritev), ACTION 'S' (stall by DELAY_US) or 'F' (fail with ERRNO, each call with probability
 * PROB_PPM / 1e6). The harness rewrites it in place (the mapping must see the same inode): the
 * parameters first, then byte 0, so a call never sees byte 0 set over half-written parameters.
 *
 * Healthy, a call costs one load from the mapping. Faulty, a call resolves its fd's path
 * (/proc/self/fd) to decide whether it is under the directory.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define CONTROL_BYTES 64
#define OP_FSYNC 1
#define OP_WRITE 2

static const volatile char *control;
static char dir_prefix[4096];
static size_t dir_prefix_len;

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off64_t);

#define NEXT(name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name)
/* A call made before the constructor ran (another library's constructor, say) resolves its own. */
#define CALL(name, ...) (real_##name != NULL || (NEXT(name)) != NULL ? real_##name(__VA_ARGS__) : (errno = ENOSYS, -1))

__attribute__((constructor)) static void kchaos_disk_init(void) {
    NEXT(fsync);
    NEXT(fdatasync);
    NEXT(write);
    NEXT(pwrite);
    NEXT(pwrite64);
    NEXT(writev);
    NEXT(pwritev);
    NEXT(pwritev64);
    const char *path = getenv("KCHAOS_DISK_CONTROL");
    const char *dir = getenv("KCHAOS_DISK_DIR");
    if (path == NULL || dir == NULL || strlen(dir) + 2 > sizeof dir_prefix) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void *map = mmap(NULL, CONTROL_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return;
    snprintf(dir_prefix, sizeof dir_prefix, "%s/", dir);
    dir_prefix_len = strlen(dir_prefix);
    control = map;
}

struct fault {
    int ops;
    char action;
    long delay_us;
    int err;
    long prob_ppm;
};

/* The fault that applies to this call on `fd`, or 0 when it runs normally. */
static int current_fault(int op, int fd, struct fault *f) {
    if (control == NULL || control[0] != '1') return 0;
    char params[CONTROL_BYTES - 1];
    memcpy(params, (const char *)control + 2, CONTROL_BYTES - 2);
    params[CONTROL_BYTES - 2] = '\0';
    if (sscanf(params, "%d %c %ld %d %ld", &f->ops, &f->action, &f->delay_us, &f->err, &f->prob_ppm) != 5) return 0;
    if (!(f->ops & op) || fd < 0) return 0;
    char link[32], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = '\0';
    return strncmp(target, dir_prefix, dir_prefix_len) == 0;
}

static void stall(long delay_us) {
    /* the raw syscall: libfaketime (also preloaded when clocks are faulted) must not scale it */
    struct timespec left = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    while (syscall(SYS_nanosleep, &left, &left) != 0 && errno == EINTR) {
    }
}

static int fails(long prob_ppm) {
    static __thread unsigned int seed;
    if (seed == 0) seed = (unsigned int)getpid() ^ (unsigned int)(size_t)&seed ^ (unsigned int)time(NULL);
    return prob_ppm >= 1000000 || (long)(rand_r(&seed) % 1000000) < prob_ppm;
}

/* Stall or fail this call; returns 1 (with errno set) when the call must fail instead of running. */
static int inject(int op, int fd) {
    struct fault f;
    if (!current_fault(op, fd, &f)) return 0;
    if (f.action == 'S') {
        stall(f.delay_us);
        return 0;
    }
    if (f.action == 'F' && fails(f.prob_ppm)) {
        errno = f.err;
        return 1;
    }
    return 0;
}

int fsync(int fd) { return inject(OP_FSYNC, fd) ? -1 : CALL(fsync, fd); }
int fdatasync(int fd) { return inject(OP_FSYNC, fd) ? -1 : CALL(fdatasync, fd); }
ssize_t write(int fd, const void *buf, size_t n) { return inject(OP_WRITE, fd) ? -1 : CALL(write, fd, buf, n); }
ssize_t pwrite(int fd, const void *buf, size_t n, off_t at) {
    return inject(OP_WRITE, fd) ? -1 : CALL(pwrite, fd, buf, n, at);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t at) {
    return inject(OP_WRITE, fd) ? -1 : CALL(pwrite64, fd, buf, n, at);
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    return inject(OP_WRITE, fd) ? -1 : CALL(writev, fd, iov, cnt);
}
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t at) {
    return inject(OP_WRITE, fd) ? -1 : CALL(pwritev, fd, iov, cnt, at);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t at) {
    return inject(OP_WRITE, fd) ? -1 : CALL(pwritev64, fd, iov, cnt, at);
}
