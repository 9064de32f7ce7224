/*
 * fuzz_s3_tagging.c — the GetObjectTagging answer parser (sync/s3/s3_int.h,
 * s3_xml_tagging_parse) on any bytes: 0 with decoded, non-empty tag names
 * and present values, or -EPROTO / -ENOMEM with nothing returned.
 */
#include "sync/s3/s3_int.h"
#include "tests/fuzz/fuzz.h"

#include <errno.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct obj_kv *tags = (struct obj_kv *)&tags;   /* must stay untouched on error */
	size_t n = 12345;
	int rc = s3_xml_tagging_parse((const char *)data, size, &tags, &n);
	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM, "rc %d", rc);
	if (rc < 0) {
		FUZZ_CHECK(tags == (struct obj_kv *)&tags && n == 12345,
			   "outputs set on error %d", rc);
		return 0;
	}
	FUZZ_CHECK((n == 0) == (tags == NULL), "%zu tags, array %p", n, (void *)tags);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(tags[i].name && tags[i].name[0] && tags[i].value,
			   "tag %zu without name or value", i);
	obj_kv_free(tags, n);
	return 0;
}
