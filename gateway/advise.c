/* advise.c — see advise.h: loading and merging traces, the rule, the sweep.
 * The report is advise_report.c, which advise_run() calls. */
#include "gateway/advise_int.h"

#include "common/trace.h"
#include "common/hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------- small hash maps ---------- */

/* u64 key (never UINT64_MAX) -> u64 value, linear probing. */
struct u64map {
	uint64_t *keys, *vals;
	size_t cap, n;
};

#define MAP_EMPTY UINT64_MAX

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static void u64map_release(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}

static size_t u64map_slot(const struct u64map *m, uint64_t k)
{
	size_t i = (size_t)mix64(k) & (m->cap - 1);
	while (m->keys[i] != MAP_EMPTY && m->keys[i] != k)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static uint64_t *u64map_get(const struct u64map *m, uint64_t k)
{
	if (!m->cap)
		return NULL;
	size_t i = u64map_slot(m, k);
	return m->keys[i] == k ? &m->vals[i] : NULL;
}

static int u64map_put(struct u64map *m, uint64_t k, uint64_t v)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct u64map g = { .cap = m->cap ? m->cap * 2 : 1024 };
		g.keys = malloc(g.cap * sizeof *g.keys);
		g.vals = malloc(g.cap * sizeof *g.vals);
		if (!g.keys || !g.vals) {
			u64map_release(&g);
			return -ENOMEM;
		}
		memset(g.keys, 0xff, g.cap * sizeof *g.keys);
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i] != MAP_EMPTY) {
				size_t j = u64map_slot(&g, m->keys[i]);
				g.keys[j] = m->keys[i];
				g.vals[j] = m->vals[i];
			}
		g.n = m->n;
		u64map_release(m);
		*m = g;
	}
	size_t i = u64map_slot(m, k);
	if (m->keys[i] == MAP_EMPTY)
		m->n++;
	m->keys[i] = k;
	m->vals[i] = v;
	return 0;
}

/* ---------- loading ---------- */

struct commit {
	int64_t t;
	uint32_t file, proc;
	uint8_t close;
};

struct event {
	int64_t t;
	uint32_t file;
	uint16_t trace;
};

struct fhinfo {
	int64_t to;
	uint64_t last_end;
	uint32_t file;
};

struct loader {
	struct advise_state *s;
	struct u64map names;       /* name hash -> chain head (file id + 1 in a list) */
	uint32_t *name_next;       /* per file: next file with the same hash (+1) */
	struct u64map viewmap, procmap;
	struct acc *accs;
	size_t naccs, capaccs;
	struct commit *commits;
	size_t ncommits, capcommits;
	struct event *events;
	size_t nevents, capevents;
	struct fhinfo *fhs;
	size_t nfhs, capfhs;
};

#define GROW(arr, n, cap)                                                        \
	((n) < (cap) ? 0 : grow_array((void **)&(arr), &(cap), sizeof *(arr)))

static int grow_array(void **arr, size_t *cap, size_t elem)
{
	size_t nc = *cap ? *cap * 2 : 256;
	void *p = realloc(*arr, nc * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

static int view_intern(struct loader *l, const char *name, size_t n, uint32_t *out)
{
	struct advise_state *s = l->s;
	uint64_t h = hash_fnv_bytes(HASH_FNV_SEED, name, n);
	for (uint64_t *v = u64map_get(&l->viewmap, h); v; v = NULL) {
		/* one view per hash: view names are few; a collision is compared */
		if (strlen(s->views[*v].name) == n && memcmp(s->views[*v].name, name, n) == 0) {
			*out = (uint32_t)*v;
			return 0;
		}
	}
	for (size_t i = 0; i < s->nviews; i++)    /* a hash collision: search */
		if (strlen(s->views[i].name) == n && memcmp(s->views[i].name, name, n) == 0) {
			*out = (uint32_t)i;
			return 0;
		}
	if (GROW(s->views, s->nviews, s->capviews) < 0)
		return -ENOMEM;
	struct aview *v = &s->views[s->nviews];
	memset(v, 0, sizeof *v);
	if (!(v->name = strndup(name, n)))
		return -ENOMEM;
	if (!u64map_get(&l->viewmap, h) && u64map_put(&l->viewmap, h, s->nviews) < 0)
		return -ENOMEM;
	*out = (uint32_t)s->nviews++;
	return 0;
}

/* The file id of name (n bytes), made on first sight. */
static int file_intern(struct loader *l, const char *name, size_t n, uint32_t *out)
{
	struct advise_state *s = l->s;
	uint64_t h = hash_fnv_bytes(HASH_FNV_SEED, name, n);
	uint64_t *head = u64map_get(&l->names, h);
	for (uint64_t id = head ? *head : 0; id; id = l->name_next[id - 1]) {
		const char *fn = s->files[id - 1].name;
		if (strncmp(fn, name, n) == 0 && fn[n] == '\0') {
			*out = (uint32_t)(id - 1);
			return 0;
		}
	}
	size_t cap = s->capfiles;
	if (GROW(s->files, s->nfiles, s->capfiles) < 0)
		return -ENOMEM;
	if (cap != s->capfiles) {
		uint32_t *nn = realloc(l->name_next, s->capfiles * sizeof *nn);
		if (!nn)
			return -ENOMEM;
		l->name_next = nn;
	}
	struct afile *f = &s->files[s->nfiles];
	memset(f, 0, sizeof *f);
	f->pat.min_size = UINT64_MAX;
	if (!(f->name = strndup(name, n)))
		return -ENOMEM;
	const char *slash = memchr(name, '/', n);
	int rc = view_intern(l, name, slash ? (size_t)(slash - name) : n, &f->view);
	if (rc < 0)
		return rc;
	l->name_next[s->nfiles] = head ? (uint32_t)*head : 0;
	if (u64map_put(&l->names, h, s->nfiles + 1) < 0)
		return -ENOMEM;
	*out = (uint32_t)s->nfiles++;
	return 0;
}

static int proc_intern(struct loader *l, uint16_t trace, uint32_t pid, uint32_t *out)
{
	struct advise_state *s = l->s;
	uint64_t key = ((uint64_t)trace << 32) | pid;
	uint64_t *v = u64map_get(&l->procmap, key);
	if (v) {
		*out = (uint32_t)*v;
		return 0;
	}
	if (GROW(s->procs, s->nprocs, s->capprocs) < 0 ||
	    u64map_put(&l->procmap, key, s->nprocs) < 0)
		return -ENOMEM;
	s->procs[s->nprocs] = (struct aproc){ .pid = pid, .trace = trace };
	*out = (uint32_t)s->nprocs++;
	return 0;
}

static void pattern_add(struct pattern *p, bool write, uint64_t size, bool seq, uint64_t end)
{
	if (write) {
		p->writes++;
		p->wbytes += size;
		p->seq_writes += seq;
	} else {
		p->reads++;
		p->rbytes += size;
		p->seq_reads += seq;
	}
	if (size < p->min_size)
		p->min_size = size;
	if (size > p->max_size)
		p->max_size = size;
	if (end > p->max_end)
		p->max_end = end;
}

/* One record of trace ti at aligned time t. */
static int load_rec(struct loader *l, uint16_t ti, struct u64map *fhmap,
		    const struct trace_rec *r, const char *name, int64_t t)
{
	struct advise_state *s = l->s;
	uint32_t file, proc;
	uint64_t *fv;
	int rc = 0;
	size_t nlen = strnlen(name, r->name_len);   /* rename: the old name */
	switch (r->op) {
	case TRACE_OPEN:
	case TRACE_CREATE:
		if (r->result < 0 || !nlen)
			return 0;
		if ((rc = file_intern(l, name, nlen, &file)) < 0 ||
		    GROW(l->fhs, l->nfhs, l->capfhs) < 0)
			return rc < 0 ? rc : -ENOMEM;
		l->fhs[l->nfhs] = (struct fhinfo){ .to = t, .last_end = UINT64_MAX, .file = file };
		return u64map_put(fhmap, r->fh, l->nfhs++);
	case TRACE_READ:
	case TRACE_WRITE: {
		if (r->result <= 0)
			return 0;
		if (!(fv = u64map_get(fhmap, r->fh))) {
			s->traces[ti].skipped++;
			return 0;
		}
		struct fhinfo *h = &l->fhs[*fv];
		if ((rc = proc_intern(l, ti, r->pid, &proc)) < 0 ||
		    GROW(l->accs, l->naccs, l->capaccs) < 0)
			return rc < 0 ? rc : -ENOMEM;
		bool w = r->op == TRACE_WRITE;
		uint64_t end = r->off + (uint64_t)r->result;
		l->accs[l->naccs] = (struct acc){ .t = t, .to = h->to, .tcommit = T_NONE,
			.tclose = T_NONE, .start = r->off, .end = end, .file = h->file,
			.proc = proc, .seq = (uint32_t)l->naccs, .trace = ti, .write = w };
		l->naccs++;
		pattern_add(&s->files[h->file].pat, w, (uint64_t)r->result, r->off == h->last_end, end);
		h->last_end = end;
		return 0;
	}
	case TRACE_FSYNC:
	case TRACE_FLUSH:
		if (!(fv = u64map_get(fhmap, r->fh)))
			return 0;
		if ((rc = proc_intern(l, ti, r->pid, &proc)) < 0 ||
		    GROW(l->commits, l->ncommits, l->capcommits) < 0)
			return rc < 0 ? rc : -ENOMEM;
		l->commits[l->ncommits++] = (struct commit){ .t = t, .file = l->fhs[*fv].file,
			.proc = proc, .close = r->op == TRACE_FLUSH };
		return 0;
	case TRACE_EVENT:
		if (!nlen)
			return 0;
		if ((rc = file_intern(l, name, nlen, &file)) < 0 ||
		    GROW(l->events, l->nevents, l->capevents) < 0)
			return rc < 0 ? rc : -ENOMEM;
		l->events[l->nevents++] = (struct event){ .t = t, .file = file, .trace = ti };
		s->events++;
		return 0;
	case TRACE_RENAME: s->renames++; return 0;
	case TRACE_UNLINK: s->unlinks++; return 0;
	case TRACE_TRUNCATE: s->truncates++; return 0;
	default: return 0;
	}
}

static int load_traces(struct loader *l, const char *const *paths, size_t n)
{
	struct advise_state *s = l->s;
	struct trace_file *tf = calloc(n, sizeof *tf);
	int rc = 0;
	if (!tf)
		return -ENOMEM;
	size_t opened = 0;
	for (; opened < n; opened++) {
		const char *why = NULL;
		if ((rc = trace_file_open(paths[opened], &tf[opened], &why)) < 0) {
			fprintf(stderr, "facetfs advise: %s: %s\n", paths[opened],
				why ? why : strerror(-rc));
			goto out;
		}
	}
	/* At most one access per record: reserve them at once (untouched
	 * pages cost nothing), so the array is never copied while it grows. */
	size_t most = 0;
	for (size_t i = 0; i < n; i++)
		most += tf[i].size / sizeof(struct trace_rec);
	if (most > l->capaccs) {
		struct acc *a = realloc(l->accs, most * sizeof *a);
		if (a) {
			l->accs = a;
			l->capaccs = most;
		}
	}
	/* Time 0 is the earliest wall-clock anchor. */
	s->base_wall_ns = INT64_MAX;
	for (size_t i = 0; i < n; i++)
		if (tf[i].h.wall_ns < s->base_wall_ns)
			s->base_wall_ns = tf[i].h.wall_ns;
	for (size_t i = 0; i < n; i++) {
		struct atrace *at = &s->traces[i];
		at->path = paths[i];
		memcpy(at->source, tf[i].h.source, sizeof at->source);
		at->source[sizeof at->source - 1] = '\0';
		at->offset_ns = (tf[i].h.wall_ns - s->base_wall_ns) - tf[i].h.mono_ns;
		at->anchor_err_ns = tf[i].h.anchor_err_ns;
		at->anchor_ns = tf[i].h.wall_ns - s->base_wall_ns;
		struct u64map fhmap = { 0 };
		size_t pos = 0;
		const char *name;
		const struct trace_rec *r;
		while ((r = trace_file_next(&tf[i], &pos, &name))) {
			at->records++;
			if ((rc = load_rec(l, (uint16_t)i, &fhmap, r, name, r->t + at->offset_ns)) < 0)
				break;
		}
		s->records += at->records;
		u64map_release(&fhmap);
		if (rc < 0)
			goto out;
	}
out:
	for (size_t i = 0; i < opened; i++)
		trace_file_close(&tf[i]);
	free(tf);
	return rc;
}

/* ---------- tcommit, tclose ---------- */

static int cmp_commit(const void *x, const void *y)
{
	const struct commit *a = x, *b = y;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->proc != b->proc)
		return a->proc < b->proc ? -1 : 1;
	return (a->t > b->t) - (a->t < b->t);
}

static int cmp_acc_proc(const void *x, const void *y)
{
	const struct acc *a = x, *b = y;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->proc != b->proc)
		return a->proc < b->proc ? -1 : 1;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Walk accesses and commits, both sorted by (file, proc, t). */
static void commits_assign(struct loader *l)
{
	qsort(l->commits, l->ncommits, sizeof *l->commits, cmp_commit);
	qsort(l->accs, l->naccs, sizeof *l->accs, cmp_acc_proc);
	size_t c = 0;
	for (size_t i = 0; i < l->naccs; i++) {
		struct acc *a = &l->accs[i];
		while (c < l->ncommits && (l->commits[c].file < a->file ||
		       (l->commits[c].file == a->file && l->commits[c].proc < a->proc)))
			c++;
		/* commits of (file, proc) from c on; skip those at or before t */
		size_t k = c;
		while (k < l->ncommits && l->commits[k].file == a->file &&
		       l->commits[k].proc == a->proc && l->commits[k].t <= a->t)
			k++;
		c = k;   /* later accesses of the group are no earlier */
		for (; k < l->ncommits && l->commits[k].file == a->file &&
		       l->commits[k].proc == a->proc; k++) {
			if (a->tcommit == T_NONE)
				a->tcommit = l->commits[k].t;
			if (l->commits[k].close) {
				a->tclose = l->commits[k].t;
				break;
			}
		}
	}
}

/* ---------- events ---------- */

static int cmp_event(const void *x, const void *y)
{
	const struct event *a = x, *b = y;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->trace != b->trace)
		return a->trace < b->trace ? -1 : 1;
	return (a->t > b->t) - (a->t < b->t);
}

/* The first event on file applied by trace's gateway after t, or T_NONE. */
static int64_t event_after(const struct loader *l, uint32_t file, uint16_t trace, int64_t t)
{
	size_t lo = 0, hi = l->nevents;
	struct event key = { .t = t, .file = file, .trace = trace };
	while (lo < hi) {    /* first event > key */
		size_t mid = lo + (hi - lo) / 2;
		if (cmp_event(&l->events[mid], &key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < l->nevents && l->events[lo].file == file && l->events[lo].trace == trace)
		return l->events[lo].t;
	return T_NONE;
}

/* ---------- the sweep ---------- */

static int cmp_acc_start(const void *x, const void *y)
{
	const struct acc *a = x, *b = y;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

static void example_keep(struct afile *f, unsigned cls, unsigned max,
			 const struct acc *a, const struct acc *b, int64_t te, unsigned rank)
{
	unsigned n = f->nex[cls];
	struct example *ex = f->ex[cls];
	/* sorted by rank (high first), then by the second access's time */
	unsigned at = n;
	while (at > 0 && (ex[at - 1].rank < rank ||
			  (ex[at - 1].rank == rank && ex[at - 1].b.t > b->t)))
		at--;
	if (at >= max)
		return;
	if (n == max)
		n--;
	memmove(&ex[at + 1], &ex[at], (n - at) * sizeof *ex);
	ex[at] = (struct example){ .a = *a, .b = *b, .te = te, .rank = rank };
	f->nex[cls] = n + 1;
}

/* x and y overlap: a pair when the earlier one is a write. */
static void pair_check(struct loader *l, const struct acc *x, const struct acc *y)
{
	struct advise_state *s = l->s;
	const struct acc *a = x, *b = y;
	if (y->t < x->t || (y->t == x->t && y->seq < x->seq)) {
		a = y;
		b = x;
	}
	if (!a->write)
		return;
	bool distinct = a->proc != b->proc;
	unsigned cls = (b->write ? CLS_WAW_S : CLS_RAW_S) + distinct;
	struct counts *c = &s->files[a->file].c;
	c->pairs[cls]++;
	bool commit = a->tcommit > b->t;
	bool session = !(a->tclose < b->to);
	int64_t te = T_NONE;
	bool eventual = session;
	if (!session) {
		te = a->trace == b->trace ? a->tclose : event_after(l, a->file, b->trace, a->tclose);
		eventual = !(te < b->to);
	}
	c->conflicts[cls][POL_COMMIT] += commit;
	c->conflicts[cls][POL_SESSION] += session;
	c->conflicts[cls][POL_EVENTUAL] += eventual;
	if (a->trace != b->trace && !eventual) {
		int64_t gap = b->to - a->tclose;
		if (!c->wb_pairs || gap < c->wb_gap)
			c->wb_gap = gap;
		c->wb_pairs++;
	}
	if (distinct && a->trace != b->trace && b->t - a->t < (int64_t)(s->o->skew_ms * 1e6))
		c->uncertain++;
	unsigned rank = commit ? 3 : session ? 2 : eventual ? 1 : 0;
	if (rank)
		example_keep(&s->files[a->file], cls, s->o->examples, a, b, te, rank);
}

/* Remove what ended at or before start from list; pair the rest with b. */
static size_t active_scan(struct loader *l, uint32_t *list, size_t n, const struct acc *b)
{
	size_t kept = 0;
	for (size_t i = 0; i < n; i++) {
		const struct acc *a = &l->accs[list[i]];
		if (a->end <= b->start)
			continue;
		list[kept++] = list[i];
		pair_check(l, a, b);
	}
	return kept;
}

static int sweep(struct loader *l)
{
	qsort(l->accs, l->naccs, sizeof *l->accs, cmp_acc_start);
	qsort(l->events, l->nevents, sizeof *l->events, cmp_event);
	uint32_t *w = NULL, *r = NULL;
	size_t nw = 0, nr = 0, capw = 0, capr = 0;
	uint32_t cur = UINT32_MAX;
	for (size_t i = 0; i < l->naccs; i++) {
		const struct acc *b = &l->accs[i];
		if (b->file != cur) {
			cur = b->file;
			nw = nr = 0;
		}
		nw = active_scan(l, w, nw, b);
		if (b->write)
			nr = active_scan(l, r, nr, b);
		if (b->write ? GROW(w, nw, capw) < 0 : GROW(r, nr, capr) < 0) {
			free(w);
			free(r);
			return -ENOMEM;
		}
		if (b->write)
			w[nw++] = (uint32_t)i;
		else
			r[nr++] = (uint32_t)i;
	}
	free(w);
	free(r);
	return 0;
}

static void counts_add(struct counts *to, const struct counts *c)
{
	for (unsigned k = 0; k < CLS_N; k++) {
		to->pairs[k] += c->pairs[k];
		for (unsigned p = 0; p < POL_N; p++)
			to->conflicts[k][p] += c->conflicts[k][p];
	}
	to->uncertain += c->uncertain;
	if (c->wb_pairs && (!to->wb_pairs || c->wb_gap < to->wb_gap))
		to->wb_gap = c->wb_gap;
	to->wb_pairs += c->wb_pairs;
}

static void pattern_sum(struct pattern *to, const struct pattern *p)
{
	to->reads += p->reads;
	to->writes += p->writes;
	to->rbytes += p->rbytes;
	to->wbytes += p->wbytes;
	to->seq_reads += p->seq_reads;
	to->seq_writes += p->seq_writes;
	if (p->min_size < to->min_size)
		to->min_size = p->min_size;
	if (p->max_size > to->max_size)
		to->max_size = p->max_size;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int advise_run(const char *const *paths, size_t n, const struct advise_opts *o, FILE *out)
{
	double t0 = now_s();
	struct advise_opts opts = *o;
	if (!opts.examples)
		opts.examples = 3;
	if (opts.examples > EXAMPLES_MAX)
		opts.examples = EXAMPLES_MAX;
	struct advise_state s = { .o = &opts, .ntraces = n };
	struct loader l = { .s = &s };
	int rc = -ENOMEM;
	if (n > UINT16_MAX) {
		fprintf(stderr, "facetfs advise: at most %u traces\n", UINT16_MAX);
		return -EINVAL;
	}
	if (!(s.traces = calloc(n, sizeof *s.traces)))
		goto out;
	if ((rc = load_traces(&l, paths, n)) < 0)
		goto out;
	double t1 = now_s();
	commits_assign(&l);
	if ((rc = sweep(&l)) < 0)
		goto out;
	s.naccs = l.naccs;
	for (size_t v = 0; v < s.nviews; v++)
		s.views[v].pat.min_size = UINT64_MAX;
	for (size_t f = 0; f < s.nfiles; f++) {
		struct afile *af = &s.files[f];
		if (!af->pat.reads && !af->pat.writes)
			continue;
		counts_add(&s.views[af->view].c, &af->c);
		pattern_sum(&s.views[af->view].pat, &af->pat);
		s.views[af->view].files++;
		counts_add(&s.total, &af->c);
	}
	s.elapsed_s = now_s() - t0;
	if (!opts.quiet_time)
		fprintf(stderr, "facetfs advise: %llu records, %zu accesses in %.2f s "
			"(load %.2f s, rule and sweep %.2f s)\n", (unsigned long long)s.records,
			s.naccs, s.elapsed_s, t1 - t0, s.elapsed_s - (t1 - t0));
	if (opts.json) {
		rc = advise_report_json(&s, out);
	} else {
		advise_report_text(&s, out);
		rc = 0;
	}
out:
	if (rc == -ENOMEM)
		fprintf(stderr, "facetfs advise: out of memory\n");
	for (size_t f = 0; f < s.nfiles; f++)
		free(s.files[f].name);
	for (size_t v = 0; v < s.nviews; v++)
		free(s.views[v].name);
	free(s.files);
	free(s.views);
	free(s.procs);
	free(s.traces);
	free(l.accs);
	free(l.commits);
	free(l.events);
	free(l.fhs);
	free(l.name_next);
	u64map_release(&l.names);
	u64map_release(&l.viewmap);
	u64map_release(&l.procmap);
	return rc;
}
