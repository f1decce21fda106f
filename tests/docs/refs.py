#!/usr/bin/env python3
"""Every path and section the tree cites must exist in the tree.

Scans the source and documentation files of the repository for
  - repository paths (`docs/runtime.md`, `core/values/spec.c`, `tests/lib/tap.h`, ...),
  - repository folders (`tools/common/`, and in backticks also without the
    trailing slash or the extension: `tests/lib`, `tools/kvrt-like/name`),
  - relative Markdown links (`[x](../docs/cli.md)`),
  - section references (`docs/design.md §7`, `design.md §3`),
and fails (TAP) on any that does not resolve.  Citations of a document that
is not part of the repository (a bare upper-case design-document name with a
section sign) are failures too: the tree
must stand on its own.

Usage: refs.py SOURCE_ROOT
"""
import os
import re
import sys
import tempfile

SCANNED = ('.c', '.h', '.in', '.cu', '.cpp', '.md', '.build', '.txt', '.sh', '.py')
TOP_DIRS = ('core', 'include', 'plugins', 'tests', 'tools', 'docs', 'examples', 'bench', 'xfer', 'store',
            'python', 'cmake', 'scripts')
EXTS = ('c', 'h', 'in', 'cu', 'cpp', 'md', 'build', 'txt', 'sh', 'py', 'json', 'supp',
        'svg', 'patch', 'dict', 'cfg')

# Files produced by the build, cited by the name they have in the build tree.
GENERATED = {
    'include/kvrt/version.h': 'include/kvrt/version.h.in',
}

# Files whose repository paths name files of other repositories (the
# provenance of copied data), so bare paths there are not this tree's.
# Links and section references in them are still checked.
OTHER_REPOS = {
    'examples/models/SOURCES.md': 'where each example config was copied from',
}

PATH_RE = re.compile(r'(?<![\w/.<>$*-])((?:%s)/[\w./+-]*?\.(?:%s))(?![\w/*<-])'
                     % ('|'.join(TOP_DIRS), '|'.join(EXTS)))
# A folder: a top-level folder and sub-folders, ending in "/".
FOLDER_RE = re.compile(r'(?<![\w/.<>$*@-])((?:%s)/(?:[\w+-]+/)*)(?![\w*<-])' % '|'.join(TOP_DIRS))
# Anything under a top-level folder written as code, with or without an
# extension or a trailing slash.
TICK_RE = re.compile(r'`((?:%s)(?:/[\w.+-]+)+/?)`' % '|'.join(TOP_DIRS))
LINK_RE = re.compile(r'\]\(([^)#\s]+)(?:#[^)]*)?\)')
SECTION_RE = re.compile(r'([\w./-]*\.md)\s+§\s*(\d+)')
FOREIGN_RE = re.compile(r'\bDESIGN(?:\.md\b|\s*§)')
# The name of the outside brief, for the self-test's sample only.
OUTSIDE = 'DES' + 'IGN'
# The checker's own file, whose self-test names missing paths on purpose.
SELF = 'tests/docs/refs.py'
HEADING_RE = re.compile(r'^#{2,}\s+(\d+)\.', re.M)


def is_build_dir(path):
    return (os.path.isdir(os.path.join(path, 'meson-private'))
            or os.path.isdir(os.path.join(path, 'meson-info')))


def scanned_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if not d.startswith('.') and not is_build_dir(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            if name.endswith(SCANNED) or name in ('NEWS', 'meson.build', 'meson_options.txt'):
                yield os.path.join(dirpath, name)


def sections(root, doc, cache):
    if doc not in cache:
        path = os.path.join(root, doc)
        try:
            with open(path, encoding='utf-8') as f:
                cache[doc] = set(int(n) for n in HEADING_RE.findall(f.read()))
        except OSError:
            cache[doc] = None
    return cache[doc]


def find_doc(root, citing_dir, name):
    """A cited .md file: as a repository path, relative to the citing file, or in docs/."""
    for cand in (name, os.path.relpath(os.path.join(citing_dir, name), root), os.path.join('docs', name)):
        cand = os.path.normpath(cand)
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check(root):
    """Problems found under root, as 'file:line: text' strings."""
    problems = []
    cache = {}
    for path in scanned_files(root):
        rel = os.path.relpath(path, root)
        if rel == SELF:
            continue
        citing_dir = os.path.dirname(rel)
        try:
            with open(path, encoding='utf-8') as f:
                lines = f.read().split('\n')
        except (OSError, UnicodeDecodeError):
            continue
        for lineno, line in enumerate(lines, 1):
            where = '%s:%d' % (rel, lineno)
            cited_here = set()
            for regex in ([] if rel in OTHER_REPOS else (PATH_RE, FOLDER_RE, TICK_RE)):
                for m in regex.finditer(line):
                    cited = m.group(1).rstrip('.') if regex is PATH_RE else m.group(1)
                    if cited in cited_here:
                        continue
                    cited_here.add(cited)
                    if cited in GENERATED:
                        cited = GENERATED[cited]
                    # meson.build files name their sources relative to themselves.
                    if not (os.path.exists(os.path.join(root, cited))
                            or os.path.exists(os.path.join(root, citing_dir, cited))):
                        problems.append('%s: cites %s, which does not exist' % (where, m.group(1)))
            if rel.endswith('.md'):
                for m in LINK_RE.finditer(line):
                    target = m.group(1)
                    if re.match(r'^[a-z]+:', target):
                        continue
                    full = os.path.normpath(os.path.join(root, citing_dir, target))
                    if not os.path.exists(full):
                        problems.append('%s: links to %s, which does not exist' % (where, target))
            for m in SECTION_RE.finditer(line):
                doc = find_doc(root, citing_dir, m.group(1))
                num = int(m.group(2))
                if doc is None:
                    problems.append('%s: cites %s §%d, but there is no such file' % (where, m.group(1), num))
                    continue
                have = sections(root, doc, cache)
                if not have or num not in have:
                    problems.append('%s: cites %s §%d, but %s has sections %s' % (
                        where, m.group(1), num, doc, sorted(have or [])))
            if FOREIGN_RE.search(line):
                problems.append('%s: cites a DESIGN section, which is not in the repository; '
                                'cite docs/design.md §N' % where)
    return problems


def self_test():
    """The checker must catch what it exists to catch (and accept what is valid)."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, 'docs'))
        os.makedirs(os.path.join(tmp, 'core', 'room'))
        with open(os.path.join(tmp, 'docs', 'design.md'), 'w') as f:
            f.write('# d\n\n## 1. One\n\n## 2. Two\n')
        with open(os.path.join(tmp, 'core', 'a.c'), 'w') as f:
            f.write('/* docs/design.md §2, core/a.c and docs/x.md */\n'
                    '/* docs/design.md §9 */\n'
                    # Spelled in pieces so that this file itself cites nothing.
                    '/* ' + OUTSIDE + ' §4 */\n'
                    '/* see ../' + OUTSIDE + '.md */\n'
                    '/* core/gone.c and build-x/core/ok.c and <prefix>/docs/no.md */\n')
        with open(os.path.join(tmp, 'docs', 'b.md'), 'w') as f:
            f.write('[ok](design.md) [bad](../core/missing.c) [web](https://x.org/a.md) design.md §1\n')
            # Folders: core/room/ and `core/room` exist, the others do not.
            f.write('core/room/ and `core/room` are here\n'
                    'tools/gone/ is not\n'
                    'nor is `core/room/gone`\n')
        got = sorted(p.split(': ', 1)[0] + ' ' + p.split(': ', 1)[1].split(' ')[0]
                     for p in check(tmp))
        want = sorted(['core/a.c:1 cites', 'core/a.c:2 cites', 'core/a.c:3 cites',
                       'core/a.c:4 cites', 'core/a.c:5 cites', 'docs/b.md:1 links',
                       'docs/b.md:3 cites', 'docs/b.md:4 cites'])
        return got == want, got, want


def main():
    if len(sys.argv) != 2:
        print('usage: refs.py SOURCE_ROOT', file=sys.stderr)
        return 2
    root = sys.argv[1]
    print('1..3')
    ok, got, want = self_test()
    print('%s 1 - the checker flags missing paths, folders, links and sections in a sample tree'
          % ('ok' if ok else 'not ok'))
    if not ok:
        print('# flagged: %s' % got)
        print('# wanted:  %s' % want)
    have = sections(root, 'docs/design.md', {})
    design_ok = bool(have) and have == set(range(1, max(have) + 1))
    print('%s 2 - docs/design.md exists with sections numbered 1..N' % ('ok' if design_ok else 'not ok'))
    if not design_ok:
        print('# sections found: %s' % sorted(have or []))
    problems = check(root)
    print('%s 3 - every cited path, folder and section exists in the tree' % ('not ok' if problems else 'ok'))
    for p in problems:
        print('# ' + p)
    return 0


if __name__ == '__main__':
    sys.exit(main())
