/* SPDX-License-Identifier: Apache-2.0 */
/* http.h - the HTTP/1.1 client the etcd directory speaks through (directory
 * layer; includes only core).  Plain http on the address given (etcd's JSON
 * gateway on loopback or a private network; no TLS).  Every call is bounded
 * by a timeout; responses are size-limited; the parsers are fuzzed
 * (tests/fuzz/fuzz_etcd_http.c). */
#ifndef GW_DIRECTORY_HTTP_H
#define GW_DIRECTORY_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "gpuwire.h"

#define GW_HTTP_MAX_HEAD 16384
#define GW_HTTP_MAX_BODY (8u << 20)

/* A growable byte buffer, NUL-terminated, refusing to grow past max. */
typedef struct gw_buf {
    char *p;
    size_t len, cap, max;
} gw_buf_t;
int gw_buf_add(gw_buf_t *b, const void *data, size_t n); /* 0, -1: past max or no memory */
void gw_buf_consume(gw_buf_t *b, size_t n);                 /* drops the first n bytes */
void gw_buf_free(gw_buf_t *b);

/* "etcd://host:port", "http://host:port" or "host:port" -> "host:port". */
gw_status_t gw_http_hostport(const char *url, char *out, size_t cap, char *why, size_t whylen);

/* Response head: status code, body framing. */
typedef struct gw_http_head {
    int status;
    int chunked;
    int64_t content_length; /* -1: absent */
} gw_http_head_t;
/* Parses a complete head (up to and including the blank line).  0 or -1. */
int gw_http_parse_head(const char *s, size_t n, gw_http_head_t *h, char *why, size_t whylen);

/* Body decoder (identity with a length, chunked, or until close). */
typedef struct gw_http_body {
    int chunked;
    int64_t left;    /* identity: bytes left (-1: until close); chunked: of this chunk */
    int state;       /* chunked: 0 size line, 1 data, 2 CRLF after data, 3 trailers, 4 done */
    char line[64];
    size_t ll;
} gw_http_body_t;
void gw_http_body_init(gw_http_body_t *b, const gw_http_head_t *h);
/* Feeds raw bytes; decoded bytes go to out.  1: the body is complete (*used
 * bytes taken); 0: needs more; -1: malformed or out grew past its max. */
int gw_http_body_feed(gw_http_body_t *b, const char *in, size_t n, size_t *used, gw_buf_t *out);

/* POST path with a JSON body to host:port and reads the whole response
 * (Connection: close).  GW_OK with *status and the body in out (caller
 * frees); GW_ERR_CONN_REFUSED / GW_ERR_TIMEOUT / GW_ERR_PROTOCOL with why. */
gw_status_t gw_http_post(const char *hostport, const char *path, const char *body, int timeout_ms,
                         int *status, gw_buf_t *out, char *why, size_t whylen);

/* A streaming POST (etcd watch): connects, sends, reads the head.  GW_OK with
 * *fd (blocking, owned by the caller) and the decoder state; bytes of the
 * body already read are decoded into out. */
gw_status_t gw_http_stream_open(const char *hostport, const char *path, const char *body,
                                int timeout_ms, int *fd, gw_http_body_t *dec, gw_buf_t *out,
                                char *why, size_t whylen);

#endif
