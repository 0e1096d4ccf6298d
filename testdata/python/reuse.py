# Code objects freed and made again at the same address: each round makes
# a copy of grow's code named f<i> in file gen<i>.py, and drops it at the
# next round. pymalloc hands the next copy the block the last one left,
# so one address holds forty code objects in turn, and often their names'
# strings sit where an earlier round's did: the same three addresses for
# another code object. Even rounds call their copy once and keep a
# bytearray of its own size; odd rounds' copies never run, so memtrace
# never reads them. memtrace must charge each even f<i> its own bytes (or,
# when it read f<i> too late, no name at all), never another code object
# that had the same address. The argument is how long each copy that ran
# stays alive (0.05 s by default; 0: memtrace reads most of them late).
import os
import sys
import time
import types

ROUNDS = 40
ALIVE = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
keep = []
addrs = set()
# (code, co_name, co_filename) addresses of the last round that ran.
last = None
same = 0


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
    code = fn.__code__
    addrs.add(id(code))
    if i % 2:
        continue
    here = (id(code), id(code.co_name), id(code.co_filename))
    same += here == last
    last = here
    keep.append(fn(100000 + i * 4096))
    # Alive a while: memtrace reads a code object when it drains the
    # events that ran it (every 20 ms), and names it only if it is alive.
    time.sleep(ALIVE)

# Alive after the rounds: memtrace reads the code objects of the events
# it drains late while the process is still there to read.
time.sleep(0.3)
# Rounds, distinct addresses of their code objects, and rounds run whose
# code object and names had the addresses of the last round run's.
print(ROUNDS, len(addrs), same)
sys.stdout.flush()
# Exit without finalizing, which would free what was kept.
os._exit(0)
