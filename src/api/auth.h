/* SPDX-License-Identifier: Apache-2.0 */
/* auth.h - HMAC-SHA256 proofs of a shared secret (api layer; OpenSSL). */
#ifndef GW_API_AUTH_H
#define GW_API_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define GW_AUTH_MAC_LEN 32

/* mac = HMAC-SHA256(secret, label || a || b || u1 || u2), a and b 32-byte
 * nonces, u1/u2 the two contexts' uuids.  Returns 0, or -1 if the build has
 * no crypto library. */
int gw_auth_mac(const uint8_t *secret, size_t secret_len, const char *label, const uint8_t *a,
                const uint8_t *b, uint64_t u1, uint64_t u2, uint8_t mac[GW_AUTH_MAC_LEN]);
/* mac = HMAC-SHA256(secret, label || a || b || u1 || u2 || data): binds data
 * (a names table) to one handshake's nonces.  0, or -1 without crypto. */
int gw_auth_mac_data(const uint8_t *secret, size_t secret_len, const char *label, const uint8_t *a,
                     const uint8_t *b, uint64_t u1, uint64_t u2, const uint8_t *data, size_t len,
                     uint8_t mac[GW_AUTH_MAC_LEN]);
/* Constant-time comparison; 1 when equal. */
int gw_auth_equal(const uint8_t *x, const uint8_t *y, size_t len);

#endif
