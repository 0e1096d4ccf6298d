/*
 * The kernel's structures the probes read (CO-RE: their offsets come from
 * the running kernel's BTF), and the constants of its ABI they test.
 * Provides: struct task_struct, mm_struct, vm_area_struct, file, inode,
 * super_block, linux_binprm, signal_struct, uprobe_task, return_instance,
 * xol_area, uprobes_state (the fields used only); MAP_ANONYMOUS, PROT_EXEC,
 * MAP_FAILED, MAX_USER_SIZE, WAKEUP_WINDOW.
 * Needs: memtrace.h (struct event).
 */
#ifndef MEMTRACE_KERNEL_H
#define MEMTRACE_KERNEL_H

#include <linux/bpf.h>

#include "memtrace.h"

#define MAP_ANONYMOUS 0x20
#define PROT_EXEC 0x4
/* No allocation of this many bytes can succeed (x86-64's user address space). */
#define MAX_USER_SIZE (1ULL << 47)
#define MAP_FAILED ((__u64)-1)
/* Records (with their 8-byte header) within which a crossing still wakes. */
#define WAKEUP_WINDOW (32 * (sizeof(struct event) + 8))

/* The fields read for --comm and by the exit probe (CO-RE: offsets from the kernel's BTF). */
struct signal_struct {
	struct {
		int counter;
	} live;
} __attribute__((preserve_access_index));

/* The page of a process's uprobe trampolines (in_outer). */
struct xol_area {
	unsigned long vaddr;
} __attribute__((preserve_access_index));

struct uprobes_state {
	struct xol_area *xol_area;
} __attribute__((preserve_access_index));

struct mm_struct {
	struct uprobes_state uprobes_state;
	unsigned long start_code, end_code;
} __attribute__((preserve_access_index));

/*
 * What a return probe replaced: the return address (orig_ret_vaddr) that
 * was in the stack slot at stack, the thread's newest call first
 * (real_return in unwind.h).
 */
struct return_instance {
	unsigned long stack;
	unsigned long orig_ret_vaddr;
	struct return_instance *next;
} __attribute__((preserve_access_index));

struct uprobe_task {
	struct return_instance *return_instances;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;  /* the thread id */
	int tgid; /* the process id */
	__u64 start_time;
	struct mm_struct *mm;
	struct uprobe_task *utask;
	struct task_struct *group_leader;
	struct signal_struct *signal;
	char comm[COMM_LEN];
} __attribute__((preserve_access_index));

/* The fields that name the file a code address is mapped from. */
struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
	long long i_size;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

/* The exec being done: what sched_process_exec passes as its third argument. */
struct linux_binprm {
	struct file *file;
	const char *interp;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	unsigned long vm_pgoff;
	struct file *vm_file;
	unsigned long vm_flags; /* in an anonymous union since 6.3: CO-RE finds it */
} __attribute__((preserve_access_index));

#endif
