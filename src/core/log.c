/* log.c - leveled logging to stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gw_log_threshold = GW_LOG_WARN;

static const char *const g_names[] = {"error", "warn", "info", "debug", "trace"};

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

void gw_log_impl(gw_log_level_t level, const char *fmt, ...)
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "gpuwire[%d] %s: ", (int)getpid(),
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
    /* one write() so lines from several processes do not interleave */
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}
