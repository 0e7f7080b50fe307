/* weighted-c: an allocd strategy plugin in C. Each consumer gets a contiguous block of the
 * group's queues sized by its "weight" label: its share q*w/W rounded down, the queues left over
 * going one each to the largest remainders, ties to the lower index. With equal weights that is
 * RocketMQ's AVG. It computes exactly what the Go plugin `allocd init-plugin` writes, so
 * `allocd check weighted-c.wasm --reference that.wasm` proves the two agree. */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "weighted.h"

/* The bulk-transfer imports of allocd:host/v1 (ABI.md 3.2): one host call moves a whole buffer. */
#define HOST(name) __attribute__((import_module("allocd:host/v1"), import_name(name)))
HOST("input_read") uint32_t input_read(void *ptr, uint32_t limit);
HOST("output_write") void output_write(const void *ptr, uint32_t len);
HOST("error_write") void error_write(const void *ptr, uint32_t len);

/* Importing sched_yield lets the host stop a runaway loop cheaply (ABI.md 7). */
__attribute__((import_module("wasi_snapshot_preview1"), import_name("sched_yield"))) uint16_t wasi_sched_yield(void);

static const char describe_json[] =
	"{\"name\":\"weighted-c\",\"version\":\"0.1.0\",\"abi\":\"1.0\","
	"\"description\":\"contiguous blocks of queues sized by the consumers' weight label (C)\","
	"\"properties\":[\"balanced\",\"weighted\"],"
	"\"config\":{\"default-weight\":\"weight of a consumer without a weight label (default 1)\"}}";

__attribute__((export_name("allocd_abi_version"))) int32_t abi_version(void) { return ALC_VERSION; }

__attribute__((export_name("allocd_describe"))) int32_t describe(void) {
	output_write(describe_json, sizeof describe_json - 1);
	wasi_sched_yield(); /* once, at load: keeps the import */
	return 0;
}

/* One call at a time runs in an instance, so its buffers are kept for the next call. */
static uint8_t *in;
static uint32_t in_cap;
static alc_response out;
static struct weighted_state st;

static int32_t fail(const char *msg) {
	error_write(msg, (uint32_t)strlen(msg));
	return 1;
}

__attribute__((export_name("allocate"))) int32_t allocate(void) {
	uint32_t n = input_read(in, in_cap);
	if (n > in_cap) {
		uint8_t *b = realloc(in, n);
		if (!b) return fail("weighted-c: out of memory for the request");
		in = b;
		in_cap = n;
		input_read(in, in_cap);
	}
	alc_request req;
	const char *err;
	if (alc_parse(&req, in, n, &err) != 0) return fail(err);
	const char *msg = weighted_allocate(&st, &req, &out);
	if (msg) return fail(msg);
	uint32_t len;
	const uint8_t *b = alc_resp_end(&out, &len);
	if (!b) return fail("weighted-c: out of memory for the response");
	output_write(b, len);
	return 0;
}
