/*
 * array.h — growing a heap array by doubling, the one way every module does
 * it (a batch's scratch arrays, listed pages, partition tables).
 *
 * An array is a pointer variable plus a capacity in elements, both owned by
 * the caller; the count of used elements stays the caller's too. Growing
 * keeps the contents (realloc) and may move the array, so pointers into it
 * are stale afterwards. On failure nothing changes: the old array is still
 * there and still the caller's to free. No state, any thread (one owner per
 * array).
 *
 * Tests: test_common.c.
 */
#ifndef FACETFS_ARRAY_H
#define FACETFS_ARRAY_H

#include <stddef.h>

/* Make room for at least `need` elements of `elem` bytes in the array whose
 * pointer variable is at `arrp` (a T **) and whose capacity is *cap: the new
 * capacity is the larger of need and twice the old one (at least 16). 0, or
 * -ENOMEM (overflow or no memory; array and *cap unchanged). */
int array_grow(void *arrp, size_t *cap, size_t need, size_t elem);

/* The same with the element size taken from the pointer's type:
 * `if (ARRAY_GROW(&x->items, &x->cap, x->n + 1) < 0) return -ENOMEM;` */
#define ARRAY_GROW(arrp, cap, need) \
	((need) <= *(cap) ? 0 : array_grow((arrp), (cap), (need), sizeof **(arrp)))

#endif
