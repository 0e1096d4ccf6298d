/*
 * The slot of refault_slots a sampled page counts in (resident.h), in a
 * header of its own so that the test programs check the probes' own hash
 * against user space's (tracer.refaultSlot).
 */
#ifndef MEMTRACE_REFAULT_H
#define MEMTRACE_REFAULT_H

#define REFAULT_SLOT_BITS 20

/* refault_index: the slot of process tgid's page at addr (a multiplicative hash of both). */
static __always_inline __u32 refault_index(__u32 tgid, __u64 addr)
{
	return (((addr >> 12) ^ ((__u64)tgid << 40)) * 0x9E3779B97F4A7C15ULL) >> (64 - REFAULT_SLOT_BITS);
}

#endif
