/*
 * test_inode.c — fuse/inode.h against a model: lookups, forgets (in any
 * order, in any split of the counts), renames and unlinks in random
 * sequences. After every step each inode the model holds is in the table
 * with its path and kind, each name leads to the inode the model says,
 * and the count agrees; when every lookup is forgotten nothing is left
 * (count 0, the bytes of an empty table). Also: the bytes an inode held
 * costs, a name whose number a renamed inode keeps, and threads taking
 * and forgetting lookups of the same names at once.
 *
 *   test_inode [SEED [SEQUENCES [STEPS]]]
 */
#include "unit.h"

#include "fuse/inode.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>

static size_t resolve(const void *ctx, const char *name)
{
	(void)ctx;
	if (!strcmp(name, "a"))
		return 0;
	if (!strcmp(name, "b"))
		return 1;
	return INODE_NO_VIEW;
}

/* ---- the model ---- */

#define NAMES 24
#define MAXN 256

struct mnode {
	uint64_t ino;
	uint64_t nlookup;
	int view;                    /* 0 "a", 1 "b" */
	char path[32];
	bool is_dir;
	bool named;
};

struct model {
	struct mnode n[MAXN];
	size_t count;
};

static const char *vnames[] = { "a", "b" };

static void name_of(unsigned i, int *view, char *path, size_t len)
{
	*view = (int)(i % 2);
	unsigned k = i / 2;
	if (k == 0)
		snprintf(path, len, "%s", "");
	else if (k < 4)
		snprintf(path, len, "d%u", k);
	else
		snprintf(path, len, "d%u/f%u", k % 3 + 1, k);
}

static struct mnode *m_named(struct model *m, int view, const char *path)
{
	for (size_t i = 0; i < m->count; i++)
		if (m->n[i].named && m->n[i].view == view && !strcmp(m->n[i].path, path))
			return &m->n[i];
	return NULL;
}

static struct mnode *m_by_ino(struct model *m, uint64_t ino)
{
	for (size_t i = 0; i < m->count; i++)
		if (m->n[i].ino == ino)
			return &m->n[i];
	return NULL;
}

static void m_remove(struct model *m, struct mnode *x)
{
	*x = m->n[--m->count];
}

/* Does the table agree with the model? Prints the first difference. */
static bool agree(struct inode_table *t, struct model *m, const char *after)
{
	if (inode_count(t) != m->count) {
		printf("# after %s: count %zu, model %zu\n", after, inode_count(t), m->count);
		return false;
	}
	for (size_t i = 0; i < m->count; i++) {
		struct mnode *x = &m->n[i];
		struct inode_info info;
		int rc = inode_get(t, x->ino, NULL, &info);
		if (rc != 0 || strcmp(info.path, x->path) || info.view != (size_t)x->view ||
		    info.is_dir != x->is_dir) {
			printf("# after %s: inode %" PRIu64 " (%s/%s, held %" PRIu64 "): rc %d, %s\n",
			       after, x->ino, vnames[x->view], x->path, x->nlookup, rc,
			       rc == 0 ? info.path : "-");
			if (rc == 0)
				free(info.path);
			return false;
		}
		free(info.path);
	}
	for (unsigned i = 0; i < NAMES; i++) {
		int view;
		char path[32];
		name_of(i, &view, path, sizeof path);
		struct mnode *x = m_named(m, view, path);
		uint64_t ino = 0;
		bool found = inode_find(t, vnames[view], path, &ino);
		if (found != (x != NULL) || (x && ino != x->ino)) {
			printf("# after %s: name %s/%s finds %d (%" PRIu64 "), model %" PRIu64 "\n",
			       after, vnames[view], path, found, ino, x ? x->ino : 0);
			return false;
		}
	}
	return true;
}

/* One random sequence; false at the first disagreement. */
static bool run_sequence(unsigned seed, int steps, size_t empty_bytes)
{
	struct inode_table *t;
	if (inode_table_new(resolve, &t) < 0)
		exit(2);
	static struct model m;
	memset(&m, 0, sizeof m);
	srand(seed);
	char what[96] = "start";
	bool ok = true;
	for (int s = 0; s < steps && ok; s++) {
		int op = rand() % 10;
		int view;
		char path[32];
		name_of((unsigned)rand() % NAMES, &view, path, sizeof path);
		if (op < 4 && m.count < MAXN) {          /* a lookup */
			bool is_dir = path[0] != 'd' || !strchr(path, '/');
			uint64_t ino = inode_ref(t, vnames[view], path, is_dir);
			struct mnode *x = m_named(&m, view, path);
			snprintf(what, sizeof what, "step %d: lookup %s/%s", s, vnames[view], path);
			if (!ino || (x && x->ino != ino) || (!x && m_by_ino(&m, ino))) {
				printf("# %s: number %" PRIu64 " (model %" PRIu64 ")\n", what, ino,
				       x ? x->ino : 0);
				ok = false;
				break;
			}
			if (!x) {
				x = &m.n[m.count++];
				*x = (struct mnode){ .ino = ino, .view = view, .named = true };
				snprintf(x->path, sizeof x->path, "%s", path);
			}
			x->nlookup++;
			x->is_dir = is_dir;
		} else if (op < 8 && m.count) {          /* a forget of part or all */
			struct mnode *x = &m.n[(size_t)rand() % m.count];
			uint64_t k = 1 + (uint64_t)rand() % x->nlookup;
			snprintf(what, sizeof what, "step %d: forget %" PRIu64 " of %" PRIu64 " (%s/%s)",
				 s, k, x->nlookup, vnames[x->view], x->path);
			inode_unref(t, x->ino, k);
			x->nlookup -= k;
			if (x->nlookup == 0)
				m_remove(&m, x);
		} else if (op == 8 && m.count) {         /* a rename in the same view */
			struct mnode *x = &m.n[(size_t)rand() % m.count];
			if (x->view != view || !x->named)
				continue;
			snprintf(what, sizeof what, "step %d: rename %s/%s to %s", s,
				 vnames[x->view], x->path, path);
			struct mnode *o = m_named(&m, view, path);
			if (inode_rename(t, x->ino, path) != 0) {
				printf("# %s: failed\n", what);
				ok = false;
				break;
			}
			if (o && o != x)
				o->named = false;
			snprintf(x->path, sizeof x->path, "%s", path);
		} else if (op == 9) {                    /* an unlink */
			snprintf(what, sizeof what, "step %d: unlink %s/%s", s, vnames[view], path);
			inode_unname(t, vnames[view], path);
			struct mnode *x = m_named(&m, view, path);
			if (x)
				x->named = false;
		}
		ok = agree(t, &m, what);
	}
	/* Forget what is left, in random order. */
	while (ok && m.count) {
		struct mnode *x = &m.n[(size_t)rand() % m.count];
		inode_unref(t, x->ino, x->nlookup);
		m_remove(&m, x);
		ok = agree(t, &m, "the final forgets");
	}
	struct inode_mem mem;
	inode_mem(t, &mem);
	if (ok && (mem.inodes || mem.extras || mem.aliases || mem.bytes != empty_bytes)) {
		printf("# seed %u: left %zu inodes, %zu extras, %zu aliases, %zu bytes (empty: %zu)\n",
		       seed, mem.inodes, mem.extras, mem.aliases, mem.bytes, empty_bytes);
		ok = false;
	}
	inode_table_free(t);
	if (!ok)
		printf("# the failing sequence: seed %u\n", seed);
	return ok;
}

/* ---- fixed cases ---- */

static void test_renamed_home(size_t empty_bytes)
{
	struct inode_table *t;
	if (inode_table_new(resolve, &t) < 0)
		exit(2);
	uint64_t x = inode_ref(t, "a", "x", false);
	CHECK(x == inode_number("a", "x"), "a new name gets its own number");
	CHECK(inode_rename(t, x, "y") == 0, "rename x to y");
	uint64_t x2 = inode_ref(t, "a", "x", false), f = 0;
	CHECK(x2 && x2 != x, "x made again while y keeps x's number: another number");
	CHECK(inode_find(t, "a", "y", &f) && f == x, "y leads to the renamed inode");
	inode_unref(t, x, 1);
	CHECK(inode_find(t, "a", "x", &f) && f == x2,
	      "once y is forgotten, x still leads to its inode (an alias)");
	CHECK(inode_ref(t, "a", "x", false) == x2, "and a lookup of x takes that one");
	inode_unref(t, x2, 2);
	struct inode_mem mem;
	inode_mem(t, &mem);
	CHECK(mem.inodes == 0 && mem.aliases == 0 && mem.bytes == empty_bytes,
	      "nothing left (%zu inodes, %zu aliases, %zu bytes)", mem.inodes, mem.aliases,
	      mem.bytes);
	inode_table_free(t);
}

static void test_gone(void)
{
	struct inode_table *t;
	if (inode_table_new(resolve, &t) < 0)
		exit(2);
	uint64_t x = inode_ref(t, "b", "f", false), f;
	struct stat st = { .st_size = 7, .st_nlink = 1, .st_mode = S_IFREG | 0644 };
	inode_unname_gone(t, "b", "f", &st);
	struct inode_info info;
	CHECK(!inode_find(t, "b", "f", &f), "unlinked: no name leads to it");
	CHECK(inode_get(t, x, NULL, &info) == 0 && info.gone && info.gone_st.st_size == 7 &&
	      info.gone_st.st_nlink == 0, "but its number does, with what it was (nlink 0)");
	free(info.path);
	uint64_t y = inode_ref(t, "b", "f", false);
	CHECK(y && y != x, "the name made again is another inode");
	CHECK(inode_ref(t, "c", "f", false) != 0, "a view the resolver does not know: a node");
	uint64_t z = 0;
	CHECK(inode_find(t, "c", "f", &z) && inode_get(t, z, NULL, &info) == -ENOENT,
	      "which inode_get answers ENOENT (its view is gone)");
	inode_table_free(t);
}

/* Bytes per inode held, for names like those of a big listing. */
static void test_bytes(size_t empty_bytes)
{
	struct inode_table *t;
	if (inode_table_new(resolve, &t) < 0)
		exit(2);
	const size_t n = 100000;
	for (size_t i = 0; i < n; i++) {
		char p[32];
		snprintf(p, sizeof p, "object-%07zu", i);
		inode_ref(t, "a", p, false);
	}
	struct inode_mem mem;
	inode_mem(t, &mem);
	double per = (double)(mem.bytes - empty_bytes) / (double)n;
	CHECK(mem.inodes == n && per <= 100,
	      "%zu inodes held with 14-byte names: %.1f bytes each (at most 100)", mem.inodes, per);
	for (size_t i = n; i-- > 0; ) {
		char p[32];
		uint64_t ino;
		snprintf(p, sizeof p, "object-%07zu", i);
		if (inode_find(t, "a", p, &ino))
			inode_unref(t, ino, 1);
	}
	inode_mem(t, &mem);
	CHECK(mem.inodes == 0 && mem.bytes == empty_bytes,
	      "all forgotten: the table is back to its empty size (%zu bytes)", mem.bytes);
	inode_table_free(t);
}

/* Threads looking up and forgetting the same 64 names: each thread's
 * lookups are forgotten by itself, so at the end nothing is held. */
struct th {
	struct inode_table *t;
	unsigned seed;
	bool bad;
};

static void *thread_main(void *arg)
{
	struct th *h = arg;
	uint64_t held[64] = { 0 };
	uint64_t ino[64] = { 0 };
	for (int s = 0; s < 20000; s++) {
		unsigned i = (unsigned)rand_r(&h->seed) % 64;
		char p[16];
		snprintf(p, sizeof p, "n%u", i);
		if (rand_r(&h->seed) % 2 || !held[i]) {
			uint64_t got = inode_ref(h->t, "a", p, false);
			if (!got || (held[i] && got != ino[i]))
				h->bad = true;   /* a held name changed its number */
			ino[i] = got;
			held[i]++;
		} else {
			uint64_t k = 1 + (uint64_t)rand_r(&h->seed) % held[i];
			inode_unref(h->t, ino[i], k);
			held[i] -= k;
		}
	}
	for (unsigned i = 0; i < 64; i++)
		if (held[i])
			inode_unref(h->t, ino[i], held[i]);
	return NULL;
}

static void test_threads(size_t empty_bytes)
{
	struct inode_table *t;
	if (inode_table_new(resolve, &t) < 0)
		exit(2);
	struct th h[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		h[i] = (struct th){ .t = t, .seed = 7u + (unsigned)i };
		pthread_create(&th[i], NULL, thread_main, &h[i]);
	}
	bool bad = false;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		bad |= h[i].bad;
	}
	struct inode_mem mem;
	inode_mem(t, &mem);
	CHECK(!bad, "4 threads: a name held by a thread kept its number");
	CHECK(mem.inodes == 0 && mem.bytes == empty_bytes,
	      "4 threads, 80,000 lookups and forgets of 64 names: nothing left (%zu)", mem.inodes);
	inode_table_free(t);
}

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : (unsigned)time(NULL);
	int seqs = argc > 2 ? atoi(argv[2]) : 300;
	int steps = argc > 3 ? atoi(argv[3]) : 400;

	struct inode_table *t;
	if (inode_table_new(resolve, &t) < 0)
		return 2;
	struct inode_mem mem;
	inode_mem(t, &mem);
	size_t empty = mem.bytes;
	inode_table_free(t);

	int bad = 0;
	for (int i = 0; i < seqs && !bad; i++)
		bad += !run_sequence(seed + (unsigned)i, steps, empty);
	CHECK(!bad, "%d random sequences of %d lookups, forgets, renames and unlinks "
	      "(seeds %u..%u) agree with the model", seqs, steps, seed, seed + (unsigned)seqs - 1);
	test_renamed_home(empty);
	test_gone();
	test_bytes(empty);
	test_threads(empty);
	return unit_exit();
}
