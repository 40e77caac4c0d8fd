/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_etcd.c - libFuzzer target for everything the etcd directory client
 * parses from the network (directory/): the HTTP response head, the chunked
 * and identity body decoders, the JSON reader, base64, a kv object and the
 * watch stream.  The first input byte picks the parser. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "directory/etcd.h"
#include "directory/http.h"
#include "directory/json.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_etcd: %s\n", what);
        abort();
    }
}

static int walk(gw_json_t v, int depth)
{
    must(depth <= GW_JSON_MAX_DEPTH + 1, "nesting past the limit was accepted");
    char s[256];
    int64_t x;
    gw_json_string(v, s, sizeof(s));
    gw_json_i64(v, &x);
    gw_json_t m;
    gw_json_get(v, "key", &m);
    gw_json_get(v, "result", &m);
    size_t it = 0;
    gw_json_t el;
    int n = 0;
    while (gw_json_next(v, &it, &el) && n < 1000) {
        must(el.p >= v.p && el.p + el.n <= v.p + v.n, "array element outside its array");
        walk(el, depth + 1);
        n++;
    }
    return n;
}

static void on_event(void *arg, int is_delete, const gw_etcd_kv_t *kv)
{
    (void)arg;
    (void)is_delete;
    must(strlen(kv->key) < sizeof(kv->key) && kv->value_len <= GW_ETCD_VALUE_MAX, "kv fields out of range");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    char why[256];
    switch (data[0] % 6) {
    case 0: { /* JSON */
        gw_json_t v;
        size_t used;
        int r = gw_json_value(s, n, &v, &used);
        if (r == 1) {
            must(v.p >= s && v.p + v.n <= s + n && used <= n, "value span outside the input");
            walk(v, 0);
        }
        break;
    }
    case 1: { /* response head */
        gw_http_head_t h;
        if (gw_http_parse_head(s, n, &h, why, sizeof(why)) == 0)
            must(h.status >= 100 && h.status <= 599, "status out of range");
        break;
    }
    case 2:
    case 3: { /* body decoder, chunked or with a length, fed in two pieces */
        gw_http_head_t h = {.status = 200, .chunked = data[0] % 6 == 2, .content_length = n / 2};
        gw_http_body_t b;
        gw_buf_t out = {.max = 1 << 16};
        gw_http_body_init(&b, &h);
        size_t used, half = n / 3;
        int r = gw_http_body_feed(&b, s, half, &used, &out);
        must(used <= half, "used past the input");
        if (r == 0) {
            r = gw_http_body_feed(&b, s + half, n - half, &used, &out);
            must(used <= n - half, "used past the input");
        }
        must(out.len <= out.max, "body grew past its limit");
        gw_buf_free(&out);
        break;
    }
    case 4: { /* base64 and a kv object */
        uint8_t dec[1024];
        char enc[2048];
        long dl = gw_b64_decode(s, n, dec, sizeof(dec));
        if (dl >= 0) {
            size_t el = gw_b64_encode(dec, (size_t)dl, enc, sizeof(enc));
            must(el == n && memcmp(enc, s, n) == 0, "base64 does not round-trip");
        }
        gw_etcd_kv_t *kv = malloc(sizeof(*kv));
        if (kv) {
            gw_etcd_parse_kv(s, n, kv);
            free(kv);
        }
        break;
    }
    case 5: { /* the watch stream's messages */
        gw_etcd_watch_t w;
        memset(&w, 0, sizeof(w));
        w.fd = -1;
        w.buf.max = 1 << 20;
        if (gw_buf_add(&w.buf, s, n) == 0)
            gw_etcd_watch_dispatch(&w, on_event, NULL, why, sizeof(why));
        gw_buf_free(&w.buf);
        break;
    }
    }
    return 0;
}
