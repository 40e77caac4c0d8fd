/* SPDX-License-Identifier: Apache-2.0 */
/* test_names_wire.c - the names table format and the etcd client's parsers
 * on known inputs (the fuzzers cover the unknown ones). */
#include <stdio.h>
#include <string.h>

#include "bootstrap/names_wire.h"
#include "bootstrap/wire.h"
#include "core/util.h"
#include "directory/etcd.h"
#include "directory/http.h"
#include "directory/json.h"
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

static void test_json(void)
{
    const char *s = " {\"a\":\"x\\\"y\",\"n\":\"-12\",\"m\":34,\"arr\":[1,{\"k\":true},\"s\"],\"t\":true} tail";
    gw_json_t v, m;
    size_t used;
    CHECK(gw_json_value(s, strlen(s), &v, &used) == 1 && !strncmp(s + used, "tail", 4));
    char buf[32];
    int64_t x;
    CHECK(gw_json_get(v, "a", &m) && gw_json_string(m, buf, sizeof(buf)) == 0 && !strcmp(buf, "x\"y"));
    CHECK(gw_json_get(v, "n", &m) && gw_json_i64(m, &x) == 0 && x == -12);
    CHECK(gw_json_get(v, "m", &m) && gw_json_i64(m, &x) == 0 && x == 34);
    CHECK(gw_json_get(v, "t", &m) && gw_json_true(m));
    CHECK(!gw_json_get(v, "zz", &m));
    CHECK(gw_json_get(v, "arr", &m));
    size_t it = 0;
    gw_json_t el;
    int k = 0;
    while (gw_json_next(m, &it, &el))
        k++;
    CHECK(k == 3);
    CHECK(gw_json_value("{\"a\":", 5, &v, &used) == 0);  /* incomplete */
    CHECK(gw_json_value("{\"a\" 1}", 7, &v, &used) == -1); /* malformed */
    CHECK(gw_json_value("[1,]", 4, &v, &used) == -1);
    char deep[80];
    memset(deep, '[', sizeof(deep));
    CHECK(gw_json_value(deep, sizeof(deep), &v, &used) == -1); /* past the depth limit */
    size_t ol = 0;
    char out[32];
    CHECK(gw_json_put_str(out, sizeof(out), &ol, "a\"b\n") == 0 && !strcmp(out, "\"a\\\"b\\u000a\""));
    CHECK(gw_json_i64((gw_json_t){"\"99999999999999999999\"", 22}, &x) == -1); /* overflow */
}

static void test_b64(void)
{
    char enc[16];
    uint8_t dec[16];
    CHECK(gw_b64_encode("ab", 2, enc, sizeof(enc)) == 4 && !strcmp(enc, "YWI="));
    CHECK(gw_b64_decode("YWI=", 4, dec, sizeof(dec)) == 2 && !memcmp(dec, "ab", 2));
    CHECK(gw_b64_decode("YWJ=", 4, dec, sizeof(dec)) == -1); /* non-zero bits past the data */
    CHECK(gw_b64_decode("Y=I=", 4, dec, sizeof(dec)) == -1);
    CHECK(gw_b64_decode("YWI", 3, dec, sizeof(dec)) == -1);
}

static void test_http(void)
{
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    gw_http_head_t h;
    char why[128];
    CHECK(gw_http_parse_head(head, strlen(head), &h, why, sizeof(why)) == 0 && h.status == 200 && h.chunked);
    CHECK(gw_http_parse_head("HTTP/1.1 404 NF\r\nContent-Length: 7\r\n\r\n", 37, &h, why, sizeof(why)) == 0 &&
          h.status == 404 && h.content_length == 7 && !h.chunked);
    CHECK(gw_http_parse_head("SSH-2.0-x\r\n\r\n", 13, &h, why, sizeof(why)) == -1);
    gw_http_head_t ch = {.status = 200, .chunked = 1};
    gw_http_body_t b;
    gw_buf_t out = {0};
    size_t used;
    gw_http_body_init(&b, &ch);
    const char *body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n";
    CHECK(gw_http_body_feed(&b, body, 9, &used, &out) == 0); /* in two pieces */
    CHECK(gw_http_body_feed(&b, body + 9, strlen(body) - 9, &used, &out) == 1);
    CHECK(out.len == 11 && !memcmp(out.p, "hello world", 11));
    gw_buf_free(&out);
    gw_http_body_init(&b, &ch);
    CHECK(gw_http_body_feed(&b, "zz\r\n", 4, &used, &out) == -1);
    gw_buf_free(&out);
    char hp[64];
    CHECK(gw_http_hostport("etcd://127.0.0.1:2379", hp, sizeof(hp), why, sizeof(why)) == GW_OK &&
          !strcmp(hp, "127.0.0.1:2379"));
    CHECK(gw_http_hostport("https://x:1", hp, sizeof(hp), why, sizeof(why)) == GW_ERR_CONFIG);
}

static int events, deletes;
static void on_event(void *arg, int is_delete, const gw_etcd_kv_t *kv)
{
    (void)arg;
    events++;
    deletes += is_delete;
    CHECK(!strcmp(kv->key, "a"));
}

static void test_etcd_msgs(void)
{
    /* as etcd 3.4's gateway writes them */
    const char *kvj = "{\"key\":\"YQ==\",\"create_revision\":\"2\",\"mod_revision\":\"5\",\"version\":\"1\",\"value\":\"Yg==\"}";
    gw_etcd_kv_t kv;
    CHECK(gw_etcd_parse_kv(kvj, strlen(kvj), &kv) == 0 && !strcmp(kv.key, "a") && kv.value_len == 1 &&
          kv.value[0] == 'b' && kv.create_rev == 2 && kv.mod_rev == 5);
    const char *stream =
        "{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}\n"
        "{\"result\":{\"header\":{\"revision\":\"2\"},\"events\":[{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"2\",\"value\":\"Yg==\"}}]}}\n"
        "{\"result\":{\"header\":{\"revision\":\"3\"},\"events\":[{\"type\":\"DELETE\",\"kv\":{\"key\":\"YQ==\",\"mod_revision\":\"3\"}}]}}\n"
        "{\"result\":{\"header\"";
    gw_etcd_watch_t w;
    memset(&w, 0, sizeof(w));
    w.fd = -1;
    CHECK(gw_buf_add(&w.buf, stream, strlen(stream)) == 0);
    char why[128];
    CHECK_ST(gw_etcd_watch_dispatch(&w, on_event, NULL, why, sizeof(why)), GW_OK);
    CHECK(w.created && w.rev == 3 && events == 2 && deletes == 1);
    CHECK(w.buf.len == strlen("{\"result\":{\"header\"")); /* the partial message waits */
    gw_buf_consume(&w.buf, w.buf.len);
    const char *cancel = "{\"result\":{\"canceled\":true,\"cancel_reason\":\"compacted\"}}";
    gw_buf_add(&w.buf, cancel, strlen(cancel));
    CHECK_ST(gw_etcd_watch_dispatch(&w, on_event, NULL, why, sizeof(why)), GW_ERR_CANCELED);
    CHECK(strstr(why, "compacted") != NULL);
    gw_etcd_watch_close(&w);
}

int main(void)
{
    test_table();
    test_pieces();
    test_json();
    test_b64();
    test_http();
    test_etcd_msgs();
    return gwt_done("unit_names_wire");
}
