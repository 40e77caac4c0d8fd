/* SPDX-License-Identifier: Apache-2.0 */
/* auth.c - HMAC-SHA256 through OpenSSL's libcrypto (never hand-written). */
#include "api/auth.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#if GW_HAVE_AUTH
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

int gw_auth_mac(const uint8_t *secret, size_t secret_len, const char *label, const uint8_t *a,
                const uint8_t *b, uint64_t u1, uint64_t u2, uint8_t mac[GW_AUTH_MAC_LEN])
{
#if GW_HAVE_AUTH
    uint8_t msg[64 + 32 + 32 + 16];
    size_t ll = strlen(label);
    if (ll > 64)
        return -1;
    memcpy(msg, label, ll);
    memcpy(msg + ll, a, 32);
    memcpy(msg + ll + 32, b, 32);
    gw_put_u64(msg + ll + 64, u1);
    gw_put_u64(msg + ll + 72, u2);
    unsigned int outlen = 0;
    if (!HMAC(EVP_sha256(), secret, (int)secret_len, msg, ll + 80, mac, &outlen) || outlen != GW_AUTH_MAC_LEN)
        return -1;
    return 0;
#else
    (void)secret; (void)secret_len; (void)label; (void)a; (void)b; (void)u1; (void)u2;
    memset(mac, 0, GW_AUTH_MAC_LEN);
    return -1;
#endif
}

int gw_auth_mac_data(const uint8_t *secret, size_t secret_len, const char *label, const uint8_t *a,
                     const uint8_t *b, uint64_t u1, uint64_t u2, const uint8_t *data, size_t len,
                     uint8_t mac[GW_AUTH_MAC_LEN])
{
#if GW_HAVE_AUTH
    size_t ll = strlen(label);
    if (ll > 64)
        return -1;
    uint8_t *msg = malloc(ll + 80 + len);
    if (!msg)
        return -1;
    memcpy(msg, label, ll);
    memcpy(msg + ll, a, 32);
    memcpy(msg + ll + 32, b, 32);
    gw_put_u64(msg + ll + 64, u1);
    gw_put_u64(msg + ll + 72, u2);
    if (len)
        memcpy(msg + ll + 80, data, len);
    unsigned int outlen = 0;
    int ok = HMAC(EVP_sha256(), secret, (int)secret_len, msg, ll + 80 + len, mac, &outlen) && outlen == GW_AUTH_MAC_LEN;
    free(msg);
    return ok ? 0 : -1;
#else
    (void)secret; (void)secret_len; (void)label; (void)a; (void)b; (void)u1; (void)u2; (void)data; (void)len;
    memset(mac, 0, GW_AUTH_MAC_LEN);
    return -1;
#endif
}

int gw_auth_equal(const uint8_t *x, const uint8_t *y, size_t len)
{
#if GW_HAVE_AUTH
    return CRYPTO_memcmp(x, y, len) == 0;
#else
    unsigned char d = 0;
    for (size_t i = 0; i < len; i++)
        d |= (unsigned char)(x[i] ^ y[i]);
    return d == 0;
#endif
}
