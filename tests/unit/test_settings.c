/* SPDX-License-Identifier: Apache-2.0 */
/* test_settings.c - the GPUWIRE_* registry: listing, size suffixes, integer
 * and size parsing with messages that name the variable and value, the
 * unknown-name warning with its suggestion, and a bad log level. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/settings.h"
#include "harness.h"
#include "transport/tcp/tcp_int.h"
#include "transport/verbs/verbs.h"

static void check_size(const char *s, int want_rc, uint64_t want)
{
    uint64_t v = 12345;
    int rc = gw_parse_size(s, &v);
    if (rc != want_rc || (rc == 0 && v != want)) {
        fprintf(stderr, "gw_parse_size(\"%s\") = %d, %llu; expected %d, %llu\n", s, rc,
                (unsigned long long)v, want_rc, (unsigned long long)want);
        gwt_failures++;
    }
}

/* Runs gw_settings_load with stderr captured into buf. */
static gw_status_t load_captured(gw_settings_t *s, char *err, size_t errlen, char *buf,
                                 size_t buflen)
{
    char path[] = "/tmp/gw_unit_settings_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    gw_status_t st = gw_settings_load(s, err, errlen);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, buf, buflen - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    return st;
}

int main(void)
{
    /* registry listing */
    size_t n = 0;
    for (const gw_setting_desc_t *d; (d = gw_setting_at(n)) != NULL; n++) {
        CHECK(strncmp(d->name, "GPUWIRE_", 8) == 0);
        CHECK(d->default_value != NULL);
        CHECK(d->help && strlen(d->help) > 10);
        for (size_t j = 0; j < n; j++)
            CHECK(strcmp(gw_setting_at(j)->name, d->name) != 0);
    }
    CHECK(n == GW_SET_COUNT);
    CHECK(gw_setting_at(GW_SET_COUNT) == NULL);
    CHECK(strcmp(gw_settings_name(GW_SET_TCP_STREAMS), "GPUWIRE_TCP_STREAMS") == 0);
    CHECK(strcmp(gw_settings_name((gw_setting_id_t)9999), "?") == 0);

    /* the registry's kinds and ranges: every range parses, every default is
     * accepted, and the ranges fit the arrays and limits the readers size by
     * them (a range is written only in settings.def) */
    for (size_t i = 0; i < GW_SET_COUNT; i++) {
        const gw_setting_rule_t *r = gw_settings_rule((gw_setting_id_t)i);
        const gw_setting_desc_t *d = gw_setting_at(i);
        REQUIRE(r && d->accepts && d->accepts[0]);
        if (r->kind == GW_SK_INT || r->kind == GW_SK_SIZE)
            CHECK(r->min <= r->max);
        if (r->kind == GW_SK_WORDS)
            CHECK(r->words[0] != '\0');
        if (r->kind == GW_SK_TEXT)
            CHECK(!strcmp(d->accepts, "text"));
    }
    CHECK(gw_settings_rule(GW_SET_TCP_STREAMS)->max <= GW_TCP_MAX_STREAMS);
    CHECK(gw_settings_rule(GW_SET_TCP_THREADS)->max <= GW_TCP_MAX_STREAMS);
    CHECK(gw_settings_rule(GW_SET_IB_QPS)->max <= GW_VERBS_MAX_QPS);
    CHECK(gw_settings_rule(GW_SET_TCP_EAGER_MAX)->max <= MAX_EAGER_RECV);
    CHECK(gw_settings_rule(GW_SET_TCP_CHUNK)->min == 4096 && gw_settings_rule(GW_SET_TCP_CHUNK)->max == 1ull << 30);
    CHECK(gw_settings_rule(GW_SET_TCP_STRIPE_MIN)->max == UINT64_MAX);
    CHECK(!strcmp(gw_setting_at(GW_SET_TCP_STREAMS)->accepts, "integer 1..16, or auto"));
    CHECK(!strcmp(gw_setting_at(GW_SET_INTRA)->accepts, "one of auto, force or off"));
    CHECK(!strcmp(gw_setting_at(GW_SET_IB_GID_INDEX)->accepts, "integer 0..255, or auto or empty"));
    CHECK(gw_settings_is_word(GW_SET_LOG_LEVEL, "DEBUG"));
    CHECK(gw_settings_is_word(GW_SET_IB_GID_INDEX, ""));
    CHECK(!gw_settings_is_word(GW_SET_TCP_CHUNK, ""));
    CHECK(!gw_settings_is_word(GW_SET_INTRA, "forc"));

    /* sizes */
    check_size("0", 0, 0);
    check_size("123", 0, 123);
    check_size("4K", 0, 4096);
    check_size("4k", 0, 4096);
    check_size("4KiB", 0, 4096);
    check_size("4KB", 0, 4096);
    check_size("1M", 0, 1u << 20);
    check_size("64m", 0, 64u << 20);
    check_size("3G", 0, 3ull << 30);
    check_size("2T", 0, 2ull << 40);
    check_size("18446744073709551615", 0, UINT64_MAX);
    check_size("16777216T", -1, 0); /* 2^64: overflows */
    check_size("", -1, 0);
    check_size("K", -1, 0);
    check_size("-1", -1, 0);
    check_size(" 4K", -1, 0);
    check_size("1.5M", -1, 0);
    check_size("4X", -1, 0);
    check_size("4KX", -1, 0);
    check_size("99999999999999999999999", -1, 0);
    CHECK(gw_parse_size(NULL, &(uint64_t){0}) == -1);

    /* every default parses as what its setting is (sizes for the size settings) */
    gw_settings_t s;
    char err[256] = "", cap[4096];
    unsetenv("GPUWIRE_TCP_CHUNK");
    REQUIRE_OK(load_captured(&s, err, sizeof(err), cap, sizeof(cap)));
    uint64_t v;
    uint64_t want;
    static const gw_setting_id_t size_ids[] = {GW_SET_TCP_CHUNK, GW_SET_TCP_STRIPE_MIN,
                                               GW_SET_TCP_EAGER_MAX, GW_SET_TCP_SOCKBUF,
                                               GW_SET_STAGING_CHUNK};
    for (size_t i = 0; i < sizeof(size_ids) / sizeof(size_ids[0]); i++) {
        const char *def = gw_setting_at(size_ids[i])->default_value;
        CHECK(gw_parse_size(def, &want) == 0);
        CHECK_ST(gw_settings_size(&s, size_ids[i], &v, err, sizeof(err)), GW_OK);
        CHECK(v == want);
        CHECK(strcmp(gw_settings_str(&s, size_ids[i]), def) == 0);
    }
    long l;
    CHECK_ST(gw_settings_int(&s, GW_SET_STAGING_BUFFERS, &l, err, sizeof(err)), GW_OK);
    CHECK(l == atol(gw_setting_at(GW_SET_STAGING_BUFFERS)->default_value));
    CHECK_ST(gw_settings_int(&s, GW_SET_PEER_TIMEOUT_MS, &l, err, sizeof(err)), GW_OK);
    CHECK_ST(gw_settings_int(&s, GW_SET_CONNECT_TIMEOUT_MS, &l, err, sizeof(err)), GW_OK);
    CHECK(s.from_env[GW_SET_TCP_STREAMS] == 0);
    gw_settings_free(&s);

    /* values from the environment, bad values named in the message */
    setenv("GPUWIRE_TCP_CHUNK", "8M", 1);
    setenv("GPUWIRE_TCP_STREAMS", "abc", 1);
    setenv("GPUWIRE_PEER_TIMEOUT_MS", "99999999999999999999", 1);
    setenv("GPUWIRE_TCP_SOCKBUF", "12Q", 1);
    REQUIRE_OK(load_captured(&s, err, sizeof(err), cap, sizeof(cap)));
    CHECK(s.from_env[GW_SET_TCP_CHUNK]);
    CHECK(strcmp(gw_settings_str(&s, GW_SET_TCP_CHUNK), "8M") == 0);
    CHECK_ST(gw_settings_size(&s, GW_SET_TCP_CHUNK, &v, err, sizeof(err)), GW_OK);
    CHECK(v == 8u << 20);
    CHECK_ST(gw_settings_check(&s, err, sizeof(err)), GW_ERR_CONFIG); /* the streams' "abc" */
    gw_settings_free(&s);
    setenv("GPUWIRE_TCP_CHUNK", "2G", 1); /* above the registry's 1G */
    REQUIRE_OK(load_captured(&s, err, sizeof(err), cap, sizeof(cap)));
    CHECK_ST(gw_settings_size(&s, GW_SET_TCP_CHUNK, &v, err, sizeof(err)), GW_ERR_CONFIG);
    CHECK(strstr(err, "GPUWIRE_TCP_CHUNK") && strstr(err, "2G") && strstr(err, "4K..1G"));
    err[0] = '\0';
    CHECK_ST(gw_settings_int(&s, GW_SET_TCP_STREAMS, &l, err, sizeof(err)), GW_ERR_CONFIG);
    CHECK(strstr(err, "GPUWIRE_TCP_STREAMS") && strstr(err, "abc") && strstr(err, "1..16, or auto"));
    CHECK_ST(gw_settings_int(&s, GW_SET_PEER_TIMEOUT_MS, &l, err, sizeof(err)), GW_ERR_CONFIG);
    CHECK_ST(gw_settings_size(&s, GW_SET_TCP_SOCKBUF, &v, err, sizeof(err)), GW_ERR_CONFIG);
    CHECK(strstr(err, "GPUWIRE_TCP_SOCKBUF") && strstr(err, "12Q"));
    gw_settings_free(&s);
    unsetenv("GPUWIRE_TCP_CHUNK");
    unsetenv("GPUWIRE_TCP_STREAMS");
    unsetenv("GPUWIRE_PEER_TIMEOUT_MS");
    unsetenv("GPUWIRE_TCP_SOCKBUF");

    /* unknown names: a typo gets a suggestion, a stranger gets a pointer to info */
    setenv("GPUWIRE_TCP_STREMS", "4", 1);
    setenv("GPUWIRE_COMPLETELY_DIFFERENT_THING", "1", 1);
    REQUIRE_OK(load_captured(&s, err, sizeof(err), cap, sizeof(cap)));
    fprintf(stderr, "captured: %s", cap);
    CHECK(strstr(cap, "unknown setting GPUWIRE_TCP_STREMS") != NULL);
    CHECK(strstr(cap, "did you mean GPUWIRE_TCP_STREAMS") != NULL);
    CHECK(strstr(cap, "unknown setting GPUWIRE_COMPLETELY_DIFFERENT_THING") != NULL);
    CHECK(strstr(cap, "GPUWIRE_COMPLETELY_DIFFERENT_THING in the environment (gpuwire info") != NULL);
    CHECK(strstr(cap, "GPUWIRE_TCP_STREAMS ") == NULL); /* known names are not warned about */
    gw_settings_free(&s);
    unsetenv("GPUWIRE_TCP_STREMS");
    unsetenv("GPUWIRE_COMPLETELY_DIFFERENT_THING");

    /* a context core with a bad log level fails with GW_ERR_CONFIG and says why */
    setenv("GPUWIRE_LOG_LEVEL", "loud", 1);
    gw_core_t core;
    err[0] = '\0';
    CHECK_ST(gw_core_init(&core, err, sizeof(err)), GW_ERR_CONFIG);
    CHECK(strstr(err, "GPUWIRE_LOG_LEVEL") && strstr(err, "loud"));
    setenv("GPUWIRE_LOG_LEVEL", "debug", 1);
    REQUIRE_OK(gw_core_init(&core, err, sizeof(err)));
    CHECK(gw_log_threshold == GW_LOG_DEBUG);
    gw_core_fini(&core);
    gw_log_set_level(GW_LOG_WARN);
    unsetenv("GPUWIRE_LOG_LEVEL");
    CHECK(gw_log_parse_level("TRACE") == GW_LOG_TRACE);
    CHECK(gw_log_parse_level("2") == GW_LOG_INFO);
    CHECK(gw_log_parse_level("5") == -1);
    CHECK(gw_log_parse_level(NULL) == -1);

    /* the one sysfs-root resolver: a context's value, else the process's
     * environment now; unset or empty is /sys */
    unsetenv("GPUWIRE_SYSFS_ROOT");
    CHECK(!strcmp(gw_settings_sysfs_root(NULL), "/sys"));
    setenv("GPUWIRE_SYSFS_ROOT", "", 1);
    CHECK(!strcmp(gw_settings_sysfs_root(NULL), "/sys"));
    setenv("GPUWIRE_SYSFS_ROOT", "/rec/one", 1);
    CHECK(!strcmp(gw_settings_sysfs_root(NULL), "/rec/one"));
    CHECK(!strcmp(gw_settings_env(GW_SET_SYSFS_ROOT), "/rec/one"));
    gw_settings_t ss;
    REQUIRE_OK(gw_settings_load(&ss, err, sizeof(err)));
    setenv("GPUWIRE_SYSFS_ROOT", "/rec/two", 1); /* after the load: the loaded value stays */
    CHECK(!strcmp(gw_settings_sysfs_root(&ss), "/rec/one"));
    CHECK(!strcmp(gw_settings_sysfs_root(NULL), "/rec/two"));
    gw_settings_free(&ss);
    setenv("GPUWIRE_SYSFS_ROOT", "", 1);
    REQUIRE_OK(gw_settings_load(&ss, err, sizeof(err)));
    CHECK(!strcmp(gw_settings_sysfs_root(&ss), "/sys"));
    gw_settings_free(&ss);
    unsetenv("GPUWIRE_SYSFS_ROOT");
    return gwt_done("unit_settings");
}
