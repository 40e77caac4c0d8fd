/* SPDX-License-Identifier: Apache-2.0 */
/* log.h - leveled logging, one line per message, to stderr or a file (core layer).
 *
 * Each line names the process, the subsystem and the level:
 *     gpuwire[4242] tcp warn: connect(10.0.0.2:7000) failed: ...
 * The subsystem is the source directory of the code that logged (the build
 * defines GW_LOG_SUBSYS per file from its path: core, cuda, bootstrap,
 * directory, mem, topo, transport (base), tcp, verbs, intra, proto, api,
 * diag).
 * Settings (read at context creation, process-wide like the level):
 * GPUWIRE_LOG_LEVEL, GPUWIRE_LOG_FILE (a path, "%p" becomes the pid;
 * appended to), GPUWIRE_LOG_SUBSYS (a comma-separated list: messages above
 * warn come only from these; errors and warnings always come). */
#ifndef GW_CORE_LOG_H
#define GW_CORE_LOG_H

#include <stddef.h>

#ifndef GW_LOG_SUBSYS
#define GW_LOG_SUBSYS "gpuwire"
#endif

typedef enum gw_log_level {
    GW_LOG_ERROR = 0,
    GW_LOG_WARN = 1,
    GW_LOG_INFO = 2,
    GW_LOG_DEBUG = 3,
    GW_LOG_TRACE = 4
} gw_log_level_t;

/* The most verbose level logged (the cheap test every gw_log makes first). */
extern int gw_log_threshold;

/* Parses "error".."trace" or "0".."4"; -1 if unknown. */
int gw_log_parse_level(const char *s);
void gw_log_set_level(int level);
/* Where lines go and which subsystems may log above warn.  file NULL or "":
 * stderr; subsystems NULL or "": all.  Returns 0, or -1 with the reason in
 * err (an unknown subsystem name; a file that cannot be opened), in which
 * case nothing changes. */
int gw_log_configure(const char *file, const char *subsystems, char *err, size_t errlen);

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void gw_log_impl(gw_log_level_t level, const char *subsys, const char *fmt, ...);

#define gw_log(level, ...)                                                                     \
    do {                                                                                       \
        if ((int)(level) <= gw_log_threshold)                                                  \
            gw_log_impl((level), GW_LOG_SUBSYS, __VA_ARGS__);                                  \
    } while (0)

#endif
