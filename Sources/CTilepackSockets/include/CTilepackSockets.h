// Linux's epoll and eventfd, which Swift's Glibc module does not export, for TilepackSockets.
#ifndef CTILEPACK_SOCKETS_H
#define CTILEPACK_SOCKETS_H
#ifdef __linux__
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

static const uint32_t tilepack_epoll_in = EPOLLIN;
static const uint32_t tilepack_epoll_out = EPOLLOUT;
static const uint32_t tilepack_epoll_err = EPOLLERR;
static const uint32_t tilepack_epoll_hup = EPOLLHUP;
static const uint32_t tilepack_epoll_rdhup = EPOLLRDHUP;
static const uint32_t tilepack_epoll_et = EPOLLET;

/// Registers `fd` for `events`, with `fd` as its data.
static inline int tilepack_epoll_add(int epoll, int fd, uint32_t events) {
    struct epoll_event event = { .events = events, .data = { .fd = fd } };
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}

/// Waits for events; `fds[i]` and `events[i]` receive the descriptor and events of each.
static inline int tilepack_epoll_wait(int epoll, int *fds, uint32_t *events, int capacity, int timeout) {
    struct epoll_event ready[64];
    if (capacity > 64) capacity = 64;
    int count = epoll_wait(epoll, ready, capacity, timeout);
    for (int i = 0; i < count; i++) {
        fds[i] = ready[i].data.fd;
        events[i] = ready[i].events;
    }
    return count;
}

static inline int tilepack_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }
static inline int tilepack_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }
#endif
#endif
