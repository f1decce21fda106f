#!/usr/bin/env python3
"""Select the C files the analysers check, from the build's compile database.

    compile-db.py [--cppcheck] SOURCE_ROOT BUILD_ROOT OUT_DIR DIR...

Writes OUT_DIR/compile_commands.json with one entry per .c file under the
given source directories (relative to SOURCE_ROOT; generated files in the
build tree are left out), and prints the files, one per line.

Every source is compiled once, except a few that the build compiles more
than once on purpose, each time with other flags: the CPU decode kernel
once per instruction set, the test backend and the conformance mutants once
per variant, the template backend again with its entry point renamed for
the mutants, and in a clang build with the fuzzers the core, the tool's
readers, the kvrt-xfer metadata parser and the fuzz targets again with
coverage.  So the build's database cannot serve the analysers directly, for
the two reasons this script exists:

- clang-tidy 14 analyses a file once per command the database holds for it
  (24 times for the test backend), and from the second pass on reports a
  false clang-analyzer-valist.Uninitialized on every va_start/vsnprintf
  pair; so one entry per file is kept, the first (the plain build's).
- cppcheck 2.10 drops a shell-quoted define ('-DNAME="0.1.0"', as meson
  writes it) and strips the quotes of an unquoted one, so with --cppcheck
  entries are written as "arguments" lists with the quotes of -D values
  escaped.
"""
import json
import os
import shlex
import sys


def main():
    args = sys.argv[1:]
    for_cppcheck = bool(args) and args[0] == "--cppcheck"
    if for_cppcheck:
        args = args[1:]
    if len(args) < 4:
        sys.exit("usage: compile-db.py [--cppcheck] SOURCE_ROOT BUILD_ROOT OUT_DIR DIR...")
    src, build, out = (os.path.realpath(p) for p in args[:3])
    dirs = [os.path.join(src, d.strip("/")) + os.sep for d in args[3:]]
    with open(os.path.join(build, "compile_commands.json")) as f:
        db = json.load(f)
    seen, keep = set(), []
    for entry in db:
        path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        if not path.endswith(".c") or path.startswith(build + os.sep) or path in seen:
            continue
        if not any(path.startswith(d) for d in dirs):
            continue
        seen.add(path)
        entry = dict(entry, file=path)
        if "command" in entry:
            entry["arguments"] = shlex.split(entry.pop("command"))
        if for_cppcheck:
            # cppcheck 2.10 drops a shell-quoted define ('-DNAME="0.1.0"',
            # as meson writes it) and strips the quotes of an unquoted one,
            # so string-valued defines reach it only with escaped quotes.
            entry["arguments"] = [a.replace('"', '\\"') if a.startswith("-D") else a
                                  for a in entry["arguments"]]
        keep.append(entry)
    keep.sort(key=lambda e: e["file"])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "compile_commands.json"), "w") as f:
        json.dump(keep, f, indent=1)
    for entry in keep:
        print(entry["file"])


if __name__ == "__main__":
    main()
