/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_info.c - `gpuwire info`: version, build features, transports (usable
 * or why not), the settings taken from the environment (with --settings every
 * GPUWIRE_* setting with its value and help), and with --topo the PCIe/NUMA
 * topology (printed by topo_print.c when built in). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuwire.h"
#include "subcommands.h"

#if defined(__has_include)
#if __has_include("topo_print.h")
#include "topo_print.h"
#endif
#endif

/* Weak: the topology printer lives in topo_print.c; a tool built without it
 * still links and says so. */
int gw_tool_print_topo(FILE *out, int json) __attribute__((weak));

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuwire info [--all | --transports | --settings] [--topo] [--json]\n"
            "\n"
            "With no selection, a summary: version and build features, the transports\n"
            "compiled in and whether each is usable here (why not, when not), the names\n"
            "directory in use (GPUWIRE_DIRECTORY) and whether it answers, and the GPUWIRE_*\n"
            "settings taken from the environment.\n"
            "\n"
            "  -a, --all          the summary, then every setting as --settings prints it\n"
            "  -t, --transports   only the transports\n"
            "  -s, --settings     only the settings: every GPUWIRE_* setting with the value\n"
            "                     in effect, where it came from (env or default) and its help\n"
            "  -T, --topo         the PCIe/NUMA topology: GPUs, NICs and their distance\n"
            "  -j, --json         one JSON object (always complete): version, features, context\n"
            "                     status, transports, settings (value, source, default,\n"
            "                     help), unknown GPUWIRE_* names, and with --topo the\n"
            "                     topology (--topo --json alone: the topology object)\n"
            "  -h, --help         this text\n");
}

/* Wraps text at width columns, each line prefixed by indent spaces. */
static void print_wrapped(const char *text, int indent, int width)
{
    const char *p = text;
    while (*p) {
        int avail = width - indent;
        size_t n = strlen(p);
        size_t take = n;
        if ((int)n > avail) {
            take = (size_t)avail;
            while (take > 0 && p[take] != ' ')
                take--;
            if (take == 0)
                take = (size_t)avail;
        }
        printf("%*s%.*s\n", indent, "", (int)take, p);
        p += take;
        while (*p == ' ')
            p++;
    }
}

static int print_transports(gw_context_t *ctx)
{
    printf("transports (in GPUWIRE_TRANSPORTS order of preference when allowed):\n");
    int usable = 0;
    for (size_t i = 0;; i++) {
        gw_transport_info_t ti;
        memset(&ti, 0, sizeof(ti));
        ti.size = sizeof(ti);
        gw_status_t st = gw_transport_at(ctx, i, &ti);
        if (st == GW_ERR_NOT_FOUND)
            break;
        if (st != GW_OK) {
            printf("  #%zu: query failed: %s (%s)\n", i, gw_status_name(st), gw_last_error(ctx));
            continue;
        }
        usable += ti.usable != 0;
        printf("  %-6s %-10s %s\n", ti.name, ti.usable ? "usable" : "not usable",
               ti.detail[0] ? ti.detail : "");
    }
    if (!usable)
        printf("  (no transport is usable: connections will fail with GW_ERR_NO_TRANSPORT)\n");
    return 0;
}

/* Lists the GPUWIRE_* variables of the environment that name no setting. */
static void print_unknown_vars(void)
{
    extern char **environ;
    int header = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "GPUWIRE_", 8) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        size_t i = 0;
        for (; gw_setting_at(i); i++)
            if (strlen(gw_setting_at(i)->name) == len && strncmp(gw_setting_at(i)->name, *e, len) == 0)
                break;
        if (gw_setting_at(i))
            continue;
        if (!header)
            printf("unknown GPUWIRE_* variables in the environment (ignored):\n");
        header = 1;
        printf("  %.*s\n", (int)len, *e);
    }
}

/* A secret's value (GPUWIRE_AUTH_SECRET, GPUWIRE_DIRECTORY_PASSWORD) is
 * never printed: only whether it is set. */
static const char *shown(const char *name, const char *val)
{
    size_t n = strlen(name);
    int secret = (n > 7 && !strcmp(name + n - 7, "_SECRET")) || (n > 9 && !strcmp(name + n - 9, "_PASSWORD"));
    return secret && val && *val ? "(set, not shown)" : val;
}

static void print_settings(gw_context_t *ctx)
{
    printf("settings (environment variables, read at gw_context_create()):\n");
    for (size_t i = 0;; i++) {
        const gw_setting_desc_t *d = gw_setting_at(i);
        if (!d)
            break;
        const char *val = gw_setting_value(ctx, d->name);
        int env = gw_setting_from_env(ctx, d->name) == 1;
        if (!val)
            val = d->default_value;
        val = shown(d->name, val);
        const char *src = env ? "env" : "default";
        printf("  %s=%s%s%s  [%s", d->name, *val ? "\"" : "", *val ? val : "(unset)",
               *val ? "\"" : "", src);
        if (env && strcmp(d->default_value, val) != 0)
            printf("; default \"%s\"", d->default_value);
        printf("]\n");
        print_wrapped(d->help, 6, 92);
        printf("      accepts: %s\n", d->accepts);
    }
    /* unknown GPUWIRE_* variables: gw_context_create() warned already; list them again here */
    print_unknown_vars();
}

/* The summary's settings line: those set in the environment, and unknown names. */
static void print_settings_summary(gw_context_t *ctx)
{
    size_t n = 0, set = 0;
    for (; gw_setting_at(n); n++)
        if (ctx && gw_setting_from_env(ctx, gw_setting_at(n)->name) == 1)
            set++;
    printf("settings: %zu GPUWIRE_* variables (gpuwire info --settings: all, with their help); "
           "%zu set in the environment%s\n", n, set, set ? ":" : "");
    for (size_t i = 0; ctx && i < n; i++) {
        const gw_setting_desc_t *d = gw_setting_at(i);
        if (gw_setting_from_env(ctx, d->name) != 1)
            continue;
        const char *val = gw_setting_value(ctx, d->name);
        printf("  %s=\"%s\"  [env; default \"%s\"]\n", d->name, val ? shown(d->name, val) : "", d->default_value);
    }
    print_unknown_vars();
}

/* ---- --json ------------------------------------------------------------------------ */
static void json_str(const char *v)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)(v ? v : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void json_transports(gw_context_t *ctx)
{
    printf("\"transports\":[");
    for (size_t i = 0; ctx; i++) {
        gw_transport_info_t ti;
        memset(&ti, 0, sizeof(ti));
        ti.size = sizeof(ti);
        gw_status_t st = gw_transport_at(ctx, i, &ti);
        if (st == GW_ERR_NOT_FOUND)
            break;
        printf("%s{\"name\":", i ? "," : "");
        json_str(st == GW_OK ? ti.name : "?");
        printf(",\"usable\":%s,\"detail\":", st == GW_OK && ti.usable ? "true" : "false");
        json_str(st == GW_OK ? ti.detail : gw_last_error(ctx));
        printf("}");
    }
    printf("]");
}

static int is_known(const char *e, size_t n)
{
    for (size_t i = 0; gw_setting_at(i); i++) {
        const char *name = gw_setting_at(i)->name;
        if (strlen(name) == n && strncmp(name, e, n) == 0)
            return 1;
    }
    return 0;
}

static void json_settings(gw_context_t *ctx)
{
    printf("\"settings\":[");
    for (size_t i = 0;; i++) {
        const gw_setting_desc_t *d = gw_setting_at(i);
        if (!d)
            break;
        const char *val = gw_setting_value(ctx, d->name);
        int env = gw_setting_from_env(ctx, d->name) == 1;
        if (!val)
            val = d->default_value;
        printf("%s{\"name\":", i ? "," : "");
        json_str(d->name);
        printf(",\"value\":");
        json_str(shown(d->name, val));
        printf(",\"source\":\"%s\",\"default\":", env ? "env" : "default");
        json_str(d->default_value);
        printf(",\"help\":");
        json_str(d->help);
        printf(",\"accepts\":");
        json_str(d->accepts);
        printf("}");
    }
    printf("],\"unknown_settings\":[");
    extern char **environ;
    int k = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "GPUWIRE_", 8) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        if (is_known(*e, n))
            continue;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), *e);
        printf("%s", k++ ? "," : "");
        json_str(name);
    }
    printf("]");
}

/* One JSON object of what the text form prints (and the topology with --topo). */
static int print_json(int want_tl, int want_set, int want_topo)
{
    int all = !want_tl && !want_set;
    gw_context_t *ctx = NULL;
    gw_status_t st = gw_context_create(NULL, &ctx);
    printf("{\"version\":");
    json_str(gw_version());
    printf(",\"header_version\":");
    json_str(GW_VERSION_STRING);
    printf(",\"features\":[");
    char feat[256];
    snprintf(feat, sizeof(feat), "%s", gw_build_features());
    int k = 0;
    for (char *save = NULL, *w = strtok_r(feat, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        printf("%s", k++ ? "," : "");
        json_str(w);
    }
    printf("],\"context\":{\"status\":");
    json_str(gw_status_name(st));
    printf(",\"ok\":%s}", st == GW_OK ? "true" : "false");
    if (all || want_tl) {
        printf(",");
        json_transports(ctx);
    }
    if (all || want_set) {
        printf(",");
        json_settings(ctx);
    }
    int rc = st == GW_OK ? 0 : 1;
    if (want_topo) {
        printf(",\"topology\":");
        fflush(stdout);
        if (!gw_tool_print_topo || gw_tool_print_topo(stdout, 1) != 0) {
            printf("null");
            rc = 1;
        }
    }
    printf("}\n");
    gw_context_destroy(ctx);
    return rc;
}

static int print_topo(int json)
{
    if (!gw_tool_print_topo) {
        fprintf(stderr, "gpuwire info --topo: topology support not built into this tool\n");
        return 1;
    }
    return gw_tool_print_topo(stdout, json) == 0 ? 0 : 1;
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"all", no_argument, NULL, 'a'},
        {"transports", no_argument, NULL, 't'},
        {"settings", no_argument, NULL, 's'},
        {"topo", no_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int want_tl = 0, want_set = 0, want_topo = 0, json = 0, want_all = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "atsTjh", opts, NULL)) != -1) {
        switch (c) {
        case 'a': want_all = 1; break;
        case 't': want_tl = 1; break;
        case 's': want_set = 1; break;
        case 'T': want_topo = 1; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuwire info: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (want_all && (want_tl || want_set)) {
        fprintf(stderr, "gpuwire info: --all includes --transports and --settings\n");
        return 2;
    }
    if (want_topo && !want_tl && !want_set && !want_all)
        return print_topo(json);
    if (json)
        return print_json(want_tl, want_set, want_topo);
    int all = !want_tl && !want_set;

    gw_context_t *ctx = NULL;
    gw_status_t st = gw_context_create(NULL, &ctx);
    if (all) {
        printf("gpuwire %s (header %s)\n", gw_version(), GW_VERSION_STRING);
        printf("features: %s\n", gw_build_features());
    }
    if (st != GW_OK) {
        /* the settings still print: a bad setting is the usual cause */
        printf("context: gw_context_create() failed: %s (%s); the message above names the "
               "setting\n",
               gw_status_name(st), gw_status_str(st));
    }
    if ((all || want_tl) && ctx)
        print_transports(ctx);
    if (all && ctx) {
        char dir[512];
        if (gw_directory_describe(ctx, dir, sizeof(dir)) == GW_OK)
            printf("directory: %s\n", dir);
        else
            printf("directory: %s\n", gw_last_error(ctx));
    }
    if (all && !want_all)
        print_settings_summary(ctx);
    if (want_all || want_set || (all && st != GW_OK)) /* a bad setting: show them all */
        print_settings(ctx);
    int rc = st == GW_OK ? 0 : 1;
    if (want_topo && print_topo(0) != 0)
        rc = 1;
    gw_context_destroy(ctx);
    return rc;
}
