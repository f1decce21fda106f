"""Tensor- and pipeline-parallel rank rules through libkvrt
(kvrt/parallel.h, docs/parallel.md): which KV heads and layers a rank
holds, and which runs of heads move between two groups of different sizes.
The rules are libkvrt's, as vLLM states them; nothing here restates them.
Refusals raise kvrt.Error classes with libkvrt's message."""
import ctypes as C

from ._errors import InvalidArgumentError
from ._lib import TpEntry, TpHeads, check, lib, text
from ._model import whole

U64_MAX = (1 << 64) - 1


def _u64(name, value):
    # Only the type's range here: which values the rule accepts, and why, is
    # libkvrt's to say (a Python -1 must not reach C as 2^64-1).
    return whole(name, value, 0, U64_MAX)


def tp_heads(kv_heads, tp_size, rank):
    """The KV heads rank `rank` of a tensor-parallel group holds: a dict of
    head_start, num_heads, replicas (1 when heads are split) and replica
    (this rank's index among the ranks that hold the same heads)."""
    out = TpHeads()
    check(lib.kvrt_tp_heads(_u64("kv_heads", kv_heads), _u64("tp_size", tp_size), _u64("rank", rank), C.byref(out)))
    return {"head_start": out.head_start, "num_heads": out.num_heads, "replicas": out.replicas,
            "replica": out.replica}


def _c_text(name, value):
    # C would stop at a NUL byte and read a different value than was given.
    if "\x00" in value:
        raise InvalidArgumentError("%s %r holds a NUL byte" % (name, value))
    return value.encode("utf-8", "surrogateescape")


def direction_value(direction):
    """libkvrt's value of a direction name ("pull" or "push")."""
    v = C.c_int()
    check(lib.kvrt_tp_direction_parse(_c_text("direction", direction if isinstance(direction, str)
                                              else repr(direction)), C.byref(v)))
    return v.value


def direction_names():
    """The direction names, as libkvrt spells them."""
    return text(lib.kvrt_tp_direction_valid_names()).split(", ")


def map_with(fn, kv_heads, local_tp, local_rank, remote_tp, spread, direction):
    """Run a kvrt_tp_map-shaped C function (libkvrt's, or libkvrt-xfer's
    name for it) and return its entries as tuples."""
    args = (_u64("kv_heads", kv_heads), _u64("local_tp", local_tp), _u64("local_rank", local_rank),
            _u64("remote_tp", remote_tp), _u64("spread", spread), direction_value(direction))
    count = C.c_size_t()
    check(fn(*args, None, 0, C.byref(count)))
    entries = (TpEntry * max(1, count.value))()
    check(fn(*args, entries, count.value, C.byref(count)))
    return [(e.remote_rank, e.local_head_start, e.remote_head_start, e.num_heads) for e in entries[:count.value]]


def tp_map(kv_heads, local_tp, local_rank, remote_tp, spread=0, direction="pull"):
    """The runs that move this rank's KV heads between a local group of
    local_tp ranks (this is local_rank) and a remote one of remote_tp: a list
    of (remote_rank, local_head_start, remote_head_start, num_heads), head
    starts counted from the first head each rank holds.

    direction "pull" (the destination view): where each head this rank
    holds is read from, once, in local head order.  "push" (the source
    view): what this rank sends so that every remote rank gets its heads
    once.  spread (a sequence id, say) picks among a replicated head's
    sources; both sides must pass the same."""
    return map_with(lib.kvrt_tp_map, kv_heads, local_tp, local_rank, remote_tp, spread, direction)


def pp_partition():
    """VLLM_PP_LAYER_PARTITION as libkvrt reads it: (value or None, source),
    source "environment" or "default"."""
    value, source = C.c_char_p(), C.c_char_p()
    check(lib.kvrt_pp_partition_env(C.byref(value), C.byref(source)))
    return text(value.value), text(source.value)


def layers_with(fn, num_layers, pp_size, rank, partition):
    """Run a kvrt_pp_layers-shaped C function (libkvrt's, or libkvrt-xfer's
    name for it) when partition is None, else kvrt_pp_layers_partition."""
    args = (_u64("num_layers", num_layers), _u64("pp_size", pp_size), _u64("rank", rank))
    start, count = C.c_uint64(), C.c_uint64()
    if partition is None:
        check(fn(*args, C.byref(start), C.byref(count)))
    else:
        if not isinstance(partition, str):
            raise TypeError("partition must be a str such as \"10,10,12\" or None, not %s"
                            % type(partition).__name__)
        check(lib.kvrt_pp_layers_partition(*args, _c_text("partition", partition), C.byref(start),
                                           C.byref(count)))
    return start.value, count.value


def pp_layers(num_layers, pp_size, rank, partition=None):
    """(start, count): the layers pipeline stage `rank` of pp_size holds, as
    vLLM splits num_layers.  partition None: VLLM_PP_LAYER_PARTITION when it
    is set, else vLLM's even split; a string: that partition
    ("10,10,12"), the environment left alone."""
    return layers_with(lib.kvrt_pp_layers, num_layers, pp_size, rank, partition)
