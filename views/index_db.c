/*
 * index_db.c — the LevelDB calls the index's files share: write the
 * batch, get one value, walk the keys of a tag. The bottom of the index (index_int.h gives the
 * layers).
 */
#include "views/index_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

int ix_write(struct index *ix, const char *what)
{
	char *err = NULL;
	leveldb_write(ix->db, ix->wo, ix->wb, &err);
	leveldb_writebatch_clear(ix->wb);
	if (err) {
		log_error("index: write of %s failed: %s", what, err);
		leveldb_free(err);
		return -EIO;
	}
	return 0;
}

int ix_get(struct index *ix, const leveldb_readoptions_t *ro,
	   const char *k, size_t kl, char **val, size_t *vl)
{
	char *err = NULL;
	*val = leveldb_get(ix->db, ro ? ro : ix->ro, k, kl, vl, &err);
	if (err) {
		log_error("index: read failed: %s", err);
		leveldb_free(err);
		return -EIO;
	}
	return *val ? 0 : -ENOENT;
}

int ix_each_pair(struct index *ix, char tag, const char *what, ix_pair_fn fn,
		 void *ctx)
{
	leveldb_iterator_t *it = leveldb_create_iterator(ix->db, ix->ro);
	int rc = 0;
	for (leveldb_iter_seek(it, &tag, 1); rc == 0 && leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl;
		const char *k = leveldb_iter_key(it, &kl);
		if (kl < 2 || k[0] != tag)
			break;
		const char *nul = memchr(k + 1, '\0', kl - 1);
		if (!nul)
			continue;                /* not ours: skip */
		char *a = strndup(k + 1, (size_t)(nul - k - 1));
		char *b = strndup(nul + 1, kl - (size_t)(nul + 1 - k));
		size_t vl;
		const char *v = leveldb_iter_value(it, &vl);
		rc = a && b ? fn(ctx, a, b, v, vl) : -ENOMEM;
		free(a);
		free(b);
	}
	char *err = NULL;
	leveldb_iter_get_error(it, &err);
	if (err) {
		log_error("index: listing %s: %s", what, err);
		leveldb_free(err);
		rc = -EIO;
	}
	leveldb_iter_destroy(it);
	return rc < 0 ? rc : 0;
}
