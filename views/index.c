/*
 * index.c — opening and closing the LevelDB index: its options (block
 * cache, memtable and table sizes, tables read by pread: index_env.h), the
 * object count it loads, the key filter's first build; closing frees what
 * the other files keep in struct index. The write path is index_write.c.
 * See index.h for the key schema.
 */
#include "views/index_int.h"
#include "views/index_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "views/index_own.h"

/* ---- open / close ----------------------------------------------------- */

static const struct stats_def index_stats[] = {
	STATS_COUNTER(struct index_counters, applied, "events", "applied"),
	STATS_COUNTER(struct index_counters, ignored, "events", "ignored"),
	STATS_COUNTER(struct index_counters, redelivered, "events", "redelivered"),
	STATS_COUNTER(struct index_counters, own, "events", "own"),
	STATS_COUNTER(struct index_counters, bad_keys, "keys", "not_a_path"),
};

int index_open(const char *state_dir, struct stats *st, struct index **out,
	       char *err, size_t errlen)
{
	*out = NULL;
	if (mkdir(state_dir, 0755) < 0 && errno != EEXIST) {
		int e = errno;
		snprintf(err, errlen, "cannot create %s: %s", state_dir, strerror(e));
		return -e;
	}
	struct index *ix = calloc(1, sizeof *ix);
	char *path = NULL;
	if (!ix || asprintf(&path, "%s/index", state_dir) < 0) {
		free(ix);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	stats_group_add(st, &ix->grp, index_stats,
			sizeof index_stats / sizeof index_stats[0], &ix->ctr);
	pthread_mutex_init(&ix->wmu, NULL);
	pthread_mutex_init(&ix->bloom_mu, NULL);
	ix->own = own_new();         /* NULL: own writes are not told apart */
	pthread_rwlock_init(&ix->vlock, NULL);

	ix->opts = leveldb_options_create();
	ix->fpolicy = leveldb_filterpolicy_create_bloom(10);
	ix->cache = leveldb_cache_create_lru(INDEX_CACHE_BYTES);
	leveldb_options_set_create_if_missing(ix->opts, 1);
	leveldb_options_set_filter_policy(ix->opts, ix->fpolicy);
	leveldb_options_set_cache(ix->opts, ix->cache);
	ix->env = index_env_new();
	if (!ix->env) {
		snprintf(err, errlen, "out of memory");
		free(path);
		index_close(ix);
		return -ENOMEM;
	}
	leveldb_options_set_env(ix->opts, ix->env);
	/* Each table LevelDB keeps open holds a descriptor (index_env.h):
	 * 512 tables of 8 MiB (below) keep about 4 GiB of index open, some
	 * 90M objects, and leave most of a 1,024-descriptor limit to the
	 * mount and S3. */
	leveldb_options_set_max_open_files(ix->opts, 512);
	/* 16 MiB memtable: the skiplist insert is most of an apply; a smaller
	 * table stays cache-warmer (bench-index, 100 views, 1M events: 16 MiB
	 * ~240K events per CPU-s of the applier, 32 MiB ~185K, 64 MiB ~155K);
	 * below 16 MiB L0 fills faster than one core compacts and writes stall */
	leveldb_options_set_write_buffer_size(ix->opts, INDEX_MEMTABLE_BYTES);
	leveldb_options_set_max_file_size(ix->opts, 8u << 20);
	leveldb_options_set_compression(ix->opts, leveldb_snappy_compression);
	ix->ro = leveldb_readoptions_create();
	ix->ro_list = leveldb_readoptions_create();
	leveldb_readoptions_set_fill_cache(ix->ro_list, 0);
	ix->wo = leveldb_writeoptions_create();
	leveldb_writeoptions_set_sync(ix->wo, 0);
	ix->wb = leveldb_writebatch_create();

	char *lerr = NULL;
	ix->db = leveldb_open(ix->opts, path, &lerr);
	if (lerr) {
		snprintf(err, errlen, "cannot open %s: %s", path, lerr);
		leveldb_free(lerr);
		free(path);
		ix->db = NULL;
		index_close(ix);
		return -EIO;
	}
	free(path);

	char *v;
	size_t vl;
	int rc = ix_get(ix, NULL, "Co", 2, &v, &vl);
	if (rc == 0) {
		if (vl == 8)
			atomic_store(&ix->objects, be64_get(v));
		leveldb_free(v);
	} else if (rc != -ENOENT) {
		snprintf(err, errlen, "cannot read the index counters");
		index_close(ix);
		return rc;
	}
	pthread_mutex_lock(&ix->wmu);
	ix_bloom_maybe_rebuild(ix, 2 * atomic_load(&ix->objects));
	pthread_mutex_unlock(&ix->wmu);
	*out = ix;
	return 0;
}

void index_close(struct index *ix)
{
	if (!ix)
		return;
	ix_bloom_stop(ix);
	if (ix->db)
		leveldb_close(ix->db);
	leveldb_writebatch_destroy(ix->wb);
	leveldb_writeoptions_destroy(ix->wo);
	leveldb_readoptions_destroy(ix->ro);
	leveldb_readoptions_destroy(ix->ro_list);
	leveldb_options_destroy(ix->opts);
	index_env_free(ix->env);
	leveldb_cache_destroy(ix->cache);
	leveldb_filterpolicy_destroy(ix->fpolicy);
	ix_table_free(ix->views, ix->n_views, ix->buckets, ix->n_buckets, ix->route);
	viewset_unpin(ix->set);
	arena_release(&ix->ar);
	ibuf_release(&ix->kbuf);
	ibuf_release(&ix->vbuf);
	ibuf_release(&ix->tbuf);
	free(ix->slots);
	free(ix->tab);
	free(ix->chg);
	free(ix->vchg);
	free(ix->mdelta);
	free(ix->evslot);
	free(ix->order);
	free(ix->ops);
	free(ix->ops_tmp);
	free(ix->vstart);
	free(ix->cand);
	own_free(ix->own);
	stats_group_remove(&ix->grp);
	pthread_rwlock_destroy(&ix->vlock);
	pthread_mutex_destroy(&ix->bloom_mu);
	pthread_mutex_destroy(&ix->wmu);
	free(ix);
}

void index_set_sync(struct index *ix, bool sync)
{
	pthread_mutex_lock(&ix->wmu);
	leveldb_writeoptions_set_sync(ix->wo, sync);
	pthread_mutex_unlock(&ix->wmu);
}

uint64_t index_objects(struct index *ix)
{
	return atomic_load(&ix->objects);
}
