# Fixture for memtrace's Python tests (cmd/memtrace python_test.go): named
# functions keep dicts, lists, strings, comprehension results and
# bytearrays alive, then the script stops at a known point. With
# PYTHONTRACEMALLOC set it prints tracemalloc's view of the same moment,
# one "file:line bytes" per line, for the test to compare. It exits
# without tearing the interpreter down, so the final report sees what it kept.
import os
import sys
import tracemalloc

kept = []


def load_rows(n):
    rows = []
    for i in range(n):
        rows.append({"id": i, "name": "row-%d" % i, "score": i * 0.5})
    return rows


def build_index(rows):
    return {r["name"]: r["id"] for r in rows}


def render(rows):
    return ["<td>%s</td><td>%08d</td>" % (r["name"], r["id"]) for r in rows]


def buffers(n):
    return [bytearray(4096) for _ in range(n)]


def squares(n):
    return [i * i for i in range(n)]


def main():
    scale = int(os.environ.get("KEEP_SCALE", "1"))
    rows = load_rows(60000 * scale)
    kept.append(rows)
    kept.append(build_index(rows))
    kept.append(render(rows))
    kept.append(buffers(2000 * scale))
    kept.append(squares(300000 * scale))
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        for st in snap.statistics("lineno")[:15]:
            fr = st.traceback[0]
            print("%s:%d %d" % (fr.filename, fr.lineno, st.size))
        print("total %d" % tracemalloc.get_traced_memory()[0])
    sys.stdout.flush()
    # Exit without finalizing: the interpreter's teardown would free what
    # was kept, and memtrace's final report is taken at the exit.
    os._exit(0)


main()
