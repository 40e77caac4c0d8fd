/* SPDX-License-Identifier: Apache-2.0 */
/* json.h - the small JSON reader/writer and base64 codec the etcd client
 * needs (directory layer; includes only core).
 *
 * The reader works on spans of the input and never allocates: it validates
 * a value (strings, numbers, literals, arrays, objects; nesting at most
 * GW_JSON_MAX_DEPTH) and walks objects and arrays.  etcd's JSON gateway
 * writes 64-bit integers as strings, so gw_json_i64() accepts both forms.
 * Everything here is fuzzed (tests/fuzz/fuzz_etcd_json.c). */
#ifndef GW_DIRECTORY_JSON_H
#define GW_DIRECTORY_JSON_H

#include <stddef.h>
#include <stdint.h>

#define GW_JSON_MAX_DEPTH 32

typedef struct gw_json {
    const char *p; /* first byte of the value (after leading white space) */
    size_t n;      /* its length */
} gw_json_t;

/* Parses one value at the start of s[0..n) (white space around it allowed).
 * 1: a whole value, *v its span and *used the bytes consumed including
 * trailing white space; 0: the input ends inside the value (more may come);
 * -1: malformed. */
int gw_json_value(const char *s, size_t n, gw_json_t *v, size_t *used);
/* Member `key` of object obj (keys compared byte for byte, unescaped form not
 * supported: etcd's keys are plain).  1 found, 0 absent or obj no object. */
int gw_json_get(gw_json_t obj, const char *key, gw_json_t *val);
/* Next element of array arr; *it starts at 0.  1: *elem set; 0: end. */
int gw_json_next(gw_json_t arr, size_t *it, gw_json_t *elem);
/* A string value, unescaped into buf (NUL-terminated; \u escapes outside
 * ASCII become '?').  0 on success, -1 when v is not a string or it does
 * not fit. */
int gw_json_string(gw_json_t v, char *buf, size_t cap);
/* An integer written as a number or as a string of digits.  0 / -1. */
int gw_json_i64(gw_json_t v, int64_t *out);
/* 1 for true, 0 otherwise. */
int gw_json_true(gw_json_t v);

/* Appends s as a JSON string literal (quotes, escapes) to buf at *len;
 * -1 (and nothing useful written) when it does not fit. */
int gw_json_put_str(char *buf, size_t cap, size_t *len, const char *s);

/* Standard base64 with padding.  Encode: returns the output length (buf
 * NUL-terminated) or 0 when cap is too small.  Decode: returns the decoded
 * length or -1 on a malformed input or a too small buffer. */
size_t gw_b64_encode(const void *in, size_t n, char *buf, size_t cap);
long gw_b64_decode(const char *in, size_t n, void *out, size_t cap);

#endif
