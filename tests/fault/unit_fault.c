/* SPDX-License-Identifier: Apache-2.0 */
/* unit_fault.c - the GPUWIRE_FAULT spec: what parses, what is refused with
 * which reason, which calls a rule fires on, and its counters. */
#include <errno.h>
#include <string.h>

#include "core/fault.h"
#include "harness.h"

static void refused(const char *spec, const char *why_part)
{
    char err[256] = "";
    gw_status_t st = gw_fault_configure(spec, err, sizeof(err));
    CHECK_ST(st, GW_ERR_CONFIG);
    if (!strstr(err, why_part)) {
        fprintf(stderr, "spec \"%s\": reason \"%s\" lacks \"%s\"\n", spec, err, why_part);
        gwt_failures++;
    }
}

int main(void)
{
    char err[256];
    gw_fault_t f;
    /* nothing armed: no call fires, nothing is counted */
    REQUIRE_OK(gw_fault_configure("", err, sizeof(err)));
    CHECK(gw_fault_on == 0);
    CHECK(gw_fault_at("sock.send", &f) == 0);

    refused("sock.send", "expected POINT:ACTION");
    refused("sock.write:short", "unknown point");
    refused("disk.read:fail", "unknown point");
    refused("cuda.cuMemcpyAsyn:fail", "unknown point");
    refused("ibv.destroy_qp:fail", "unknown point");
    refused("cuda.cuFoo*:fail", "unknown point");
    refused("sock.send:explode", "unknown action");
    refused("sock.send:status=retry_exc", "does not take action status");
    refused("cuda.cuMemcpyAsync:short=3", "does not take action short");
    refused("ibv.post_send:drop", "does not take action drop");
    refused("ibv.poll_cq:status", "wants a completion status");
    refused("ibv.poll_cq:status=sunny", "bad argument");
    refused("sock.send:fail=ENOTANERRNO", "bad argument");
    refused("sock.send:reset@0", "is not a number");
    refused("sock.send:reset@x", "is not a number");
    refused("sock.send:eagain=4", "bad argument");
    /* a refused spec leaves nothing armed */
    CHECK(gw_fault_rules() == 0);

    /* @N *K: the 3rd and 4th calls at sock.send; sock.recv is another point */
    REQUIRE_OK(gw_fault_configure("sock.send:short=5@3*2; sock.recv:eagain", err, sizeof(err)));
    CHECK(gw_fault_rules() == 2);
    int fired[8];
    for (int i = 0; i < 6; i++)
        fired[i] = gw_fault_at("sock.send", &f);
    CHECK(!fired[0] && !fired[1] && fired[2] && fired[3] && !fired[4] && !fired[5]);
    CHECK(gw_fault_fired(0) == 2 && gw_fault_calls(0) == 6);
    CHECK(gw_fault_at("sock.recv", &f) == 1 && f.act == GW_FAULT_EAGAIN && f.rule == 1);
    CHECK(gw_fault_at("sock.recv", &f) == 0);
    char rep[512];
    CHECK(gw_fault_report(rep, sizeof(rep)) == 0);
    CHECK(strstr(rep, "sock.send:short=5@3*2 fired 2 of 6 calls") != NULL);

    /* the same spec again keeps the counters; another one zeroes them */
    REQUIRE_OK(gw_fault_configure("sock.send:short=5@3*2; sock.recv:eagain", err, sizeof(err)));
    CHECK(gw_fault_calls(0) == 6);
    REQUIRE_OK(gw_fault_configure("cuda.cuMemcpy*:fail=CUDA_ERROR_ILLEGAL_ADDRESS@2*all;ibv.poll_cq:status=rem_access",
                                  err, sizeof(err)));
    CHECK(gw_fault_calls(0) == 0);
    CHECK(gw_fault_at("cuda.cuMemcpyAsync", &f) == 0);
    CHECK(gw_fault_at("cuda.cuMemcpyDtoHAsync", &f) == 1 && f.act == GW_FAULT_FAIL && f.arg == 700);
    CHECK(gw_fault_at("cuda.cuMemcpy", &f) == 1);
    CHECK(gw_fault_at("cuda.cuLaunchKernel", &f) == 0);
    CHECK(gw_fault_at("ibv.poll_cq", &f) == 1 && f.act == GW_FAULT_STATUS && f.arg == 10);
    CHECK(gw_fault_wants("cuda.cuMemcpyHtoD") && gw_fault_wants("ibv.poll_cq") && !gw_fault_wants("ibv.post_send"));
    CHECK(gw_fault_wants("ibv.*") && !gw_fault_wants("sock.*"));
    /* two rules at one point both count its calls; the first whose turn it is acts */
    REQUIRE_OK(gw_fault_configure("sock.send:eagain@2; sock.send:short=9@2*2", err, sizeof(err)));
    CHECK(gw_fault_at("sock.send", &f) == 0);
    CHECK(gw_fault_at("sock.send", &f) == 1 && f.act == GW_FAULT_EAGAIN && f.rule == 0);
    CHECK(gw_fault_at("sock.send", &f) == 1 && f.act == GW_FAULT_SHORT && f.rule == 1 && f.arg == 9);
    CHECK(gw_fault_calls(0) == 3 && gw_fault_calls(1) == 3);
    CHECK(gw_fault_fired(0) == 1 && gw_fault_fired(1) == 1);
    /* a rule that never fired is reported so */
    REQUIRE_OK(gw_fault_configure("ibv.create_qp:fail=ENOMEM", err, sizeof(err)));
    CHECK(gw_fault_report(rep, sizeof(rep)) == 1);
    CHECK(strstr(rep, "NEVER FIRED") != NULL);
    CHECK(gw_fault_at("ibv.create_qp", &f) == 1 && f.arg == ENOMEM);
    REQUIRE_OK(gw_fault_configure(NULL, err, sizeof(err)));
    CHECK(gw_fault_on == 0 && gw_fault_rules() == 0);
    return gwt_done("unit_fault");
}
