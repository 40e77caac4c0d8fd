/* SPDX-License-Identifier: Apache-2.0 */
/* sysfs.c - small readers of sysfs/procfs files that say why they failed. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/topo.h"

static int join(const char *root, const char *rel, char *out, size_t outlen)
{
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/')
        rl--;
    while (*rel == '/')
        rel++;
    int n = snprintf(out, outlen, "%.*s/%s", (int)rl, root, rel);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static void set_why(char *why, size_t whylen, const char *fmt, const char *path, int err)
{
    if (why && whylen)
        snprintf(why, whylen, fmt, path, strerror(err));
}

long gw_sysfs_read_bin(const char *root, const char *rel, uint8_t *buf, size_t len, char *why,
                       size_t whylen)
{
    char path[PATH_MAX];
    if (join(root, rel, path, sizeof(path))) {
        set_why(why, whylen, "%s: %s", rel, ENAMETOOLONG);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_why(why, whylen, "open(%s) failed: %s", path, errno);
        return -1;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            set_why(why, whylen, "read(%s) failed: %s", path, errno);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    return (long)got;
}

int gw_sysfs_read(const char *root, const char *rel, char *buf, size_t len, char *why,
                  size_t whylen)
{
    if (len == 0)
        return -1;
    long n = gw_sysfs_read_bin(root, rel, (uint8_t *)buf, len - 1, why, whylen);
    if (n < 0) {
        buf[0] = '\0';
        return -1;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', (size_t)n)) {
        if (why && whylen)
            snprintf(why, whylen, "%s: binary content where text was expected", rel);
        buf[0] = '\0';
        return -1;
    }
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    return (int)n;
}

int gw_sysfs_read_long(const char *root, const char *rel, long *out, char *why, size_t whylen)
{
    char buf[64];
    if (gw_sysfs_read(root, rel, buf, sizeof(buf), why, whylen) < 0)
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(buf, &end, 0);
    /* "4: ACTIVE" style files: the number ends at ':' */
    if (end == buf || errno || (*end && *end != ':' && !isspace((unsigned char)*end))) {
        if (why && whylen)
            snprintf(why, whylen, "%s: not a number: \"%.32s\"", rel, buf);
        return -1;
    }
    *out = v;
    return 0;
}

int gw_sysfs_resolve(const char *root, const char *rel, char *out, size_t outlen, char *why,
                     size_t whylen)
{
    char path[PATH_MAX], real[PATH_MAX], rroot[PATH_MAX];
    if (join(root, rel, path, sizeof(path))) {
        set_why(why, whylen, "%s: %s", rel, ENAMETOOLONG);
        return -1;
    }
    if (!realpath(root, rroot)) {
        set_why(why, whylen, "realpath(%s) failed: %s", root, errno);
        return -1;
    }
    if (!realpath(path, real)) {
        set_why(why, whylen, "realpath(%s) failed: %s", path, errno);
        return -1;
    }
    size_t rl = strlen(rroot);
    if (rl == 1) /* root is "/" */
        rl = 0;
    if (strncmp(real, rroot, rl) != 0 || (real[rl] != '/' && real[rl] != '\0')) {
        if (why && whylen)
            snprintf(why, whylen, "%s resolves to %s, outside the tree %s", rel, real, rroot);
        return -1;
    }
    if (snprintf(out, outlen, "%s", real + rl) >= (int)outlen) {
        set_why(why, whylen, "%s: %s", rel, ENAMETOOLONG);
        return -1;
    }
    return 0;
}

int gw_is_bdf(const char *s)
{
    /* DDDD:BB:DD.F with hex digits (domains can be longer than 4 digits, e.g. VMD 10000) */
    const char *p = s;
    int n = 0;
    while (isxdigit((unsigned char)*p)) {
        p++;
        n++;
    }
    if (n < 4 || *p++ != ':')
        return 0;
    for (int i = 0; i < 2; i++)
        if (!isxdigit((unsigned char)*p++))
            return 0;
    if (*p++ != ':')
        return 0;
    for (int i = 0; i < 2; i++)
        if (!isxdigit((unsigned char)*p++))
            return 0;
    if (*p++ != '.')
        return 0;
    if (*p < '0' || *p > '7')
        return 0;
    return p[1] == '\0';
}
