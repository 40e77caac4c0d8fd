/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_etcd.c - libFuzzer target for what the etcd directory reads from
 * the network (names/etcd.c): a range answer with its kvs (keys and values
 * base64) and the watch stream, fed in two pieces so that a message split
 * across reads is exercised.  JSON itself is cJSON's (fuzzed upstream);
 * this covers gpuwire's reading of what cJSON returns.  The first input
 * byte picks the parser.  Needs libcjson.so.1 at run time, like the
 * library. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names/etcd.h"

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_etcd: %s\n", what);
        abort();
    }
}

static int on_kv(void *arg, const gw_etcd_kv_t *kv)
{
    (void)arg;
    must(strlen(kv->key) > 0 && strlen(kv->key) < sizeof(kv->key) && kv->value_len <= GW_ETCD_VALUE_MAX,
         "kv fields out of range");
    return 0;
}

static void on_event(void *arg, int is_delete, const gw_etcd_kv_t *kv)
{
    (void)arg;
    (void)is_delete;
    on_kv(NULL, kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gw_etcd_t e;
    static int ready;
    char why[256];
    if (!ready) {
        gw_etcd_cfg_t c = {.url = "etcd://127.0.0.1:1"};
        if (gw_etcd_init(&e, &c, why, sizeof(why)) != GW_OK) {
            fprintf(stderr, "fuzz_etcd: %s\n", why);
            abort();
        }
        ready = 1;
    }
    if (size < 1)
        return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    why[0] = '\0';
    if (data[0] & 1) { /* a range answer */
        int64_t rev = 0;
        gw_status_t st = gw_etcd_range_parse(&e, s, n, on_kv, NULL, &rev, why, sizeof(why));
        must(st == GW_OK || st == GW_ERR_PROTOCOL || st == GW_ERR_NOMEM, "unexpected status for a range answer");
        must(st == GW_OK || why[0], "a refused answer has no reason");
    } else { /* the watch stream, in two pieces */
        gw_etcd_watch_t w;
        memset(&w, 0, sizeof(w));
        w.e = &e;
        size_t half = (data[0] >> 1) % (n + 1);
        gw_status_t st = gw_etcd_watch_feed(&w, s, half, on_event, NULL, why, sizeof(why));
        if (st == GW_OK)
            st = gw_etcd_watch_feed(&w, s + half, n - half, on_event, NULL, why, sizeof(why));
        must(w.len <= n, "undelivered bytes past the input");
        must(memchr(w.buf ? w.buf : "", '\n', w.len) == NULL || st != GW_OK, "a complete message was left undelivered");
        gw_etcd_watch_close(&w);
    }
    return 0;
}
