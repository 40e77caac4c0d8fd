/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_iface.c - the ofi transport at context level: the provider and domain
 * fi_getinfo offers (and why others were passed over), the completion
 * poller and the sleeper that lets the context block on the queues' wait
 * fds, region registration (FI_HMEM_CUDA for GPU memory where offered), the
 * key part, and the ops table. */
#include "transport/ofi/ofi.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "topo/topo.h"

const char *gw_ofi_strerror(const gw_ofi_iface_t *oif, int err)
{
    return oif->fi->strerror(err < 0 ? -err : err);
}

/* Providers gpuwire serves better itself, passed over unless named. */
static int served_elsewhere(const char *prov, const char **by)
{
    static const struct { const char *name, *by; } list[] = {
        {"tcp", "gpuwire's tcp transport"}, {"sockets", "gpuwire's tcp transport"},
        {"udp", "gpuwire's tcp transport"}, {"net", "gpuwire's tcp transport"},
        {"shm", "gpuwire's intra transport"}, {"sm2", "gpuwire's intra transport"},
        {"verbs", "gpuwire's verbs transport"},
    };
    size_t n = strcspn(prov, ";");
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
        if (strlen(list[i].name) == n && !strncmp(prov, list[i].name, n)) {
            *by = list[i].by;
            return 1;
        }
    return 0;
}

static uint32_t api_version(const gw_fi_t *fi)
{
    uint32_t have = fi->version(), built = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
    return have < built ? have : built;
}

struct fi_info *gw_ofi_getinfo(const gw_fi_t *fi, const char *prov, const char *dom, int hmem, int delivery,
                               char *why, size_t whylen)
{
    struct fi_info *hints = fi->dupinfo(NULL), *out = NULL;
    if (!hints) {
        snprintf(why, whylen, "fi_allocinfo() failed: out of memory");
        return NULL;
    }
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | (hmem ? FI_HMEM : 0);
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | (hmem ? FI_MR_HMEM : 0);
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    if (delivery)
        hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    if (prov && *prov)
        hints->fabric_attr->prov_name = strdup(prov);
    if (dom && *dom)
        hints->domain_attr->name = strdup(dom);
    /* tagged messages too where the provider has them (the tagged path,
     * ofi_post.c), else without */
    hints->caps |= FI_TAGGED;
    int rc = fi->getinfo(api_version(fi), NULL, NULL, 0, hints, &out);
    if (rc) {
        hints->caps &= ~(uint64_t)FI_TAGGED;
        rc = fi->getinfo(api_version(fi), NULL, NULL, 0, hints, &out);
    }
    fi->freeinfo(hints);
    if (rc) {
        snprintf(why, whylen, "fi_getinfo(RDM, msg+rma%s%s%s%s%s%s) found nothing: %s", hmem ? "+hmem" : "",
                 delivery ? ", delivery complete" : "", prov && *prov ? ", provider " : "", prov ? prov : "",
                 dom && *dom ? ", domain " : "", dom ? dom : "", fi->strerror(-rc));
        return NULL;
    }
    return out;
}

static void append(char *buf, size_t len, const char *s)
{
    size_t u = strlen(buf);
    if (u < len)
        snprintf(buf + u, len - u, "%s", s);
}

/* Picks one entry of the list: the named provider's, else the first not
 * served better elsewhere (those are listed in passed); for efa without a
 * named domain, the domain of the NIC nearest this process's GPU first. */
static struct fi_info *pick(struct fi_info *list, const char *want, const char *nic, char *passed, size_t plen)
{
    struct fi_info *first = NULL;
    for (struct fi_info *i = list; i; i = i->next) {
        const char *p = i->fabric_attr->prov_name, *by;
        if (!(want && *want) && served_elsewhere(p, &by)) {
            if (!strstr(passed, p)) {
                append(passed, plen, *passed ? ", " : "");
                append(passed, plen, p);
            }
            continue;
        }
        if (!first)
            first = i;
        if (nic && *nic && i->domain_attr->name && !strncmp(i->domain_attr->name, nic, strlen(nic)))
            return i;
    }
    return first;
}

/* Is there a device a hardware provider could drive?  Looked up before
 * libfabric is loaded at all when no provider is named: its first
 * fi_getinfo costs about half a second (measured on Debian 12's 1.17,
 * whatever the providers), which every process would otherwise pay where
 * only the providers gpuwire passes over exist.  efa and psm3 devices are
 * RDMA devices (class infiniband), cxi has its own class, opx and psm2
 * open /dev/hfi1_*. */
static int hw_present(const char *sysfs, char *seen, size_t len)
{
    static const char *const dirs[] = {"class/infiniband", "class/cxi"};
    seen[0] = '\0';
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", sysfs && *sysfs ? sysfs : "/sys", dirs[i]);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.') {
                snprintf(seen, len, "%.300s/%.200s", path, e->d_name);
                closedir(d);
                return 1;
            }
        closedir(d);
    }
    if (access("/dev/hfi1_0", F_OK) == 0) {
        snprintf(seen, len, "/dev/hfi1_0");
        return 1;
    }
    return 0;
}

void gw_ofi_keep_update(gw_ofi_iface_t *oif)
{
    /* nothing would wake a sleeper: the context fd stays readable while
     * endpoints exist (armed once, not drained and re-armed every pass) */
    int keep = (oif->no_wakeup || !oif->wait_fd) && !gw_list_empty(&oif->eps);
    gw_core_keep_ready(oif->super.core, GW_KEEP_OFI, keep);
}

/* The liveness tick (20 ms): judges every endpoint's peer, pings an idle
 * one.  With the coarse clock, on timer passes only (core.h fds_read: at
 * least every millisecond of a spinning caller): a full clock read on
 * every pass was a fifth of the cycles of an 8-byte ping-pong over shm.
 * (Out of line: the spinning pass saves no registers for it.) */
__attribute__((noinline)) static void ofi_live(gw_ofi_iface_t *oif)
{
    uint64_t now = gw_now_coarse_ns();
    if (!gw_liveness_due(&oif->live, now))
        return;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &oif->eps) {
        gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
        gw_ep_base_t *b = ep->super.base;
        if (!ep->connected || gw_ep_failed(b))
            continue;
        if (GW_UNLIKELY(ep->probe_seq) && now >= ep->probe_until) { /* no answer to the cancel's probe */
            gw_ofi_probe_verdict(ep, 0);
            continue;
        }
        uint64_t idle;
        int busy = gw_ep_has_work(b) || !gw_list_empty(&ep->rdv_recvs);
        switch (gw_liveness_judge(b, busy, now, &ep->last_ping_ns, &idle)) {
        case GW_LIVE_DEAD:
            gw_ofi_ep_die(ep, GW_ERR_PEER_TIMEOUT,
                          "ofi %s: nothing from peer %s for %llu ms with work outstanding "
                          "(GPUWIRE_PEER_TIMEOUT_MS=%ld)", oif->prov, b->peer,
                          (unsigned long long)(idle / 1000000), oif->super.core->peer_timeout_ms);
            break;
        case GW_LIVE_PING: {
            gw_ofi_hdr_t h = {.type = GW_OFI_PING};
            gw_ofi_send_ctl(ep, &h);
            break;
        }
        default:
            break;
        }
    }
}

/* ofi_poll past its common case: every endpoint, the closed ones' sweep,
 * the liveness tick. */
__attribute__((noinline)) static int ofi_poll_all(gw_ofi_iface_t *oif)
{
    int n = 0;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &oif->eps) {
        gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
        /* a failed endpoint's queue is read no more: reading it is what
         * drives the provider, which would go on applying the RMA writes
         * the peer sent before the failure into our regions after the
         * failure was reported (its slots stay out until it is destroyed) */
        if (ep->connected && !gw_ep_failed(ep->super.base))
            n += gw_ofi_ep_progress(ep);
    }
    if (GW_UNLIKELY(!gw_list_empty(&oif->graves)))
        gw_ofi_graves_sweep(oif, 0);
    if (GW_UNLIKELY(oif->super.core->fds_read))
        ofi_live(oif);
    return n;
}

/* The poller.  A spinning caller's common pass - one endpoint, nothing
 * closed waiting for its sweep, no liveness tick due - is the endpoint's
 * queue read alone, a tail call with no frame of its own; anything else
 * takes the full walk, in the same order. */
static int ofi_poll(void *arg)
{
    gw_ofi_iface_t *oif = arg;
    gw_list_t *p = oif->eps.next;
    if (GW_LIKELY(p != &oif->eps && p->next == &oif->eps && gw_list_empty(&oif->graves) &&
                  !oif->super.core->fds_read)) {
        gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
        return ep->connected && !gw_ep_failed(ep->super.base) ? gw_ofi_ep_progress(ep) : 0;
    }
    return ofi_poll_all(oif);
}

static int ofi_ep_progress_op(gw_tl_ep_t *e)
{
    gw_ofi_ep_t *ep = to_oep(e);
    return ep->connected && !gw_ep_failed(ep->super.base) ? gw_ofi_ep_progress(ep) : 0;
}

/* Before the context blocks: fi_trywait on every queue; where completions
 * wait already (or a queue has no wait fd and work is outstanding), the
 * context fd is made readable so it does not sleep past them. */
static void ofi_sleep(void *arg, int asleep)
{
    gw_ofi_iface_t *oif = arg;
    if (!asleep)
        return;
    gw_list_t *p;
    for (p = oif->eps.next; p != &oif->eps; p = p->next) {
        gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
        if (!ep->cq)
            continue;
        int again;
        if (oif->no_wakeup) {
            again = 1;
        } else if (oif->wait_fd) {
            struct fid *f = &ep->cq->fid;
            again = fi_trywait(oif->fabric, &f, 1) != FI_SUCCESS;
        } else {
            again = ep->connected && (gw_ep_has_work(ep->super.base) || !gw_list_empty(&ep->pending));
        }
        if (again || !gw_list_empty(&ep->pending) || !gw_list_empty(&ep->ctlq)) {
            gw_core_signal(oif->super.core);
            return;
        }
    }
}

static gw_status_t ofi_iface_open(gw_core_t *core, gw_tl_iface_t **out, char *why, size_t whylen)
{
    char lwhy[512];
    int broken = 0;
    const char *named = gw_settings_str(&core->settings, GW_SET_OFI_PROVIDER);
    if (!*named && !hw_present(gw_settings_sysfs_root(&core->settings), lwhy, sizeof(lwhy))) {
        snprintf(why, whylen, "no device a hardware libfabric provider drives (nothing in class/infiniband or "
                 "class/cxi, no /dev/hfi1_0); name a provider in GPUWIRE_OFI_PROVIDER to use another");
        return GW_ERR_UNAVAILABLE;
    }
    const gw_fi_t *fi = gw_fi_get(lwhy, sizeof(lwhy), &broken);
    if (!fi) {
        snprintf(why, whylen, "%s", lwhy);
        return broken ? GW_ERR_SYSTEM : GW_ERR_UNAVAILABLE;
    }
    const gw_settings_t *s = &core->settings;
    const char *want = gw_settings_str(s, GW_SET_OFI_PROVIDER), *dom = gw_settings_str(s, GW_SET_OFI_DOMAIN);
    const char *hm = gw_settings_str(s, GW_SET_OFI_HMEM);
    /* FI_HMEM only where a CUDA driver loads: a host-only machine asks for no
     * GPU support the provider might set up */
    char cwhy[256] = "";
    int try_hmem = strcmp(hm, "off") != 0 && gw_cuda_get(cwhy, sizeof(cwhy)) != NULL;
    /* the NIC: the one this context names (GPUWIRE_IB_DEVICE or
     * gw_config_t.ib_device, "NIC[:port]": the NCCL plugin's context per
     * NIC), else the one nearest this process's GPU */
    char nic[64] = "", nic_why[256] = "";
    const char *named_nic = gw_settings_str(s, GW_SET_IB_DEVICE);
    if (!*dom && *named_nic) {
        snprintf(nic, sizeof(nic), "%.*s", (int)strcspn(named_nic, ":"), named_nic);
        snprintf(nic_why, sizeof(nic_why), "the context's NIC, %s", named_nic);
    } else if (!*dom && gw_topo_process_nic(s, nic, sizeof(nic), nic_why, sizeof(nic_why)) != GW_OK) {
        nic[0] = '\0';
    }

    struct fi_info *list = NULL, *info = NULL;
    char passed[400] = "", gwhy[400] = "";
    int hmem = 0, delivery = 0;
    for (int h = try_hmem; h >= 0 && !info; h--)
        for (int d = 1; d >= 0 && !info; d--) {
            list = gw_ofi_getinfo(fi, want, dom, h, d, gwhy, sizeof(gwhy));
            if (!list)
                continue;
            passed[0] = '\0';
            info = pick(list, want, nic, passed, sizeof(passed));
            if (!info) {
                fi->freeinfo(list);
                list = NULL;
            } else {
                hmem = h;
                delivery = d;
            }
        }
    if (!info) {
        if (*passed)
            snprintf(why, whylen, "only providers gpuwire's own transports serve better: %s (name one in "
                     "GPUWIRE_OFI_PROVIDER to use it)", passed);
        else
            snprintf(why, whylen, "%s", gwhy);
        return GW_ERR_UNAVAILABLE;
    }
    gw_ofi_iface_t *oif = calloc(1, sizeof(*oif));
    if (!oif) {
        fi->freeinfo(list);
        snprintf(why, whylen, "ofi: out of memory");
        return GW_ERR_NOMEM;
    }
    oif->super.ops = &gw_tl_ofi_ops;
    oif->super.core = core;
    oif->super.id = GW_TL_OFI;
    oif->fi = fi;
    oif->info = fi->dupinfo(info);
    fi->freeinfo(list);
    gw_list_init(&oif->eps);
    gw_list_init(&oif->graves);
    if (!oif->info) {
        free(oif);
        snprintf(why, whylen, "fi_dupinfo() failed: out of memory");
        return GW_ERR_NOMEM;
    }
    info = oif->info;
    snprintf(oif->prov, sizeof(oif->prov), "%s", info->fabric_attr->prov_name);
    snprintf(oif->dom, sizeof(oif->dom), "%s", info->domain_attr->name ? info->domain_attr->name : "");
    uint64_t mm = (uint64_t)info->domain_attr->mr_mode;
    oif->mr_local = !!(mm & FI_MR_LOCAL);
    /* test hook (not a setting): describe every local buffer as an
     * FI_MR_LOCAL provider (efa) needs, so the bounce slots and per-operation
     * registrations run over the providers of a machine without one */
    const char *th = gw_settings_test_hook("GW_TEST_OFI_MR_LOCAL");
    if (th && *th == '1')
        oif->mr_local = 1;
    oif->virt_addr = !!(mm & FI_MR_VIRT_ADDR);
    oif->prov_key = !!(mm & FI_MR_PROV_KEY);
    oif->hmem = hmem;
    oif->delivery = delivery;
    oif->wflags = FI_COMPLETION | (delivery ? FI_DELIVERY_COMPLETE : 0);
    oif->max_piece = info->ep_attr->max_msg_size ? info->ep_attr->max_msg_size : (1ull << 30);
    if (oif->max_piece > (1ull << 30))
        oif->max_piece = 1ull << 30;
    oif->inject = GW_MIN(info->tx_attr->inject_size, (size_t)GW_OFI_INJECT_MAX);
    /* test hook (not a setting): every message from a send slot, as on a
     * provider without inject room, so both paths run over one provider */
    th = gw_settings_test_hook("GW_TEST_OFI_NO_INJECT");
    if (oif->inject < GW_OFI_HDR_LEN || (th && *th == '1'))
        oif->inject = 0;
    /* the tagged path: the provider's tagged messages in send order, with
     * all 64 bits of a tag (a format whose top bits are clear reserves
     * them: a tag of gpuwire's would not fit) */
    {
        uint64_t fmt = info->ep_attr->mem_tag_format;
        const char *tg = gw_settings_str(&core->settings, GW_SET_OFI_TAGGED);
        if (strcmp(tg, "on") != 0)
            snprintf(oif->tagged_why, sizeof(oif->tagged_why), "GPUWIRE_OFI_TAGGED=off");
        else if (!(info->caps & FI_TAGGED))
            snprintf(oif->tagged_why, sizeof(oif->tagged_why), "the provider offers no FI_TAGGED");
        else if (!(info->tx_attr->msg_order & FI_ORDER_SAS) || !(info->rx_attr->msg_order & FI_ORDER_SAS))
            snprintf(oif->tagged_why, sizeof(oif->tagged_why), "the provider keeps no send-after-send order");
        else if (info->domain_attr->cq_data_size < 8)
            snprintf(oif->tagged_why, sizeof(oif->tagged_why), "the provider carries %zu bytes of remote CQ data "
                     "(the tagged path needs 8)", info->domain_attr->cq_data_size);
        else if (!strcmp(oif->prov, "tcp"))
            /* libfabric 2.x's tcp provider alone (1.17 layers it under
             * ofi_rxm, which keeps unexpected messages): receives posted
             * out of sending order by tag stalled behind an unexpected
             * message (it_msg, 200 messages received by tag in reverse) */
            snprintf(oif->tagged_why, sizeof(oif->tagged_why), "libfabric 2.x's tcp provider holds later messages "
                     "behind an unexpected one");
        else if (!strcmp(oif->prov, "shm") && fi->version() < FI_VERSION(2, 0))
            /* libfabric 1.17's shm: 200 messages received by tag in
             * reverse of their sending order stalled (it_msg), and a
             * truncated tagged receive reports no length */
            snprintf(oif->tagged_why, sizeof(oif->tagged_why), "libfabric 1.x's shm provider stalls on messages "
                     "received out of sending order (2.x's does not)");
        else if (fmt && !(fmt >> 60))
            snprintf(oif->tagged_why, sizeof(oif->tagged_why), "the provider reserves the high tag bits "
                     "(mem_tag_format 0x%llx)", (unsigned long long)fmt);
        else
            oif->tagged = 1;
        oif->max_msg = info->ep_attr->max_msg_size ? info->ep_attr->max_msg_size : (1ull << 30);
        /* auto: not over libfabric 2.x's own tcp provider ("tcp"), whose
         * sender is no faster than its receiver: a one-way stream there
         * pays a CREDIT send per 16-20 messages for nothing (0.84-1.0x of
         * its rate); 1.x's tcp;ofi_rxm needs them (8-byte sends without
         * them were received at ~50,000 a second, ~200,000 with them) */
        const char *cr = gw_settings_str(&core->settings, GW_SET_OFI_CREDITS);
        oif->credits = !strcmp(cr, "on") || (!strcmp(cr, "auto") && strcmp(oif->prov, "tcp") != 0);
        if (!oif->credits)
            snprintf(oif->credits_why, sizeof(oif->credits_why), "%s", !strcmp(cr, "off") ? "GPUWIRE_OFI_CREDITS=off"
                     : "libfabric 2.x's tcp provider keeps pace");
        oif->tinject = oif->inject ? GW_MIN(info->tx_attr->inject_size, (size_t)GW_OFI_TINJECT_MAX) : 0;
    }
    gw_random_bytes(&oif->next_key, sizeof(oif->next_key));
    oif->next_key = (oif->next_key & 0xffffffffull) << 16;

    int rc = fi->fabric(info->fabric_attr, &oif->fabric, NULL);
    if (rc) {
        snprintf(why, whylen, "fi_fabric(%s, %s) failed: %s", oif->prov, info->fabric_attr->name,
                 fi->strerror(-rc));
        goto err;
    }
    rc = fi_domain(oif->fabric, info, &oif->domain, NULL);
    if (rc) {
        snprintf(why, whylen, "fi_domain(%s, %s) failed: %s", oif->prov, oif->dom, fi->strerror(-rc));
        goto err;
    }
    /* wait fds until an endpoint's queue says otherwise (ofi_ep.c), or
     * none at all when GPUWIRE_OFI_WAIT=poll: then the context is kept
     * polling while endpoints exist (ofi_poll), as when none is offered */
    oif->wait_fd = strcmp(gw_settings_str(&core->settings, GW_SET_OFI_WAIT), "poll") != 0;
    {
        size_t cl = strcspn(oif->prov, ";");
        oif->no_wakeup = (cl == 3 && !strncmp(oif->prov, "shm", 3)) || (cl == 3 && !strncmp(oif->prov, "sm2", 3));
        oif->shm_names = !strcmp(oif->prov, "shm") && info->addr_format == FI_ADDR_STR;
        /* "tcp" alone offering RDM endpoints is libfabric 2.x's tcp provider
         * (1.17 serves them as "tcp;ofi_rxm"): its listener per endpoint
         * needs deferred closes (ofi_ep.c), and its FI_ECANCELED carries
         * whatever errno the thread had last, so a cancel says nothing of
         * its cause (ofi_post.c) */
        oif->defer_close = oif->cancel_vague = !strcmp(oif->prov, "tcp");
        /* test hook (not a setting): deferred closes on any provider, so
         * that they run where CI has only 1.17 (the probe cannot: ofi_rxm
         * does not connect anew to a peer that dropped its connection) */
        const char *vh = gw_settings_test_hook("GW_TEST_OFI_DEFER_CLOSE");
        if (vh && *vh == '1')
            oif->defer_close = 1;
    }
    if (oif->shm_names)
        gw_ofi_shm_sweep();
    gw_status_t st;
    if ((st = gw_core_add_poller(core, ofi_poll, oif)) != GW_OK) {
        snprintf(why, whylen, "%s", core->errbuf);
        goto err;
    }
    if ((st = gw_core_add_sleeper(core, ofi_sleep, oif)) != GW_OK) {
        gw_core_del_poller(core, ofi_poll, oif);
        snprintf(why, whylen, "%s", core->errbuf);
        goto err;
    }
    snprintf(oif->how, sizeof(oif->how), "provider %s (libfabric %u.%u), domain %s%s%s%s; %s; %s%s%s%s", oif->prov,
             FI_MAJOR(fi->version()), FI_MINOR(fi->version()), oif->dom,
             nic[0] && !strncmp(oif->dom, nic, strlen(nic)) ? " (" : "",
             nic[0] && !strncmp(oif->dom, nic, strlen(nic)) ? nic_why : "",
             nic[0] && !strncmp(oif->dom, nic, strlen(nic)) ? ")" : "",
             hmem ? "GPU memory by FI_HMEM_CUDA"
                  : (!strcmp(hm, "off") ? "host memory only (GPUWIRE_OFI_HMEM=off)"
                                        : (try_hmem ? "host memory only (the provider has no FI_HMEM)"
                                                    : "host memory only (no CUDA driver)")),
             delivery ? "writes complete on delivery" : "writes complete on transmit (no FI_DELIVERY_COMPLETE)",
             oif->tagged ? "; messages by tagged operations where the peer agrees" : "",
             *passed ? "; passed over (served better by gpuwire's own transports) " : "", passed);
    gw_log(GW_LOG_INFO, "ofi: using %s", oif->how);
    *out = &oif->super;
    return GW_OK;
err:
    if (oif->domain)
        fi_close(&oif->domain->fid);
    if (oif->fabric)
        fi_close(&oif->fabric->fid);
    fi->freeinfo(oif->info);
    free(oif);
    return GW_ERR_UNAVAILABLE;
}

static void ofi_iface_close(gw_tl_iface_t *iface)
{
    if (!iface)
        return;
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    gw_core_t *core = iface->core;
    if (!gw_list_empty(&oif->eps))
        gw_log(GW_LOG_WARN, "ofi %s: closing with %zu endpoints alive", oif->prov, gw_list_len(&oif->eps));
    gw_ofi_graves_sweep(oif, 1);
    gw_core_del_sleeper(core, ofi_sleep, oif);
    gw_core_del_poller(core, ofi_poll, oif);
    gw_core_keep_ready(core, GW_KEEP_OFI, 0);
    int rc;
    if ((rc = fi_close(&oif->domain->fid)) != 0)
        gw_log(GW_LOG_WARN, "fi_close(domain %s) failed: %s (regions still registered?)", oif->dom,
               gw_ofi_strerror(oif, rc));
    if ((rc = fi_close(&oif->fabric->fid)) != 0)
        gw_log(GW_LOG_WARN, "fi_close(fabric of %s) failed: %s", oif->prov, gw_ofi_strerror(oif, rc));
    oif->fi->freeinfo(oif->info);
    free(oif);
}

static gw_status_t ofi_iface_describe(gw_tl_iface_t *iface, char *buf, size_t len)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    snprintf(buf, len, "%s; completions %s; largest RMA %llu bytes, inject %zu bytes, mr_mode%s%s%s; application "
             "messages %s%s%s; header messages %s%s%s", oif->how,
             oif->no_wakeup || !oif->wait_fd ? "polled (the context fd stays readable while endpoints exist)"
                                             : "wake the context through the queues' wait fds",
             (unsigned long long)oif->max_piece, oif->info->tx_attr->inject_size,
             oif->mr_local ? " local" : "", oif->virt_addr ? " virt_addr" : " offsets",
             oif->prov_key ? " prov_key" : " app_key",
             oif->tagged ? "by tagged operations where the peer agrees" : "with gpuwire's header (tagged path: ",
             oif->tagged ? "" : oif->tagged_why, oif->tagged ? "" : ")",
             oif->credits ? "under credits where the peer agrees" : "without credits (",
             oif->credits ? "" : oif->credits_why, oif->credits ? "" : ")");
    return GW_OK;
}

/* ---- regions ------------------------------------------------------------------- */
static gw_status_t reg(gw_ofi_iface_t *oif, const void *buf, size_t len, uint64_t access, int cuda_dev,
                       struct fid_mr **out)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct fi_mr_attr a;
    memset(&a, 0, sizeof(a));
    a.mr_iov = &iov;
    a.iov_count = 1;
    a.access = access;
    a.requested_key = oif->prov_key ? 0 : ++oif->next_key;
    a.iface = cuda_dev >= 0 ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
    uint64_t flags = 0;
    if (cuda_dev >= 0) {
        a.device.cuda = cuda_dev;
        /* device memory (cuMemAlloc, VMM; managed memory is host memory
         * to gpuwire): the shm provider moves such a region by CUDA IPC
         * only when told so, and by bounce buffers otherwise (1.8 GB/s
         * against its IPC path's 230 at 64 MiB on two H200s) */
        flags |= FI_HMEM_DEVICE_ONLY;
    }
    int rc = fi_mr_regattr(oif->domain, &a, flags, out);
    if (rc) {
        *out = NULL;
        return gw_err(oif->super.core, rc == -FI_ENOMEM ? GW_ERR_MEMLOCK : GW_ERR_SYSTEM,
                      "fi_mr_regattr(%s/%s, %p, %zu bytes, %s, access 0x%llx) failed: %s%s", oif->prov, oif->dom,
                      buf, len, cuda_dev >= 0 ? "FI_HMEM_CUDA" : "host", (unsigned long long)access,
                      gw_ofi_strerror(oif, rc), rc == -FI_ENOMEM ? " (locked-memory limit: ulimit -l)" : "");
    }
    return GW_OK;
}

struct fid_mr *gw_ofi_reg_local(gw_ofi_iface_t *oif, const void *buf, size_t len, uint64_t access, int cuda_dev,
                                gw_status_t *st)
{
    struct fid_mr *mr;
    *st = reg(oif, buf, len ? len : 1, access, cuda_dev, &mr);
    return mr;
}

void gw_ofi_close_mr(gw_ofi_iface_t *oif, struct fid_mr *mr)
{
    int rc = mr ? fi_close(&mr->fid) : 0;
    if (rc)
        gw_log(GW_LOG_WARN, "fi_close(mr of %s) failed: %s", oif->prov, gw_ofi_strerror(oif, rc));
}

static gw_status_t ofi_mem_reg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    size_t u = strlen(mem->path);
    int gpu = mem->type != GW_MEM_HOST;
    if (gpu && !oif->hmem) {
        snprintf(mem->path + u, sizeof(mem->path) - u, "%sofi: not reachable (%s has no FI_HMEM here)",
                 u ? "; " : "", oif->prov);
        mem->tl_reg[GW_TL_OFI] = NULL;
        return GW_OK;
    }
    uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (mem->access & GW_ACCESS_REMOTE_READ)
        access |= FI_REMOTE_READ;
    if (mem->access & GW_ACCESS_REMOTE_WRITE)
        access |= FI_REMOTE_WRITE;
    gw_ofi_reg_t *r = calloc(1, sizeof(*r));
    if (!r)
        return gw_err(iface->core, GW_ERR_NOMEM, "ofi registration: out of memory");
    gw_status_t st = reg(oif, mem->addr, mem->len ? mem->len : 1, access, gpu ? mem->cuda_device : -1, &r->mr);
    if (st != GW_OK) {
        free(r);
        return st;
    }
    r->desc = fi_mr_desc(r->mr);
    r->key = fi_mr_key(r->mr);
    mem->tl_reg[GW_TL_OFI] = r;
    if (gpu)
        oif->gpu_regs++;
    snprintf(mem->path + u, sizeof(mem->path) - u, "%sofi: %s registered on %s/%s%s", u ? "; " : "",
             gpu ? "GPU memory (FI_HMEM_CUDA)" : "host memory", oif->prov, oif->dom,
             gpu ? ", moved by the provider" : "");
    return GW_OK;
}

/* After a remotely writable region's MR is closed: with manual data
 * progress the provider moves a peer's RMA write into our memory during our
 * progress calls, and one whose header it took (the key still valid) before
 * the close goes on landing in later calls (the tcp provider reads the rest
 * of its payload from the socket when it arrives).  Nothing then tells that
 * write apart from the others, so every connected peer is asked a PING
 * carrying this fence's number and each endpoint is progressed until the
 * PONG echoing it is in: the provider's messages keep their order after
 * writes (FI_ORDER_SAW, which the tcp provider gives) and it reads one
 * message at a time, so a write begun before the PING reached the peer has
 * landed by then, and any later one meets the closed key and is refused.
 * A peer that does not answer within GPUWIRE_PEER_TIMEOUT_MS fails its
 * endpoint, whose queue is then read no more (ofi_poll): nothing of it lands
 * either.  Costs one round trip per endpoint, in parallel. */
static void ofi_dereg_fence(gw_ofi_iface_t *oif, const gw_mem_t *mem)
{
    gw_core_t *c = oif->super.core;
    uint64_t seq = ++oif->fence_seq;
    int asked = 0;
    gw_list_t *p, *t;
    gw_list_for_each_safe(p, t, &oif->eps) {
        gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
        ep->fence_want = 0;
        if (!ep->connected || ep->closing || gw_ep_failed(ep->super.base))
            continue;
        gw_ofi_hdr_t h = {.type = GW_OFI_PING, .f = {seq}};
        if (gw_ofi_send_ctl(ep, &h) != GW_OK)
            continue; /* (the endpoint failed: read no more) */
        ep->fence_want = seq;
        asked++;
    }
    if (!asked)
        return;
    uint64_t until = gw_now_ns() + (uint64_t)c->peer_timeout_ms * 1000000ull;
    for (;;) {
        int left = 0, moved = 0;
        gw_list_for_each_safe(p, t, &oif->eps) {
            gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
            if (ep->fence_want != seq)
                continue;
            if (!gw_ep_failed(ep->super.base) && ep->fence_seen < seq)
                moved += gw_ofi_ep_progress(ep);
            if (gw_ep_failed(ep->super.base) || ep->fence_seen >= seq)
                ep->fence_want = 0;
            else
                left++;
        }
        if (!left)
            return;
        if (gw_now_ns() >= until)
            break;
        if (!moved)
            usleep(50);
    }
    gw_list_for_each_safe(p, t, &oif->eps) {
        gw_ofi_ep_t *ep = gw_container_of(p, gw_ofi_ep_t, link);
        if (ep->fence_want != seq)
            continue;
        ep->fence_want = 0;
        gw_ofi_ep_die(ep, GW_ERR_PEER_TIMEOUT,
                      "ofi %s: peer %s did not answer within %ld ms (GPUWIRE_PEER_TIMEOUT_MS) while region "
                      "[%p, +%zu) was deregistered here; its endpoint fails so that no put of it still in "
                      "flight can land in that memory", oif->prov, ep->super.base->peer, c->peer_timeout_ms,
                      mem->addr, mem->len);
    }
}

static gw_status_t ofi_mem_dereg(gw_tl_iface_t *iface, gw_mem_t *mem)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    gw_ofi_reg_t *r = mem->tl_reg[GW_TL_OFI];
    if (!r)
        return GW_OK;
    /* closing the MR revokes its key: later remote access through it fails
     * at the initiator */
    gw_ofi_close_mr(oif, r->mr);
    free(r);
    mem->tl_reg[GW_TL_OFI] = NULL;
    if (mem->type != GW_MEM_HOST)
        oif->gpu_regs--;
    /* deferred closes (defer_close) end now: a peer's connection to one
     * of them, if any came in its grace period, lands no write after this */
    if ((mem->access & GW_ACCESS_REMOTE_WRITE) && !gw_list_empty(&oif->graves))
        gw_ofi_graves_sweep(oif, 1);
    /* and a write that had begun before the close is waited for */
    if ((mem->access & GW_ACCESS_REMOTE_WRITE) && oif->info->domain_attr->data_progress != FI_PROGRESS_AUTO)
        ofi_dereg_fence(oif, mem);
    return GW_OK;
}

static gw_status_t ofi_rkey_pack(gw_tl_iface_t *iface, const gw_mem_t *mem, uint8_t *buf, size_t *len)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    const gw_ofi_reg_t *r = mem->tl_reg[GW_TL_OFI];
    if (!r) {
        *len = 0;
        return GW_ERR_UNSUPPORTED;
    }
    if (!buf || *len < GW_OFI_RKEY_LEN) {
        *len = GW_OFI_RKEY_LEN;
        return buf ? GW_ERR_INVALID : GW_OK;
    }
    gw_ofi_rkey_t k = {.key = r->key, .base = (uint64_t)(uintptr_t)mem->addr, .virt = (uint8_t)oif->virt_addr};
    *len = gw_ofi_rkey_pack(&k, buf, *len);
    return GW_OK;
}

static gw_status_t ofi_rkey_unpack(gw_tl_iface_t *iface, const uint8_t *blob, size_t len, gw_rkey_t *rk,
                                   char *why, size_t whylen)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    _Static_assert(sizeof(gw_ofi_rkey_t) <= GW_RKEY_TL_KEY_MAX, "ofi key over the parsed-key room");
    if (len == 0) {
        snprintf(why, whylen, "ofi key part: none (its owner did not register the region with ofi: GPU memory "
                 "without FI_HMEM)");
        return GW_ERR_INVALID_KEY;
    }
    gw_ofi_rkey_t k;
    gw_status_t st = gw_ofi_rkey_parse(&k, blob, len, why, whylen);
    if (st != GW_OK)
        return st;
    if (k.virt != oif->virt_addr) {
        snprintf(why, whylen, "ofi key part: the owner's provider addresses by %s, ours by %s",
                 k.virt ? "virtual address" : "offset", oif->virt_addr ? "virtual address" : "offset");
        return GW_ERR_INVALID_KEY;
    }
    memcpy(rk->tl_key, &k, sizeof(k));
    return GW_OK;
}

static void ofi_caps(gw_tl_iface_t *iface, gw_tl_caps_t *out)
{
    gw_ofi_iface_t *oif = (gw_ofi_iface_t *)iface;
    out->eager_max = GW_OFI_EAGER_MAX;
    out->max_msg = UINT64_MAX; /* cut into pieces of the provider's largest message */
    out->mem_kinds = GW_TL_MEM_HOST | (oif->hmem ? GW_TL_MEM_CUDA : 0);
    out->gpu_paths = oif->hmem ? GW_TL_GPU_DIRECT : 0;
    /* no batch of its own: the protocol layer expands batches into puts and
     * gets, their notification (ordered or counted) through notify_out */
    out->batch = 0;
}

const gw_tl_ops_t gw_tl_ofi_ops = {
    .size = sizeof(gw_tl_ops_t),
    .name = "ofi",
    .iface_open = ofi_iface_open,
    .iface_close = ofi_iface_close,
    .iface_describe = ofi_iface_describe,
    .mem_reg = ofi_mem_reg,
    .mem_dereg = ofi_mem_dereg,
    .rkey_pack = ofi_rkey_pack,
    .rkey_unpack = ofi_rkey_unpack,
    .rkey_release = gw_tl_noop_rkey_release,
    .caps = ofi_caps,
    .ep_prepare = gw_ofi_ep_prepare,
    .ep_reachable = gw_ofi_ep_reachable,
    .ep_connect = gw_ofi_ep_connect,
    .ep_join = gw_tl_unsupported_ep_join,
    .ep_close = gw_ofi_ep_close,
    .ep_destroy = gw_ofi_ep_destroy,
    .ep_describe = gw_ofi_ep_describe,
    .submit = gw_ofi_submit,
    .rma_iov = gw_ofi_rma_iov,
    .am_send = gw_ofi_am_send,
    .rma_now = gw_tl_unsupported_rma_now,
    .send_now = gw_ofi_send_now,
    .put_direct = gw_tl_unsupported_put_direct,
    .ep_progress = ofi_ep_progress_op,
    .recv_matched = gw_ofi_recv_matched,
    .cancel = gw_ofi_cancel,
};
