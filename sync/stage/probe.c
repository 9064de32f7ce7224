/*
 * probe.c — see probe.h. The bodies are the first 1, 2, 3 and 4 bytes of
 * one small memory file, so that each PUT stores another version (another
 * ETag) and an ignored condition shows as a PUT that succeeded.
 */
#include "sync/stage/probe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/file.h"
#include "common/log.h"

/* The ETag of no bytes: no version of the probe key (1 to 4 bytes) has it. */
#define PROBE_NO_ETAG "d41d8cd98f00b204e9800998ecf8427e"

void probe_key(char *out, size_t outlen)
{
	char host[256] = "";
	if (gethostname(host, sizeof host - 1) != 0 || !host[0])
		snprintf(host, sizeof host, "localhost");
	snprintf(out, outlen, "%s%s-%ld", PROBE_PREFIX, host, (long)getpid());
}

/* One conditional PUT of the first n bytes (base as s3_put_file_if); a
 * success updates etag (the key's version now). Returns the PUT's answer. */
static int probe_put(struct s3 *s, const char *bucket, const char *key, int fd,
		     uint64_t n, const char *base, char etag[72])
{
	char got[72];
	int rc = s3_put_file_if(s, bucket, key, fd, n, NULL, 0, NULL, base, got);
	if (rc == 0)
		memcpy(etag, got, sizeof got);
	return rc;
}

/* Whether the answer rc to the PUT described by what was want; logs the
 * surprise. */
static bool probe_expect(const char *bucket, const char *key, const char *what,
			 int rc, int want)
{
	if (rc == want)
		return true;
	log_info("probe: %s/%s: PUT %s answered %s, not %s: that condition is not "
		 "honoured", bucket, key, what, rc ? strerror(-rc) : "success",
		 want ? "412 (refused)" : "success");
	return false;
}

int probe_cond_put(struct s3 *s, const char *bucket, const char *key,
		   struct s3_cond_caps *out)
{
	*out = (struct s3_cond_caps){ 0 };
	char etag[72] = "";
	int fd = memfd_create("facetfs-probe", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = file_pwrite_all(fd, "1234", 4, 0);
	if (rc == 0)
		rc = s3_delete(s, bucket, key);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	rc = probe_put(s, bucket, key, fd, 1, "", etag);
	bool inm = probe_expect(bucket, key, "If-None-Match: * (no object)", rc, 0);
	if (rc != 0)                 /* refused or failed: the key is needed */
		rc = s3_put_file(s, bucket, key, fd, 1, NULL, 0, NULL, etag);
	if (rc == 0) {
		rc = probe_put(s, bucket, key, fd, 2, "", etag);
		inm = probe_expect(bucket, key, "If-None-Match: * (an object)", rc,
				   -ESTALE) && inm;
		rc = probe_put(s, bucket, key, fd, 3, PROBE_NO_ETAG, etag);
		bool im = probe_expect(bucket, key, "If-Match (another ETag)", rc,
				       -ESTALE);
		rc = probe_put(s, bucket, key, fd, 4, etag, etag);
		im = probe_expect(bucket, key, "If-Match (its ETag)", rc, 0) && im;
		*out = (struct s3_cond_caps){ .if_none_match = inm, .if_match = im };
		rc = 0;
	}
	close(fd);
	int drc = s3_delete(s, bucket, key);
	if (drc < 0)
		log_warn("probe: %s/%s: cannot delete the probe's key: %s; delete it "
			 "by hand", bucket, key, strerror(-drc));
	return rc;
}
