/* SPDX-License-Identifier: Apache-2.0 */
/* json.c - span-based JSON reader, string writer, base64 (see json.h). */
#include "directory/json.h"

#include <string.h>

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* Scans the value starting at s[i]; returns 1 with *end one past it, 0 when
 * the input ends first, -1 when malformed. */
static int scan(const char *s, size_t n, size_t i, int depth, size_t *end)
{
    if (i >= n)
        return 0;
    if (depth > GW_JSON_MAX_DEPTH)
        return -1;
    char c = s[i];
    if (c == '"') {
        for (i++; i < n; i++) {
            unsigned char ch = (unsigned char)s[i];
            if (ch == '"') {
                *end = i + 1;
                return 1;
            }
            if (ch < 0x20)
                return -1;
            if (ch == '\\') {
                if (++i >= n)
                    return 0;
                if (s[i] == 'u') {
                    for (int k = 0; k < 4; k++) {
                        if (++i >= n)
                            return 0;
                        char h = s[i];
                        if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                            return -1;
                    }
                } else if (!strchr("\"\\/bfnrt", s[i]) || s[i] == '\0') {
                    return -1;
                }
            }
        }
        return 0;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        i = skip_ws(s, n, i + 1);
        if (i >= n)
            return 0;
        if (s[i] == close) {
            *end = i + 1;
            return 1;
        }
        for (;;) {
            size_t e;
            int r;
            if (c == '{') {
                if (s[i] != '"')
                    return -1;
                if ((r = scan(s, n, i, depth + 1, &e)) <= 0)
                    return r;
                i = skip_ws(s, n, e);
                if (i >= n)
                    return 0;
                if (s[i] != ':')
                    return -1;
                i = skip_ws(s, n, i + 1);
            }
            if ((r = scan(s, n, i, depth + 1, &e)) <= 0)
                return r;
            i = skip_ws(s, n, e);
            if (i >= n)
                return 0;
            if (s[i] == close) {
                *end = i + 1;
                return 1;
            }
            if (s[i] != ',')
                return -1;
            i = skip_ws(s, n, i + 1);
            if (i >= n)
                return 0;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t j = i + (c == '-');
        size_t digits = 0;
        while (j < n && ((s[j] >= '0' && s[j] <= '9') || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
                         s[j] == '+' || s[j] == '-')) {
            digits += s[j] >= '0' && s[j] <= '9';
            j++;
        }
        if (j == n)
            return 0; /* a number may go on */
        if (!digits)
            return -1;
        *end = j;
        return 1;
    }
    static const char *lit[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lit[k]);
        if (c != lit[k][0])
            continue;
        size_t have = n - i < l ? n - i : l;
        if (memcmp(s + i, lit[k], have) != 0)
            return -1;
        if (have < l)
            return 0;
        *end = i + l;
        return 1;
    }
    return -1;
}

int gw_json_value(const char *s, size_t n, gw_json_t *v, size_t *used)
{
    size_t i = skip_ws(s, n, 0), e = 0;
    int r = scan(s, n, i, 0, &e);
    if (r <= 0)
        return r;
    v->p = s + i;
    v->n = e - i;
    *used = skip_ws(s, n, e);
    return 1;
}

/* The values below are spans that gw_json_value() validated, so the scans
 * cannot fail; they are still checked. */
int gw_json_get(gw_json_t obj, const char *key, gw_json_t *val)
{
    if (obj.n < 2 || obj.p[0] != '{')
        return 0;
    size_t kl = strlen(key), i = skip_ws(obj.p, obj.n, 1), e;
    while (i < obj.n && obj.p[i] == '"') {
        if (scan(obj.p, obj.n, i, 0, &e) != 1)
            return 0;
        int match = e - i == kl + 2 && memcmp(obj.p + i + 1, key, kl) == 0;
        i = skip_ws(obj.p, obj.n, e);
        if (i >= obj.n || obj.p[i] != ':')
            return 0;
        i = skip_ws(obj.p, obj.n, i + 1);
        if (scan(obj.p, obj.n, i, 0, &e) != 1)
            return 0;
        if (match) {
            val->p = obj.p + i;
            val->n = e - i;
            return 1;
        }
        i = skip_ws(obj.p, obj.n, e);
        if (i >= obj.n || obj.p[i] != ',')
            return 0;
        i = skip_ws(obj.p, obj.n, i + 1);
    }
    return 0;
}

int gw_json_next(gw_json_t arr, size_t *it, gw_json_t *elem)
{
    if (arr.n < 2 || arr.p[0] != '[')
        return 0;
    size_t i = *it ? *it : 1, e;
    i = skip_ws(arr.p, arr.n, i);
    if (i < arr.n && arr.p[i] == ',')
        i = skip_ws(arr.p, arr.n, i + 1);
    if (i >= arr.n || arr.p[i] == ']')
        return 0;
    if (scan(arr.p, arr.n, i, 0, &e) != 1)
        return 0;
    elem->p = arr.p + i;
    elem->n = e - i;
    *it = e;
    return 1;
}

static int hexval(char h)
{
    if (h >= '0' && h <= '9')
        return h - '0';
    if (h >= 'a' && h <= 'f')
        return h - 'a' + 10;
    if (h >= 'A' && h <= 'F')
        return h - 'A' + 10;
    return -1;
}

int gw_json_string(gw_json_t v, char *buf, size_t cap)
{
    if (v.n < 2 || v.p[0] != '"' || v.p[v.n - 1] != '"' || !cap)
        return -1;
    size_t o = 0;
    for (size_t i = 1; i + 1 < v.n; i++) {
        char c = v.p[i];
        if (c == '\\' && i + 2 < v.n) {
            c = v.p[++i];
            switch (c) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                int cp = 0;
                for (int k = 0; k < 4; k++) {
                    int h = i + 1 < v.n - 1 ? hexval(v.p[++i]) : -1;
                    if (h < 0)
                        return -1;
                    cp = cp * 16 + h;
                }
                c = cp > 0 && cp < 0x80 ? (char)cp : '?';
                break;
            }
            default: break; /* " \ / */
            }
        }
        if (o + 1 >= cap)
            return -1;
        buf[o++] = c;
    }
    buf[o] = '\0';
    return 0;
}

int gw_json_i64(gw_json_t v, int64_t *out)
{
    const char *p = v.p;
    size_t n = v.n;
    if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
        p++;
        n -= 2;
    }
    if (!n || n > 20)
        return -1;
    int neg = p[0] == '-';
    size_t i = (size_t)neg;
    if (i == n)
        return -1;
    uint64_t x = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    if (x > (uint64_t)INT64_MAX + (uint64_t)neg)
        return -1;
    *out = neg ? (int64_t)(0 - x) : (int64_t)x;
    return 0;
}

int gw_json_true(gw_json_t v)
{
    return v.n == 4 && memcmp(v.p, "true", 4) == 0;
}

int gw_json_put_str(char *buf, size_t cap, size_t *len, const char *s)
{
    size_t o = *len;
#define PUT(ch)                                                                                \
    do {                                                                                       \
        if (o + 1 >= cap)                                                                      \
            return -1;                                                                         \
        buf[o++] = (ch);                                                                       \
    } while (0)
    PUT('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            PUT('\\');
            PUT((char)c);
        } else if (c < 0x20) {
            static const char hx[] = "0123456789abcdef";
            PUT('\\'); PUT('u'); PUT('0'); PUT('0'); PUT(hx[c >> 4]); PUT(hx[c & 15]);
        } else {
            PUT((char)c);
        }
    }
    PUT('"');
#undef PUT
    buf[o] = '\0';
    *len = o;
    return 0;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t gw_b64_encode(const void *in, size_t n, char *buf, size_t cap)
{
    const uint8_t *s = in;
    size_t need = (n + 2) / 3 * 4;
    if (cap < need + 1)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        buf[o++] = b64[v >> 18];
        buf[o++] = b64[(v >> 12) & 63];
        buf[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        buf[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    buf[o] = '\0';
    return o;
}

long gw_b64_decode(const char *in, size_t n, void *out, size_t cap)
{
    uint8_t *d = out;
    if (n % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = in[i + k];
            const char *f = c ? strchr(b64, c) : NULL;
            if (c == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (f && !pad) {
                v[k] = (int)(f - b64);
            } else {
                return -1;
            }
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        int nb = 3 - pad;
        if ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15)))
            return -1; /* bits past the data must be zero: one encoding per value */
        if (o + (size_t)nb > cap)
            return -1;
        for (int k = 0; k < nb; k++)
            d[o++] = (uint8_t)(x >> (16 - 8 * k));
    }
    return (long)o;
}
