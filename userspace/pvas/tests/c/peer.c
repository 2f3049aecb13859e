/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A shared-space member written in C against sky_pvas.h: receives
 * messages from member 1, sends them back to member 3, then drains a push
 * queue from member 1. Attaches from SKY_PVAS_PATH / SKY_PVAS_ID.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sky_pvas.h"

static unsigned char pattern(uint64_t k, size_t i)
{
	return (unsigned char)((size_t)(k * 31) ^ (i * 7) ^ (i >> 8));
}

static int fail(const char *what)
{
	printf("c error: %s: %s\n", what, sky_pvas_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	sky_pvas *space = sky_pvas_attach_env();
	size_t max = 0;
	unsigned char *buf;
	int nsizes = argc - 1;
	char line[64];

	if (!space)
		return fail("attach");
	for (int k = 0; k < nsizes; k++)
		if ((size_t)atol(argv[k + 1]) > max)
			max = atol(argv[k + 1]);
	/* One-copy receives land in our own segment. */
	buf = sky_pvas_alloc(space, max ? max : 1, 64);
	if (!buf)
		return fail("alloc");
	for (int k = 0; k < nsizes; k++) {
		size_t want = atol(argv[k + 1]);
		int64_t n = sky_pvas_recv(space, 1, buf, max);

		if (n < 0)
			return fail("recv");
		if ((size_t)n != want) {
			printf("c error: message %d is %lld bytes, expected %zu\n", k, (long long)n, want);
			return 1;
		}
		for (size_t i = 0; i < want; i++)
			if (buf[i] != pattern(k, i)) {
				printf("c error: message %d differs at byte %zu\n", k, i);
				return 1;
			}
		if (sky_pvas_send(space, 3, buf, want) < 0)
			return fail("send");
	}
	printf("c messages ok, segment of member 1 at %p\n", sky_pvas_segment(space, 1));

	sky_pvas_queue *q = sky_pvas_queue_open(space, 1, SKY_PVAS_PUSH, 1, 2, 0, 64, 4);
	if (!q)
		return fail("queue");
	for (uint64_t k = 0; k < 100; k++) {
		int64_t n = sky_pvas_dequeue(q, line, sizeof(line));
		size_t want = 1 + (k * 13) % 64;

		if (n < 0)
			return fail("dequeue");
		if ((size_t)n != want) {
			printf("c error: queue message %llu is %lld bytes, expected %zu\n",
			       (unsigned long long)k, (long long)n, want);
			return 1;
		}
		for (size_t i = 0; i < want; i++)
			if ((unsigned char)line[i] != pattern(k, i)) {
				printf("c error: queue message %llu differs at byte %zu\n",
				       (unsigned long long)k, i);
				return 1;
			}
	}
	/* Either NULL handle must be refused with -EINVAL. */
	if (sky_pvas_send(NULL, 1, "x", 1) != -22 || sky_pvas_recv(NULL, 1, buf, 1) != -22)
		return fail("NULL handle accepted");
	sky_pvas_queue_close(q);
	sky_pvas_detach(space);
	printf("c ok\n");
	return 0;
}
