/* test_s3_tagging.c — unit tests of the GetObjectTagging answer parser
 * (sync/s3/s3_int.h: s3_xml_tagging_parse), no services. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/s3/s3_int.h"
#include "tests/unit/unit.h"

static int parse(const char *xml, struct obj_kv **t, size_t *n)
{
	*t = NULL;
	*n = 0;
	return s3_xml_tagging_parse(xml, strlen(xml), t, n);
}

/* As RGW 16 answers (one line, namespace, XML declaration). */
static void test_rgw_answer(void)
{
	const char *xml =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
		"<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet>"
		"<Tag><Key>stage</Key><Value>raw</Value></Tag>"
		"<Tag><Key>owner</Key><Value>a&amp;b &lt;x&gt; &#233;</Value></Tag>"
		"</TagSet></Tagging>";
	struct obj_kv *t;
	size_t n;
	int rc = parse(xml, &t, &n);
	CHECK(rc == 0 && n == 2, "RGW answer: two tags (rc %d, n %zu)", rc, n);
	if (rc == 0 && n == 2) {
		CHECK(!strcmp(t[0].name, "stage") && !strcmp(t[0].value, "raw"),
		      "first tag stage=raw in document order");
		CHECK(!strcmp(t[1].name, "owner") && !strcmp(t[1].value, "a&b <x> \xc3\xa9"),
		      "entities decoded in a value (got \"%s\")", t[1].value);
	}
	obj_kv_free(t, n);
}

static void test_empty_and_pretty(void)
{
	struct obj_kv *t;
	size_t n;
	int rc = parse("<Tagging><TagSet></TagSet></Tagging>", &t, &n);
	CHECK(rc == 0 && n == 0 && t == NULL, "empty TagSet: no tags, NULL array");
	rc = parse("<Tagging><TagSet/></Tagging>", &t, &n);
	CHECK(rc == 0 && n == 0, "self-closing TagSet: no tags");

	/* AWS pretty-prints; an empty value, an empty-element value */
	const char *xml =
		"<Tagging>\n  <TagSet>\n    <Tag>\n      <Key>empty</Key>\n"
		"      <Value></Value>\n    </Tag>\n    <Tag>\n      <Key>k2</Key>\n"
		"      <Value/>\n    </Tag>\n    <Tag><Key>sp ace</Key><Value> v </Value></Tag>\n"
		"  </TagSet>\n</Tagging>\n";
	rc = parse(xml, &t, &n);
	CHECK(rc == 0 && n == 3, "pretty-printed answer: three tags (rc %d, n %zu)", rc, n);
	if (rc == 0 && n == 3) {
		CHECK(!strcmp(t[0].name, "empty") && !strcmp(t[0].value, ""),
		      "<Value></Value> is the empty string");
		CHECK(!strcmp(t[1].name, "k2") && !strcmp(t[1].value, ""),
		      "<Value/> is the empty string");
		CHECK(!strcmp(t[2].name, "sp ace") && !strcmp(t[2].value, " v "),
		      "spaces in names and values are kept");
	}
	obj_kv_free(t, n);
}

static void test_bad(void)
{
	struct obj_kv *t = (struct obj_kv *)1;
	size_t n = 77;
	int rc = s3_xml_tagging_parse("<Error><Code>NoSuchKey</Code></Error>", 37, &t, &n);
	CHECK(rc == -EPROTO && n == 77, "an error document is -EPROTO, outputs untouched");
	rc = parse("<Tagging><TagSet><Tag><Value>v</Value></Tag></TagSet></Tagging>", &t, &n);
	CHECK(rc == -EPROTO, "a Tag without Key is -EPROTO");
	rc = parse("<Tagging><TagSet><Tag><Key></Key><Value>v</Value></Tag></TagSet></Tagging>",
		   &t, &n);
	CHECK(rc == -EPROTO, "a Tag with an empty Key is -EPROTO");
	rc = parse("<Tagging><TagSet><Tag><Key>a</Key><Value>v</Value></Tag><Tag><Key>b",
		   &t, &n);
	CHECK(rc == -EPROTO, "a truncated document is -EPROTO");
	rc = parse("<Tagging><TagSet><Tag><Key>a&bogus;</Key></Tag></TagSet></Tagging>", &t, &n);
	CHECK(rc == -EPROTO, "a bad entity is -EPROTO");
	rc = parse("", &t, &n);
	CHECK(rc == -EPROTO, "an empty body is -EPROTO");
}

int main(void)
{
	test_rgw_answer();
	test_empty_and_pretty();
	test_bad();
	return unit_exit();
}
