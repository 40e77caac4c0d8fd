/* SPDX-License-Identifier: Apache-2.0 */
/* http.c - a careful, small HTTP/1.1 client (see http.h). */
#include "directory/http.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/sock.h"
#include "core/util.h"

int gw_buf_add(gw_buf_t *b, const void *data, size_t n)
{
    size_t max = b->max ? b->max : GW_HTTP_MAX_BODY;
    if (b->len + n > max)
        return -1;
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 1024;
        while (c < b->len + n + 1)
            c *= 2;
        char *p = realloc(b->p, c);
        if (!p)
            return -1;
        b->p = p;
        b->cap = c;
    }
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

void gw_buf_consume(gw_buf_t *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->p, b->p + n, b->len - n);
        b->len -= n;
    }
    if (b->p)
        b->p[b->len] = '\0';
}

void gw_buf_free(gw_buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

gw_status_t gw_http_hostport(const char *url, char *out, size_t cap, char *why, size_t whylen)
{
    const char *p = url;
    if (!strncmp(p, "etcd://", 7))
        p += 7;
    else if (!strncmp(p, "http://", 7))
        p += 7;
    else if (strstr(p, "://")) {
        snprintf(why, whylen, "\"%s\": only etcd:// or http:// addresses are understood (no TLS)", url);
        return GW_ERR_CONFIG;
    }
    size_t n = strcspn(p, "/");
    if (!n || n >= cap || !memchr(p, ':', n)) {
        snprintf(why, whylen, "\"%s\": expected host:port", url);
        return GW_ERR_CONFIG;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return GW_OK;
}

int gw_http_parse_head(const char *s, size_t n, gw_http_head_t *h, char *why, size_t whylen)
{
    memset(h, 0, sizeof(*h));
    h->content_length = -1;
    if (n < 12 || strncmp(s, "HTTP/1.", 7) != 0 || s[8] != ' ') {
        snprintf(why, whylen, "not an HTTP/1.x response");
        return -1;
    }
    if (s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' || s[11] > '9') {
        snprintf(why, whylen, "bad HTTP status line");
        return -1;
    }
    h->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    size_t i = 0;
    while (i < n && s[i] != '\n')
        i++;
    i++;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n')
            e++;
        size_t l = e - i;
        if (l && s[i + l - 1] == '\r')
            l--;
        if (!l)
            return 0; /* blank line: end of head */
        const char *c = memchr(s + i, ':', l);
        if (c) {
            size_t nl = (size_t)(c - (s + i));
            const char *v = c + 1;
            size_t vl = l - nl - 1;
            while (vl && (*v == ' ' || *v == '\t')) {
                v++;
                vl--;
            }
            if (nl == 14 && !strncasecmp(s + i, "Content-Length", 14)) {
                int64_t x = 0;
                if (!vl || vl > 12) {
                    snprintf(why, whylen, "bad Content-Length");
                    return -1;
                }
                for (size_t k = 0; k < vl; k++) {
                    if (v[k] < '0' || v[k] > '9') {
                        snprintf(why, whylen, "bad Content-Length");
                        return -1;
                    }
                    x = x * 10 + (v[k] - '0');
                }
                h->content_length = x;
            } else if (nl == 17 && !strncasecmp(s + i, "Transfer-Encoding", 17)) {
                if (vl >= 7 && !strncasecmp(v + vl - 7, "chunked", 7))
                    h->chunked = 1;
            }
        }
        i = e + 1;
    }
    snprintf(why, whylen, "HTTP head without its blank line");
    return -1;
}

void gw_http_body_init(gw_http_body_t *b, const gw_http_head_t *h)
{
    memset(b, 0, sizeof(*b));
    b->chunked = h->chunked;
    b->left = h->chunked ? 0 : h->content_length;
}

int gw_http_body_feed(gw_http_body_t *b, const char *in, size_t n, size_t *used, gw_buf_t *out)
{
    size_t i = 0;
    *used = 0;
    if (!b->chunked) {
        size_t take = b->left < 0 ? n : (size_t)GW_MIN((uint64_t)n, (uint64_t)b->left);
        if (take && gw_buf_add(out, in, take) != 0)
            return -1;
        *used = take;
        if (b->left >= 0) {
            b->left -= (int64_t)take;
            return b->left == 0;
        }
        return 0;
    }
    while (i < n && b->state != 4) {
        if (b->state == 1) {
            size_t take = (size_t)GW_MIN((uint64_t)(n - i), (uint64_t)b->left);
            if (gw_buf_add(out, in + i, take) != 0)
                return -1;
            i += take;
            b->left -= (int64_t)take;
            if (!b->left) {
                b->state = 2;
                b->ll = 0;
            }
            continue;
        }
        /* a line: size line, the CRLF after data, or a trailer line */
        char c = in[i++];
        if (c != '\n') {
            if (b->ll + 1 >= sizeof(b->line))
                return -1;
            b->line[b->ll++] = c;
            continue;
        }
        if (b->ll && b->line[b->ll - 1] == '\r')
            b->ll--;
        b->line[b->ll] = '\0';
        if (b->state == 2) {
            if (b->ll)
                return -1;
            b->state = 0;
        } else if (b->state == 0) {
            int64_t x = 0;
            size_t k = 0;
            for (; k < b->ll && b->line[k] != ';'; k++) {
                char h = b->line[k];
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0 || x > (int64_t)GW_HTTP_MAX_BODY)
                    return -1;
                x = x * 16 + d;
            }
            if (!k)
                return -1;
            b->left = x;
            b->state = x ? 1 : 3;
        } else { /* trailers end with an empty line */
            if (!b->ll)
                b->state = 4;
        }
        b->ll = 0;
    }
    *used = i;
    return b->state == 4;
}

static gw_status_t http_send(const char *hostport, const char *path, const char *body, int timeout_ms, int *fdp,
                             char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    gw_status_t st = gw_sock_resolve(hostport, 0, &ss, &sl, why, whylen);
    if (st != GW_OK)
        return st;
    int fd = gw_sock_connect(&ss, sl, 0, timeout_ms);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "connect to %s failed: %s", hostport, strerror(e));
        return e == ETIMEDOUT ? GW_ERR_TIMEOUT : GW_ERR_CONN_REFUSED;
    }
    char head[512];
    size_t bl = strlen(body);
    int hl = snprintf(head, sizeof(head),
                      "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      path, hostport, bl);
    if (hl < 0 || (size_t)hl >= sizeof(head) || gw_sock_write_full(fd, head, (size_t)hl, timeout_ms) != 0 ||
        gw_sock_write_full(fd, body, bl, timeout_ms) != 0) {
        snprintf(why, whylen, "sending POST %s to %s failed: %s", path, hostport, strerror(errno));
        close(fd);
        return GW_ERR_CONN_RESET;
    }
    *fdp = fd;
    return GW_OK;
}

/* Reads into raw until the head is complete; parses it.  Leaves the bytes
 * after the head at raw[0..). */
static gw_status_t read_head(int fd, uint64_t deadline, gw_buf_t *raw, gw_http_head_t *h, const char *what,
                             char *why, size_t whylen)
{
    char tmp[4096];
    for (;;) {
        char *e = raw->p ? strstr(raw->p, "\r\n\r\n") : NULL;
        if (e) {
            size_t hl = (size_t)(e - raw->p) + 4;
            char pw[160];
            if (gw_http_parse_head(raw->p, hl, h, pw, sizeof(pw)) != 0) {
                snprintf(why, whylen, "%s: %s", what, pw);
                return GW_ERR_PROTOCOL;
            }
            gw_buf_consume(raw, hl);
            return GW_OK;
        }
        if (raw->len > GW_HTTP_MAX_HEAD) {
            snprintf(why, whylen, "%s: response head longer than %d bytes", what, GW_HTTP_MAX_HEAD);
            return GW_ERR_PROTOCOL;
        }
        uint64_t now = gw_now_ns();
        if (now >= deadline) {
            snprintf(why, whylen, "%s: no response in time", what);
            return GW_ERR_TIMEOUT;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            snprintf(why, whylen, "%s: connection closed before the response head", what);
            return GW_ERR_CONN_RESET;
        }
        if (gw_buf_add(raw, tmp, (size_t)n) != 0) {
            snprintf(why, whylen, "%s: out of memory", what);
            return GW_ERR_NOMEM;
        }
    }
}

gw_status_t gw_http_post(const char *hostport, const char *path, const char *body, int timeout_ms,
                         int *status, gw_buf_t *out, char *why, size_t whylen)
{
    int fd = -1;
    uint64_t deadline = gw_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    gw_status_t st = http_send(hostport, path, body, timeout_ms, &fd, why, whylen);
    if (st != GW_OK)
        return st;
    char what[128];
    snprintf(what, sizeof(what), "POST http://%s%s", hostport, path);
    gw_buf_t raw = {0};
    gw_http_head_t h;
    gw_http_body_t dec;
    st = read_head(fd, deadline, &raw, &h, what, why, whylen);
    if (st != GW_OK)
        goto out;
    gw_http_body_init(&dec, &h);
    size_t used;
    int r = gw_http_body_feed(&dec, raw.p ? raw.p : "", raw.len, &used, out);
    char tmp[8192];
    while (r == 0) {
        uint64_t now = gw_now_ns();
        if (now >= deadline) {
            snprintf(why, whylen, "%s: response body not complete in time", what);
            st = GW_ERR_TIMEOUT;
            goto out;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
        if (pr <= 0)
            continue;
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            if (!dec.chunked && dec.left < 0)
                break; /* body until close */
            snprintf(why, whylen, "%s: connection closed in the middle of the body", what);
            st = GW_ERR_CONN_RESET;
            goto out;
        }
        r = gw_http_body_feed(&dec, tmp, (size_t)n, &used, out);
    }
    if (r < 0) {
        snprintf(why, whylen, "%s: malformed or oversized response body", what);
        st = GW_ERR_PROTOCOL;
        goto out;
    }
    *status = h.status;
out:
    gw_buf_free(&raw);
    close(fd);
    return st;
}

gw_status_t gw_http_stream_open(const char *hostport, const char *path, const char *body,
                                int timeout_ms, int *fdp, gw_http_body_t *dec, gw_buf_t *out,
                                char *why, size_t whylen)
{
    int fd = -1;
    uint64_t deadline = gw_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    gw_status_t st = http_send(hostport, path, body, timeout_ms, &fd, why, whylen);
    if (st != GW_OK)
        return st;
    char what[128];
    snprintf(what, sizeof(what), "POST http://%s%s", hostport, path);
    gw_buf_t raw = {0};
    gw_http_head_t h;
    st = read_head(fd, deadline, &raw, &h, what, why, whylen);
    if (st == GW_OK && h.status != 200) {
        snprintf(why, whylen, "%s: HTTP status %d", what, h.status);
        st = GW_ERR_PROTOCOL;
    }
    if (st == GW_OK) {
        size_t used;
        gw_http_body_init(dec, &h);
        if (raw.len && gw_http_body_feed(dec, raw.p, raw.len, &used, out) < 0) {
            snprintf(why, whylen, "%s: malformed stream", what);
            st = GW_ERR_PROTOCOL;
        }
    }
    gw_buf_free(&raw);
    if (st != GW_OK) {
        close(fd);
        return st;
    }
    *fdp = fd;
    return GW_OK;
}
