/* advise_report.c — the advisor's report, as text for people and as JSON
 * for tools (see advise.h for what the numbers mean). */
#include "gateway/advise_int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---------- the policy ladder (weakest first) ---------- */

static const char *const policy_names[POL_N] = {
	[POL_EVENTUAL] = "eventual", [POL_SESSION] = "session", [POL_COMMIT] = "commit",
};
static const char *const class_names[CLS_N] = {
	[CLS_RAW_S] = "RAW-S", [CLS_RAW_D] = "RAW-D", [CLS_WAW_S] = "WAW-S", [CLS_WAW_D] = "WAW-D",
};

static const char *advise_policy_name(unsigned pol)
{
	return pol < POL_N ? policy_names[pol] : "none";
}

static const char *advise_class_name(unsigned cls)
{
	return cls < CLS_N ? class_names[cls] : "?";
}

/* The weakest policy with no D conflict, or POL_NONE. */
static unsigned advise_verdict(const struct counts *c)
{
	for (unsigned p = 0; p < POL_N; p++)
		if (c->conflicts[CLS_RAW_D][p] + c->conflicts[CLS_WAW_D][p] == 0)
			return p;
	return POL_NONE;
}

/* ---------- the report ---------- */

static uint64_t d_conflicts(const struct counts *c, unsigned pol)
{
	return c->conflicts[CLS_RAW_D][pol] + c->conflicts[CLS_WAW_D][pol];
}

/* Files in report order: worst verdict, most D conflicts, most accesses. */
static int cmp_file(const void *x, const void *y, void *ctx)
{
	const struct advise_state *s = ctx;
	const struct afile *a = &s->files[*(const uint32_t *)x];
	const struct afile *b = &s->files[*(const uint32_t *)y];
	unsigned va = advise_verdict(&a->c), vb = advise_verdict(&b->c);
	if (va != vb)
		return va > vb ? -1 : 1;
	uint64_t da = d_conflicts(&a->c, POL_EVENTUAL), db = d_conflicts(&b->c, POL_EVENTUAL);
	if (da != db)
		return da > db ? -1 : 1;
	uint64_t na = a->pat.reads + a->pat.writes, nb = b->pat.reads + b->pat.writes;
	if (na != nb)
		return na > nb ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The files with accesses, in report order; *n of them. NULL: no memory. */
static uint32_t *files_order(const struct advise_state *s, size_t *n)
{
	uint32_t *ix = malloc((s->nfiles ? s->nfiles : 1) * sizeof *ix);
	if (!ix)
		return NULL;
	*n = 0;
	for (size_t f = 0; f < s->nfiles; f++)
		if (s->files[f].pat.reads || s->files[f].pat.writes)
			ix[(*n)++] = (uint32_t)f;
	qsort_r(ix, *n, sizeof *ix, cmp_file, (void *)s);
	return ix;
}

static const char *pattern_hint(const struct pattern *p)
{
	if (!p->reads)
		return p->writes ? "writes only: the burst buffer stages them; reads do not matter here"
				 : "no data accesses";
	double seq = (double)p->seq_reads / (double)p->reads;
	if (seq >= 0.8)
		return "mostly sequential reads: read-ahead carries them; the burst buffer helps "
		       "only if they are read again";
	if (p->max_end && p->rbytes > p->max_end)
		return "random reads that come back to the same bytes: the burst buffer (hot "
		       "ranges) helps, and `session` costs no HEAD per read where `commit` does";
	return "random reads, each byte about once: the burst buffer will not help much";
}

static void size_text(char *buf, size_t n, uint64_t b)
{
	if (b >= (1u << 20) && b % (1u << 20) == 0)
		snprintf(buf, n, "%" PRIu64 " MiB", b >> 20);
	else if (b >= 1024 && b % 1024 == 0)
		snprintf(buf, n, "%" PRIu64 " KiB", b >> 10);
	else
		snprintf(buf, n, "%" PRIu64 " B", b);
}

static void proc_text(const struct advise_state *s, uint32_t proc, char *buf, size_t n)
{
	const struct aproc *p = &s->procs[proc];
	if (s->ntraces > 1)
		snprintf(buf, n, "process %u (%s)", p->pid, s->traces[p->trace].source);
	else
		snprintf(buf, n, "process %u", p->pid);
}

static double sec(int64_t t)
{
	return (double)t / 1e9;
}

static double ms(int64_t d)
{
	return (double)d / 1e6;
}

/* What happened and what would resolve it, one paragraph. */
static void example_text(const struct advise_state *s, const struct afile *f,
			 const struct example *e, FILE *out)
{
	char p1[96], p2[96];
	proc_text(s, e->a.proc, p1, sizeof p1);
	proc_text(s, e->b.proc, p2, sizeof p2);
	const char *verb = e->b.write ? "wrote" : "read";
	fprintf(out, "      at +%.6f s %s wrote %s [%" PRIu64 ", %" PRIu64 ") and %s %s "
		"[%" PRIu64 ", %" PRIu64 ") %.3f ms later (its descriptor opened at +%.6f s)",
		sec(e->a.t), p1, f->name, e->a.start, e->a.end, p2, verb, e->b.start, e->b.end,
		ms(e->b.t - e->a.t), sec(e->b.to));
	if (e->a.proc == e->b.proc) {
		fprintf(out, ":\n        the same process: the gateway gives it its own writes "
			"under every policy.\n");
		return;
	}
	if (e->rank == 3) {
		fprintf(out, ":\n        no fsync or close by %s in between: no policy makes this "
			"safe; an fsync by %s after the write makes `commit` sufficient, a close "
			"before %s opens makes `session` sufficient.\n", p1, p1, p2);
	} else if (e->rank == 2) {
		fprintf(out, ":\n        %s committed at +%.6f s but ", p1, sec(e->a.tcommit));
		if (e->a.tclose == T_NONE)
			fprintf(out, "never closed it");
		else
			fprintf(out, "closed it only at +%.6f s", sec(e->a.tclose));
		fprintf(out, ", after %s opened: `commit` suffices; for `session`, %s must close "
			"before %s opens (or %s opens again after the close).\n", p2, p1, p2, p2);
	} else {
		fprintf(out, ":\n        %s closed at +%.6f s, before %s opened, but ", p1,
			sec(e->a.tclose), p2);
		if (e->te == T_NONE)
			fprintf(out, "no event of that change was applied on %s's gateway",
				p2);
		else
			fprintf(out, "its event was applied on %s's gateway only at +%.6f s", p2,
				sec(e->te));
		fprintf(out, ": `session` suffices; `eventual` needs the open after the event "
			"is applied.\n");
	}
}

static void counts_text(const struct counts *c, const char *indent, FILE *out)
{
	for (unsigned k = 0; k < CLS_N; k++) {
		if (!c->pairs[k])
			continue;
		fprintf(out, "%s%s %" PRIu64 " pairs; conflicts under", indent,
			advise_class_name(k), c->pairs[k]);
		for (unsigned p = 0; p < POL_N; p++)
			fprintf(out, " %s %" PRIu64 "%s", advise_policy_name(p), c->conflicts[k][p],
				p + 1 < POL_N ? "," : "");
		fprintf(out, "%s\n", k == CLS_RAW_S || k == CLS_WAW_S ?
			" (same process: read-your-writes)" : "");
	}
}

static void verdict_text(const struct counts *c, FILE *out)
{
	unsigned v = advise_verdict(c);
	if (v == POL_NONE)
		fprintf(out, "no policy suffices: even under `commit` %" PRIu64 " distinct-process "
			"pairs read or overwrite data that was never committed first "
			"(concurrent unsynchronised writers or readers)", d_conflicts(c, POL_COMMIT));
	else if (!c->pairs[CLS_RAW_D] && !c->pairs[CLS_WAW_D])
		fprintf(out, "`%s` (no distinct-process overlaps: the weakest policy)",
			advise_policy_name(v));
	else
		fprintf(out, "`%s` is the weakest policy with no distinct-process conflict",
			advise_policy_name(v));
	if (v != POL_EVENTUAL)
		return;
	if (!c->wb_pairs)
		fprintf(out, "; `write_back` too (nothing written is read or written on "
			"another gateway)");
	else
		fprintf(out, "; `write_back` too if each file is drained, and its event "
			"applied, within %.3f ms of its close (the tightest of %" PRIu64
			" accesses on another gateway)", ms(c->wb_gap), c->wb_pairs);
}

static void pattern_text(const struct pattern *p, FILE *out)
{
	char mn[32], mx[32];
	size_text(mn, sizeof mn, p->min_size == UINT64_MAX ? 0 : p->min_size);
	size_text(mx, sizeof mx, p->max_size);
	fprintf(out, "reads %" PRIu64 " (%.0f%% sequential, %" PRIu64 " bytes), writes %" PRIu64
		" (%.0f%% sequential, %" PRIu64 " bytes), sizes %s..%s\n", p->reads,
		p->reads ? 100.0 * (double)p->seq_reads / (double)p->reads : 0.0, p->rbytes,
		p->writes, p->writes ? 100.0 * (double)p->seq_writes / (double)p->writes : 0.0,
		p->wbytes, mn, mx);
}

void advise_report_text(const struct advise_state *s, FILE *out)
{
	fprintf(out, "facetfs advise: %zu trace(s), %" PRIu64 " records, %zu reads and writes "
		"on %zu file(s) in %zu view(s), %zu process(es)\n", s->ntraces, s->records,
		s->naccs, s->nfiles, s->nviews, s->nprocs);
	int64_t err = 0;
	for (size_t i = 0; i < s->ntraces; i++) {
		const struct atrace *t = &s->traces[i];
		fprintf(out, "  trace %zu: %s (gateway %s): %" PRIu64 " records, anchor +%.6f s "
			"(+-%.3f us)", i, t->path, t->source, t->records,
			sec(t->anchor_ns), ms(t->anchor_err_ns) * 1000);
		if (t->skipped)
			fprintf(out, ", %" PRIu64 " accesses on descriptors opened before the "
				"trace began (left out)", t->skipped);
		fprintf(out, "\n");
		err = t->anchor_err_ns > err ? t->anchor_err_ns : err;
	}
	fprintf(out, "  times: seconds after the earliest anchor. Alignment by wall-clock "
		"anchors: within one host +-%.3f us; across hosts add their clock offset "
		"(assumed %.3f ms, --skew-ms): %" PRIu64 " distinct-process pairs across traces are "
		"closer than that (uncertain order)\n", ms(2 * err) * 1000, s->o->skew_ms,
		s->total.uncertain);
	if (s->renames || s->unlinks || s->truncates || s->events)
		fprintf(out, "  also: %" PRIu64 " renames, %" PRIu64 " unlinks, %" PRIu64
			" truncates, %" PRIu64 " event applies\n", s->renames, s->unlinks,
			s->truncates, s->events);
	fprintf(out, "verdict: ");
	verdict_text(&s->total, out);
	fprintf(out, "\n");
	counts_text(&s->total, "  ", out);
	for (size_t v = 0; v < s->nviews; v++) {
		const struct aview *av = &s->views[v];
		if (!av->files)
			continue;
		fprintf(out, "\nview %s: ", av->name);
		verdict_text(&av->c, out);
		fprintf(out, "\n  %" PRIu64 " file(s); ", av->files);
		pattern_text(&av->pat, out);
		fprintf(out, "  access pattern: %s\n", pattern_hint(&av->pat));
		counts_text(&av->c, "  ", out);
	}
	size_t nf;
	uint32_t *order = files_order(s, &nf);
	if (!order)
		return;
	unsigned max = s->o->max_files ? s->o->max_files : 20;
	if (nf)
		fprintf(out, "\nfiles (%zu%s):\n", nf, nf > max ? ", the first ones" : "");
	for (size_t i = 0; i < nf && i < max; i++) {
		const struct afile *f = &s->files[order[i]];
		fprintf(out, "  %s: ", f->name);
		verdict_text(&f->c, out);
		fprintf(out, "\n    ");
		pattern_text(&f->pat, out);
		counts_text(&f->c, "    ", out);
		for (unsigned k = 0; k < CLS_N; k++)
			for (unsigned e = 0; e < f->nex[k]; e++) {
				if (e == 0)
					fprintf(out, "    %s, first pairs:\n", advise_class_name(k));
				example_text(s, f, &f->ex[k][e], out);
			}
	}
	free(order);
}

/* ---------- JSON ---------- */

static cJSON *counts_json(const struct counts *c)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "verdict", advise_policy_name(advise_verdict(c)));
	cJSON *cl = cJSON_AddObjectToObject(o, "classes");
	for (unsigned k = 0; k < CLS_N; k++) {
		cJSON *x = cJSON_AddObjectToObject(cl, advise_class_name(k));
		cJSON_AddNumberToObject(x, "pairs", (double)c->pairs[k]);
		cJSON *cf = cJSON_AddObjectToObject(x, "conflicts");
		for (unsigned p = 0; p < POL_N; p++)
			cJSON_AddNumberToObject(cf, advise_policy_name(p), (double)c->conflicts[k][p]);
	}
	cJSON_AddNumberToObject(o, "uncertain_pairs", (double)c->uncertain);
	cJSON *wb = cJSON_AddObjectToObject(o, "write_back");
	cJSON_AddNumberToObject(wb, "cross_gateway_pairs", (double)c->wb_pairs);
	if (c->wb_pairs)
		cJSON_AddNumberToObject(wb, "min_gap_ns", (double)c->wb_gap);
	else
		cJSON_AddNullToObject(wb, "min_gap_ns");
	return o;
}

static cJSON *pattern_json(const struct pattern *p)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "reads", (double)p->reads);
	cJSON_AddNumberToObject(o, "writes", (double)p->writes);
	cJSON_AddNumberToObject(o, "read_bytes", (double)p->rbytes);
	cJSON_AddNumberToObject(o, "write_bytes", (double)p->wbytes);
	cJSON_AddNumberToObject(o, "sequential_reads", (double)p->seq_reads);
	cJSON_AddNumberToObject(o, "sequential_writes", (double)p->seq_writes);
	cJSON_AddNumberToObject(o, "min_size", p->min_size == UINT64_MAX ? 0 : (double)p->min_size);
	cJSON_AddNumberToObject(o, "max_size", (double)p->max_size);
	cJSON_AddStringToObject(o, "hint", pattern_hint(p));
	return o;
}

static cJSON *acc_json(const struct advise_state *s, const struct acc *a)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "t", sec(a->t));
	cJSON_AddNumberToObject(o, "pid", s->procs[a->proc].pid);
	cJSON_AddNumberToObject(o, "trace", s->procs[a->proc].trace);
	cJSON_AddStringToObject(o, "type", a->write ? "write" : "read");
	cJSON_AddNumberToObject(o, "start", (double)a->start);
	cJSON_AddNumberToObject(o, "end", (double)a->end);
	cJSON_AddNumberToObject(o, "open", sec(a->to));
	if (a->tcommit != T_NONE)
		cJSON_AddNumberToObject(o, "commit", sec(a->tcommit));
	if (a->tclose != T_NONE)
		cJSON_AddNumberToObject(o, "close", sec(a->tclose));
	return o;
}

int advise_report_json(const struct advise_state *s, FILE *out)
{
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return -ENOMEM;
	cJSON_AddNumberToObject(root, "records", (double)s->records);
	cJSON_AddNumberToObject(root, "accesses", (double)s->naccs);
	cJSON_AddNumberToObject(root, "elapsed_s", s->elapsed_s);
	cJSON *pol = cJSON_AddArrayToObject(root, "policies");
	for (unsigned p = 0; p < POL_N; p++)
		cJSON_AddItemToArray(pol, cJSON_CreateString(advise_policy_name(p)));
	cJSON *tr = cJSON_AddArrayToObject(root, "traces");
	for (size_t i = 0; i < s->ntraces; i++) {
		cJSON *t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "path", s->traces[i].path);
		cJSON_AddStringToObject(t, "source", s->traces[i].source);
		cJSON_AddNumberToObject(t, "records", (double)s->traces[i].records);
		cJSON_AddNumberToObject(t, "anchor_s", sec(s->traces[i].anchor_ns));
		cJSON_AddNumberToObject(t, "anchor_err_ns", (double)s->traces[i].anchor_err_ns);
		cJSON_AddNumberToObject(t, "skipped_accesses", (double)s->traces[i].skipped);
		cJSON_AddItemToArray(tr, t);
	}
	cJSON_AddNumberToObject(root, "skew_ms", s->o->skew_ms);
	cJSON_AddItemToObject(root, "total", counts_json(&s->total));
	cJSON *views = cJSON_AddObjectToObject(root, "views");
	for (size_t v = 0; v < s->nviews; v++) {
		if (!s->views[v].files)
			continue;
		cJSON *vo = counts_json(&s->views[v].c);
		cJSON_AddNumberToObject(vo, "files", (double)s->views[v].files);
		cJSON_AddItemToObject(vo, "pattern", pattern_json(&s->views[v].pat));
		cJSON_AddItemToObject(views, s->views[v].name, vo);
	}
	size_t nf;
	uint32_t *order = files_order(s, &nf);
	cJSON *files = cJSON_AddObjectToObject(root, "files");
	for (size_t i = 0; order && i < nf; i++) {
		const struct afile *f = &s->files[order[i]];
		cJSON *fo = counts_json(&f->c);
		cJSON_AddItemToObject(fo, "pattern", pattern_json(&f->pat));
		cJSON *cl = cJSON_GetObjectItemCaseSensitive(fo, "classes");
		for (unsigned k = 0; k < CLS_N; k++) {
			cJSON *ex = cJSON_AddArrayToObject(
				cJSON_GetObjectItemCaseSensitive(cl, advise_class_name(k)), "examples");
			for (unsigned e = 0; e < f->nex[k]; e++) {
				cJSON *p = cJSON_CreateObject();
				cJSON_AddItemToObject(p, "first", acc_json(s, &f->ex[k][e].a));
				cJSON_AddItemToObject(p, "second", acc_json(s, &f->ex[k][e].b));
				cJSON_AddStringToObject(p, "weakest_safe",
					advise_policy_name(f->ex[k][e].rank == 3 ? POL_NONE :
					f->ex[k][e].rank == 2 ? POL_COMMIT : POL_SESSION));
				cJSON_AddItemToArray(ex, p);
			}
		}
		cJSON_AddItemToObject(files, f->name, fo);
	}
	free(order);
	char *text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	fprintf(out, "%s\n", text);
	free(text);
	return 0;
}
