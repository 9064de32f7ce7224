/*
 * index_db.c — the LevelDB calls the index's files share: write the
 * batch, get one value. The bottom of the index (index_int.h gives the
 * layers).
 */
#include "views/index_int.h"

#include <errno.h>

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
