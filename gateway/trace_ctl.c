/* trace_ctl.c — see trace_ctl.h. */
#include "gateway/trace_ctl.h"

#include "common/trace.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "N", "NK", "NM", "NG" (binary units, optional "iB"/"B"); 0 if not one. */
static uint64_t size_parse(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return 0;
	unsigned shift = 0;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	default: break;
	}
	if (shift && strcmp(end, "iB") == 0)
		end += 2;
	else if (strcmp(end, "B") == 0)
		end++;
	if (*end || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}

static char *answer(const char *fmt, const char *arg)
{
	char *s = NULL;
	if (asprintf(&s, fmt, arg) < 0)
		return NULL;
	return s;
}

static char *trace_start_cmd(struct trace *t, char *args)
{
	const char *view = NULL;
	uint64_t max = 0;
	char *save = NULL;
	for (char *w = strtok_r(args, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (strcmp(w, "--view") == 0 && (view = strtok_r(NULL, " ", &save))) {
			continue;
		} else if (strcmp(w, "--max-bytes") == 0) {
			const char *n = strtok_r(NULL, " ", &save);
			if (!n || !(max = size_parse(n)))
				return answer("error: trace start: --max-bytes needs a size (N, NK, NM, NG)%s\n", "");
		} else {
			return answer("error: trace start: unexpected \"%s\"\n", w);
		}
	}
	char *msg = NULL;
	trace_start(t, view, max, &msg);
	return msg;
}

char *trace_control(struct trace *t, const char *args)
{
	if (!t)
		return answer("error: tracing is not available in this gateway%s\n", "");
	while (*args == ' ')
		args++;
	char *copy = strdup(args);
	char *msg = NULL;
	if (!copy)
		return NULL;
	if (strncmp(copy, "start", 5) == 0 && (copy[5] == ' ' || !copy[5])) {
		msg = trace_start_cmd(t, copy + 5);
	} else if (strcmp(copy, "stop") == 0) {
		trace_stop(t, &msg);
	} else if (strcmp(copy, "status") == 0) {
		msg = trace_status(t);
	} else {
		msg = answer("error: trace: unknown action \"%s\" (start [--view V] "
			     "[--max-bytes N], stop, status)\n", copy);
	}
	free(copy);
	return msg;
}
