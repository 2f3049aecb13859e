/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A shared-space member written in C against sky_pvas.h: creates and
 * destroys a scratch space, receives messages from member 1, sends them
 * back to member 3, drains a push queue from member 1, then forks a child
 * that joins as member 4 through the inherited mapping and sends to us.
 * Attaches from SKY_PVAS_PATH / SKY_PVAS_ID.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
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

/* create returns a handle; a too-small path buffer costs nothing. */
static int scratch_space(const char *dir)
{
	char tiny[4], path[4096];
	sky_pvas *s = sky_pvas_create("c-scratch", dir, 2, 4 << 20, 0);

	if (!s)
		return fail("create");
	if (sky_pvas_path_of(s, tiny, sizeof(tiny)) != -EINVAL)
		return fail("a 4-byte path buffer accepted");
	if (sky_pvas_path_of(s, path, sizeof(path)) != 0 || !strstr(path, "c-scratch"))
		return fail("path_of");
	if (sky_pvas_destroy_space(s) != 0)
		return fail("destroy_space");
	if (access(path, F_OK) == 0) {
		printf("c error: %s is still there after destroy\n", path);
		return 1;
	}
	return 0;
}

/* pvas_fork: the child joins as member 4 in the mapping it inherited. */
static int fork_member(sky_pvas *space)
{
	char got[16];
	int status;
	pid_t child = fork();

	if (child < 0)
		return fail("fork");
	if (child == 0) {
		sky_pvas *mine = sky_pvas_attach_inherited(space, 4);

		if (!mine || sky_pvas_send(mine, sky_pvas_id(space), "forked", 6) != 0)
			_exit(1);
		sky_pvas_detach(mine);
		_exit(0);
	}
	if (sky_pvas_recv(space, 4, got, sizeof(got)) != 6 || memcmp(got, "forked", 6))
		return fail("recv from the forked member");
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return fail("forked member");
	/* The child's membership ended with it; ours did not. */
	if (sky_pvas_alive(space, sky_pvas_id(space)) != 1 || sky_pvas_alive(space, 4) != 0) {
		printf("c error: after the child: alive(me)=%d alive(4)=%d\n",
		       sky_pvas_alive(space, sky_pvas_id(space)), sky_pvas_alive(space, 4));
		return 1;
	}
	/* The scheduler hint: a member may set it, the flag is ours to clear. */
	if (sky_pvas_set_memory_bound(space, 1) != 0 || sky_pvas_set_memory_bound(space, 0) != 0)
		return fail("set_memory_bound");
	printf("c fork ok\n");
	return 0;
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
	if (getenv("SKY_PVAS_SCRATCH_DIR") && scratch_space(getenv("SKY_PVAS_SCRATCH_DIR")))
		return 1;
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
	if (fork_member(space))
		return 1;
	sky_pvas_detach(space);
	printf("c ok\n");
	return 0;
}
