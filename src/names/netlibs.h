/* SPDX-License-Identifier: Apache-2.0 */
/* netlibs.h - libcurl and cJSON, loaded at run time (names layer).
 *
 * The etcd directory speaks HTTP through libcurl (TLS, client certificates)
 * and reads and writes JSON through cJSON, both kept Debian libraries.
 * They are optional dependencies, opened with dlopen the first time a
 * context asks for an etcd directory: absent (no such library) is quiet
 * until then and the etcd directory alone is unavailable, with a message
 * naming the library and its package; a library that opens but lacks a
 * function gpuwire needs is broken, and that is said loudly (logged as an
 * error).  Types and constants come from their headers at build time;
 * nothing is linked.  GPUWIRE_CURL_LIB / GPUWIRE_CJSON_LIB name other
 * files. */
#ifndef GW_NAMES_NETLIBS_H
#define GW_NAMES_NETLIBS_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stddef.h>

/* X(field, symbol, return type, (arguments)) */
#define GW_CURL_SYMS(X)                                                                                     \
    X(global_init, "curl_global_init", CURLcode, (long))                                                    \
    X(easy_init, "curl_easy_init", CURL *, (void))                                                          \
    X(easy_setopt, "curl_easy_setopt", CURLcode, (CURL *, CURLoption, ...))                                 \
    X(easy_perform, "curl_easy_perform", CURLcode, (CURL *))                                                \
    X(easy_getinfo, "curl_easy_getinfo", CURLcode, (CURL *, CURLINFO, ...))                                 \
    X(easy_cleanup, "curl_easy_cleanup", void, (CURL *))                                                    \
    X(easy_strerror, "curl_easy_strerror", const char *, (CURLcode))                                        \
    X(slist_append, "curl_slist_append", struct curl_slist *, (struct curl_slist *, const char *))          \
    X(slist_free_all, "curl_slist_free_all", void, (struct curl_slist *))                                   \
    X(multi_init, "curl_multi_init", CURLM *, (void))                                                       \
    X(multi_add_handle, "curl_multi_add_handle", CURLMcode, (CURLM *, CURL *))                              \
    X(multi_remove_handle, "curl_multi_remove_handle", CURLMcode, (CURLM *, CURL *))                        \
    X(multi_perform, "curl_multi_perform", CURLMcode, (CURLM *, int *))                                     \
    X(multi_poll, "curl_multi_poll", CURLMcode, (CURLM *, struct curl_waitfd *, unsigned, int, int *))      \
    X(multi_wakeup, "curl_multi_wakeup", CURLMcode, (CURLM *))                                              \
    X(multi_info_read, "curl_multi_info_read", CURLMsg *, (CURLM *, int *))                                 \
    X(multi_cleanup, "curl_multi_cleanup", CURLMcode, (CURLM *))

#define GW_CJSON_SYMS(X)                                                                                    \
    X(parse_len, "cJSON_ParseWithLength", cJSON *, (const char *, size_t))                                  \
    X(del, "cJSON_Delete", void, (cJSON *))                                                                 \
    X(get, "cJSON_GetObjectItemCaseSensitive", cJSON *, (const cJSON *, const char *))                      \
    X(create_object, "cJSON_CreateObject", cJSON *, (void))                                                 \
    X(create_array, "cJSON_CreateArray", cJSON *, (void))                                                   \
    X(add_string, "cJSON_AddStringToObject", cJSON *, (cJSON *, const char *, const char *))                \
    X(add_number, "cJSON_AddNumberToObject", cJSON *, (cJSON *, const char *, double))                      \
    X(add_item, "cJSON_AddItemToObject", cJSON_bool, (cJSON *, const char *, cJSON *))                      \
    X(add_to_array, "cJSON_AddItemToArray", cJSON_bool, (cJSON *, cJSON *))                                 \
    X(print, "cJSON_PrintUnformatted", char *, (const cJSON *))                                             \
    X(free_, "cJSON_free", void, (void *))

#define GW_NETLIB_FIELD_(field, sym, ret, args) ret(*field) args;
typedef struct gw_curl {
    GW_CURL_SYMS(GW_NETLIB_FIELD_)
    char lib[128];
} gw_curl_t;
typedef struct gw_cjson {
    GW_CJSON_SYMS(GW_NETLIB_FIELD_)
    char lib[128];
} gw_cjson_t;
#undef GW_NETLIB_FIELD_

/* Both libraries (loaded once per process; curl_global_init done).  NULL
 * with why (the library, what went wrong, how to get it) when either is
 * absent or broken. */
const gw_curl_t *gw_curl_get(char *why, size_t whylen);
const gw_cjson_t *gw_cjson_get(char *why, size_t whylen);

#endif
