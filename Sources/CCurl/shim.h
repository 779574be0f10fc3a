#ifndef HERALD_CCURL_SHIM_H
#define HERALD_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_multi_setopt are variadic, which Swift cannot call.
   These typed wrappers are the only way the Swift side sets an option. */
static inline CURLcode herald_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode herald_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode herald_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode herald_easy_setopt_write(CURL *h, CURLoption o, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, o, f); }
static inline CURLcode herald_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode herald_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode herald_easy_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode herald_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode herald_multi_setopt_ptr(CURLM *m, CURLMoption o, const void *v) { return curl_multi_setopt(m, o, v); }
/* CURLMsg carries a union; reading the result through C keeps the layout question out of Swift. */
static inline CURLcode herald_msg_result(const CURLMsg *m) { return m->data.result; }
/* CURL_GLOBAL_DEFAULT is a macro expression Swift does not import. */
static inline CURLcode herald_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }
/* CURLOPT_HEADERFUNCTION takes the same callback shape as CURLOPT_WRITEFUNCTION; the named
   wrapper keeps the call site readable. */
static inline CURLcode herald_easy_setopt_header(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
/* The socket callbacks: the client learns each connection's socket when curl makes it and when
   curl closes it (the close callback must close it itself). */
static inline CURLcode herald_easy_setopt_sockopt(CURL *h, int (*f)(void *, curl_socket_t, curlsocktype)) { return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, f); }
static inline CURLcode herald_easy_setopt_closesocket(CURL *h, int (*f)(void *, curl_socket_t)) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, f); }
#endif
