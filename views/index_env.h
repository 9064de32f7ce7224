/*
 * index_env.h — the LevelDB environment the index opens its store with:
 * LevelDB's own (Env::Default()) except that table files are read with
 * pread(2) into LevelDB's buffers instead of being mapped.
 *
 * Why: LevelDB maps up to 1,000 table files, and every page a Get or a
 * compaction touches stays mapped until the table leaves its table cache.
 * Those pages are page cache, but they count in the gateway's RSS: while
 * 10M events were applied, up to 249 MiB of it were mapped tables, more
 * than all of the gateway's own memory. Read with pread, the same bytes
 * stay in the page cache (the kernel's to keep or drop) and the gateway's
 * RSS is its own memory only. What it costs: a table's index and filter
 * blocks are copied into the heap while the table is open (about 12 bits
 * per key; docs/operations.md "Memory"), and each block read is a system
 * call.
 *
 * The C API has no way to give LevelDB an environment of one's own, so
 * index_env_new() builds the C API's environment handle itself
 * (index_env.cc says how, and the unit test `index` fails if LevelDB
 * maps a table file).
 *
 * Tests: test_index.c.
 */
#ifndef FACETFS_INDEX_ENV_H
#define FACETFS_INDEX_ENV_H

#include <leveldb/c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A new environment (NULL: no memory); pass it to leveldb_options_set_env
 * and free it with index_env_free() after the store is closed. */
leveldb_env_t *index_env_new(void);
void index_env_free(leveldb_env_t *env);

#ifdef __cplusplus
}
#endif

#endif
