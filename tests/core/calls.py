#!/usr/bin/env python3
"""No two of libkvrt's files call each other in a circle, and no room calls
one above or beside it (CONTRIBUTING.md, "Where things live").

layers.sh holds the includes to the rooms' order; this reads what each
object file of the built library defines and needs (nm), so a call that
an include did not show (a function declared in one room's header but
defined in another's file) is caught too.

Usage: calls.py CORE_BUILD_DIR   (the folder holding libkvrt's objects)
"""
import glob
import os
import shutil
import subprocess
import sys

ROOMS = ('text', 'settings', 'values', 'models', 'runtime')
MAY = {'text': {'text'}, 'settings': {'text', 'settings'}, 'values': {'text', 'settings', 'values'},
       'models': {'text', 'settings', 'values', 'models'}, 'runtime': {'text', 'settings', 'values', 'runtime'}}


def objects(build):
    """{name: path} of libkvrt's own objects, named room/file.c."""
    out = {}
    for folder in glob.glob(os.path.join(build, 'libkvrt.so*.p')):
        for path in glob.glob(os.path.join(folder, '*.c.o')):
            base = os.path.basename(path)[:-len('.o')]
            room, _, rest = base.partition('_')
            if room in ROOMS:
                out['%s/%s' % (room, rest)] = path
    return out


def symbols(path):
    defined, needed = set(), set()
    text = subprocess.run(['nm', path], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBR':
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == 'U':
            needed.add(parts[1])
    return defined, needed


def circles(edges):
    """The strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if not shutil.which('nm'):
        print('1..0 # SKIP nm (binutils) not found')
        return 0
    objs = objects(sys.argv[1])
    if not objs:
        print('1..0 # SKIP no libkvrt objects under %s (a build of another layout)' % sys.argv[1])
        return 0
    defined, needed = {}, {}
    for name, path in objs.items():
        defined[name], needed[name] = symbols(path)
    owner = {s: n for n, d in defined.items() for s in d}
    edges = {n: sorted({owner[s] for s in needed[n] if s in owner and owner[s] != n}) for n in objs}
    print('1..4')
    print('%s 1 - %d objects of libkvrt read, each in a room' % ('ok' if len(objs) > 20 else 'not ok', len(objs)))
    up = ['%s calls %s' % (n, w) for n in sorted(edges) for w in edges[n]
          if w.split('/')[0] not in MAY[n.split('/')[0]]]
    print('%s 2 - no file calls into a room above or beside its own' % ('not ok' if up else 'ok'))
    for u in up:
        print('# ' + u)
    found = circles(edges)
    print('%s 3 - no files call each other in a circle' % ('not ok' if found else 'ok'))
    for c in found:
        print('# circle: ' + ' '.join(c))
    sample = circles({'a': ['b'], 'b': ['c'], 'c': ['a'], 'd': ['a']})
    print('%s 4 - the checker finds a circle in a sample (a -> b -> c -> a, d outside it)'
          % ('ok' if sample == [['a', 'b', 'c']] else 'not ok'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
