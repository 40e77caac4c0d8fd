/* SPDX-License-Identifier: Apache-2.0 */
/* names_util.c - see names_util.h. */
#include "names_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double gwt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

gw_status_t gwt_put_wait(gw_ep_t *ep, const void *buf, size_t len, uint64_t raddr, gw_rkey_t *rk)
{
    gw_request_t *req;
    gw_status_t st = gw_put(ep, buf, len, NULL, raddr, rk, &req);
    if (st != GW_OK)
        return st;
    st = gw_request_wait(req, 10000);
    gw_request_free(req);
    return st;
}

int gwt_progress_until(gw_context_t *ctx, int (*cond)(void *), void *arg, int timeout_ms)
{
    uint64_t end = now_ms() + (uint64_t)timeout_ms;
    while (!cond(arg)) {
        if (now_ms() > end)
            return 0;
        if (gw_progress(ctx) == 0)
            gw_context_wait(ctx, 5);
    }
    return 1;
}

static void agent_open(gwt_agent_t *a)
{
    REQUIRE_OK(gw_context_create(NULL, &a->ctx));
    gw_status_t st = gw_agent_listen(a->ctx, a->name, a->listen, &a->l);
    if (st != GW_OK) {
        fprintf(stderr, "agent %s: gw_agent_listen: %s: %s\n", a->name, gw_status_name(st), gw_last_error(a->ctx));
        exit(1);
    }
    REQUIRE_OK(gw_listener_addr(a->l, a->addr, sizeof(a->addr)));
    REQUIRE_OK(gw_mem_reg(a->ctx, a->buf, 1 << 20, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &a->mem));
    REQUIRE_OK(gw_mem_publish(a->mem, "buf"));
}

static void agent_close(gwt_agent_t *a)
{
    gw_ep_t *ep;
    while (gw_accept(a->l, 0, &ep) == GW_OK)
        gw_ep_close(ep, 0);
    /* endpoints accepted earlier are closed by the loop below */
    gw_listener_destroy(a->l);
    gw_mem_dereg(a->mem);
    if (a->late_mem)
        gw_mem_dereg(a->late_mem);
    a->late_mem = NULL;
    for (int s = 0; s < 64; s++)
        if (a->slices[s])
            gw_mem_dereg(a->slices[s]);
    memset(a->slices, 0, sizeof(a->slices));
}

typedef struct ep_list {
    gw_ep_t **v;
    size_t n, cap;
} ep_list_t;

static void *agent_main(void *arg)
{
    gwt_agent_t *a = arg;
    ep_list_t eps = {0};
    for (;;) {
        gw_ep_t *ep;
        while (gw_accept(a->l, 0, &ep) == GW_OK) {
            if (eps.n == eps.cap) {
                eps.cap = eps.cap ? eps.cap * 2 : 64;
                eps.v = realloc(eps.v, eps.cap * sizeof(*eps.v));
                REQUIRE(eps.v);
            }
            eps.v[eps.n++] = ep;
            a->accepted++;
        }
        int cmd = a->cmd;
        if (cmd) {
            if (cmd == 1) {
                REQUIRE_OK(gw_mem_reg(a->ctx, a->late_buf, sizeof(a->late_buf),
                                      GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &a->late_mem));
                REQUIRE_OK(gw_mem_publish(a->late_mem, "late"));
            } else if (cmd == 4) {
                for (int s = 0; s < 64; s++)
                    REQUIRE_OK(gw_mem_reg(a->ctx, a->buf + s * 16384, 16384,
                                          GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &a->slices[s]));
                uint64_t t0 = now_ms();
                for (a->published = 0;; a->published++) {
                    char nm[32];
                    snprintf(nm, sizeof(nm), "r%05zu", a->published);
                    if ((a->publish_st = gw_mem_publish(a->slices[a->published % 64], nm)) != GW_OK)
                        break;
                }
                a->publish_s = (double)(now_ms() - t0) / 1e3;
                snprintf(a->publish_err, sizeof(a->publish_err), "%s", gw_last_error(a->ctx));
            } else {
                for (size_t i = 0; i < eps.n; i++)
                    gw_ep_close(eps.v[i], 0);
                eps.n = 0;
                agent_close(a);
                gw_status_t st = gw_context_destroy(a->ctx);
                if (st != GW_OK) {
                    fprintf(stderr, "agent %s: gw_context_destroy: %s\n", a->name, gw_last_error(a->ctx));
                    exit(1);
                }
                a->ctx = NULL;
                if (cmd == 2) {
                    snprintf(a->listen, sizeof(a->listen), "%s", a->addr); /* the same address again */
                    agent_open(a);
                }
            }
            a->cmd = 0;
            __sync_synchronize();
            a->done++;
            if (cmd == 3)
                break;
            continue;
        }
        if (gw_progress(a->ctx) == 0)
            gw_context_wait(a->ctx, 2);
    }
    free(eps.v);
    return NULL;
}

void gwt_agent_start(gwt_agent_t *a, const char *name, const char *listen)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->name, sizeof(a->name), "%s", name);
    snprintf(a->listen, sizeof(a->listen), "%s", listen);
    a->buf = calloc(1, 1 << 20);
    REQUIRE(a->buf);
    agent_open(a);
    REQUIRE(pthread_create(&a->thr, NULL, agent_main, a) == 0);
}

void gwt_agent_cmd(gwt_agent_t *a, int cmd)
{
    int before = a->done;
    __sync_synchronize();
    a->cmd = cmd;
    uint64_t end = now_ms() + 20000;
    while (a->done == before) {
        REQUIRE(now_ms() < end);
        usleep(1000);
    }
}

void gwt_agent_stop(gwt_agent_t *a)
{
    gwt_agent_cmd(a, 3);
    pthread_join(a->thr, NULL);
    free(a->buf);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || getsockname(fd, (struct sockaddr *)&sa, &sl))
        return -1;
    close(fd);
    return ntohs(sa.sin_port);
}

/* Runs a shell command; exits the test when it fails. */
static void sh(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
        exit(1);
    }
}

/* Certificates for a TLS etcd on 127.0.0.1, made with openssl: a CA, a
 * server certificate (SAN IP:127.0.0.1), a client certificate, and a
 * second CA that signed neither.  The client certificate has no CommonName:
 * etcd's JSON gateway refuses a client certificate with one while
 * authentication is on (a CommonName would name the etcd user). */
static void make_certs(gwt_etcd_t *e)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && "
             "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > san.ext && "
             "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext && "
             "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=gwt-ca -keyout ca.key -out ca.pem && "
             "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=gwt-other-ca -keyout other.key "
             "-out other-ca.pem && "
             "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr && "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext "
             "-out server.pem && "
             "openssl req -newkey rsa:2048 -nodes -subj /O=gwt-client -keyout client.key -out client.csr && "
             "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile cli.ext "
             "-out client.pem) >'%s/openssl.log' 2>&1",
             e->dir, e->dir);
    memmove(cmd + 1, cmd, strlen(cmd) + 1); /* run it in a subshell: the redirection covers all of it */
    cmd[0] = '(';
    sh(cmd);
    snprintf(e->ca, sizeof(e->ca), "%s/ca.pem", e->dir);
    snprintf(e->cert, sizeof(e->cert), "%s/client.pem", e->dir);
    snprintf(e->key, sizeof(e->key), "%s/client.key", e->dir);
    snprintf(e->other_ca, sizeof(e->other_ca), "%s/other-ca.pem", e->dir);
}

/* Is etcd answering?  0 yes. */
static int etcd_ready(const gwt_etcd_t *e, char *why, size_t whylen)
{
#if GW_HAVE_ETCD
    gw_etcd_t c;
    gw_status_t st = gwt_etcd_client(&c, e, NULL, NULL, why, whylen);
    if (st == GW_OK) {
        int64_t rev = 0;
        st = gw_etcd_range(&c, "/gwt-ready", 0, NULL, NULL, &rev, why, whylen);
    }
    gw_etcd_fini(&c);
    return st == GW_OK ? 0 : -1;
#else
    /* no client in this build: a TCP connect says enough */
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_port = htons((uint16_t)atoi(strrchr(e->hostport, ':') + 1));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0), r = fd >= 0 ? connect(fd, (struct sockaddr *)&sa, sizeof(sa)) : -1;
    snprintf(why, whylen, "connect: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    return r;
#endif
}

static int etcd_start(gwt_etcd_t *e, int tls)
{
    static const char *const bins[] = {"/usr/bin/etcd", "/usr/local/bin/etcd", "/usr/sbin/etcd"};
    const char *bin = getenv("GWT_ETCD");
    for (size_t i = 0; !bin && i < sizeof(bins) / sizeof(bins[0]); i++)
        if (access(bins[i], X_OK) == 0)
            bin = bins[i];
    if (!bin)
        return -1;
    memset(e, 0, sizeof(*e));
    e->tls = tls;
    snprintf(e->dir, sizeof(e->dir), "/tmp/gwt-etcd-XXXXXX");
    REQUIRE(mkdtemp(e->dir));
    if (tls)
        make_certs(e);
    int cport = free_port(), pport = free_port();
    REQUIRE(cport > 0 && pport > 0 && cport != pport);
    snprintf(e->hostport, sizeof(e->hostport), "127.0.0.1:%d", cport);
    snprintf(e->url, sizeof(e->url), "%s://127.0.0.1:%d", tls ? "etcds" : "etcd", cport);
    char curl[64], purl[64], cluster[96], data[160], log[160], scert[192], skey[192], ca[192];
    snprintf(curl, sizeof(curl), "%s://127.0.0.1:%d", tls ? "https" : "http", cport);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", pport);
    snprintf(cluster, sizeof(cluster), "default=%s", purl);
    snprintf(data, sizeof(data), "%s/data", e->dir);
    snprintf(log, sizeof(log), "%s/etcd.log", e->dir);
    snprintf(scert, sizeof(scert), "%s/server.pem", e->dir);
    snprintf(skey, sizeof(skey), "%s/server.key", e->dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", e->dir);
    e->pid = fork();
    REQUIRE(e->pid >= 0);
    if (e->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that exits early (a failed REQUIRE) leaves no etcd behind */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (tls)
            execl(bin, bin, "--data-dir", data, "--listen-client-urls", curl, "--advertise-client-urls", curl,
                  "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
                  "--cert-file", scert, "--key-file", skey, "--client-cert-auth", "--trusted-ca-file", ca,
                  "--auth-token", "simple", "--auth-token-ttl", "2", (char *)NULL);
        else
            execl(bin, bin, "--data-dir", data, "--listen-client-urls", curl, "--advertise-client-urls", curl,
                  "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
                  (char *)NULL);
        _exit(127);
    }
    uint64_t end = now_ms() + 30000;
    for (;;) {
        int status = 0;
        char why[400];
        if (etcd_ready(e, why, sizeof(why)) == 0)
            return 0;
        if (waitpid(e->pid, &status, WNOHANG) == e->pid) {
            fprintf(stderr, "etcd exited early (see %s)\n", log);
            exit(1);
        }
        if (now_ms() > end) {
            fprintf(stderr, "etcd did not answer within 30 s (see %s): %s\n", log, why);
            kill(e->pid, SIGKILL);
            exit(1);
        }
        usleep(50000);
    }
}

int gwt_etcd_start(gwt_etcd_t *e)
{
    return etcd_start(e, 0);
}

int gwt_etcd_start_tls(gwt_etcd_t *e)
{
    if (system("openssl version >/dev/null 2>&1") != 0)
        return -1;
    return etcd_start(e, 1);
}

#if GW_HAVE_ETCD
gw_status_t gwt_etcd_client(gw_etcd_t *c, const gwt_etcd_t *e, const char *user, const char *password, char *why,
                            size_t whylen)
{
    gw_etcd_cfg_t cfg = {.url = e->url, .timeout_ms = 2000, .user = user, .password = password};
    if (e->tls) {
        cfg.ca = e->ca;
        cfg.cert = e->cert;
        cfg.key = e->key;
    }
    return gw_etcd_init(c, &cfg, why, whylen);
}

void gwt_etcd_enable_auth(const gwt_etcd_t *e, const char *user, const char *password, const char *prefix)
{
    char cmd[2048], tls[640] = "";
    if (e->tls)
        snprintf(tls, sizeof(tls), "--cacert %s --cert %s --key %s", e->ca, e->cert, e->key); /* (mkdtemp paths: no spaces) */
    char pend[128];
    snprintf(pend, sizeof(pend), "%s", prefix);
    pend[strlen(pend) - 1]++; /* the prefix's range end */
    snprintf(cmd, sizeof(cmd),
             "(set -e; export ETCDCTL_API=3; C=\"etcdctl --endpoints %s://%s %s\"; "
             "$C user add root:rootpw; $C role add root; $C user grant-role root root; "
             "$C user add '%s:%s'; $C role add gwt; $C role grant-permission gwt readwrite '%s' '%s'; "
             "$C user grant-role '%s' gwt; $C auth enable) >'%s/etcdctl.log' 2>&1",
             e->tls ? "https" : "http", e->hostport, tls, user, password, prefix, pend, user, e->dir);
    sh(cmd);
}
#endif

void gwt_etcd_stop(gwt_etcd_t *e)
{
    if (e->pid > 0) {
        kill(e->pid, SIGTERM);
        int st;
        waitpid(e->pid, &st, 0);
    }
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", e->dir);
}

int gwt_child_agent(const char *name)
{
    int p[2];
    REQUIRE(pipe(p) == 0);
    int pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        gwt_agent_t c;
        gwt_agent_start(&c, name, "127.0.0.1:0");
        char ok = 1;
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    REQUIRE(read(p[0], &ok, 1) == 1 && ok == 1);
    close(p[0]);
    return pid;
}
