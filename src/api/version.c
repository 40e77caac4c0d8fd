/* SPDX-License-Identifier: Apache-2.0 */
/* version.c - version and build features. */
#include "gpuwire.h"

const char *gw_version(void) { return GW_VERSION_STRING; }
const char *gw_build_features(void) { return GW_FEATURES; }
