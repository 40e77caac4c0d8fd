/* SPDX-License-Identifier: Apache-2.0 */
/* names_util.h - helpers of the names tests: an agent served by a thread of
 * its own, and a real etcd started on free loopback ports. */
#ifndef GW_TEST_NAMES_UTIL_H
#define GW_TEST_NAMES_UTIL_H

#include <pthread.h>
#include <stdint.h>

#include "gpuwire.h"

/* An agent whose context is created by the caller (so that the environment
 * it reads is the caller's choice) and then served by its own thread. */
typedef struct gwt_agent {
    char name[64];
    char listen[80];          /* where to listen, e.g. "127.0.0.1:0" */
    char addr[80];            /* where it listens */
    gw_context_t *ctx;
    gw_listener_t *l;
    gw_mem_t *mem;
    uint8_t *buf;             /* published as "buf" (1 MiB, remote read+write) */
    gw_mem_t *late_mem;
    uint8_t late_buf[4096];
    pthread_t thr;
    volatile int cmd;         /* 1 publish "late", 2 restart (new context, same address), 3 stop,
                                 4 publish "r00000", "r00001"... until the table is full */
    volatile int done;        /* commands completed */
    volatile int ready;
    uint64_t accepted;
    gw_mem_t *slices[64];     /* cmd 4: region i is 16 KiB slice i % 64 of buf */
    size_t published;         /* cmd 4: how many went in */
    gw_status_t publish_st;   /* cmd 4: what the one past the limit returned */
    char publish_err[256];
    double publish_s;         /* cmd 4: seconds it took */
} gwt_agent_t;

/* Creates the context (environment as it is now), listens, publishes "buf",
 * starts the serving thread.  Exits the test on failure. */
void gwt_agent_start(gwt_agent_t *a, const char *name, const char *listen);
/* Runs command cmd in the agent's thread and waits for it. */
void gwt_agent_cmd(gwt_agent_t *a, int cmd);
void gwt_agent_stop(gwt_agent_t *a);
/* Forks a child that starts agent `name` (gwt_agent_start), tells the parent
 * once that returned, and waits to be killed; returns its pid. */
int gwt_child_agent(const char *name);

/* A real etcd on loopback (Debian's etcd-server).  0: started, url set;
 * -1: no etcd binary here (the caller skips).  With tls (gwt_etcd_start_tls)
 * it serves https only, with certificates the test made (a CA, a server
 * certificate for 127.0.0.1, a client certificate: files in dir), and
 * checks client certificates; url is then etcds://. */
typedef struct gwt_etcd {
    int pid;
    int tls;
    char url[64];
    char hostport[64];
    char dir[128];
    char ca[192], cert[192], key[192];           /* the client's files (tls) */
    char other_ca[192];                           /* a CA that signed nothing etcd has (tls) */
} gwt_etcd_t;
int gwt_etcd_start(gwt_etcd_t *e);
int gwt_etcd_start_tls(gwt_etcd_t *e);
void gwt_etcd_stop(gwt_etcd_t *e);

#if GW_HAVE_ETCD
#include "names/etcd.h"
/* A client of etcd e (its TLS files when it has TLS; user/password may be
 * NULL). */
gw_status_t gwt_etcd_client(gw_etcd_t *c, const gwt_etcd_t *e, const char *user, const char *password, char *why,
                            size_t whylen);
/* Turns authentication on: user root (password rootpw, role root) and user
 * `user` (password `password`) with a role that may read and write keys
 * under `prefix`. */
void gwt_etcd_enable_auth(const gwt_etcd_t *e, const char *user, const char *password, const char *prefix);
#endif

/* Monotonic seconds. */
double gwt_now_s(void);
/* gw_put and a wait of up to 10 s for it; the status. */
gw_status_t gwt_put_wait(gw_ep_t *ep, const void *buf, size_t len, uint64_t raddr, gw_rkey_t *rk);

/* Spins gw_progress on ctx until cond(arg) or timeout_ms; 1 when met. */
int gwt_progress_until(gw_context_t *ctx, int (*cond)(void *), void *arg, int timeout_ms);

#endif
