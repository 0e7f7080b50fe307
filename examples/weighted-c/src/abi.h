/* A small codec for allocd's plugin ABI v1 (abi/ABI.md in the allocd repository): it reads a
 * request in place, checking every rule a reader must check, and writes a response. It needs
 * only <stdint.h>, <stddef.h> and malloc/realloc, so it builds for wasm32-wasi and natively
 * (its golden-vector test runs natively). */
#ifndef ALLOCD_ABI_H
#define ALLOCD_ABI_H

#include <stddef.h>
#include <stdint.h>

#define ALC_MAJOR 1
#define ALC_MINOR 0
#define ALC_VERSION ((ALC_MAJOR << 16) | ALC_MINOR)
#define ALC_NO_STRING 0xFFFFFFFFu

/* Section kinds (ABI.md 4.3). */
enum {
	ALC_STRINGS = 1, ALC_META, ALC_QUEUES, ALC_CONSUMERS, ALC_TARGETS, ALC_CONFIG,
	ALC_QUEUE_LABELS, ALC_QUEUE_METRICS, ALC_CONSUMER_LABELS, ALC_CONSUMER_METRICS, ALC_PREV_OWNERS,
	ALC_KINDS
};

/* A string of the request: len bytes at p, not NUL-terminated. */
typedef struct {
	const uint8_t *p;
	uint32_t len;
} alc_str;

/* A parsed request: pointers into the message, which must outlive it. */
typedef struct {
	const uint8_t *msg;
	uint32_t len;
	const uint8_t *sec[ALC_KINDS]; /* a section's first byte, NULL when absent */
	uint32_t count[ALC_KINDS];     /* its record count (STRINGS: the number of strings) */
	const uint8_t *blob;           /* the string table's bytes */
	uint32_t blob_len;
	uint32_t group;
} alc_request;

/* alc_parse reads msg[0:len) as a request. It returns 0, or -1 with *err set to a static
 * message naming the broken rule; a refused message is never read further. */
int alc_parse(alc_request *r, const uint8_t *msg, uint32_t len, const char **err);

alc_str alc_string(const alc_request *r, uint32_t id);
static inline uint32_t alc_num_queues(const alc_request *r) { return r->count[ALC_QUEUES]; }
static inline uint32_t alc_num_consumers(const alc_request *r) { return r->count[ALC_CONSUMERS]; }
/* Targets: the consumer ids to answer for, in order; the whole group (cidAll) when absent. */
int alc_whole_group(const alc_request *r);
uint32_t alc_num_targets(const alc_request *r);
uint32_t alc_target(const alc_request *r, uint32_t i); /* a string id */
/* The first index of string id in cidAll, or -1 when it is not a member. */
int64_t alc_consumer_index(const alc_request *r, uint32_t id);

uint32_t alc_consumer(const alc_request *r, uint32_t j);           /* cidAll[j], a string id */
void alc_queue(const alc_request *r, uint32_t i, uint32_t *topic, uint32_t *broker, int32_t *id);
uint32_t alc_prev_owner(const alc_request *r, uint32_t i);         /* a string id or ALC_NO_STRING */

/* Config and attributes by key (a NUL-terminated C string); 1 when found. */
int alc_config(const alc_request *r, const char *key, alc_str *value);
int alc_queue_label(const alc_request *r, uint32_t i, const char *key, alc_str *value);
int alc_queue_metric(const alc_request *r, uint32_t i, const char *key, int64_t *value);
int alc_consumer_label(const alc_request *r, uint32_t j, const char *key, alc_str *value);
int alc_consumer_metric(const alc_request *r, uint32_t j, const char *key, int64_t *value);

/* Raw records, for tools that walk every attribute (the golden test). */
uint32_t alc_u32(const uint8_t *p);
int64_t alc_i64(const uint8_t *p);

/* A response being written (ABI.md 5). Start with alc_resp_begin, add one result per target in
 * order, finish with alc_resp_end, which returns the message or NULL when memory ran out. */
typedef struct {
	uint8_t *buf;
	uint32_t len, cap, results;
	int failed;
} alc_response;

void alc_resp_begin(alc_response *w);
void alc_resp_ok(alc_response *w, const uint32_t *indices, uint32_t n);
void alc_resp_error(alc_response *w, const char *msg, uint32_t n);
const uint8_t *alc_resp_end(alc_response *w, uint32_t *len);

#endif
