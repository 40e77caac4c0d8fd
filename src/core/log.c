/* SPDX-License-Identifier: Apache-2.0 */
/* log.c - leveled logging to stderr or GPUWIRE_LOG_FILE (log.h). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int gw_log_threshold = GW_LOG_WARN;

static const char *const g_names[] = {"error", "warn", "info", "debug", "trace"};
/* the subsystems a build names (GW_LOG_SUBSYS; CMakeLists.txt derives them
 * from the source paths) */
static const char *const g_subsystems[] = {"core", "cuda", "bootstrap", "mem",
                                           "topo", "transport", "tcp", "verbs", "intra",
                                           "ofi", "proto", "api", "names", "diag", "gpuwire"};
#define NSUB (sizeof(g_subsystems) / sizeof(g_subsystems[0]))

static pthread_mutex_t g_cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_fd = STDERR_FILENO;
static unsigned g_sub_mask; /* 0: every subsystem; else bit i: g_subsystems[i] */
static char g_file[512];    /* the GPUWIRE_LOG_FILE value g_fd was opened for */

int gw_log_parse_level(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < 5; i++)
        if (strcasecmp(s, g_names[i]) == 0)
            return i;
    if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

void gw_log_set_level(int level)
{
    if (level >= GW_LOG_ERROR && level <= GW_LOG_TRACE)
        gw_log_threshold = level;
}

static int sub_index(const char *name, size_t len)
{
    for (size_t i = 0; i < NSUB; i++)
        if (strlen(g_subsystems[i]) == len && !strncmp(g_subsystems[i], name, len))
            return (int)i;
    return -1;
}

/* "%p" -> pid */
static void expand_path(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < len; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(out + o, len - o, "%d", (int)getpid());
            p++;
        } else {
            out[o++] = *p;
        }
        if (o >= len)
            o = len - 1;
    }
    out[o < len ? o : len - 1] = '\0';
}

int gw_log_configure(const char *file, const char *subsystems, char *err, size_t errlen)
{
    unsigned mask = 0;
    for (const char *p = subsystems ? subsystems : ""; *p;) {
        size_t n = strcspn(p, ",");
        if (n) {
            int i = sub_index(p, n);
            if (i < 0) {
                snprintf(err, errlen,
                         "GPUWIRE_LOG_SUBSYS=\"%s\": unknown subsystem \"%.*s\" (known: core, "
                         "cuda, bootstrap, mem, topo, transport, tcp, verbs, intra, ofi, "
                         "proto, api, names, diag)",
                         subsystems, (int)n, p);
                return -1;
            }
            mask |= 1u << i;
        }
        p += n + (p[n] ? 1 : 0);
    }
    if (!file)
        file = "";
    pthread_mutex_lock(&g_cfg_lock);
    int same_file = strcmp(file, g_file) == 0;
    if (same_file)
        g_sub_mask = mask;
    pthread_mutex_unlock(&g_cfg_lock);
    if (same_file) /* every context creation configures: the file stays open */
        return 0;
    int fd = STDERR_FILENO;
    if (*file) {
        char path[512];
        expand_path(file, path, sizeof(path));
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            snprintf(err, errlen, "GPUWIRE_LOG_FILE=\"%s\": open(%s) failed: %s", file, path,
                     strerror(errno));
            return -1;
        }
    }
    pthread_mutex_lock(&g_cfg_lock);
    int old = g_fd;
    g_fd = fd;
    g_sub_mask = mask;
    snprintf(g_file, sizeof(g_file), "%s", file);
    pthread_mutex_unlock(&g_cfg_lock);
    /* another thread may be writing a line to the old file right now: a
     * replaced log file stays open (one per change of GPUWIRE_LOG_FILE
     * between context creations, which is rare) */
    (void)old;
    return 0;
}

void gw_log_impl(gw_log_level_t level, const char *subsys, const char *fmt, ...)
{
    const char *sub = subsys ? subsys : "gpuwire";
    if (level > GW_LOG_WARN && g_sub_mask) {
        int i = sub_index(sub, strlen(sub));
        if (i < 0 || !(g_sub_mask & (1u << i)))
            return;
    }
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "gpuwire[%d] %s %s: ", (int)getpid(), sub,
                     g_names[level <= GW_LOG_TRACE ? level : GW_LOG_TRACE]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(buf))
        n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf) - 1)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    /* one write() so lines from several processes and threads do not interleave */
    ssize_t w = write(g_fd, buf, (size_t)n);
    (void)w;
}
