// SPDX-License-Identifier: GPL-2.0
/*
 * One end of a queue between machines through the C API
 * (sky_pvas_queue_connect), against a Rust end (sky-pvas-remote): the same
 * wire, the same calls as a local queue.
 *
 *   remote send|recv push|pull listen|connect IP:PORT AREA|- MESSAGES
 *          ENTRY_SIZE ENTRIES SIZES [fresh]
 *
 * Message k carries SIZES[(k - 1) % n] bytes of the pattern sky-pvas-remote
 * uses (byte i of message k: (k * 31) ^ (i * 7) ^ (i >> 8)). The sender
 * resumes after what is durably in; the receiver after what it consumed,
 * and checks every byte. Prints "c ok sent|took first=F last=L" or
 * "c error: ..." (exit 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sky_pvas.h"

#define MAX_SIZES 16

static unsigned char pattern(uint64_t k, size_t i)
{
	return (unsigned char)((size_t)(k * 31) ^ (i * 7) ^ (i >> 8));
}

static int fail(const char *what)
{
	printf("c error: %s: %s\n", what, sky_pvas_last_error());
	return 1;
}

static int parse_sizes(char *list, size_t *sizes, size_t max_size)
{
	int n = 0;

	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		long v = atol(tok);

		if (n == MAX_SIZES || v <= 0 || (size_t)v > max_size)
			return -1;
		sizes[n++] = (size_t)v;
	}
	return n;
}

static int send_all(sky_pvas_queue *q, uint64_t from, uint64_t last, unsigned char *buf,
		    const size_t *sizes, int n)
{
	for (uint64_t k = from; k <= last; k++) {
		size_t len = sizes[(k - 1) % n];
		int64_t seq;

		for (size_t i = 0; i < len; i++)
			buf[i] = pattern(k, i);
		seq = sky_pvas_enqueue(q, buf, len);
		if (seq < 0)
			return fail("enqueue");
		if ((uint64_t)seq != k) {
			printf("c error: message %llu went in as %lld\n", (unsigned long long)k,
			       (long long)seq);
			return 1;
		}
	}
	if (sky_pvas_flush(q) < 0)
		return fail("flush");
	printf("c ok sent first=%llu last=%llu\n", (unsigned long long)from,
	       (unsigned long long)last);
	return 0;
}

static int take_all(sky_pvas_queue *q, uint64_t from, uint64_t last, unsigned char *buf,
		    size_t cap, const size_t *sizes, int n)
{
	for (uint64_t k = from; k <= last; k++) {
		int64_t len = sky_pvas_dequeue(q, buf, cap);

		if (len < 0)
			return fail("dequeue");
		if ((size_t)len != sizes[(k - 1) % n]) {
			printf("c error: message %llu is %lld bytes\n", (unsigned long long)k,
			       (long long)len);
			return 1;
		}
		for (size_t i = 0; i < (size_t)len; i++) {
			if (buf[i] != pattern(k, i)) {
				printf("c error: message %llu differs at byte %zu\n",
				       (unsigned long long)k, i);
				return 1;
			}
		}
	}
	printf("c ok took first=%llu last=%llu\n", (unsigned long long)from,
	       (unsigned long long)last);
	return 0;
}

int main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES];
	uint64_t enqueued, consumed, messages;
	uint32_t entry_size, entries;
	int send, mode, listen, fresh, n, rc;
	unsigned char *buf;
	sky_pvas_queue *q;
	const char *area;

	if (argc < 10) {
		printf("c error: usage: %s send|recv push|pull listen|connect IP:PORT "
		       "AREA|- MESSAGES ENTRY_SIZE ENTRIES SIZES [fresh]\n", argv[0]);
		return 1;
	}
	send = !strcmp(argv[1], "send");
	mode = !strcmp(argv[2], "pull") ? SKY_PVAS_PULL : SKY_PVAS_PUSH;
	listen = !strcmp(argv[3], "listen");
	area = strcmp(argv[5], "-") ? argv[5] : NULL;
	messages = strtoull(argv[6], NULL, 10);
	entry_size = (uint32_t)strtoul(argv[7], NULL, 10);
	entries = (uint32_t)strtoul(argv[8], NULL, 10);
	fresh = argc > 10 && !strcmp(argv[10], "fresh");
	n = parse_sizes(argv[9], sizes, entry_size);
	if (n <= 0) {
		printf("c error: sizes %s: 1 to %d of them, each 1..%u\n", argv[9], MAX_SIZES,
		       entry_size);
		return 1;
	}
	buf = malloc(entry_size);
	if (!buf)
		return 1;
	q = sky_pvas_queue_connect(mode, send ? SKY_PVAS_SENDER : SKY_PVAS_RECEIVER, listen,
				   argv[4], area, fresh, entry_size, entries);
	if (!q)
		return fail("connect");
	if (sky_pvas_queue_set_timeout(q, 60000) < 0)
		return fail("set timeout");
	if (sky_pvas_queue_position(q, &enqueued, &consumed) < 0)
		return fail("position");
	if (send)
		rc = send_all(q, enqueued + 1, messages, buf, sizes, n);
	else
		rc = take_all(q, consumed + 1, messages, buf, entry_size, sizes, n);
	sky_pvas_queue_close(q);
	free(buf);
	return rc;
}
