#include <stdlib.h>
#include <string.h>

#include "weighted.h"

/* The largest weight, as the daemon allows for a member's weight label. */
#define MAX_WEIGHT 1000000

/* parse_weight reads a whole number in [0, MAX_WEIGHT], with an optional sign as Go's
 * strconv.ParseInt allows; 0 when s is not one. */
static int parse_weight(alc_str s, int64_t *w) {
	uint32_t i = 0;
	int neg = 0;
	if (s.len > 0 && (s.p[0] == '+' || s.p[0] == '-')) {
		neg = s.p[0] == '-';
		i = 1;
	}
	if (i == s.len) return 0;
	int64_t v = 0;
	for (; i < s.len; i++) {
		if (s.p[i] < '0' || s.p[i] > '9') return 0;
		v = v * 10 + (s.p[i] - '0');
		if (v > MAX_WEIGHT) return 0;
	}
	if (neg && v != 0) return 0;
	*w = v;
	return 1;
}

static int grow(void **p, size_t n, size_t size) {
	void *b = realloc(*p, n * size);
	if (!b) return 0;
	*p = b;
	return 1;
}

/* For sorting consumers by remainder, largest first, ties to the lower index. */
static const int64_t *sort_rem;

static int by_remainder(const void *a, const void *b) {
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (sort_rem[x] != sort_rem[y]) return sort_rem[x] > sort_rem[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

const char *weighted_allocate(struct weighted_state *st, const alc_request *req, alc_response *out) {
	uint32_t n = alc_num_consumers(req), q = alc_num_queues(req);
	if (n + 1 > st->cap_consumers) {
		uint32_t c = n + 1;
		if (!grow((void **)&st->weights, c, 2 * sizeof(int64_t)) || !grow((void **)&st->order, c, sizeof(uint32_t)) ||
		    !grow((void **)&st->start, c, sizeof(uint32_t)))
			return "weighted-c: out of memory";
		st->cap_consumers = c;
	}
	if (q > st->cap_queues) {
		if (!grow((void **)&st->indices, q, sizeof(uint32_t))) return "weighted-c: out of memory";
		st->cap_queues = q;
	}
	int64_t def = 1, *w = st->weights, *rem = st->weights + n + 1;
	alc_str v;
	if (alc_config(req, "default-weight", &v) && !parse_weight(v, &def))
		return "config default-weight is not a whole number in [0, 1000000]";
	int64_t total = 0;
	for (uint32_t j = 0; j < n; j++) {
		w[j] = def;
		if (alc_consumer_label(req, j, "weight", &v) && !parse_weight(v, &w[j]))
			return "a consumer's weight label is not a whole number in [0, 1000000]";
		total += w[j];
	}
	if (total == 0) { /* every weight 0: all equal */
		for (uint32_t j = 0; j < n; j++) w[j] = 1;
		total = n;
	}
	uint32_t left = q, *size = st->start + 1;
	for (uint32_t j = 0; j < n; j++) {
		size[j] = (uint32_t)((int64_t)q * w[j] / total);
		rem[j] = (int64_t)q * w[j] % total;
		left -= size[j];
		st->order[j] = j;
	}
	sort_rem = rem;
	qsort(st->order, n, sizeof(uint32_t), by_remainder);
	for (uint32_t k = 0; k < left; k++) size[st->order[k]]++;
	st->start[0] = 0;
	for (uint32_t j = 0; j < n; j++) st->start[j + 1] = st->start[j] + size[j]; /* in place: size is start+1 */

	for (uint32_t i = 0; i < q; i++) st->indices[i] = i;
	alc_resp_begin(out);
	for (uint32_t t = 0, nt = alc_num_targets(req); t < nt; t++) {
		int64_t self = alc_consumer_index(req, alc_target(req, t));
		if (self < 0) { /* not a member: nothing */
			alc_resp_ok(out, NULL, 0);
			continue;
		}
		alc_resp_ok(out, st->indices + st->start[self], st->start[self + 1] - st->start[self]);
	}
	return NULL;
}
