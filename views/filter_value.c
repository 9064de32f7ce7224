/*
 * filter_value.c — the text forms of filter values: sizes ("10GiB", "1.5 MB",
 * "4096"; KB..TB are powers of 1000, KiB..TiB of 1024, units in any case,
 * the result must be a whole number of bytes) and UTC times ("2026-01-01",
 * "2026-01-01T00:00:00Z", with up to 9 fraction digits), both ways.
 * Pure functions: no state, any thread.
 */
#include "views/filter_int.h"

#include <errno.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct unit { const char *name; uint64_t mult; };
static const struct unit units[] = {
	{ "B", 1 },
	{ "KB", 1000ull }, { "MB", 1000000ull }, { "GB", 1000000000ull },
	{ "TB", 1000000000000ull },
	{ "KiB", 1ull << 10 }, { "MiB", 1ull << 20 }, { "GiB", 1ull << 30 },
	{ "TiB", 1ull << 40 },
};

int fl_size_parse(const char *s, uint64_t *out, char *why, size_t whylen)
{
	const char *p = s;
	while (*p == ' ')
		p++;
	if (*p == '-') {
		snprintf(why, whylen, "negative size");
		return -1;
	}
	uint64_t ip = 0, frac = 0, fscale = 1;
	bool digits = false, over = false;
	for (; isdigit((unsigned char)*p); p++, digits = true) {
		if (ip > (UINT64_MAX - 9) / 10)
			over = true;
		else
			ip = ip * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		p++;
		for (; isdigit((unsigned char)*p); p++, digits = true) {
			if (fscale >= 100000000000000000ull)
				continue; /* beyond 1e-17: cannot change a whole result */
			frac = frac * 10 + (uint64_t)(*p - '0');
			fscale *= 10;
		}
	}
	if (!digits) {
		snprintf(why, whylen, "bad size \"%s\" (want bytes, or a number with a unit like \"10GiB\")", s);
		return -1;
	}
	while (*p == ' ')
		p++;
	uint64_t mult = 1;
	if (*p) {
		const char *u = p;
		while (*p && *p != ' ')
			p++;
		size_t ul = (size_t)(p - u);
		while (*p == ' ')
			p++;
		bool found = false;
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
			if (strlen(units[i].name) == ul && !strncasecmp(units[i].name, u, ul)) {
				mult = units[i].mult;
				found = true;
			}
		}
		if (!found || *p) {
			snprintf(why, whylen, "unknown unit \"%.*s\"", (int)(found ? strlen(u) : ul), u);
			return -1;
		}
	}
	/* value = ip * mult + frac * mult / fscale, exactly */
	unsigned __int128 whole = (unsigned __int128)ip * mult;
	unsigned __int128 fpart = (unsigned __int128)frac * mult;
	if (fpart % fscale) {
		snprintf(why, whylen, "not a whole number of bytes");
		return -1;
	}
	whole += fpart / fscale;
	if (over || whole > UINT64_MAX) {
		snprintf(why, whylen, "size too large");
		return -1;
	}
	*out = (uint64_t)whole;
	return 0;
}

/* ---- times ---- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static bool leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int num(const char **p, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (!isdigit((unsigned char)**p))
			return -1;
		v = v * 10 + (**p - '0');
	}
	return v;
}

/* "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM:SS[.fffffffff]Z" -> ns since the epoch. */
int fl_time_parse(const char *s, int64_t *out)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	const char *p = s;
	int y = num(&p, 4);
	if (y < 1970 || *p++ != '-')
		return -1;
	int mo = num(&p, 2);
	if (mo < 1 || mo > 12 || *p++ != '-')
		return -1;
	int d = num(&p, 2);
	if (d < 1 || d > mdays[mo - 1] + (mo == 2 && leap(y)))
		return -1;
	int h = 0, mi = 0, se = 0;
	int64_t ns = 0;
	if (*p) {
		if (*p++ != 'T')
			return -1;
		h = num(&p, 2);
		if (h < 0 || h > 23 || *p++ != ':')
			return -1;
		mi = num(&p, 2);
		if (mi < 0 || mi > 59 || *p++ != ':')
			return -1;
		se = num(&p, 2);
		if (se < 0 || se > 59)
			return -1;
		if (*p == '.') {
			p++;
			int nd = 0;
			while (isdigit((unsigned char)*p)) {
				if (++nd > 9)
					return -1;
				ns = ns * 10 + (*p++ - '0');
			}
			if (!nd)
				return -1;
			for (; nd < 9; nd++)
				ns *= 10;
		}
		if (*p++ != 'Z' || *p)
			return -1;
	}
	int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
	int64_t secs = days * 86400 + h * 3600 + mi * 60 + se;
	if (secs > INT64_MAX / 1000000000 - 1)
		return -1;
	*out = secs * 1000000000 + ns;
	return 0;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

void fl_time_format(int64_t ns, char *buf, size_t len)
{
	int64_t secs = ns / 1000000000, frac = ns % 1000000000;
	if (frac < 0) {
		frac += 1000000000;
		secs--;
	}
	int64_t days = secs / 86400, rem = secs % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	int64_t y;
	unsigned m, d;
	civil_from_days(days, &y, &m, &d);
	int n = snprintf(buf, len, "%04lld-%02u-%02uT%02d:%02d:%02d", (long long)y, m, d,
			 (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60));
	if (n < 0 || (size_t)n >= len)
		return;
	if (frac) {
		char f[16];
		snprintf(f, sizeof f, "%09lld", (long long)frac);
		for (int i = 8; i > 0 && f[i] == '0'; i--)
			f[i] = '\0';
		snprintf(buf + n, len - (size_t)n, ".%sZ", f);
	} else {
		snprintf(buf + n, len - (size_t)n, "Z");
	}
}


int view_size_parse(const char *text, uint64_t *out, char *why, size_t whylen)
{
	char tmp[8];
	return fl_size_parse(text, out, why ? why : tmp, why ? whylen : sizeof tmp) < 0
		       ? -EINVAL : 0;
}
