/* SPDX-License-Identifier: Apache-2.0 */
/* api_config.c - gw_config_t versions: a version-1 caller (size up to
 * log_level) still works, and version 2's ib_device overrides
 * GPUWIRE_IB_DEVICE for that context only (the NCCL plugin holds one context
 * per RDMA port this way).  gw_setting_value/gw_setting_from_env with and
 * without a context. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int main(void)
{
    setenv("GPUWIRE_IB_DEVICE", "from_env:1", 1);
    gw_context_t *a, *b, *c;
    gw_config_t v2 = {.size = sizeof(v2), .transports = "tcp", .log_level = -1, .ib_device = "mlx5_7:2"};
    REQUIRE_OK(gw_context_create(&v2, &a));
    CHECK(!strcmp(gw_setting_value(a, "GPUWIRE_IB_DEVICE"), "mlx5_7:2"));
    /* a version-1 caller: ib_device lies past its size and is not read */
    gw_config_t v1 = {.size = offsetof(gw_config_t, log_level) + sizeof(int), .transports = "tcp",
                      .log_level = -1, .ib_device = "never_read:1"};
    REQUIRE_OK(gw_context_create(&v1, &b));
    CHECK(!strcmp(gw_setting_value(b, "GPUWIRE_IB_DEVICE"), "from_env:1"));
    /* NULL: the setting */
    gw_config_t none = {.size = sizeof(none), .transports = "tcp", .log_level = -1, .ib_device = NULL};
    REQUIRE_OK(gw_context_create(&none, &c));
    CHECK(!strcmp(gw_setting_value(c, "GPUWIRE_IB_DEVICE"), "from_env:1"));
    /* the override did not leak into the other contexts */
    CHECK(!strcmp(gw_setting_value(a, "GPUWIRE_IB_DEVICE"), "mlx5_7:2"));
    /* where a value came from, and the values without a context (the tool
     * prints these when no context can be made) */
    CHECK(gw_setting_from_env(a, "GPUWIRE_IB_DEVICE") == 1);
    CHECK(gw_setting_from_env(a, "GPUWIRE_TCP_STREAMS") == 0);
    CHECK(gw_setting_from_env(a, "GPUWIRE_NO_SUCH_THING") == -1);
    CHECK(gw_setting_value(a, "GPUWIRE_NO_SUCH_THING") == NULL);
    CHECK(!strcmp(gw_setting_value(NULL, "GPUWIRE_IB_DEVICE"), "from_env:1"));
    CHECK(gw_setting_from_env(NULL, "GPUWIRE_IB_DEVICE") == 1);
    unsetenv("GPUWIRE_IB_DEVICE");
    CHECK(gw_setting_from_env(NULL, "GPUWIRE_IB_DEVICE") == 0);
    CHECK(gw_setting_value(NULL, "GPUWIRE_IB_DEVICE") != NULL);
    /* a context keeps what it read at creation */
    CHECK(gw_setting_from_env(b, "GPUWIRE_IB_DEVICE") == 1);
    CHECK(!strcmp(gw_setting_value(b, "GPUWIRE_IB_DEVICE"), "from_env:1"));
    CHECK_ST(gw_context_destroy(a), GW_OK);
    CHECK_ST(gw_context_destroy(b), GW_OK);
    CHECK_ST(gw_context_destroy(c), GW_OK);
    return gwt_done("api_config");
}
