# A script whose lines make small objects of one size class in turn: a
# tree of __slots__ nodes, each __init__ making an empty list, beside
# words, a grid, bytearrays and JSON strings. Not in the tests: on a build
# that inlines pymalloc (Debian's python3.11) memtrace charges its 16 KiB
# pools to the line that opened each, and the node, its key and its list
# (64 bytes each) share theirs unevenly (docs/python.md, Limits). With
# PYTHONTRACEMALLOC set it prints tracemalloc's view, as keep.py does.
import json
import os
import sys
import tracemalloc

held = []


class Node:
    __slots__ = ("key", "children", "payload")

    def __init__(self, key, payload):
        self.key = key
        self.children = []
        self.payload = payload


def make_tree(depth, fan):
    root = Node("root", b"x" * 64)
    level = [root]
    for d in range(depth):
        nxt = []
        for n in level:
            for f in range(fan):
                c = Node("%s.%d" % (n.key, f), bytes(200))
                n.children.append(c)
                nxt.append(c)
        level = nxt
    return root


def words(n):
    return " ".join("w%07d" % i for i in range(n)).split()


def grid(n):
    return [[j for j in range(50)] for _ in range(n)]


def blobs(n):
    out = {}
    for i in range(n):
        out[i] = bytearray(1500 + (i % 7) * 100)
    return out


def encoded(n):
    return [json.dumps({"k": i, "v": [i] * 5}) for i in range(n)]


def main():
    held.append(make_tree(6, 7))
    held.append(words(300000))
    held.append(grid(20000))
    held.append(blobs(8000))
    held.append(encoded(80000))
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        for st in snap.statistics("lineno")[:15]:
            fr = st.traceback[0]
            print("%s:%d %d" % (fr.filename, fr.lineno, st.size))
        print("total %d" % tracemalloc.get_traced_memory()[0])
    sys.stdout.flush()
    os._exit(0)


main()
