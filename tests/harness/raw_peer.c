/* SPDX-License-Identifier: Apache-2.0 */
/* raw_peer.c - see raw_peer.h. */
#include <string.h>
#include <sys/socket.h>

#include "bootstrap/wire.h"
#include "core/util.h"
#include "raw_peer.h"
#include "transport/tcp/tcp.h"

/* One handshake message: the fixed header, then its body. */
static int read_msg(int fd, gw_hs_msg_t *m, uint8_t *buf, size_t cap)
{
    if (recv(fd, buf, GW_HS_HDR_LEN, MSG_WAITALL) != GW_HS_HDR_LEN)
        return -1;
    uint32_t body = gw_get_u32(buf + 8);
    if (body > cap - GW_HS_HDR_LEN)
        return -1;
    if (body && recv(fd, buf + GW_HS_HDR_LEN, body, MSG_WAITALL) != (ssize_t)body)
        return -1;
    char why[256];
    return gw_hs_decode(buf, GW_HS_HDR_LEN + body, m, why, sizeof(why)) == GW_OK ? 0 : -1;
}

static int send_msg(int fd, const gw_hs_msg_t *m)
{
    uint8_t buf[GW_HS_HDR_LEN + 1024];
    size_t n = gw_hs_encode(m, buf, sizeof(buf));
    return n && send(fd, buf, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

int gwt_raw_tcp_handshake(int fd)
{
    uint64_t token;
    return gwt_raw_tcp_handshake_n(fd, 1, &token);
}

int gwt_raw_tcp_join(int fd, uint64_t token, unsigned idx)
{
    gw_hs_msg_t j;
    memset(&j, 0, sizeof(j));
    j.type = GW_HS_JOIN;
    j.token = token;
    j.stream = (uint16_t)idx;
    return send_msg(fd, &j);
}

int gwt_raw_tcp_handshake_n(int fd, int streams, uint64_t *token)
{
    static gw_hs_msg_t m; /* (large: the decoded blobs) */
    static uint8_t in[GW_HS_HDR_LEN + GW_HS_MAX_BODY];
    uint8_t tcp_blob[4];
    gw_put_u16(tcp_blob, GW_TCP_VERSION);
    gw_put_u16(tcp_blob + 2, (uint16_t)streams);
    memset(&m, 0, sizeof(m));
    m.type = GW_HS_HELLO;
    m.uuid = 0x1234567890abcdefull;
    m.host_id = 0xfeedfacecafebeefull; /* another host: no intra-host transport */
    m.has_nonce = 1;
    m.pref[0] = GW_TL_TCP;
    m.npref = 1;
    m.blob[0] = (gw_hs_blob_t){.tl = GW_TL_TCP, .len = 4, .data = tcp_blob};
    m.nblob = 1;
    if (send_msg(fd, &m) != 0 || read_msg(fd, &m, in, sizeof(in)) != 0 || m.type != GW_HS_ACCEPT)
        return -1;
    memset(&m, 0, sizeof(m));
    m.type = GW_HS_CONFIRM;
    if (send_msg(fd, &m) != 0 || read_msg(fd, &m, in, sizeof(in)) != 0 || m.type != GW_HS_READY)
        return -1;
    *token = m.token;
    return 0;
}
