/* SPDX-License-Identifier: Apache-2.0 */
/* delivered.c - the delivered rate of a send stream: the child sends N
 * messages of S bytes on one tag keeping 32 sends outstanding, the parent
 * keeps 32 receives posted and times the N from its first completed
 * receive to its last; both print their endpoint's path.
 * usage: delivered N S (GPUWIRE_TRANSPORTS=ofi, GPUWIRE_OFI_PROVIDER=...)
 * build: cc -O2 -o delivered delivered.c -I include -I tests/harness
 *        BUILD/libgpuwire.a BUILD/tests/libgw_testlib.a BUILD/libgpuwire.a
 *        -ldl -lpthread -lcrypto */
#include "gpuwire.h"
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static gwt_chan_t pc, cc;
static long N;
static size_t S;
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
static int child(void *a) {
  (void)a;
  gw_context_t *ctx;
  gw_ep_t *ep = gwt_connect_chan(&cc, "ofi", &ctx);
  static uint8_t buf[65536];
  gw_request_t *w[32] = {0};
  long posted = 0, done = 0;
  while (done < N) {
    while (posted < N && posted - done < 32) {
      REQUIRE_OK(gw_send(ep, buf, S, NULL, 1, &w[posted % 32]));
      posted++;
    }
    gw_progress(ctx);
    while (done < posted && gw_request_test(w[done % 32]) != GW_INPROGRESS) {
      gw_request_free(w[done % 32]);
      done++;
    }
  }
  {
    gw_ep_info_t info = {.size = sizeof(info)};
    gw_ep_query(ep, &info);
    fprintf(stderr, "  sender: %s\n", info.path);
  }
  gwt_chan_expect(&cc, ctx, "done");
  gw_ep_close(ep, 5000);
  gw_context_destroy(ctx);
  return 0;
}
int main(int argc, char **argv) {
  N = atol(argv[1]);
  S = (size_t)atol(argv[2]);
  gwt_chan_pair(&pc, &cc);
  int pid = gwt_spawn(child, NULL);
  gw_context_t *ctx;
  gw_context_create(NULL, &ctx);
  gw_listener_t *l;
  gw_ep_t *ep = gwt_listen_accept(ctx, &pc, &l);
  static uint8_t b[32][65536];
  gw_request_t *r[32];
  long posted = 0, done = 0;
  double t0 = 0;
  for (; posted < 32; posted++)
    gw_recv(ep, b[posted], 65536, NULL, 1, ~0ull, &r[posted]);
  while (done < N) {
    gw_progress(ctx);
    while (done < N && gw_request_test(r[done % 32]) != GW_INPROGRESS) {
      if (!done)
        t0 = now();
      gw_request_free(r[done % 32]);
      done++;
      if (posted < N) {
        gw_recv(ep, b[posted % 32], 65536, NULL, 1, ~0ull, &r[posted % 32]);
        posted++;
      }
    }
  }
  double t = now() - t0;
  gw_ep_info_t info = {.size = sizeof(info)};
  gw_ep_query(ep, &info);
  printf(
      "%zu bytes: %ld messages delivered in %.3f s: %.0f/s\n  receiver: %s\n",
      S, N, t, (N - 1) / t, info.path);
  gwt_chan_send(&pc, "done", 4);
  gwt_wait(pid, 60);
  gw_ep_close(ep, 1000);
  gw_listener_destroy(l);
  gw_context_destroy(ctx);
  return 0;
}
