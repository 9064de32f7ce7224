/* log.c — see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Set once by log_init() before any thread starts; read-only afterwards. */
static const char *log_prog = "facetfs";
static int log_verbosity = 1;

void log_init(const char *prog, int verbosity)
{
	log_prog = prog;
	log_verbosity = verbosity;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	if ((lvl == LOG_LVL_INFO && log_verbosity < 1) ||
	    (lvl == LOG_LVL_DEBUG && log_verbosity < 2))
		return;

	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %s %s: ",
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			 log_prog, names[lvl]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof line - 2)
		len = sizeof line - 2;   /* cut a very long line, keep the newline */
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}
