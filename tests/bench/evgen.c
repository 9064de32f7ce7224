/*
 * evgen — synthetic Ceph RGW ObjectCreated:Put records for the event
 * benchmark (tests/bench/bench_events.sh), fast enough not to compete with
 * the gateway for the CPU (a Python generator costs ~12 µs a record here).
 *
 *   evgen BUCKET PREFIXES START COUNT
 *
 * Writes COUNT lines "BUCKET/KEY<TAB>JSON" (for `kcat -P -K '\t'`), record
 * i = START.. having key "pNN/obj%07d" with NN = i mod PREFIXES, a size of
 * 100 + i mod 900 and eTag = i + 1 in hex. The JSON is shaped like
 * shared/events/ceph-put.json (compact, one record per document); eventTime
 * and the sequencer (RGW's: hex of little-endian seconds, nanoseconds) are
 * the moment each line is made, so the gateway's visible_latency_ms means
 * "generated -> visible". Exits non-zero on a write error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void seq_hex(char out[17], uint32_t sec, uint32_t ns)
{
	static const char hx[] = "0123456789ABCDEF";
	unsigned char b[8];
	for (int k = 0; k < 4; k++) {
		b[k] = (unsigned char)(sec >> (8 * k));
		b[4 + k] = (unsigned char)(ns >> (8 * k));
	}
	for (int k = 0; k < 8; k++) {
		out[2 * k] = hx[b[k] >> 4];
		out[2 * k + 1] = hx[b[k] & 15];
	}
	out[16] = '\0';
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: evgen BUCKET PREFIXES START COUNT\n");
		return 2;
	}
	const char *bucket = argv[1];
	long prefixes = atol(argv[2]), start = atol(argv[3]), count = atol(argv[4]);
	if (prefixes < 1 || prefixes > 1000 || start < 0 || count < 0) {
		fprintf(stderr, "evgen: PREFIXES must be 1..1000, START and COUNT >= 0\n");
		return 2;
	}
	int width = prefixes > 100 ? 3 : 2;     /* p00..p99, or p000..p999 */
	static char iobuf[1 << 20];
	setvbuf(stdout, iobuf, _IOFBF, sizeof iobuf);
	time_t cached_sec = -1;
	char when[32] = "";
	for (long i = start; i < start + count; i++) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		if (ts.tv_sec != cached_sec) {
			struct tm tm;
			cached_sec = ts.tv_sec;
			gmtime_r(&ts.tv_sec, &tm);
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
		}
		long us = ts.tv_nsec / 1000;
		char key[32], seq[17];
		snprintf(key, sizeof key, "p%0*ld/obj%07ld", width, i % prefixes, i);
		seq_hex(seq, (uint32_t)ts.tv_sec, (uint32_t)ts.tv_nsec);
		printf("%s/%s\t{\"Records\":[{\"eventVersion\":\"2.2\",\"eventSource\":\"ceph:s3\","
		       "\"awsRegion\":\"\",\"eventTime\":\"%s.%06ldZ\",\"eventName\":\"ObjectCreated:Put\","
		       "\"userIdentity\":{\"principalId\":\"tester\"},"
		       "\"requestParameters\":{\"sourceIPAddress\":\"\"},"
		       "\"responseElements\":{\"x-amz-request-id\":"
		       "\"1b1f58ac-0c27-4165-831f-2303c5d2a8c6.4116.%ld\","
		       "\"x-amz-id-2\":\"1014-default-default\"},"
		       "\"s3\":{\"s3SchemaVersion\":\"1.0\",\"configurationId\":\"bench\","
		       "\"bucket\":{\"name\":\"%s\",\"ownerIdentity\":{\"principalId\":\"tester\"},"
		       "\"arn\":\"arn:aws:s3:::%s\",\"id\":\"1b1f58ac-0c27-4165-831f-2303c5d2a8c6.4121.2\"},"
		       "\"object\":{\"key\":\"%s\",\"size\":%ld,\"eTag\":\"%032lx\",\"versionId\":\"\","
		       "\"sequencer\":\"%s\",\"metadata\":[{\"key\":\"x-amz-meta-tag\",\"val\":\"alpha\"}],"
		       "\"tags\":[]}},\"eventId\":\"%lld.%06ld.%032lx\",\"opaqueData\":\"\"}]}\n",
		       bucket, key, when, us, i, bucket, bucket, key, 100 + i % 900,
		       (unsigned long)(i + 1), seq, (long long)ts.tv_sec, us, (unsigned long)(i + 1));
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "evgen: write: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
