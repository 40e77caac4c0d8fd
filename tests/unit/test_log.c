/* SPDX-License-Identifier: Apache-2.0 */
/* test_log.c - log lines name the process, subsystem and level; they go to
 * GPUWIRE_LOG_FILE ("%p" = pid) when set; GPUWIRE_LOG_SUBSYS limits the
 * lines above warn to the subsystems named; bad values are refused with the
 * reason at gw_log_configure() and at gw_context_create(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "harness.h"

static char g_text[8192];

static const char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    g_text[0] = '\0';
    if (f) {
        size_t n = fread(g_text, 1, sizeof(g_text) - 1, f);
        g_text[n] = '\0';
        fclose(f);
    }
    return g_text;
}

int main(void)
{
    char dir[] = "/tmp/gw-log-XXXXXX", pat[256], path[256], err[512];
    REQUIRE(mkdtemp(dir));
    snprintf(pat, sizeof(pat), "%s/run-%%p.log", dir);
    snprintf(path, sizeof(path), "%s/run-%d.log", dir, (int)getpid());

    gw_log_set_level(GW_LOG_DEBUG);
    REQUIRE(gw_log_configure(pat, "tcp,api", err, sizeof(err)) == 0);
    gw_log_impl(GW_LOG_INFO, "tcp", "hello %d", 1);
    gw_log_impl(GW_LOG_DEBUG, "verbs", "filtered out");
    gw_log_impl(GW_LOG_WARN, "verbs", "warnings always");
    gw_log_impl(GW_LOG_ERROR, "mem", "errors always");
    gw_log(GW_LOG_INFO, "from a macro in subsystem %s", GW_LOG_SUBSYS);
    const char *t = read_all(path);
    char want[128];
    snprintf(want, sizeof(want), "gpuwire[%d] tcp info: hello 1\n", (int)getpid());
    CHECK(strstr(t, want) != NULL);
    CHECK(strstr(t, "filtered out") == NULL);
    CHECK(strstr(t, " verbs warn: warnings always\n") != NULL);
    CHECK(strstr(t, " mem error: errors always\n") != NULL);
    /* this test file is not under src/: the default name, not in the list */
    CHECK(strstr(t, "from a macro") == NULL);

    /* all subsystems again; the same file stays open and is appended to */
    REQUIRE(gw_log_configure(pat, "", err, sizeof(err)) == 0);
    gw_log_impl(GW_LOG_DEBUG, "verbs", "now shown");
    gw_log(GW_LOG_TRACE, "above the level"); /* the macro tests the level */
    gw_log(GW_LOG_DEBUG, "at the level");
    t = read_all(path);
    CHECK(strstr(t, " verbs debug: now shown\n") != NULL);
    CHECK(strstr(t, "hello 1") != NULL);
    CHECK(strstr(t, "above the level") == NULL);
    CHECK(strstr(t, " gpuwire debug: at the level\n") != NULL);

    /* bad values: refused with the reason, nothing changes */
    CHECK(gw_log_configure(pat, "tcp,tpc", err, sizeof(err)) == -1);
    CHECK(strstr(err, "GPUWIRE_LOG_SUBSYS") && strstr(err, "\"tpc\"") && strstr(err, "known:"));
    CHECK(gw_log_configure("/nonexistent-dir/x.log", "", err, sizeof(err)) == -1);
    CHECK(strstr(err, "GPUWIRE_LOG_FILE") && strstr(err, "/nonexistent-dir/x.log"));
    gw_log_impl(GW_LOG_DEBUG, "verbs", "still to the file");
    CHECK(strstr(read_all(path), "still to the file") != NULL);

    /* through the settings: a context with a bad subsystem is not created */
    setenv("GPUWIRE_LOG_SUBSYS", "verbs,nosuch", 1);
    gw_context_t *ctx = NULL;
    CHECK_ST(gw_context_create(NULL, &ctx), GW_ERR_CONFIG);
    unsetenv("GPUWIRE_LOG_SUBSYS");
    /* a good one: the file is taken from the environment */
    setenv("GPUWIRE_LOG_FILE", pat, 1);
    setenv("GPUWIRE_LOG_SUBSYS", "core", 1);
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_log_impl(GW_LOG_DEBUG, "core", "via the context");
    gw_log_impl(GW_LOG_DEBUG, "tcp", "not core");
    t = read_all(path);
    CHECK(strstr(t, " core debug: via the context\n") != NULL);
    CHECK(strstr(t, "not core") == NULL);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    unlink(path);
    rmdir(dir);
    return gwt_done("unit_log");
}
