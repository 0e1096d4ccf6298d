# Code objects freed and made again at the same address: each round makes
# a copy of grow's code named f<i> in file gen<i>.py, calls it once, keeps
# it a while and drops it. pymalloc hands the next copy the block the last
# one left, so one address holds forty code objects in turn. Each f<i>
# keeps a bytearray of its own size alive: memtrace must charge each one
# to its own f<i> (or, when it read f<i> too late, to no name at all),
# never to another code object that had the same address.
import os
import sys
import time
import types

ROUNDS = 40
keep = []
addrs = set()


def grow(n):
    return bytearray(n)


fn = None
for i in range(ROUNDS):
    names = {"co_name": f"f{i}", "co_filename": f"gen{i}.py"}
    if sys.version_info >= (3, 11):
        names["co_qualname"] = f"f{i}"
    # The last round's code object is freed just before this one's is made.
    fn = None
    fn = types.FunctionType(grow.__code__.replace(**names), globals())
    addrs.add(id(fn.__code__))
    keep.append(fn(100000 + i * 4096))
    # Alive a while: memtrace reads a code object when it drains the
    # events that ran it (every 20 ms), and names it only if it is alive.
    time.sleep(0.05)

# Rounds, and distinct addresses their code objects had.
print(ROUNDS, len(addrs))
sys.stdout.flush()
# Exit without finalizing, which would free what was kept.
os._exit(0)
