/* SPDX-License-Identifier: Apache-2.0 */
/* test_core_cold.c - how often a non-blocking progress pass reads the cold
 * epoll set (core.h, GW_CORE_COLD_EVERY): a caller that progresses now and
 * then (a pass, then a sleep of its own longer than a coarse-clock tick) has
 * a ready cold fd served on its next pass; a busy poller within one tick
 * reads the set at most on every GW_CORE_COLD_EVERY-th pass; a hot fd is
 * read on every pass. */
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "harness.h"

static int fired;
static int g_fd;
static void on_ready(void *arg, uint32_t events)
{
    (void)arg;
    (void)events;
    char b[16];
    if (read(g_fd, b, sizeof(b)) > 0)
        fired++;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(void)
{
    gw_core_t c;
    char err[256];
    REQUIRE_OK(gw_core_init(&c, err, sizeof(err)));
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    long tick_ms = res.tv_sec * 1000 + res.tv_nsec / 1000000 + 1;
    int p[2];
    REQUIRE(pipe(p) == 0);
    g_fd = p[0];
    gw_io_t io;
    REQUIRE_OK(gw_io_add_cold(&c, &io, p[0], EPOLLIN, on_ready, NULL));

    /* an occasional caller: each pass after a sleep of more than one tick
     * serves the fd made ready before it */
    for (int i = 0; i < 5; i++) {
        REQUIRE(write(p[1], "x", 1) == 1);
        sleep_ms(tick_ms + 1);
        int before = fired;
        gw_core_dispatch(&c, 0);
        CHECK(fired == before + 1);
    }

    /* a busy poller: at most a tick's worth of reads plus one per
     * GW_CORE_COLD_EVERY passes; and the fd is served within that many */
    REQUIRE(write(p[1], "y", 1) == 1);
    int before = fired, passes = 0;
    while (fired == before && passes < 10 * (int)GW_CORE_COLD_EVERY) {
        gw_core_dispatch(&c, 0);
        passes++;
    }
    fprintf(stderr, "busy poller: the ready cold fd served after %d passes (GW_CORE_COLD_EVERY %u, tick %ld ms)\n",
            passes, GW_CORE_COLD_EVERY, tick_ms - 1);
    CHECK(fired == before + 1);
    CHECK(passes <= (int)GW_CORE_COLD_EVERY);

    /* a hot fd is read on every pass */
    gw_io_del(&c, &io);
    REQUIRE_OK(gw_io_add(&c, &io, p[0], EPOLLIN, on_ready, NULL));
    for (int i = 0; i < 5; i++) {
        REQUIRE(write(p[1], "z", 1) == 1);
        int b0 = fired;
        gw_core_dispatch(&c, 0);
        CHECK(fired == b0 + 1);
    }
    gw_io_del(&c, &io);
    close(p[0]);
    close(p[1]);
    gw_core_fini(&c);
    return gwt_done("unit_core_cold");
}
