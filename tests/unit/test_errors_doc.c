/* SPDX-License-Identifier: Apache-2.0 */
/* test_errors_doc.c - docs/ERRORS.md lists exactly the codes of GW_STATUS_MAP
 * (same names, same values), each once; the header's codes have distinct
 * values and names; gw_status_str/name agree with the map. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct code {
    const char *name;
    int value;
    const char *text;
    int seen;
} code_t;

static code_t g_codes[] = {
#define X(name, value, text) {#name, value, text, 0},
    GW_STATUS_MAP(X)
#undef X
};
#define NCODES (sizeof(g_codes) / sizeof(g_codes[0]))

static code_t *find(const char *name)
{
    for (size_t i = 0; i < NCODES; i++)
        if (strcmp(g_codes[i].name, name) == 0)
            return &g_codes[i];
    return NULL;
}

/* A table row looks like: | `GW_ERR_X` | -12 | text | advice | */
static int parse_row(const char *line, char *name, size_t namelen, int *value)
{
    const char *p = line;
    while (*p == ' ')
        p++;
    if (*p != '|')
        return 0;
    p++;
    while (*p == ' ')
        p++;
    if (*p != '`')
        return 0;
    p++;
    const char *e = strchr(p, '`');
    if (!e || (size_t)(e - p) >= namelen)
        return 0;
    memcpy(name, p, (size_t)(e - p));
    name[e - p] = '\0';
    if (strncmp(name, "GW_", 3) != 0)
        return 0;
    p = strchr(e, '|');
    if (!p)
        return -1;
    char *end;
    long v = strtol(p + 1, &end, 10);
    while (*end == ' ')
        end++;
    if (end == p + 1 || *end != '|')
        return -1;
    *value = (int)v;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s docs/ERRORS.md\n", argv[0]);
        return 2;
    }
    /* the header itself: distinct values and names, strings consistent */
    for (size_t i = 0; i < NCODES; i++) {
        for (size_t j = i + 1; j < NCODES; j++) {
            if (g_codes[i].value == g_codes[j].value || !strcmp(g_codes[i].name, g_codes[j].name)) {
                fprintf(stderr, "GW_STATUS_MAP: %s and %s share a value or name\n",
                        g_codes[i].name, g_codes[j].name);
                gwt_failures++;
            }
        }
        CHECK(strcmp(gw_status_name((gw_status_t)g_codes[i].value), g_codes[i].name) == 0);
        CHECK(strcmp(gw_status_str((gw_status_t)g_codes[i].value), g_codes[i].text) == 0);
        /* the ranges of the header comment */
        int v = g_codes[i].value;
        if (strncmp(g_codes[i].name, "GW_ERR_", 7) == 0)
            CHECK(v < 0 && v > -60);
        if (v <= -40 && v > -60)
            CHECK(GW_IS_ENDPOINT_ERROR(v));
        else
            CHECK(!GW_IS_ENDPOINT_ERROR(v));
    }
    CHECK(strcmp(gw_status_name((gw_status_t)-999), "GW_STATUS_UNKNOWN") == 0);
    CHECK(gw_status_str((gw_status_t)-999) != NULL);

    FILE *f = fopen(argv[1], "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 1;
    }
    char line[4096], name[128];
    int lineno = 0, rows = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        int value = 0;
        int r = parse_row(line, name, sizeof(name), &value);
        if (r == 0)
            continue;
        if (r < 0) {
            fprintf(stderr, "%s:%d: row for %s has no numeric value column\n", argv[1], lineno, name);
            gwt_failures++;
            continue;
        }
        rows++;
        code_t *c = find(name);
        if (!c) {
            fprintf(stderr, "%s:%d: %s is documented but not in GW_STATUS_MAP\n", argv[1], lineno,
                    name);
            gwt_failures++;
            continue;
        }
        if (c->seen++) {
            fprintf(stderr, "%s:%d: %s is documented twice\n", argv[1], lineno, name);
            gwt_failures++;
        }
        if (c->value != value) {
            fprintf(stderr, "%s:%d: %s documented as %d, header says %d\n", argv[1], lineno, name,
                    value, c->value);
            gwt_failures++;
        }
    }
    fclose(f);
    for (size_t i = 0; i < NCODES; i++) {
        if (!g_codes[i].seen) {
            fprintf(stderr, "%s: %s (%d) is missing from %s\n", argv[0], g_codes[i].name,
                    g_codes[i].value, argv[1]);
            gwt_failures++;
        }
    }
    fprintf(stderr, "%d documented codes, %zu in the header\n", rows, NCODES);
    CHECK((size_t)rows == NCODES);
    return gwt_done("unit_errors_doc");
}
