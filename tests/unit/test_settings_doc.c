/* SPDX-License-Identifier: Apache-2.0 */
/* test_settings_doc.c - docs/SETTINGS.md lists every registered setting with
 * its default and what it accepts, and nothing that is not registered. */
#include "harness.h"

int main(int argc, char **argv)
{
    REQUIRE(argc == 2);
    FILE *f = fopen(argv[1], "r");
    REQUIRE(f);
    static char doc[1 << 16];
    size_t n = fread(doc, 1, sizeof(doc) - 1, f);
    fclose(f);
    doc[n] = '\0';
    size_t count = 0;
    for (size_t i = 0; gw_setting_at(i); i++, count++) {
        const gw_setting_desc_t *d = gw_setting_at(i);
        char row[256];
        if (d->default_value[0])
            snprintf(row, sizeof(row), "| `%s` | `%s` | %s |", d->name, d->default_value, d->accepts);
        else
            snprintf(row, sizeof(row), "| `%s` | (unset) | %s |", d->name, d->accepts);
        if (!strstr(doc, row)) {
            fprintf(stderr, "docs/SETTINGS.md lacks the row for %s (default \"%s\", accepts %s)\n", d->name,
                    d->default_value, d->accepts);
            gwt_failures++;
        }
    }
    size_t rows = 0;
    for (const char *p = doc; (p = strstr(p, "| `GPUWIRE_")) != NULL; p++)
        rows++;
    if (rows != count) {
        fprintf(stderr, "docs/SETTINGS.md has %zu setting rows, the registry %zu\n", rows, count);
        gwt_failures++;
    }
    return gwt_done("unit_settings_doc");
}
