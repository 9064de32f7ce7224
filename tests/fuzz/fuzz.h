/*
 * fuzz.h — what the libFuzzer targets of tests/fuzz/ share.
 *
 * Each target is one file defining LLVMFuzzerTestOneInput() for one parser
 * of outside input; it feeds the bytes exactly as given (the parsers take
 * a length and need no NUL, so ASan sees any read past the end), then
 * checks the parser's documented postconditions with FUZZ_CHECK. A failed
 * check prints why and aborts: libFuzzer then saves the input, like for a
 * sanitizer report. Targets keep no state between inputs.
 */
#ifndef FACETFS_FUZZ_H
#define FACETFS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...) do {                                      \
		if (!(cond)) {                                          \
			fprintf(stderr, "fuzz check failed at %s:%d: ", \
				__FILE__, __LINE__);                    \
			fprintf(stderr, __VA_ARGS__);                   \
			fprintf(stderr, "\n");                          \
			abort();                                        \
		}                                                       \
	} while (0)

/* A NUL-terminated copy of data[0..size) (malloc'ed; NULL on ENOMEM, the
 * target then skips the input), for the functions that take C strings. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
