/*
 * log.h — the one logging facility of facetfs.
 *
 * Lines go to stderr as "TIME PROG LEVEL: message". Any thread may call;
 * each call writes one whole line (one write(2)). log_init() is called once
 * by main before threads start; without it the program name is "facetfs".
 * LOG_DEBUG lines print only when the verbosity is 2 or more, LOG_INFO when
 * it is 1 or more; warnings and errors always print.
 *
 * Log an error once, where it is detected, naming the key, offset or inode.
 *
 * Tests: no unit test of its own (every test logs through it).
 */
#ifndef FACETFS_LOG_H
#define FACETFS_LOG_H

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_init(const char *prog, int verbosity);
void log_msg(enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
