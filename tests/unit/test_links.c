/*
 * test_links.c — fuse/links.h: a kept target comes back for its ETag and
 * length only; a second target in the same slot replaces the first; the
 * buffer bounds are kept.
 */
#include "unit.h"

#include "fuse/links.h"

int main(void)
{
	struct links *l;
	if (links_new(&l))
		return 2;
	char buf[64];
	CHECK(!links_get(l, "e1", 6, buf, sizeof buf), "nothing kept: a miss");
	links_put(l, "e1", "target");
	CHECK(links_get(l, "e1", 6, buf, sizeof buf) && !strcmp(buf, "target"),
	      "kept: the target of its ETag");
	CHECK(!links_get(l, "e2", 6, buf, sizeof buf), "another ETag: a miss");
	CHECK(!links_get(l, "e1", 7, buf, sizeof buf),
	      "a length other than the indexed size: a miss");
	CHECK(!links_get(l, "e1", 6, buf, 6), "a buffer without room for the NUL: a miss");
	CHECK(!links_get(l, "", 0, buf, sizeof buf), "an empty ETag: a miss");
	/* Find an ETag that shares e1's slot: it replaces e1's target. */
	char other[16] = "";
	for (unsigned i = 0; i < 100000 && !other[0]; i++) {
		char e[16];
		snprintf(e, sizeof e, "x%u", i);
		links_put(l, e, "t");
		if (!links_get(l, "e1", 6, buf, sizeof buf))
			snprintf(other, sizeof other, "%s", e);
	}
	CHECK(other[0] && links_get(l, other, 1, buf, sizeof buf) && !strcmp(buf, "t"),
	      "a target put in a taken slot replaces it (%s)", other);
	links_free(l);
	links_free(NULL);
	return unit_exit();
}
