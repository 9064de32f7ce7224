/*
 * s3_sign.c — AWS Signature Version 4 of one S3 request (s3_int.h).
 *
 * Why here and not CURLOPT_AWS_SIGV4: curl 7.88 sorts the headers it signs
 * as whole "name:value" strings, so a header whose name extends another's
 * with a character below ':' ("x-amz-meta-a" and "x-amz-meta-a-b", or
 * "x-amz-copy-source" and "x-amz-copy-source-if-match") is signed in the
 * wrong order and RGW answers SignatureDoesNotMatch (seen here); it also
 * signs an empty header ("Expect:") that it then does not send. This file
 * sorts by name as AWS specifies, and signs exactly what we send.
 *
 * Payload: the value of the x-amz-content-sha256 line (UNSIGNED-PAYLOAD
 * for all our requests). Pure functions: any thread may call.
 */
#include "sync/s3/s3_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sign_hdr {
	char *name;              /* lower case */
	char *value;             /* trimmed, inner runs of spaces collapsed */
};

static int sign_hdr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sign_hdr *)a)->name,
		      ((const struct sign_hdr *)b)->name);
}

/* Split "Name: value" into a lower-case name and a canonical value,
 * written into buf (room for strlen(line) + 2). */
static int sign_hdr_parse(const char *line, char *buf, struct sign_hdr *h)
{
	const char *colon = strchr(line, ':');
	if (!colon || colon == line)
		return -EINVAL;
	size_t nl = (size_t)(colon - line);
	for (size_t i = 0; i < nl; i++) {
		char c = line[i];
		buf[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	buf[nl] = '\0';
	h->name = buf;
	char *v = buf + nl + 1, *o = v;
	const char *p = colon + 1;
	while (*p == ' ' || *p == '\t')
		p++;
	bool space = false;
	for (; *p; p++) {
		if (*p == ' ' || *p == '\t') {
			space = true;
			continue;
		}
		if (space && o != v)
			*o++ = ' ';
		space = false;
		*o++ = *p;
	}
	*o = '\0';
	h->value = v;
	return 0;
}

static void sign_hex(const unsigned char *d, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[2 * n] = '\0';
}

static int sign_hmac(const void *key, size_t kl, const char *data,
		     unsigned char out[32])
{
	unsigned ol = 0;
	if (!HMAC(EVP_sha256(), key, (int)kl, (const unsigned char *)data,
		  strlen(data), out, &ol) || ol != 32)
		return -EIO;
	return 0;
}

int s3_sign_v4(const char *method, const char *path, const char *query,
	       const char *const *lines, size_t n, const char *amzdate,
	       const char *region, const char *access_key,
	       const char *secret_key, char *auth, size_t authlen)
{
	int err = -ENOMEM;
	struct sign_hdr *h = calloc(n ? n : 1, sizeof *h);
	char **bufs = calloc(n ? n : 1, sizeof *bufs);
	char *creq = NULL, *sts = NULL, *ksecret = NULL;
	size_t cap = strlen(method) + strlen(path) + strlen(query ? query : "") + 256;
	if (!h || !bufs)
		goto out;
	const char *payload = "UNSIGNED-PAYLOAD";
	for (size_t i = 0; i < n; i++) {
		bufs[i] = malloc(strlen(lines[i]) + 2);
		if (!bufs[i])
			goto out;
		err = sign_hdr_parse(lines[i], bufs[i], &h[i]);
		if (err)
			goto out;
		if (strcmp(h[i].name, "x-amz-content-sha256") == 0)
			payload = h[i].value;
		cap += 2 * strlen(lines[i]) + 4;
	}
	qsort(h, n, sizeof *h, sign_hdr_cmp);
	err = -ENOMEM;
	creq = malloc(cap);
	if (!creq)
		goto out;
	/* CanonicalRequest: method, URI, query, headers, signed names, payload */
	size_t o = (size_t)snprintf(creq, cap, "%s\n%s\n%s\n", method, path,
				    query ? query : "");
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(creq + o, cap - o, "%s:%s\n", h[i].name,
				      h[i].value);
	creq[o++] = '\n';
	size_t signed_at = o;
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(creq + o, cap - o, "%s%s", i ? ";" : "",
				      h[i].name);
	size_t signed_len = o - signed_at;
	o += (size_t)snprintf(creq + o, cap - o, "\n%s", payload);

	unsigned char d[32];
	unsigned dl = 0;
	char creq_hex[65];
	err = -EIO;
	if (EVP_Digest(creq, o, d, &dl, EVP_sha256(), NULL) != 1 || dl != 32)
		goto out;
	sign_hex(d, 32, creq_hex);

	char day[9];
	if (strlen(amzdate) != 16) {
		err = -EINVAL;
		goto out;
	}
	memcpy(day, amzdate, 8);
	day[8] = '\0';
	err = -ENOMEM;
	if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s",
		     amzdate, day, region, creq_hex) < 0) {
		sts = NULL;
		goto out;
	}
	if (asprintf(&ksecret, "AWS4%s", secret_key) < 0) {
		ksecret = NULL;
		goto out;
	}
	unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
	err = sign_hmac(ksecret, strlen(ksecret), day, k1);
	if (!err)
		err = sign_hmac(k1, 32, region, k2);
	if (!err)
		err = sign_hmac(k2, 32, "s3", k3);
	if (!err)
		err = sign_hmac(k3, 32, "aws4_request", k4);
	if (!err)
		err = sign_hmac(k4, 32, sts, sig);
	if (err)
		goto out;
	char sig_hex[65];
	sign_hex(sig, 32, sig_hex);
	int w = snprintf(auth, authlen,
			 "AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request, "
			 "SignedHeaders=%.*s, Signature=%s", access_key, day,
			 region, (int)signed_len, creq + signed_at, sig_hex);
	err = w < 0 || (size_t)w >= authlen ? -EOVERFLOW : 0;
out:
	if (ksecret) {
		memset(ksecret, 0, strlen(ksecret));
		free(ksecret);
	}
	free(sts);
	free(creq);
	for (size_t i = 0; bufs && i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(h);
	return err;
}
