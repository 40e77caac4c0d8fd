/* SPDX-License-Identifier: Apache-2.0 */
/* test_names_wire.c - the names table format, the handshake's extension
 * slot, and the etcd client's configuration checks, library loading and
 * parsers (through cJSON) on known inputs (the fuzzers cover the unknown
 * ones). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names/table_wire.h"
#include "bootstrap/wire.h"
#include "core/util.h"
#if GW_HAVE_ETCD
#include "names/etcd.h"
#endif
#include "harness.h"

static size_t key_for(uint64_t owner, uint64_t id, uint8_t *out)
{
    gw_rkey_wire_t w = {.owner_uuid = owner, .id = id, .addr = 0x1000, .len = 4096, .access = 3};
    return gw_rkey_encode(&w, out, GW_RKEY_MAX_LEN);
}

static void test_table(void)
{
    static uint8_t buf[GW_NT_MAX_LEN];
    uint8_t k1[GW_RKEY_MAX_LEN], k2[GW_RKEY_MAX_LEN];
    size_t l1 = key_for(7, 1, k1), l2 = key_for(7, 2, k2);
    gw_nt_enc_t e;
    gw_nt_begin(&e, buf, sizeof(buf), 7, 42, "agent-0");
    gw_nt_add(&e, "kv.cache:3", k2, l2);
    gw_nt_add(&e, "weights", k1, l1);
    size_t n = gw_nt_finish(&e);
    CHECK(n > 0);
    gw_nt_header_t h;
    char why[256];
    CHECK_ST(gw_nt_decode(buf, n, &h, why, sizeof(why)), GW_OK);
    CHECK(h.uuid == 7 && h.epoch == 42 && h.count == 2 && !strcmp(h.name, "agent-0") && !h.stub && h.full_len == n);
    gw_nt_entry_t en;
    CHECK(gw_nt_entry(buf, n, 0, &en) == 0 && !strcmp(en.name, "kv.cache:3") && en.key_len == l2 &&
          !memcmp(en.key, k2, l2));
    CHECK(gw_nt_entry(buf, n, 2, &en) != 0);
    CHECK(gw_nt_find(buf, n, "weights", &en) == 0 && en.key_len == l1 && !memcmp(en.key, k1, l1));
    CHECK(gw_nt_find(buf, n, "kv", &en) != 0 && gw_nt_find(buf, n, "zz", &en) != 0 &&
          gw_nt_find(buf, n, "a", &en) != 0);
    size_t off = 0;
    int cnt = 0;
    while (gw_nt_next(buf, n, &off, &en))
        cnt++;
    CHECK(cnt == 2 && off == n);
    /* truncated, trailing byte, bad magic, wrong version (1: the 12 KiB format) */
    CHECK_ST(gw_nt_decode(buf, n - 1, &h, why, sizeof(why)), GW_ERR_PROTOCOL);
    buf[0] ^= 1;
    CHECK_ST(gw_nt_decode(buf, n, &h, why, sizeof(why)), GW_ERR_PROTOCOL);
    buf[0] ^= 1;
    buf[4] = 1;
    CHECK_ST(gw_nt_decode(buf, n, &h, why, sizeof(why)), GW_ERR_VERSION);
    buf[4] = GW_NT_VERSION;
    /* the stub: who, how many, how long; no entries */
    uint8_t stub[128];
    size_t sl = gw_nt_stub(buf, n, stub, sizeof(stub));
    CHECK(sl == GW_NT_FIXED_LEN + 7);
    CHECK_ST(gw_nt_decode(stub, sl, &h, why, sizeof(why)), GW_OK);
    CHECK(h.stub && h.full_len == n && h.count == 2 && h.uuid == 7 && !strcmp(h.name, "agent-0"));
    off = 0;
    CHECK(gw_nt_next(stub, sl, &off, &en) == 0 && gw_nt_find(stub, sl, "weights", &en) != 0);
    stub[sl] = 'x'; /* a stub with entry bytes */
    gw_put_u32(stub + 8, (uint32_t)sl + 1);
    CHECK_ST(gw_nt_decode(stub, sl + 1, &h, why, sizeof(why)), GW_ERR_PROTOCOL);
    /* a key issued by another context, a name twice, out of order, a bad name */
    uint8_t k3[GW_RKEY_MAX_LEN];
    size_t l3 = key_for(8, 3, k3);
    gw_nt_begin(&e, buf, sizeof(buf), 7, 1, "a");
    gw_nt_add(&e, "x", k3, l3);
    n = gw_nt_finish(&e);
    CHECK_ST(gw_nt_decode(buf, n, &h, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "another context") != NULL);
    gw_nt_begin(&e, buf, sizeof(buf), 7, 1, "a");
    gw_nt_add(&e, "x", k1, l1);
    gw_nt_add(&e, "y", k2, l2);
    n = gw_nt_finish(&e);
    CHECK(n > 0);
    /* entry 2's name: past the name "a", entry 1, entry 2's length byte */
    uint8_t *second = buf + GW_NT_FIXED_LEN + 1 + (1 + 1 + 2 + l1) + 1;
    CHECK(*second == 'y');
    *second = 'x';
    CHECK_ST(gw_nt_decode(buf, n, &h, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "twice") != NULL);
    *second = 'w';
    CHECK_ST(gw_nt_decode(buf, n, &h, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "out of order") != NULL);
    gw_nt_begin(&e, buf, sizeof(buf), 7, 1, "a");
    gw_nt_add(&e, "y", k1, l1);
    gw_nt_add(&e, "x", k2, l2); /* the encoder wants order too */
    CHECK(gw_nt_finish(&e) == 0);
    gw_nt_begin(&e, buf, sizeof(buf), 7, 1, "a");
    gw_nt_add(&e, "sp ace", k1, l1);
    n = gw_nt_finish(&e);
    CHECK_ST(gw_nt_decode(buf, n, &h, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(gw_name_valid("node-1.gpu:0") && !gw_name_valid("") && !gw_name_valid("a/b"));
    /* the encoder refuses to pass its capacity */
    gw_nt_begin(&e, buf, 4096, 7, 1, "a");
    for (int i = 0; i < 400; i++) {
        char nm[16];
        snprintf(nm, sizeof(nm), "r%04d", i);
        gw_nt_add(&e, nm, k1, l1);
    }
    CHECK(gw_nt_finish(&e) == 0);
}

/* A table far past one handshake message, sent in pieces and put together. */
static void test_pieces(void)
{
    static uint8_t table[GW_NT_MAX_LEN], whole[GW_NT_MAX_LEN];
    uint8_t k[GW_RKEY_MAX_LEN], piece[GW_NP_HDR_LEN + GW_NP_MAX_DATA + 64];
    size_t kl = key_for(9, 1, k);
    gw_nt_enc_t e;
    gw_nt_begin(&e, table, sizeof(table), 9, 5, "big");
    for (int i = 0; i < 5000; i++) {
        char nm[32];
        snprintf(nm, sizeof(nm), "region-%05d", i);
        gw_nt_add(&e, nm, k, kl);
    }
    size_t n = gw_nt_finish(&e);
    CHECK(n > 20 * GW_NT_INLINE_MAX);
    size_t have = 0, pieces = 0;
    char why[256];
    while (have < n) {
        size_t pl = gw_np_encode(piece, sizeof(piece), table, n, have, 9, 77);
        gw_np_header_t ph;
        CHECK_ST(gw_np_decode(piece, pl, &ph, why, sizeof(why)), GW_OK);
        if (pl == 0 || ph.off != have || ph.full_len != n || ph.uuid != 9 || ph.serial != 77)
            break;
        memcpy(whole + have, ph.data, ph.data_len);
        have += ph.data_len;
        pieces++;
    }
    CHECK(have == n && pieces == (n + GW_NP_MAX_DATA - 1) / GW_NP_MAX_DATA);
    gw_nt_header_t h;
    CHECK_ST(gw_nt_decode(whole, n, &h, why, sizeof(why)), GW_OK);
    CHECK(h.count == 5000);
    gw_nt_entry_t en;
    CHECK(gw_nt_find(whole, n, "region-04999", &en) == 0 && gw_nt_find(whole, n, "region-5", &en) != 0);
    CHECK(gw_np_encode(piece, sizeof(piece), table, n, n, 9, 77) == 0); /* nothing past the end */
    /* bad pieces: magic, version, lengths that do not add up */
    size_t pl = gw_np_encode(piece, sizeof(piece), table, n, 0, 9, 77);
    gw_np_header_t ph;
    CHECK_ST(gw_np_decode(piece, pl - 1, &ph, why, sizeof(why)), GW_ERR_PROTOCOL);
    piece[0] ^= 1;
    CHECK_ST(gw_np_decode(piece, pl, &ph, why, sizeof(why)), GW_ERR_PROTOCOL);
    piece[0] ^= 1;
    piece[4] = 9;
    CHECK_ST(gw_np_decode(piece, pl, &ph, why, sizeof(why)), GW_ERR_VERSION);
    piece[4] = GW_NP_VERSION;
    gw_put_u32(piece + 8, (uint32_t)n - 10); /* runs past the whole */
    CHECK_ST(gw_np_decode(piece, pl, &ph, why, sizeof(why)), GW_ERR_PROTOCOL);
    gw_put_u32(piece + 8, 0);
    gw_put_u32(piece + 12, GW_NT_MAX_LEN + 1);
    CHECK_ST(gw_np_decode(piece, pl, &ph, why, sizeof(why)), GW_ERR_PROTOCOL);
}

/* The extension slot of the handshake: typed, versioned, one of each
 * type, its HMAC after it; retired tags skipped. */
static void test_hs_ext(void)
{
    gw_hs_msg_t m, d;
    memset(&m, 0, sizeof(m));
    m.type = GW_HS_READY;
    m.token = 7;
    const uint8_t pay[] = "table bytes";
    CHECK(gw_hs_ext_add(&m, GW_HS_EXT_NAMES, 1, pay, sizeof(pay)) == 0);
    CHECK(gw_hs_ext_add(&m, GW_HS_EXT_NAMES, 1, pay, sizeof(pay)) == -1); /* one of each type */
    CHECK(gw_hs_ext_add(&m, 9, 3, NULL, 0) == 0);
    m.ext[0].has_mac = 1;
    memset(m.ext[0].mac, 0xab, GW_HS_MAC_LEN);
    uint8_t buf[512];
    size_t n = gw_hs_encode(&m, buf, sizeof(buf));
    REQUIRE(n > 0);
    char why[256];
    REQUIRE_OK(gw_hs_decode(buf, n, &d, why, sizeof(why)));
    const gw_hs_ext_t *x = gw_hs_ext_find(&d, GW_HS_EXT_NAMES);
    CHECK(d.next == 2 && x && x->version == 1 && x->len == sizeof(pay) && !memcmp(x->data, pay, sizeof(pay)) &&
          x->has_mac && x->mac[31] == 0xab);
    CHECK(gw_hs_ext_find(&d, 9) && gw_hs_ext_find(&d, 9)->version == 3 && !gw_hs_ext_find(&d, 9)->has_mac);
    CHECK(gw_hs_ext_find(&d, 2) == NULL);
    /* an extension request of an extension-only HELLO */
    memset(&m, 0, sizeof(m));
    m.type = GW_HS_HELLO;
    m.uuid = 1;
    m.has_nonce = 1;
    m.npref = 1;
    m.flags = GW_HS_FLAG_EXT_ONLY;
    m.has_ext_req = 1;
    m.ext_req_type = GW_HS_EXT_NAMES;
    m.ext_req_version = 1;
    m.ext_req_arg = 12288;
    n = gw_hs_encode(&m, buf, sizeof(buf));
    REQUIRE_OK(gw_hs_decode(buf, n, &d, why, sizeof(why)));
    CHECK(d.has_ext_req && d.ext_req_type == GW_HS_EXT_NAMES && d.ext_req_version == 1 && d.ext_req_arg == 12288);
    /* a MAC for an extension that is not there; the same type twice; a
     * retired tag (13, the table before it became an extension) skipped */
    uint8_t raw[128];
    size_t k = GW_HS_HDR_LEN;
    uint8_t tok[8] = {1};
    gw_put_u16(raw + k, 3), gw_put_u16(raw + k + 2, 8), memcpy(raw + k + 4, tok, 8), k += 12;
    gw_put_u16(raw + k, 13), gw_put_u16(raw + k + 2, 2), raw[k + 4] = 'x', raw[k + 5] = 'y', k += 6;
    size_t keep = k;
    gw_put_u16(raw + k, 18), gw_put_u16(raw + k + 2, 34), memset(raw + k + 4, 0, 34), k += 38;
    gw_put_u32(raw, GW_HS_MAGIC), gw_put_u16(raw + 4, GW_HS_VERSION), gw_put_u16(raw + 6, GW_HS_READY);
    gw_put_u32(raw + 8, (uint32_t)(k - GW_HS_HDR_LEN));
    CHECK_ST(gw_hs_decode(raw, k, &d, why, sizeof(why)), GW_ERR_PROTOCOL);
    CHECK(strstr(why, "HMAC") != NULL);
    k = keep;
    for (int t = 0; t < 2; t++)
        gw_put_u16(raw + k, 17), gw_put_u16(raw + k + 2, 4), gw_put_u16(raw + k + 4, 1), gw_put_u16(raw + k + 6, 1),
            k += 8;
    gw_put_u32(raw + 8, (uint32_t)(k - GW_HS_HDR_LEN));
    CHECK_ST(gw_hs_decode(raw, k, &d, why, sizeof(why)), GW_ERR_PROTOCOL);
    gw_put_u32(raw + 8, (uint32_t)(keep - GW_HS_HDR_LEN));
    CHECK_ST(gw_hs_decode(raw, keep, &d, why, sizeof(why)), GW_OK);
    CHECK(d.next == 0);
}

#if GW_HAVE_ETCD
/* Settings that do not fit fail at once, naming what is wrong; a missing
 * library is named with its package; a library without the functions
 * needed is called broken. */
static void test_etcd_config(void)
{
    gw_etcd_t e;
    char why[512];
    gw_etcd_cfg_t c = {.url = "etcd://127.0.0.1:2379"};
    /* (first: a library once loaded stays loaded) */
    /* absent: named, with the package */
    setenv("GPUWIRE_CURL_LIB", "libgwt-no-such-curl.so.4", 1);
    CHECK_ST(gw_etcd_init(&e, &c, why, sizeof(why)), GW_ERR_UNAVAILABLE);
    CHECK(strstr(why, "libgwt-no-such-curl.so.4") && strstr(why, "GPUWIRE_CURL_LIB"));
    gw_etcd_fini(&e);
    unsetenv("GPUWIRE_CURL_LIB");
    /* broken: a library that is not cJSON */
    setenv("GPUWIRE_CJSON_LIB", "libc.so.6", 1);
    CHECK_ST(gw_etcd_init(&e, &c, why, sizeof(why)), GW_ERR_UNAVAILABLE);
    CHECK(strstr(why, "libc.so.6") && strstr(why, "broken"));
    gw_etcd_fini(&e);
    unsetenv("GPUWIRE_CJSON_LIB");
    c = (gw_etcd_cfg_t){.url = "etcd://127.0.0.1:2379", .ca = "/x/ca.pem"};
    CHECK_ST(gw_etcd_init(&e, &c, why, sizeof(why)), GW_ERR_CONFIG);
    CHECK(strstr(why, "GPUWIRE_DIRECTORY_CA") && strstr(why, "etcds://"));
    gw_etcd_fini(&e);
    c = (gw_etcd_cfg_t){.url = "etcds://127.0.0.1:2379", .cert = "/x/c.pem"};
    CHECK_ST(gw_etcd_init(&e, &c, why, sizeof(why)), GW_ERR_CONFIG);
    CHECK(strstr(why, "GPUWIRE_DIRECTORY_KEY") != NULL);
    gw_etcd_fini(&e);
    c = (gw_etcd_cfg_t){.url = "etcd://127.0.0.1:2379", .user = "u"};
    CHECK_ST(gw_etcd_init(&e, &c, why, sizeof(why)), GW_ERR_CONFIG);
    CHECK(strstr(why, "password") != NULL);
    gw_etcd_fini(&e);
    c = (gw_etcd_cfg_t){.url = "ftp://127.0.0.1:2379"};
    CHECK_ST(gw_etcd_init(&e, &c, why, sizeof(why)), GW_ERR_CONFIG);
    gw_etcd_fini(&e);
    c = (gw_etcd_cfg_t){.url = "https://127.0.0.1:2379"};
    REQUIRE_OK(gw_etcd_init(&e, &c, why, sizeof(why)));
    CHECK(e.tls && !strcmp(e.base, "https://127.0.0.1:2379"));
    gw_etcd_fini(&e);
    fprintf(stderr, "etcd config refusals checked (last: %s)\n", why);
}

static int events, deletes;
static int count_kv(void *arg, const gw_etcd_kv_t *kv)
{
    (void)arg;
    (void)kv;
    events++;
    return 0;
}
static void on_event(void *arg, int is_delete, const gw_etcd_kv_t *kv)
{
    (void)arg;
    events++;
    deletes += is_delete;
    CHECK(!strcmp(kv->key, "a"));
}

static void test_etcd_msgs(void)
{
    gw_etcd_t e;
    char why[256];
    gw_etcd_cfg_t c = {.url = "etcd://127.0.0.1:1"};
    REQUIRE_OK(gw_etcd_init(&e, &c, why, sizeof(why)));
    /* as etcd 3.4's gateway writes them */
    const char *kvj = "{\"key\":\"YQ==\",\"create_revision\":\"2\",\"mod_revision\":\"5\",\"version\":\"1\",\"value\":\"Yg==\"}";
    cJSON *o = e.js->parse_len(kvj, strlen(kvj));
    gw_etcd_kv_t kv;
    CHECK(gw_etcd_kv_from(&e, o, &kv) == 0 && !strcmp(kv.key, "a") && kv.value_len == 1 && kv.value[0] == 'b' &&
          kv.create_rev == 2 && kv.mod_rev == 5);
    e.js->del(o);
    const char *bad[] = {"{\"key\":\"YQ\"}", "{\"key\":\"\"}", "{\"key\":\"YQ==\",\"mod_revision\":\"x5\"}",
                         "{\"key\":\"AA==\"}", "[1]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o = e.js->parse_len(bad[i], strlen(bad[i]));
        CHECK(gw_etcd_kv_from(&e, o, &kv) == -1);
        if (o)
            e.js->del(o);
    }
    const char *range = "{\"header\":{\"revision\":\"9\"},\"kvs\":[" "{\"key\":\"YQ==\",\"value\":\"Yg==\"}," 
                        "{\"key\":\"Yg==\",\"value\":\"Yw==\"}],\"count\":\"2\"}";
    int64_t rev = 0;
    events = 0;
    CHECK_ST(gw_etcd_range_parse(&e, range, strlen(range), count_kv, NULL, &rev, why, sizeof(why)), GW_OK);
    CHECK(rev == 9 && events == 2);
    CHECK_ST(gw_etcd_range_parse(&e, "{\"kvs\":7}", 9, count_kv, NULL, &rev, why, sizeof(why)), GW_ERR_PROTOCOL);
    const char *stream =
        "{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}\n"
        "{\"result\":{\"header\":{\"revision\":\"2\"},\"events\":[{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"2\",\"value\":\"Yg==\"}}]}}\n"
        "{\"result\":{\"header\":{\"revision\":\"3\"},\"events\":[{\"type\":\"DELETE\",\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"3\"}}]}}\n"
        "{\"result\":{\"header\"";
    gw_etcd_watch_t w;
    memset(&w, 0, sizeof(w));
    w.e = &e;
    events = deletes = 0;
    CHECK_ST(gw_etcd_watch_feed(&w, stream, strlen(stream), on_event, NULL, why, sizeof(why)), GW_OK);
    CHECK(w.created && w.rev == 3 && events == 2 && deletes == 1);
    CHECK(w.len == strlen("{\"result\":{\"header\"")); /* the partial message waits */
    w.len = 0;
    const char *cancel = "{\"result\":{\"canceled\":true,\"cancel_reason\":\"compacted\"}}\n";
    CHECK_ST(gw_etcd_watch_feed(&w, cancel, strlen(cancel), on_event, NULL, why, sizeof(why)), GW_ERR_CANCELED);
    CHECK(strstr(why, "compacted") != NULL);
    w.len = 0;
    const char *denied = "{\"error\":{\"grpc_code\":7,\"http_code\":403,\"message\":\"etcdserver: permission denied\"}}\n";
    CHECK_ST(gw_etcd_watch_feed(&w, denied, strlen(denied), on_event, NULL, why, sizeof(why)), GW_ERR_AUTH);
    w.len = 0;
    CHECK_ST(gw_etcd_watch_feed(&w, "{\"result\":\n", 11, on_event, NULL, why, sizeof(why)), GW_ERR_PROTOCOL);
    gw_etcd_watch_close(&w);
    gw_etcd_fini(&e);
}
#endif

int main(void)
{
    test_table();
    test_pieces();
    test_hs_ext();
#if GW_HAVE_ETCD
    test_etcd_config();
    test_etcd_msgs();
#endif
    return gwt_done("unit_names_wire");
}
