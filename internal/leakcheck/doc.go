// Package leakcheck classifies the live heap blocks of a stopped process as
// valgrind's memcheck does: definitely lost, indirectly lost, possibly lost
// or still reachable.
//
// It is pure: its inputs are the live blocks (address and size), a Memory
// that reads the target's address space, the root ranges (writable data of
// the modules, the thread stacks from their stack pointers, other client
// memory that is not heap) and the register values; its output is a class
// per block. It imports nothing from eBPF or ptrace, so it is tested with a
// fake memory.
//
// The algorithm is memcheck's (mc_leakcheck.c), reimplemented:
//
//   - A conservative scan of aligned 8-byte words. A word whose value lies
//     in [addr, addr+size) of a block points to it (a block of size 0 covers
//     its address only): at addr it is a start-pointer, past it an
//     interior-pointer.
//   - Mark phase: every word of the roots and every register is a pointer
//     from a "definite" place. A block reached by a start-pointer from a
//     definite place is Reachable; reached any other way (an interior
//     pointer, or from a block that is itself only possibly reachable) it is
//     Possible. A block whose state changes is scanned (again), with its
//     own state deciding whether what it points to is reached definitely.
//     Interior pointers that match one of memcheck's heuristics (stdstring,
//     length64, newarray, multipleinheritance; all on by default, as with
//     valgrind's --leak-check-heuristics=all) count as start-pointers.
//   - Clique phase: the blocks still unreached are visited in address order;
//     each one still unreached becomes a clique leader, and every unreached
//     block reachable from it (through unreached blocks, by any pointer) joins
//     its clique as indirectly lost, a leader of an earlier clique included
//     (its clique is merged). Leaders are definitely lost.
//   - Blocks reachable only from possibly-lost blocks are possibly lost, not
//     indirectly lost (they are reached in the mark phase).
//
// The final classes do not depend on the order blocks are scanned in (the
// mark phase computes a fixpoint; each clique is the set of unreached blocks
// reachable from its leader, leaders taken in address order), so blocks are
// read and scanned in batches sorted by address, which is what makes a 1 GB
// heap cheap to read through process_vm_readv.
//
// What memtrace cannot reproduce natively: memcheck only follows words whose
// bytes are defined (written by the program); natively every aligned word is
// read, so a stale pointer left in uninitialized memory (an unwritten stack
// slot, the unwritten tail of a block, a register) can make a block look
// reachable or possibly lost where valgrind says lost. The allocator's own
// bookkeeping can point into blocks too: glibc's malloc keeps pointers to
// chunk headers, which lie inside the previous block's last word; see
// GlibcChunkHeader.
package leakcheck
