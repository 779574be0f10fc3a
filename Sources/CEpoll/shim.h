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
#endif
