/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tasks.bpf.h - the daemon's listing of the running tasks: an iterator over
 * every thread writes one struct sky_task_row (intf.h) each, so the daemon
 * lists a machine's threads in a few reads instead of walking /proc with
 * several system calls a thread (under TCG, 0.5 to 1.4 ms a thread). It
 * gives what the walk gave (thread, process, name) and what the gangs read
 * per thread besides (runnable, and where it runs). The scheduler itself
 * never uses it.
 */
#ifndef __SKY_TASKS_BPF_H
#define __SKY_TASKS_BPF_H

#include "sky.bpf.h"

SEC("iter/task")
int sky_list_tasks(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct sky_task_row row = {};

	if (!task)
		return 0;
	row.tid = task->pid;
	row.pid = task->tgid;
	row.cpu = scx_bpf_task_cpu(task);
	/* TASK_RUNNING: running or waiting for a CPU, /proc's state R. */
	row.runnable = task->__state == 0;
	bpf_probe_read_kernel_str(row.comm, sizeof(row.comm), task->comm);
	bpf_seq_write(seq, &row, sizeof(row));
	return 0;
}

#endif /* __SKY_TASKS_BPF_H */
