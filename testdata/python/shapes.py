# Fixture for memtrace's Python tests (cmd/memtrace e2e_python_test.go),
# keep.py's companion with other shapes: instances with a __dict__,
# f-strings, a join, tuples, a set comprehension, a generator's lists
# and bytes, each kept alive by a named function's line. With
# PYTHONTRACEMALLOC set it prints tracemalloc's view of the same moment,
# one "file:line bytes" per line, for the test to compare.
import os
import sys
import tracemalloc

kept = []


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y
        self.tags = {"x": x, "y": y}


def points(n):
    return [Point(i, i + 1) for i in range(n)]


def words(n):
    out = []
    for i in range(n):
        out.append(f"word-{i:06d}-" + "z" * (i % 40))
    return out


def joined(ws):
    return ",".join(ws)


def pairs(n):
    return [(i, str(i)) for i in range(n)]


def sets(n):
    return {i * 7 for i in range(n)}


def gen(n):
    for i in range(n):
        yield [i] * 3


def blobs(n):
    return [bytes(1000 + i % 100) for i in range(n)]


def main():
    kept.append(points(40000))
    ws = words(80000)
    kept.append(ws)
    kept.append(joined(ws))
    kept.append(pairs(70000))
    kept.append(sets(100000))
    kept.append(list(gen(50000)))
    kept.append(blobs(3000))
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        for st in snap.statistics("lineno")[:15]:
            fr = st.traceback[0]
            print("%s:%d %d" % (fr.filename, fr.lineno, st.size))
        print("total %d" % tracemalloc.get_traced_memory()[0])
    sys.stdout.flush()
    os._exit(0)


main()
