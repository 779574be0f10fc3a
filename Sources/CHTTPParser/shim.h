#include <http_parser.h>

/* http_parser's state lives in bitfields; reading them through C keeps their layout out of Swift. */
static inline unsigned herald_http_errno(const http_parser *p) { return p->http_errno; }
static inline unsigned herald_http_method(const http_parser *p) { return p->method; }
static inline unsigned herald_http_upgrade(const http_parser *p) { return p->upgrade; }
