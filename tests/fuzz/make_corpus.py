#!/usr/bin/env python3
"""Regenerate the binary seed corpora of fuzz-geometry and fuzz-descriptor.

    tests/fuzz/make_corpus.py [VECTORS_DIR]

The geometry seeds are the acceptance vectors (tests/vectors/geometry.json
and placement.json) encoded in the byte format fuzz_geometry.c reads, plus a
few edge cases (sizes near 2^64, fixed strides, state and padded pages,
duplicate names).  The descriptor seeds are a valid descriptor and one
mutation per rule of plugin.h.  The layout-names seeds are plain text files
kept by hand.  Run it again whenever an input format in fuzz_*.c changes.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
UNSET = (1 << 64) - 1
LAYOUTS = ["LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"]
KINDS = {"attention": 0, "mla": 1, "state": 2}
DTYPE_BY_SIZE = {4: 0, 2: 1, 1: 5}  # fp32, fp16, int8


def value(v):
    """fuzz_value(): selector byte, then the payload."""
    if v == UNSET:
        return b"\x05"
    if v < 32:
        return bytes([0, v])
    if v < 1 << 16:
        return b"\x03" + struct.pack("<H", v)
    return b"\x07" + struct.pack("<Q", v)


def spec_bytes(s):
    kind = KINDS[s["kind"]]
    dtype = DTYPE_BY_SIZE.get(s.get("dtype_size") or 1, 5)
    out = bytes([kind + 1, dtype + 1])
    out += value(s["block_size"]) + value(s.get("num_kv_heads") or 0) + value(s.get("head_size") or 0)
    optional = [
        ("head_size_v", s.get("head_size_v")),
        ("num_head_slots", s.get("num_head_slots")),
        ("state_content_bytes", s.get("state_content_bytes")),
        ("tps_num", (s.get("tokens_per_state") or [1, 1])[0]),
        ("tps_den", (s.get("tokens_per_state") or [1, 1])[1]),
        ("page_size_padded", s.get("page_size_padded")),
    ]
    defaults = {"tps_num": 1, "tps_den": 1}
    mask, tail = 0, b""
    for bit, (name, v) in enumerate(optional):
        if v is None or v == defaults.get(name):
            continue
        mask |= 1 << bit
        tail += value(v)
    return out + bytes([mask]) + tail


def geometry_input(spec, layout, num_layers, num_blocks, kernel=None, fixed=None, groups=None,
                   ids=None, budget=None):
    out = spec_bytes(spec)
    out += bytes([LAYOUTS.index(layout) + 1 if layout in LAYOUTS else 0])
    out += value(num_layers) + value(num_blocks)
    flags = (1 if kernel else 0) | sum(2 << a for a in range(5) if fixed and fixed[a] is not None)
    out += bytes([flags])
    if kernel:
        out += value(kernel)
    for a in range(5):
        if fixed and fixed[a] is not None:
            out += value(fixed[a])
    # Placement: by default one group of num_layers (at most 3) layers of
    # the same spec; `groups` lists per group a list of (name mode, spec or None).
    if groups is None:
        groups = [[(0, None)] * max(1, min(num_layers, 3))]
    out += bytes([len(groups) - 1])
    for g in groups:
        out += bytes([len(g) - 1])
        for name_mode, s in g:
            out += bytes([name_mode | (0 if s is None else 3 << 2)])
            if name_mode == 2:  # index of the earlier layer whose name to reuse
                out += b"\x00"
            if s is not None:
                out += spec_bytes(s)
    # Transfer: one round of ids (small ids are (sel >> 2) % (blocks + 1)).
    ids = ids if ids is not None else [0, num_blocks - 1 if num_blocks else 0]
    out += bytes([0, len(ids)]) + bytes([(i << 2) & 0xfc for i in ids])
    if budget is None:
        out += b"\x00"
    else:
        out += b"\x01" + value(budget)
    return out


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def geometry_corpus(vectors):
    with open(os.path.join(vectors, "geometry.json")) as f:
        geo = json.load(f)
    for c in geo["cases"] + geo["errors"]:
        write("geometry", "vector-" + c["id"],
              geometry_input(c["spec"], c["layout"], c["num_layers"], c["num_blocks"],
                             c.get("kernel_block_size"), c.get("fixed_strides"), budget=1 << 20))
    with open(os.path.join(vectors, "placement.json")) as f:
        pl = json.load(f)
    for i, c in enumerate(pl["cases"]):
        groups = [[(0, l["spec"]) for l in g] for g in c["groups"]]
        first = c["groups"][0][0]["spec"]
        write("geometry", "placement-%d" % i,
              geometry_input(first, c["layout"], 1, c["num_blocks"], groups=groups,
                             ids=[0, 2, 3, 1], budget=100000))

    attn = {"kind": "attention", "block_size": 16, "num_kv_heads": 2, "head_size": 8, "dtype_size": 2}
    huge = dict(attn, num_kv_heads=1 << 40, head_size=1 << 20)
    write("geometry", "edge-overflow", geometry_input(huge, "LBNHC", 1 << 30, 1 << 30))
    write("geometry", "edge-near-max", geometry_input(attn, "BLHNC", 3, (1 << 63) // 1024))
    write("geometry", "edge-fixed-strides",
          geometry_input(attn, "LBHNC", 2, 3, fixed=[None, 4096, 1024, None, 1]))
    write("geometry", "edge-fixed-small",
          geometry_input(attn, "LBNHC", 2, 3, fixed=[16, None, None, None, None]))
    write("geometry", "edge-fixed-odd",
          geometry_input(attn, "LHBNC", 2, 3, fixed=[None, None, 777, None, None]))
    state = {"kind": "state", "block_size": 16, "state_content_bytes": 77}
    write("geometry", "edge-state-odd",
          geometry_input(state, "BLHNC", 1, 4,
                         groups=[[(0, None), (0, attn)], [(0, state)]]))
    write("geometry", "edge-duplicate-name",
          geometry_input(attn, "LBNHC", 2, 4, groups=[[(0, None), (2, None)]]))
    write("geometry", "edge-kernel-split",
          geometry_input(dict(attn, block_size=64), "LBNHC", 3, 5, kernel=16, ids=[4, 0, 4]))
    write("geometry", "edge-tokens-per-state",
          geometry_input(dict(attn, tokens_per_state=[3, 2]), "BHLNC", 2, 5))
    write("geometry", "edge-zero", geometry_input(dict(attn, block_size=0), "LBNHC", 0, 0))
    write("geometry", "edge-split-fixed-block",
          geometry_input(dict(attn, block_size=64, num_kv_heads=1), "LBNHC", 2, 3, kernel=16,
                         fixed=[None, 2048, None, None, None]))
    small = dict(attn, num_kv_heads=1)
    write("geometry", "edge-block-outer-sets",
          geometry_input(attn, "BLHNC", 2, 4, groups=[[(0, None), (0, None), (0, small)]], ids=[3, 1]))
    write("geometry", "edge-padded-outer",
          geometry_input(dict(attn, page_size_padded=2304), "BLNHC", 2, 4, ids=[0, 1, 3]))


def text_input(text, limit):
    """make_text() in fuzz_descriptor.c: None keeps the fixed string; "null";
    bytes (terminated); or ("unterminated", extra) for limit + 1 + extra
    bytes without a NUL."""
    if text is None:
        return b"\x00"
    if text == "null":
        return b"\x80"
    if isinstance(text, tuple):
        return bytes([0xe0 + text[1]]) + b"v" * (limit + 1 + text[1])
    return b"\x90" + text + b"\x00"


def descriptor_input(size_sel=0, major_sel=0, name=None, name_null=False, version_null=False,
                     flags_sel=0, count_sel=0, layouts=(1,), layouts_null=False, dtypes_sel=0,
                     ops_sel=0, null_fn=None, why=255, text=127, version=None, description=None,
                     name_unterminated=None):
    out = bytes([size_sel, major_sel, 0])
    if name_null:
        out += b"\x40"
    elif name_unterminated is not None:
        # Raw mode with bit 0x20: an empty raw name, then 65 + n letters.
        out += bytes([0xa0 + name_unterminated]) + b"\x00" + bytes([0] * (65 + name_unterminated))
    elif name is None:
        out += b"\x03"
    else:
        out += b"\x80" + name + b"\x00"
    out += bytes([0x10 if layouts_null else 0])
    out += text_input("null" if version_null else version, 64) + text_input(description, 512)
    out += bytes([flags_sel, count_sel])
    if not layouts_null:
        out += bytes(layouts)
    out += bytes([dtypes_sel, ops_sel])
    out += bytes([0 if null_fn is None else 0x80 + null_fn])
    return out + bytes([why, text])


def descriptor_corpus():
    # Selector values index the tables in fuzz_descriptor.c.
    write("descriptor", "valid-one-layout", descriptor_input())
    write("descriptor", "valid-all-layouts",
          descriptor_input(count_sel=3, layouts=(1, 0, 4, 3, 5, 2)))
    write("descriptor", "valid-any", descriptor_input(flags_sel=1, count_sel=4, layouts=()))
    write("descriptor", "valid-raw-name", descriptor_input(name=b"my_backend-2"))
    write("descriptor", "bad-size", descriptor_input(size_sel=2))
    write("descriptor", "bad-size-zero", descriptor_input(size_sel=4))
    write("descriptor", "bad-abi", descriptor_input(major_sel=2))
    write("descriptor", "bad-name-null", descriptor_input(name_null=True))
    write("descriptor", "bad-name-upper", descriptor_input(name=b"CPU"))
    write("descriptor", "bad-name-long", descriptor_input(name=b"x" * 65))
    write("descriptor", "bad-name-empty", descriptor_input(name=b""))
    write("descriptor", "bad-version-null", descriptor_input(version_null=True))
    write("descriptor", "bad-flags", descriptor_input(flags_sel=3))
    write("descriptor", "bad-no-layouts", descriptor_input(count_sel=4, layouts=()))
    write("descriptor", "bad-seven-layouts",
          descriptor_input(count_sel=5, layouts=(0, 1, 2, 3, 4, 5, 0)))
    write("descriptor", "bad-layouts-null", descriptor_input(layouts_null=True))
    write("descriptor", "bad-layout-range", descriptor_input(layouts=(6,)))
    write("descriptor", "bad-layout-twice", descriptor_input(count_sel=1, layouts=(1, 1)))
    write("descriptor", "bad-no-dtypes", descriptor_input(dtypes_sel=4))
    write("descriptor", "bad-dtype-bit", descriptor_input(dtypes_sel=3))
    write("descriptor", "bad-op-bit", descriptor_input(ops_sel=4))
    write("descriptor", "bad-probe-null", descriptor_input(null_fn=0))
    write("descriptor", "bad-decode-null", descriptor_input(null_fn=13))
    write("descriptor", "ok-decode-null-without-op", descriptor_input(ops_sel=2, null_fn=13))
    # Strings read with a bound: no NUL within the limit, control bytes.
    write("descriptor", "bad-name-unterminated", descriptor_input(name_unterminated=0))
    write("descriptor", "bad-name-unterminated-longer", descriptor_input(name_unterminated=15))
    write("descriptor", "bad-version-unterminated", descriptor_input(version=("unterminated", 0)))
    write("descriptor", "bad-version-long", descriptor_input(version=b"1" * 65))
    write("descriptor", "ok-version-64", descriptor_input(version=b"1" * 64))
    write("descriptor", "bad-version-newline", descriptor_input(version=b"1.0\n\x1b[2J"))
    write("descriptor", "ok-version-not-utf8", descriptor_input(version=b"1.0-\xff\xfe"))
    write("descriptor", "bad-description-unterminated", descriptor_input(description=("unterminated", 3)))
    write("descriptor", "bad-description-del", descriptor_input(description=b"a\x7fb"))
    write("descriptor", "ok-description-null", descriptor_input(description="null"))
    write("descriptor", "ok-description-512", descriptor_input(description=b"d" * 512))


def main():
    vectors = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "vectors")
    geometry_corpus(vectors)
    descriptor_corpus()


if __name__ == "__main__":
    main()
