/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gw_nixl_engine.cpp - the GPUWIRE backend engine of NIXL: NIXL's backend
 * interface (backend/backend_engine.h) translated to the plain-C core
 * (gwnx.h), which does the work over gpuwire's public API.
 *
 * Metadata: a registration's public data is the region's packed gpuwire
 * remote key; a peer unpacks it on its endpoint to this agent.  Connection
 * info lists the addresses the agent's listener answers on.  Local
 * transfers (NIXL's loadLocalMD) go through the agent's endpoint to itself.
 *
 * Backend parameters (NIXL's createBackend params): listen_addr (default
 * ":0"), advertise_addr (the host peers connect to; default: this host's
 * non-loopback IPv4 addresses, then 127.0.0.1).  Everything else is
 * gpuwire's own settings (GPUWIRE_TRANSPORTS and the rest), read when the
 * backend is created.
 */
#include "backend/backend_engine.h"
#include "backend/backend_plugin.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gwnx.h"

// gwnx returns NIXL's status numbers
constexpr bool same(int a, nixl_status_t b) { return a == static_cast<int>(b); }
static_assert(same(GWNX_SUCCESS, NIXL_SUCCESS) && same(GWNX_IN_PROG, NIXL_IN_PROG) &&
                  same(GWNX_ERR_NOT_POSTED, NIXL_ERR_NOT_POSTED) &&
                  same(GWNX_ERR_INVALID_PARAM, NIXL_ERR_INVALID_PARAM) && same(GWNX_ERR_BACKEND, NIXL_ERR_BACKEND) &&
                  same(GWNX_ERR_NOT_FOUND, NIXL_ERR_NOT_FOUND) && same(GWNX_ERR_MISMATCH, NIXL_ERR_MISMATCH) &&
                  same(GWNX_ERR_NOT_ALLOWED, NIXL_ERR_NOT_ALLOWED) &&
                  same(GWNX_ERR_REPOST_ACTIVE, NIXL_ERR_REPOST_ACTIVE) && same(GWNX_ERR_UNKNOWN, NIXL_ERR_UNKNOWN) &&
                  same(GWNX_ERR_NOT_SUPPORTED, NIXL_ERR_NOT_SUPPORTED) &&
                  same(GWNX_ERR_REMOTE_DISCONNECT, NIXL_ERR_REMOTE_DISCONNECT) &&
                  same(GWNX_ERR_CANCELED, NIXL_ERR_CANCELED),
              "gwnx status numbers differ from nixl_status_t");

namespace {

nixl_status_t st(int s) { return static_cast<nixl_status_t>(s); }

// A local registration.
class gwLocalMD : public nixlBackendMD {
public:
    gwnx_region_t *region = nullptr;
    gwLocalMD() : nixlBackendMD(true) {}
};

// A peer's region (or one of ours, loaded for local transfers).
class gwRemoteMD : public nixlBackendMD {
public:
    gwnx_rregion_t *region = nullptr;
    gwRemoteMD() : nixlBackendMD(false) {}
};

class gwReqH : public nixlBackendReqH {
public:
    gwnx_xfer_t *xfer = nullptr;
};

std::string param(const nixl_b_params_t *p, const char *key)
{
    if (!p)
        return "";
    auto it = p->find(key);
    return it == p->end() ? "" : it->second;
}

class nixlGpuwireEngine : public nixlBackendEngine {
    gwnx_core_t *core_ = nullptr;

public:
    explicit nixlGpuwireEngine(const nixlBackendInitParams *init) : nixlBackendEngine(init)
    {
        std::string listen = param(init->customParams, "listen_addr");
        std::string adv = param(init->customParams, "advertise_addr");
        gwnx_core_opts_t o = {};
        o.agent = localAgent.c_str();
        o.listen_addr = listen.empty() ? nullptr : listen.c_str();
        o.advertise = adv.empty() ? nullptr : adv.c_str();
        o.progress_thread = 1;
        char err[512] = "";
        if (gwnx_core_create(&o, &core_, err, sizeof(err)) != GWNX_SUCCESS) {
            initErr = true;
            return;
        }
        // local transfers: this agent reaches itself like any peer
        char ci[512];
        if (gwnx_conn_info(core_, ci, sizeof(ci)) != GWNX_SUCCESS ||
            gwnx_peer_set(core_, localAgent.c_str(), ci) != GWNX_SUCCESS)
            initErr = true;
    }

    ~nixlGpuwireEngine() override { gwnx_core_destroy(core_); }

    bool supportsRemote() const override { return true; }
    bool supportsLocal() const override { return true; }
    bool supportsNotif() const override { return true; }
    nixl_mem_list_t getSupportedMems() const override { return {DRAM_SEG, VRAM_SEG}; }

    nixl_status_t registerMem(const nixlBlobDesc &mem, const nixl_mem_t &nixl_mem, nixlBackendMD *&out) override
    {
        if (nixl_mem != DRAM_SEG && nixl_mem != VRAM_SEG)
            return NIXL_ERR_NOT_SUPPORTED;
        auto *md = new gwLocalMD();
        // gpuwire tells host from device memory by the pointer itself
        int rc = gwnx_mem_reg(core_, reinterpret_cast<void *>(mem.addr), mem.len, &md->region);
        if (rc != GWNX_SUCCESS) {
            delete md;
            return st(rc);
        }
        out = md;
        return NIXL_SUCCESS;
    }

    nixl_status_t deregisterMem(nixlBackendMD *meta) override
    {
        auto *md = static_cast<gwLocalMD *>(meta);
        int rc = gwnx_mem_dereg(md->region);
        if (rc == GWNX_SUCCESS)
            delete md;
        return st(rc);
    }

    nixl_status_t getPublicData(const nixlBackendMD *meta, std::string &str) const override
    {
        auto *md = static_cast<const gwLocalMD *>(meta);
        size_t len = 0;
        gwnx_mem_public(md->region, nullptr, &len);
        str.resize(len);
        return st(gwnx_mem_public(md->region, str.data(), &len));
    }

    nixl_status_t getConnInfo(std::string &str) const override
    {
        char ci[512];
        int rc = gwnx_conn_info(core_, ci, sizeof(ci));
        if (rc == GWNX_SUCCESS)
            str = ci;
        return st(rc);
    }

    nixl_status_t loadRemoteConnInfo(const std::string &remote_agent, const std::string &info) override
    {
        return st(gwnx_peer_set(core_, remote_agent.c_str(), info.c_str()));
    }

    nixl_status_t connect(const std::string &remote_agent) override
    {
        return st(gwnx_peer_connect(core_, remote_agent.c_str()));
    }

    nixl_status_t disconnect(const std::string &remote_agent) override
    {
        return st(gwnx_peer_disconnect(core_, remote_agent.c_str()));
    }

    nixl_status_t loadRemoteMD(const nixlBlobDesc &input, const nixl_mem_t &nixl_mem,
                               const std::string &remote_agent, nixlBackendMD *&output) override
    {
        if (nixl_mem != DRAM_SEG && nixl_mem != VRAM_SEG)
            return NIXL_ERR_NOT_SUPPORTED;
        auto *md = new gwRemoteMD();
        int rc = gwnx_remote_load(core_, remote_agent.c_str(), input.metaInfo.data(), input.metaInfo.size(),
                                  &md->region);
        if (rc != GWNX_SUCCESS) {
            delete md;
            return st(rc);
        }
        output = md;
        return NIXL_SUCCESS;
    }

    nixl_status_t loadLocalMD(nixlBackendMD *input, nixlBackendMD *&output) override
    {
        std::string pub;
        nixl_status_t s = getPublicData(input, pub);
        if (s != NIXL_SUCCESS)
            return s;
        auto *md = new gwRemoteMD();
        int rc = gwnx_remote_load(core_, localAgent.c_str(), pub.data(), pub.size(), &md->region);
        if (rc != GWNX_SUCCESS) {
            delete md;
            return st(rc);
        }
        output = md;
        return NIXL_SUCCESS;
    }

    nixl_status_t unloadMD(nixlBackendMD *input) override
    {
        auto *md = dynamic_cast<gwRemoteMD *>(input);
        if (!md)
            return NIXL_ERR_INVALID_PARAM;
        gwnx_remote_unload(md->region);
        delete md;
        return NIXL_SUCCESS;
    }

    nixl_status_t prepXfer(const nixl_xfer_op_t &op, const nixl_meta_dlist_t &local,
                           const nixl_meta_dlist_t &remote, const std::string &remote_agent,
                           nixlBackendReqH *&handle, const nixl_opt_b_args_t *) const override
    {
        if (op != NIXL_READ && op != NIXL_WRITE)
            return NIXL_ERR_INVALID_PARAM;
        if (local.descCount() != remote.descCount())
            return NIXL_ERR_MISMATCH;
        size_t n = static_cast<size_t>(local.descCount());
        std::vector<gwnx_desc_t> l(n), r(n);
        for (size_t i = 0; i < n; i++) {
            auto *lm = static_cast<const gwLocalMD *>(local[i].metadataP);
            auto *rm = static_cast<const gwRemoteMD *>(remote[i].metadataP);
            l[i] = {static_cast<uint64_t>(local[i].addr), local[i].len, lm ? lm->region : nullptr};
            r[i] = {static_cast<uint64_t>(remote[i].addr), remote[i].len, rm ? rm->region : nullptr};
        }
        auto *h = new gwReqH();
        int rc = gwnx_xfer_prep(core_, remote_agent.c_str(), op == NIXL_WRITE ? GWNX_WRITE : GWNX_READ, l.data(),
                                r.data(), n, &h->xfer);
        if (rc != GWNX_SUCCESS) {
            delete h;
            return st(rc);
        }
        handle = h;
        return NIXL_SUCCESS;
    }

    nixl_status_t postXfer(const nixl_xfer_op_t &, const nixl_meta_dlist_t &, const nixl_meta_dlist_t &,
                           const std::string &, nixlBackendReqH *&handle,
                           const nixl_opt_b_args_t *opt_args) const override
    {
        auto *h = static_cast<gwReqH *>(handle);
        bool notif = opt_args && opt_args->hasNotif;
        return st(gwnx_xfer_post(h->xfer, notif, notif ? opt_args->notifMsg.data() : nullptr,
                                 notif ? opt_args->notifMsg.size() : 0));
    }

    nixl_status_t checkXfer(nixlBackendReqH *handle) const override
    {
        return st(gwnx_xfer_check(static_cast<gwReqH *>(handle)->xfer));
    }

    nixl_status_t releaseReqH(nixlBackendReqH *handle) const override
    {
        auto *h = static_cast<gwReqH *>(handle);
        gwnx_xfer_release(h->xfer);
        delete h;
        return NIXL_SUCCESS;
    }

    nixl_status_t getNotifs(notif_list_t &notif_list) override
    {
        gwnx_notifs_take(
            core_,
            [](void *arg, const char *agent, size_t alen, const void *msg, size_t mlen) {
                static_cast<notif_list_t *>(arg)->emplace_back(
                    std::string(agent, alen), std::string(static_cast<const char *>(msg), mlen));
            },
            &notif_list);
        return NIXL_SUCCESS;
    }

    nixl_status_t genNotif(const std::string &remote_agent, const std::string &msg) const override
    {
        return st(gwnx_notif_gen(core_, remote_agent.c_str(), msg.data(), msg.size()));
    }
};

// ---- the plugin's entry points -------------------------------------------------
nixlBackendEngine *create_engine(const nixlBackendInitParams *init)
{
    try {
        return new nixlGpuwireEngine(init);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gpuwire NIXL backend: cannot create the engine: %s\n", e.what());
        return nullptr;
    }
}

void destroy_engine(nixlBackendEngine *e) { delete e; }
const char *plugin_name() { return "GPUWIRE"; }
const char *plugin_version() { return GW_VERSION_STRING; }
nixl_b_params_t plugin_options() { return {{"listen_addr", ""}, {"advertise_addr", ""}}; }
nixl_mem_list_t plugin_mems() { return {DRAM_SEG, VRAM_SEG}; }

nixlBackendPlugin gw_plugin = {NIXL_PLUGIN_API_VERSION, create_engine, destroy_engine, plugin_name,
                               plugin_version, plugin_options, plugin_mems};

} // namespace

extern "C" NIXL_PLUGIN_EXPORT nixlBackendPlugin *nixl_plugin_init() { return &gw_plugin; }
extern "C" NIXL_PLUGIN_EXPORT void nixl_plugin_fini() {}
