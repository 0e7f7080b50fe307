#include "abi.h"

#include <stdlib.h>
#include <string.h>

uint32_t alc_u32(const uint8_t *p) {
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int64_t alc_i64(const uint8_t *p) { return (int64_t)((uint64_t)alc_u32(p) | (uint64_t)alc_u32(p + 4) << 32); }

static const uint8_t *rec(const alc_request *r, int kind, uint32_t size, uint32_t i) {
	return r->sec[kind] + 4 + (size_t)size * i;
}

alc_str alc_string(const alc_request *r, uint32_t id) {
	alc_str s = {NULL, 0};
	if (id >= r->count[ALC_STRINGS]) return s;
	const uint8_t *o = r->sec[ALC_STRINGS] + 4 + 4 * (size_t)id;
	uint32_t a = alc_u32(o), b = alc_u32(o + 4);
	s.p = r->blob + a;
	s.len = b - a;
	return s;
}

/* Byte-wise order, a shorter prefix first (ABI.md 1). */
static int cmp_str(alc_str a, alc_str b) {
	uint32_t n = a.len < b.len ? a.len : b.len;
	int c = n ? memcmp(a.p, b.p, n) : 0;
	if (c) return c;
	return a.len < b.len ? -1 : a.len > b.len;
}

static int cmp_key(alc_str a, const char *key) {
	alc_str k = {(const uint8_t *)key, (uint32_t)strlen(key)};
	return cmp_str(a, k);
}

#define FAIL(msg) do { *err = (msg); return -1; } while (0)

/* The record size of each kind after its u32 count (0: not a counted section). */
static const uint32_t rec_size[ALC_KINDS] = {0, 0, 0, 12, 4, 4, 8, 12, 16, 12, 16, 4};

static int check_id(const alc_request *r, uint32_t id) { return id < r->count[ALC_STRINGS]; }

/* Attribute records: owners in range, sorted by owner then key, strictly; ids valid. */
static int check_attrs(alc_request *r, int kind, uint32_t owners, int labels, const char **err) {
	if (!r->sec[kind]) return 0;
	uint32_t size = rec_size[kind];
	for (uint32_t i = 0; i < r->count[kind]; i++) {
		const uint8_t *p = rec(r, kind, size, i);
		uint32_t owner = alc_u32(p), key = alc_u32(p + 4);
		if (owner >= owners) FAIL("abi: an attribute names an owner index out of range");
		if (!check_id(r, key) || (labels && !check_id(r, alc_u32(p + 8)))) FAIL("abi: an attribute names a string the request lacks");
		if (i > 0) {
			const uint8_t *q = rec(r, kind, size, i - 1);
			uint32_t powner = alc_u32(q);
			if (owner < powner || (owner == powner && cmp_str(alc_string(r, alc_u32(q + 4)), alc_string(r, key)) >= 0))
				FAIL("abi: attribute records are not sorted by owner, then key, strictly");
		}
	}
	return 0;
}

static int check_ids(alc_request *r, int kind, int allow_none, const char **err) {
	if (!r->sec[kind]) return 0;
	for (uint32_t i = 0; i < r->count[kind]; i++) {
		uint32_t id = alc_u32(rec(r, kind, 4, i));
		if (!check_id(r, id) && !(allow_none && id == ALC_NO_STRING)) FAIL("abi: a string id is out of range");
	}
	return 0;
}

int alc_parse(alc_request *r, const uint8_t *msg, uint32_t len, const char **err) {
	memset(r, 0, sizeof *r);
	r->msg = msg;
	r->len = len;
	if (len < 16) FAIL("abi: request shorter than its 16-byte header");
	if (memcmp(msg, "ALRQ", 4) != 0) FAIL("abi: not a request (magic is not ALRQ)");
	if ((alc_u32(msg + 4) & 0xFFFF) != ALC_MAJOR) FAIL("abi: request of another major version");
	if (alc_u32(msg + 8) != len) FAIL("abi: the header's total length is not the message's length");
	uint32_t n = alc_u32(msg + 12);
	uint64_t dir_end = 16 + 12 * (uint64_t)n;
	if (dir_end > len) FAIL("abi: the directory does not fit in the message");
	uint32_t seclen[ALC_KINDS] = {0};
	for (uint32_t e = 0; e < n; e++) {
		const uint8_t *d = msg + 16 + 12 * (size_t)e;
		uint32_t kind = alc_u32(d), off = alc_u32(d + 4), slen = alc_u32(d + 8);
		if (off % 4 != 0) FAIL("abi: a section's offset is not a multiple of 4");
		if (off < dir_end || (uint64_t)off + slen > len) FAIL("abi: a section lies outside the message");
		if (kind == 0 || kind >= ALC_KINDS) continue; /* a later minor version's: skipped */
		if (r->sec[kind]) FAIL("abi: a section kind appears twice");
		r->sec[kind] = msg + off;
		seclen[kind] = slen;
	}
	if (!r->sec[ALC_STRINGS] || !r->sec[ALC_META] || !r->sec[ALC_QUEUES] || !r->sec[ALC_CONSUMERS])
		FAIL("abi: a required section (STRINGS, META, QUEUES, CONSUMERS) is missing");

	/* STRINGS (4.4). */
	if (seclen[ALC_STRINGS] < 4) FAIL("abi: STRINGS is too short");
	uint32_t ns = alc_u32(r->sec[ALC_STRINGS]);
	uint64_t table = 4 + 4 * ((uint64_t)ns + 1);
	if (table > seclen[ALC_STRINGS]) FAIL("abi: the string offsets do not fit in STRINGS");
	r->count[ALC_STRINGS] = ns;
	r->blob = r->sec[ALC_STRINGS] + table;
	r->blob_len = seclen[ALC_STRINGS] - (uint32_t)table;
	const uint8_t *o = r->sec[ALC_STRINGS] + 4;
	if (alc_u32(o) != 0) FAIL("abi: the first string offset is not 0");
	for (uint32_t i = 0; i < ns; i++)
		if (alc_u32(o + 4 * (size_t)i + 4) < alc_u32(o + 4 * (size_t)i)) FAIL("abi: string offsets decrease");
	if (alc_u32(o + 4 * (size_t)ns) > r->blob_len) FAIL("abi: a string runs past the string table");

	/* META (4.5). */
	if (seclen[ALC_META] < 8) FAIL("abi: META is shorter than 8 bytes");
	r->group = alc_u32(r->sec[ALC_META]);
	if (!check_id(r, r->group)) FAIL("abi: the group names a string the request lacks");

	/* Counted sections: the count fits. */
	for (int k = ALC_QUEUES; k < ALC_KINDS; k++) {
		if (!r->sec[k]) continue;
		if (seclen[k] < 4) FAIL("abi: a section is shorter than its count");
		r->count[k] = alc_u32(r->sec[k]);
		if (4 + (uint64_t)rec_size[k] * r->count[k] > seclen[k]) FAIL("abi: a section's records do not fit in it");
	}
	for (uint32_t i = 0; i < r->count[ALC_QUEUES]; i++) {
		const uint8_t *q = rec(r, ALC_QUEUES, 12, i);
		if (!check_id(r, alc_u32(q)) || !check_id(r, alc_u32(q + 4))) FAIL("abi: a queue names a string the request lacks");
	}
	if (check_ids(r, ALC_CONSUMERS, 0, err) || check_ids(r, ALC_TARGETS, 0, err) || check_ids(r, ALC_PREV_OWNERS, 1, err))
		return -1;
	if (r->sec[ALC_PREV_OWNERS] && r->count[ALC_PREV_OWNERS] != r->count[ALC_QUEUES])
		FAIL("abi: PREV_OWNERS does not have one entry per queue");
	if (r->sec[ALC_CONFIG]) {
		for (uint32_t i = 0; i < r->count[ALC_CONFIG]; i++) {
			const uint8_t *c = rec(r, ALC_CONFIG, 8, i);
			if (!check_id(r, alc_u32(c)) || !check_id(r, alc_u32(c + 4))) FAIL("abi: a config entry names a string the request lacks");
			if (i > 0 && cmp_str(alc_string(r, alc_u32(c - 8)), alc_string(r, alc_u32(c))) >= 0)
				FAIL("abi: config keys are not strictly increasing");
		}
	}
	uint32_t nq = r->count[ALC_QUEUES], nc = r->count[ALC_CONSUMERS];
	if (check_attrs(r, ALC_QUEUE_LABELS, nq, 1, err) || check_attrs(r, ALC_QUEUE_METRICS, nq, 0, err) ||
	    check_attrs(r, ALC_CONSUMER_LABELS, nc, 1, err) || check_attrs(r, ALC_CONSUMER_METRICS, nc, 0, err))
		return -1;
	return 0;
}

int alc_whole_group(const alc_request *r) { return r->sec[ALC_TARGETS] == NULL; }

uint32_t alc_num_targets(const alc_request *r) {
	return alc_whole_group(r) ? r->count[ALC_CONSUMERS] : r->count[ALC_TARGETS];
}

uint32_t alc_target(const alc_request *r, uint32_t i) {
	return alc_u32(rec(r, alc_whole_group(r) ? ALC_CONSUMERS : ALC_TARGETS, 4, i));
}

uint32_t alc_consumer(const alc_request *r, uint32_t j) { return alc_u32(rec(r, ALC_CONSUMERS, 4, j)); }

int64_t alc_consumer_index(const alc_request *r, uint32_t id) {
	/* Each distinct string is stored once (4.4), so ids compare as strings do. */
	for (uint32_t j = 0; j < r->count[ALC_CONSUMERS]; j++)
		if (alc_consumer(r, j) == id) return j;
	return -1;
}

void alc_queue(const alc_request *r, uint32_t i, uint32_t *topic, uint32_t *broker, int32_t *id) {
	const uint8_t *q = rec(r, ALC_QUEUES, 12, i);
	*topic = alc_u32(q);
	*broker = alc_u32(q + 4);
	*id = (int32_t)alc_u32(q + 8);
}

uint32_t alc_prev_owner(const alc_request *r, uint32_t i) {
	return r->sec[ALC_PREV_OWNERS] ? alc_u32(rec(r, ALC_PREV_OWNERS, 4, i)) : ALC_NO_STRING;
}

int alc_config(const alc_request *r, const char *key, alc_str *value) {
	if (!r->sec[ALC_CONFIG]) return 0;
	uint32_t lo = 0, hi = r->count[ALC_CONFIG]; /* keys are sorted: binary search */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const uint8_t *c = rec(r, ALC_CONFIG, 8, mid);
		int d = cmp_key(alc_string(r, alc_u32(c)), key);
		if (d == 0) {
			*value = alc_string(r, alc_u32(c + 4));
			return 1;
		}
		if (d < 0) lo = mid + 1; else hi = mid;
	}
	return 0;
}

/* find returns the record of (owner, key) in an attribute section, or NULL. */
static const uint8_t *find(const alc_request *r, int kind, uint32_t owner, const char *key) {
	if (!r->sec[kind]) return NULL;
	uint32_t size = rec_size[kind], lo = 0, hi = r->count[kind];
	while (lo < hi) { /* the first record of owner */
		uint32_t mid = lo + (hi - lo) / 2;
		if (alc_u32(rec(r, kind, size, mid)) < owner) lo = mid + 1; else hi = mid;
	}
	for (; lo < r->count[kind]; lo++) {
		const uint8_t *p = rec(r, kind, size, lo);
		if (alc_u32(p) != owner) break;
		int d = cmp_key(alc_string(r, alc_u32(p + 4)), key);
		if (d == 0) return p;
		if (d > 0) break;
	}
	return NULL;
}

static int label(const alc_request *r, int kind, uint32_t owner, const char *key, alc_str *value) {
	const uint8_t *p = find(r, kind, owner, key);
	if (p) *value = alc_string(r, alc_u32(p + 8));
	return p != NULL;
}

static int metric(const alc_request *r, int kind, uint32_t owner, const char *key, int64_t *value) {
	const uint8_t *p = find(r, kind, owner, key);
	if (p) *value = alc_i64(p + 8);
	return p != NULL;
}

int alc_queue_label(const alc_request *r, uint32_t i, const char *key, alc_str *v) { return label(r, ALC_QUEUE_LABELS, i, key, v); }
int alc_queue_metric(const alc_request *r, uint32_t i, const char *key, int64_t *v) { return metric(r, ALC_QUEUE_METRICS, i, key, v); }
int alc_consumer_label(const alc_request *r, uint32_t j, const char *key, alc_str *v) { return label(r, ALC_CONSUMER_LABELS, j, key, v); }
int alc_consumer_metric(const alc_request *r, uint32_t j, const char *key, int64_t *v) { return metric(r, ALC_CONSUMER_METRICS, j, key, v); }

/* The response writer. */

static void put(alc_response *w, const void *p, uint32_t n) {
	if (w->failed) return;
	if (w->len + (uint64_t)n > w->cap) {
		uint64_t cap = w->cap ? w->cap : 256;
		while (cap < w->len + (uint64_t)n) cap *= 2;
		uint8_t *b = cap > 0xFFFFFFFFu ? NULL : realloc(w->buf, (size_t)cap);
		if (!b) {
			w->failed = 1;
			return;
		}
		w->buf = b;
		w->cap = (uint32_t)cap;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void put32(alc_response *w, uint32_t v) {
	uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
	put(w, b, 4);
}

void alc_resp_begin(alc_response *w) {
	w->len = 0;
	w->results = 0;
	w->failed = 0;
	put(w, "ALRS", 4);
	put32(w, ALC_MAJOR | ALC_MINOR << 16);
	put32(w, 0); /* the total length, set by alc_resp_end */
	put32(w, 0); /* the number of results */
}

void alc_resp_ok(alc_response *w, const uint32_t *indices, uint32_t n) {
	put32(w, 0);
	put32(w, n);
	for (uint32_t i = 0; i < n; i++) put32(w, indices[i]);
	w->results++;
}

void alc_resp_error(alc_response *w, const char *msg, uint32_t n) {
	static const uint8_t zeros[4] = {0};
	put32(w, 1);
	put32(w, n);
	put(w, msg, n);
	put(w, zeros, (4 - n % 4) % 4);
	w->results++;
}

const uint8_t *alc_resp_end(alc_response *w, uint32_t *len) {
	if (w->failed) return NULL;
	uint8_t *b = w->buf;
	for (int i = 0; i < 4; i++) {
		b[8 + i] = (uint8_t)(w->len >> (8 * i));
		b[12 + i] = (uint8_t)(w->results >> (8 * i));
	}
	*len = w->len;
	return b;
}
