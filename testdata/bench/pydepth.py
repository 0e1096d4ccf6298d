# memtrace's Python benchmark (bench/python.go): at a Python stack of
# DEPTH frames, ITERS times, one list of 4 items is made and dropped (its
# item array is one PyMem_Malloc and one PyMem_Free). Prints the loop's
# ns per iteration, start-up left out.
import os
import sys
import time

DEPTH = int(os.environ.get("DEPTH", "50"))
ITERS = int(os.environ.get("ITERS", "200000"))


def work():
    t = time.perf_counter_ns()
    for _ in range(ITERS):
        x = [None] * 4
        del x
    return (time.perf_counter_ns() - t) / ITERS


def down(n):
    if n > 1:
        return down(n - 1)
    return work()


# <module>, down() DEPTH-2 times, work(): DEPTH Python frames at each allocation.
print("%.1f" % down(DEPTH - 1))
sys.stdout.flush()
