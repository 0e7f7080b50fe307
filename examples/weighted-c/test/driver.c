/* A native driver of the codec and the strategy, for golden_test.go:
 *   driver dump FILE       print the request in FILE field by field, or "error: ..." (exit 1)
 *   driver resp            write the response described on stdin ("ok I..." or "error HEX" lines)
 *   driver allocate FILE   answer the request in FILE with the strategy, as the plugin would */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/abi.h"
#include "../src/weighted.h"

static uint8_t *slurp(const char *path, uint32_t *len) {
	FILE *f = fopen(path, "rb");
	if (!f) return NULL;
	uint8_t *b = NULL;
	size_t n = 0, cap = 0, r;
	do {
		if (n == cap) b = realloc(b, cap = cap ? 2 * cap : 4096);
		r = fread(b + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	*len = (uint32_t)n;
	return b;
}

static void hex(alc_str s) {
	if (s.len == 0) fputs("-", stdout);
	for (uint32_t i = 0; i < s.len; i++) printf("%02x", s.p[i]);
}

static void id(const alc_request *r, uint32_t id) { hex(alc_string(r, id)); }

static void attrs(const alc_request *r, const char *what, int labels, int metrics) {
	if (!r->sec[labels] && !r->sec[metrics]) {
		printf("%s none\n", what);
		return;
	}
	printf("%s present\n", what);
	for (uint32_t i = 0; r->sec[labels] && i < r->count[labels]; i++) {
		const uint8_t *p = r->sec[labels] + 4 + 12 * (size_t)i;
		printf("%s label %u ", what, alc_u32(p));
		id(r, alc_u32(p + 4));
		putchar(' ');
		id(r, alc_u32(p + 8));
		putchar('\n');
	}
	for (uint32_t i = 0; r->sec[metrics] && i < r->count[metrics]; i++) {
		const uint8_t *p = r->sec[metrics] + 4 + 16 * (size_t)i;
		printf("%s metric %u ", what, alc_u32(p));
		id(r, alc_u32(p + 4));
		printf(" %" PRId64 "\n", alc_i64(p + 8));
	}
}

static int dump(const alc_request *r) {
	fputs("group ", stdout);
	id(r, r->group);
	putchar('\n');
	for (uint32_t i = 0; i < alc_num_queues(r); i++) {
		uint32_t t, b;
		int32_t q;
		alc_queue(r, i, &t, &b, &q);
		fputs("queue ", stdout);
		id(r, t);
		putchar(' ');
		id(r, b);
		printf(" %d\n", q);
	}
	for (uint32_t j = 0; j < alc_num_consumers(r); j++) {
		fputs("consumer ", stdout);
		id(r, alc_consumer(r, j));
		putchar('\n');
	}
	if (alc_whole_group(r)) puts("targets none");
	for (uint32_t t = 0; !alc_whole_group(r) && t < alc_num_targets(r); t++) {
		fputs("target ", stdout);
		id(r, alc_target(r, t));
		printf(" index %" PRId64 "\n", alc_consumer_index(r, alc_target(r, t)));
	}
	puts(r->sec[ALC_CONFIG] ? "config present" : "config none");
	for (uint32_t i = 0; r->sec[ALC_CONFIG] && i < r->count[ALC_CONFIG]; i++) {
		const uint8_t *p = r->sec[ALC_CONFIG] + 4 + 8 * (size_t)i;
		alc_str k = alc_string(r, alc_u32(p)), v = alc_string(r, alc_u32(p + 4)), found;
		/* Look each key a C string can name up as a strategy would, to prove the search. */
		char key[256];
		if (k.len < sizeof key && !memchr(k.p, 0, k.len)) {
			memcpy(key, k.p, k.len);
			key[k.len] = 0;
			if (!alc_config(r, key, &found) || found.p != v.p || found.len != v.len) {
				printf("config lookup of a key failed\n");
				return 3;
			}
		}
		fputs("config ", stdout);
		hex(k);
		putchar(' ');
		hex(v);
		putchar('\n');
	}
	attrs(r, "queue", ALC_QUEUE_LABELS, ALC_QUEUE_METRICS);
	attrs(r, "consumer", ALC_CONSUMER_LABELS, ALC_CONSUMER_METRICS);
	if (!r->sec[ALC_PREV_OWNERS]) puts("prev none");
	for (uint32_t i = 0; r->sec[ALC_PREV_OWNERS] && i < alc_num_queues(r); i++) {
		uint32_t o = alc_prev_owner(r, i);
		fputs("prev ", stdout);
		if (o == ALC_NO_STRING) fputs("none", stdout); else id(r, o);
		putchar('\n');
	}
	return 0;
}

static int resp(void) {
	alc_response w = {0};
	alc_resp_begin(&w);
	char line[1 << 16];
	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "ok", 2) == 0) {
			uint32_t idx[1024], n = 0;
			for (char *p = line + 2, *end; n < 1024; p = end) {
				unsigned long v = strtoul(p, &end, 10);
				if (end == p) break;
				idx[n++] = (uint32_t)v;
			}
			alc_resp_ok(&w, idx, n);
		} else if (strncmp(line, "error", 5) == 0) {
			char msg[1 << 15];
			uint32_t n = 0;
			for (char *p = line + 6; p[0] && p[0] != '\n' && p[1]; p += 2) {
				unsigned v;
				if (sscanf(p, "%2x", &v) != 1) return 1;
				msg[n++] = (char)v;
			}
			alc_resp_error(&w, msg, n);
		}
	}
	uint32_t len;
	const uint8_t *b = alc_resp_end(&w, &len);
	int rc = b && fwrite(b, 1, len, stdout) == len ? 0 : 1;
	free(w.buf);
	return rc;
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "resp") == 0) return resp();
	if (argc != 3) return 2;
	uint32_t len;
	uint8_t *b = slurp(argv[2], &len);
	if (!b) return 2;
	alc_request r;
	const char *err;
	int rc = 2;
	if (alc_parse(&r, b, len, &err) != 0) {
		printf("error: %s\n", err);
		rc = 1;
	} else if (strcmp(argv[1], "dump") == 0) {
		rc = dump(&r);
	} else if (strcmp(argv[1], "allocate") == 0) {
		struct weighted_state st = {0};
		alc_response w = {0};
		const char *msg = weighted_allocate(&st, &r, &w);
		uint32_t n;
		const uint8_t *out = msg ? NULL : alc_resp_end(&w, &n);
		if (msg) printf("error: %s\n", msg);
		rc = out && fwrite(out, 1, n, stdout) == n ? 0 : 1;
		free(w.buf);
		free(st.weights);
		free(st.order);
		free(st.start);
		free(st.indices);
	}
	free(b);
	return rc;
}
