/* log.h - leveled logging to stderr (core layer). */
#ifndef GW_CORE_LOG_H
#define GW_CORE_LOG_H

typedef enum gw_log_level {
    GW_LOG_ERROR = 0,
    GW_LOG_WARN = 1,
    GW_LOG_INFO = 2,
    GW_LOG_DEBUG = 3,
    GW_LOG_TRACE = 4
} gw_log_level_t;

extern int gw_log_threshold;

/* Parses "error".."trace" or "0".."4"; -1 if unknown. */
int gw_log_parse_level(const char *s);
void gw_log_set_level(int level);

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void gw_log_impl(gw_log_level_t level, const char *fmt, ...);

#define gw_log(level, ...)                                                                     \
    do {                                                                                       \
        if ((int)(level) <= gw_log_threshold)                                                  \
            gw_log_impl((level), __VA_ARGS__);                                                 \
    } while (0)

#endif
