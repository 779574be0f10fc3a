#include <http_parser.h>

/* http_parser's state lives in bitfields; reading them through C keeps their layout out of Swift. */
static inline unsigned herald_http_errno(const http_parser *p) { return p->http_errno; }
static inline unsigned herald_http_method(const http_parser *p) { return p->method; }
static inline unsigned herald_http_upgrade(const http_parser *p) { return p->upgrade; }
/* The body length a request declared in Content-Length, or -1 when it declared none (chunked, or no body). */
static inline long long herald_http_declared_length(const http_parser *p) {
  return (p->flags & F_CONTENTLENGTH) ? (long long)p->content_length : -1;
}
