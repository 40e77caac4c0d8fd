/* SPDX-License-Identifier: Apache-2.0 */
/* status.c - names and texts of gw_status_t, generated from GW_STATUS_MAP. */
#include "gpuwire.h"

const char *gw_status_str(gw_status_t status)
{
    switch (status) {
#define X(name, value, text)                                                                   \
    case name:                                                                                 \
        return text;
        GW_STATUS_MAP(X)
#undef X
    }
    return "unknown status";
}

const char *gw_status_name(gw_status_t status)
{
    switch (status) {
#define X(name, value, text)                                                                   \
    case name:                                                                                 \
        return #name;
        GW_STATUS_MAP(X)
#undef X
    }
    return "GW_STATUS_UNKNOWN";
}
