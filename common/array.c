/* array.c — see array.h. */
#include "common/array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int array_grow(void *arrp, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap > 8 ? *cap : 8;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (elem && n > SIZE_MAX / elem)
		return -ENOMEM;
	/* the pointer variable is read and written as bytes: arrp may be the
	 * address of any object pointer type */
	void *old;
	memcpy(&old, arrp, sizeof old);
	void *p = realloc(old, n * elem);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof p);
	*cap = n;
	return 0;
}
