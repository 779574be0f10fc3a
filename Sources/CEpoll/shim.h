#ifndef HERALD_CEPOLL_SHIM_H
#define HERALD_CEPOLL_SHIM_H
/* Linux event primitives the HTTP server's event loops are built on. Swift's Glibc module does not
   carry these headers, so they are bound here like any other C library. */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/prctl.h>
#include <signal.h>
#include <spawn.h>

/* prctl is variadic, which Swift cannot call: a worker process asks for SIGTERM when its
   supervisor dies, so no orphan keeps sending. */
static inline int herald_set_parent_death_signal(int sig) { return prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0, 0, 0); }

/* glibc (2.34 on) declares this only under _GNU_SOURCE: a program spawned to outlive us (the
   private PostgreSQL of herald work --keep) must inherit no descriptor beyond 0, 1 and 2. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
static inline int herald_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
#endif
