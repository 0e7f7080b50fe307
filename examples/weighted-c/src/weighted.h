/* The strategy, apart from the wasm exports, so that it also builds natively. */
#ifndef WEIGHTED_H
#define WEIGHTED_H

#include "abi.h"

/* Buffers kept from call to call. */
struct weighted_state {
	int64_t *weights;
	uint32_t *order, *start, *indices;
	uint32_t cap_consumers, cap_queues;
};

/* weighted_allocate answers req into out (begun and filled; the caller ends it). It returns
 * NULL, or the message of a whole-call failure. */
const char *weighted_allocate(struct weighted_state *st, const alc_request *req, alc_response *out);

#endif
