/* Preloaded in front of libfaketime so that only the wall clock is faked, never a wait.
 *
 * libfaketime fakes every time function it knows, including the ones that wait: with
 * FAKETIME_DONT_FAKE_MONOTONIC=1 its clock_nanosleep() fails with EINVAL on the monotonic absolute
 * sleeps Python 3.11's time.sleep() makes, and once a rate (`x1.5`) is set it scales every relative
 * timeout (nanosleep, poll, select, epoll_wait...), which would make asyncio's timers, driven by the
 * real monotonic clock, fire late or early. Each function below goes straight to the C library's own
 * implementation instead. An absolute wait on CLOCK_REALTIME is the one case left to libfaketime:
 * its deadline was computed from the faked wall clock, so libfaketime must translate it.
 *
 * pthread_cond_timedwait matters most: CPython's GIL waits on a CLOCK_MONOTONIC condition variable,
 * and through libfaketime those waits took up to hundreds of ms (a 3-node quorum's p99 commit
 * latency went from 12 ms to 1 s). The clock of a glibc condvar is bit 1 of __data.__wrefs
 * (glibc >= 2.25, nptl/pthread_cond_common.c): set means CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static void *libc_handle(void) {
    static void *handle;
    if (handle == NULL) handle = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    return handle;
}

/* `real` is the C library's function of the same name (looked up once). */
#define LIBC(name)                                                              \
    static __typeof__(name) *real;                                              \
    if (real == NULL) real = (__typeof__(name) *)dlsym(libc_handle(), #name)

/* The next definition of `name` in the preload chain: libfaketime's. */
#define FAKETIME(name)                                                          \
    static __typeof__(name) *next;                                              \
    if (next == NULL) next = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
    if (clock == CLOCK_REALTIME && (flags & TIMER_ABSTIME)) {
        FAKETIME(clock_nanosleep);
        return next(clock, flags, req, rem);
    }
    LIBC(clock_nanosleep);
    return real(clock, flags, req, rem);
}

int nanosleep(const struct timespec *req, struct timespec *rem) {
    LIBC(nanosleep);
    return real(req, rem);
}

int usleep(useconds_t usec) {
    LIBC(usleep);
    return real(usec);
}

unsigned int sleep(unsigned int seconds) {
    LIBC(sleep);
    return real(seconds);
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout) {
    LIBC(poll);
    return real(fds, nfds, timeout);
}

int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *mask) {
    LIBC(ppoll);
    return real(fds, nfds, timeout, mask);
}

int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout) {
    LIBC(select);
    return real(nfds, r, w, e, timeout);
}

int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *timeout, const sigset_t *mask) {
    LIBC(pselect);
    return real(nfds, r, w, e, timeout, mask);
}

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout) {
    LIBC(epoll_wait);
    return real(epfd, events, maxevents, timeout);
}

int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout, const sigset_t *mask) {
    LIBC(epoll_pwait);
    return real(epfd, events, maxevents, timeout, mask);
}

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *abstime) {
    if (cond->__data.__wrefs & 2) { /* a CLOCK_MONOTONIC condvar: its deadline is real */
        LIBC(pthread_cond_timedwait);
        return real(cond, mutex, abstime);
    }
    FAKETIME(pthread_cond_timedwait);
    return next(cond, mutex, abstime);
}
