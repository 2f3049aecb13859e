/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sky_pvas.h - C interface to scx_sky shared spaces (libsky_pvas.so).
 *
 * A space is one address range mapped at the same address in every member,
 * so pointers into it are valid in all of them. Member ID i (1..max) owns
 * segment i, which begins with an export area any member can find from the
 * ID. Members allocate their own data in their own segment.
 *
 * Return values: 0 or a count on success, a negated errno on failure
 * (constructors return NULL); sky_pvas_last_error() describes the last
 * failure on the calling thread. Blocking calls fail with -EPIPE if the
 * peer dies or leaves and -ESHUTDOWN if the space is destroyed: they never
 * block forever on a dead process (sky_pvas_set_timeout bounds them for a
 * live but silent one: -ETIMEDOUT). Values a peer wrote into shared memory
 * are checked before use; impossible ones fail with -EBADMSG.
 *
 * Threads: a handle (and the queues opened with it) may be used by one
 * thread at a time; it may move between threads. For several threads,
 * give each its own member ID (sky_pvas_attach_inherited).
 */
#ifndef SKY_PVAS_H
#define SKY_PVAS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sky_pvas sky_pvas;
typedef struct sky_pvas_queue sky_pvas_queue;

#define SKY_PVAS_EXPORT_WORDS 32
#define SKY_PVAS_PUSH 0
#define SKY_PVAS_PULL 1
#define SKY_PVAS_SENDER 0
#define SKY_PVAS_RECEIVER 1

const char *sky_pvas_last_error(void);

/*
 * Space lifecycle. dir NULL means /dev/shm. sky_pvas_create returns a
 * handle that is not a member (its path: sky_pvas_path_of).
 */
sky_pvas *sky_pvas_create(const char *name, const char *dir, uint32_t max_members,
			  uint64_t segment_size, int group_access);
int sky_pvas_path_of(const sky_pvas *space, char *out, size_t cap);
int sky_pvas_path(const char *dir, const char *name, char *out, size_t cap);
sky_pvas *sky_pvas_attach(const char *path, uint32_t id);
/*
 * Attach as set up by `scx_sky pvas run` (SKY_PVAS_PATH, SKY_PVAS_ID and
 * the slot lock it holds for us, SKY_PVAS_LOCK_FD).
 */
sky_pvas *sky_pvas_attach_env(void);
/*
 * Join as member `id` through this process's mapping of `space`: in a
 * child forked by a member, the inherited one (no exec needed; the
 * parent's membership is untouched).
 */
sky_pvas *sky_pvas_attach_inherited(const sky_pvas *space, uint32_t id);
void sky_pvas_detach(sky_pvas *space);
/* Destroy the space of any handle (member or not); frees the handle. */
int sky_pvas_destroy_space(sky_pvas *space);
int sky_pvas_destroy(const char *path);
/* Bound every blocking call on `space` to `ms` milliseconds; 0: none. */
int sky_pvas_set_timeout(const sky_pvas *space, uint64_t ms);
/*
 * Tell the scheduler this member is memory-bound (on != 0) or not: scx_sky
 * keeps a space with a memory-bound member on one last-level cache. Only a
 * member (not a creator's or opener's handle) may say so.
 */
int sky_pvas_set_memory_bound(const sky_pvas *space, int on);

/* 1 if a live process holds member ID `id` (as the kernel says), else 0. */
int sky_pvas_alive(const sky_pvas *space, uint32_t id);

/* Addresses: identical in every member. */
uint32_t sky_pvas_id(const sky_pvas *space);
void *sky_pvas_segment(const sky_pvas *space, uint32_t id);
uint64_t *sky_pvas_export_words(const sky_pvas *space, uint32_t id);
void *sky_pvas_alloc(const sky_pvas *space, size_t len, size_t align);

/*
 * One-copy messages, in order per pair. Messages over the eager size need
 * a receive buffer inside the receiver's segment (sky_pvas_alloc).
 */
int sky_pvas_set_eager_max(const sky_pvas *space, size_t bytes);
int sky_pvas_send(const sky_pvas *space, uint32_t to, const void *buf, size_t len);
int64_t sky_pvas_recv(const sky_pvas *space, uint32_t from, void *buf, size_t cap);

/*
 * Persistent queue (one sender, one receiver). The owner (the receiver for
 * PUSH, the sender for PULL) passes create=1 for a new, empty queue; the
 * other side, and either side resuming after a crash, restart or power
 * loss, passes create=0. sky_pvas_enqueue returns the message's sequence
 * number (from 1) once it is durable; after a resume the sender re-sends
 * what follows `enqueued` of sky_pvas_queue_position. Close queues before
 * detaching their space.
 */
sky_pvas_queue *sky_pvas_queue_open(const sky_pvas *space, int create, int mode,
				    uint32_t sender, uint32_t receiver, uint32_t slot,
				    uint32_t entry_size, uint32_t entry_count);
/*
 * The same queue between machines, over RDMA (RDMA CM on IPv4): `listen`
 * non-zero waits for the peer at `addr` ("IP:PORT", the IP naming the
 * RDMA device), else connects to it there. `area` is the owner's queue
 * area (PUSH receiver, PULL sender: a Device DAX namespace such as
 * /dev/dax0.0 for persistence, or a file) or the PULL receiver's state;
 * NULL for a PUSH sender. `fresh` non-zero starts a new epoch at the owner;
 * otherwise both sides resume from their durable state, as above. The
 * calls below work on either kind of queue; a broken connection fails
 * them (reconnect with fresh=0 to go on). Waits for a live but silent
 * peer are bounded by sky_pvas_queue_set_timeout (-ETIMEDOUT).
 */
sky_pvas_queue *sky_pvas_queue_connect(int mode, int role, int listen, const char *addr,
				       const char *area, int fresh, uint32_t entry_size,
				       uint32_t entry_count);
int sky_pvas_queue_set_timeout(const sky_pvas_queue *queue, uint64_t ms);
void sky_pvas_queue_close(sky_pvas_queue *queue);
int64_t sky_pvas_enqueue(const sky_pvas_queue *queue, const void *buf, size_t len);
int64_t sky_pvas_dequeue(const sky_pvas_queue *queue, void *buf, size_t cap);
int sky_pvas_flush(const sky_pvas_queue *queue);
int sky_pvas_queue_position(const sky_pvas_queue *queue, uint64_t *enqueued,
			    uint64_t *consumed);

#ifdef __cplusplus
}
#endif

#endif /* SKY_PVAS_H */
