"""kvrt.tp_heads, kvrt.tp_map, kvrt.pp_layers and their kvrt.xfer names
against an independent pure-Python statement of vLLM's rules
(QKVParallelLinear, get_pp_indices) on random groups, and the refusals as
Python sees them."""
import os
import random

import kvrt
from common import Skip, raises

try:
    import kvrt.xfer as kx
except ImportError as e:  # libkvrt-xfer is built only with UCX
    kx, _why = None, str(e)

PP_ENV = "VLLM_PP_LAYER_PARTITION"


# ---- the reference ------------------------------------------------------------

def vllm_heads(total_kv_heads, tp_size, tp_rank):
    """QKVParallelLinear.__init__ and weight_loader, as vLLM writes them:
    (first head, count, replicas), or None where vLLM's divide() asserts."""
    if tp_size >= total_kv_heads:
        if tp_size % total_kv_heads:
            return None
        replicas = tp_size // total_kv_heads
        num = 1
    else:
        if total_kv_heads % tp_size:
            return None
        replicas = 1
        num = total_kv_heads // tp_size
    shard_id = tp_rank // replicas
    return shard_id * num, num, replicas


def holders(total, tp):
    """head -> the ranks that hold it, with the head's index in each."""
    out = {}
    for r in range(tp):
        first, num, _ = vllm_heads(total, tp, r)
        for i in range(num):
            out.setdefault(first + i, []).append((r, i))
    return out


def reference_pull(total, local_tp, local_rank, remote_tp, spread):
    """The documented destination rule, per head then merged: each local
    head from its one remote holder, or from replica
    (local_rank + spread) mod replicas of its holders in rank order."""
    first, num, _ = vllm_heads(total, local_tp, local_rank)
    where = holders(total, remote_tp)
    per_head = []
    for i in range(num):
        hs = where[first + i]
        rank, index = hs[(local_rank + spread) % len(hs)] if len(hs) > 1 else hs[0]
        per_head.append((rank, i, index))
    runs = []
    for rank, li, ri in per_head:
        if runs and runs[-1][0] == rank and runs[-1][1] + runs[-1][3] == li and runs[-1][2] + runs[-1][3] == ri:
            runs[-1] = (rank, runs[-1][1], runs[-1][2], runs[-1][3] + 1)
        else:
            runs.append((rank, li, ri, 1))
    return runs


def vllm_pp_indices(num_hidden_layers, pp_rank, pp_size, partition_list_str=None):
    """get_pp_indices as vLLM writes it (the partition string as the
    variable's value)."""
    if partition_list_str is not None:
        partitions = [int(layer) for layer in partition_list_str.split(",")]
        assert len(partitions) == pp_size and sum(partitions) == num_hidden_layers
    else:
        layers_per_partition = num_hidden_layers // pp_size
        partitions = [layers_per_partition for _ in range(pp_size)]
        remaining_layers = num_hidden_layers % pp_size
        if remaining_layers:
            for i in range(2, remaining_layers + 2):
                partitions[-i] += 1
    start_layer = sum(partitions[:pp_rank])
    return start_layer, start_layer + partitions[pp_rank]


def valid_groups(rng, n):
    """n random (kv_heads, local_tp, remote_tp) that vLLM accepts."""
    out = []
    while len(out) < n:
        heads = rng.choice([1, 1, 2, 4, 8, 8, 16, 32, 40, 64, 3, 6, 12])
        tps = [t for t in range(1, 65) if vllm_heads(heads, t, 0) is not None]
        out.append((heads, rng.choice(tps), rng.choice(tps)))
    return out


# ---- the tests --------------------------------------------------------------

def test_heads_match_vllm():
    """kvrt.tp_heads is QKVParallelLinear's split or replication, for every size up to 64 of 20 head counts"""
    for heads in list(range(1, 17)) + [24, 32, 40, 48, 64]:
        for tp in range(1, 65):
            want = vllm_heads(heads, tp, 0)
            if want is None:
                e = raises(kvrt.InvalidArgumentError, kvrt.tp_heads, heads, tp, 0)
                assert "size %d cannot hold %d KV heads" % (tp, heads) in e.message, e.message
                continue
            for rank in range(tp):
                first, num, replicas = vllm_heads(heads, tp, rank)
                got = kvrt.tp_heads(heads, tp, rank)
                assert got == {"head_start": first, "num_heads": num, "replicas": replicas,
                               "replica": rank % replicas}, (heads, tp, rank, got)


def test_map_matches_reference_on_random_groups():
    """kvrt.tp_map's pull view is the reference rule on 300 random groups, spreads and ranks"""
    rng = random.Random(20240530)
    for heads, local_tp, remote_tp in valid_groups(rng, 300):
        rank, spread = rng.randrange(local_tp), rng.randrange(1 << 20)
        got = kvrt.tp_map(heads, local_tp, rank, remote_tp, spread=spread)
        assert got == reference_pull(heads, local_tp, rank, remote_tp, spread), (heads, local_tp, rank, remote_tp,
                                                                                spread, got)
        assert kvrt.tp_map(heads, local_tp, rank, remote_tp, spread, "pull") == got


def test_push_views_add_up_to_pull_views():
    """on 100 random groups, every source rank's push view together is every destination rank's pull view"""
    rng = random.Random(7)
    for heads, dst_tp, src_tp in valid_groups(rng, 100):
        spread = rng.randrange(16)
        pulled = sorted((d, r, li, ri, n) for d in range(dst_tp)
                        for r, li, ri, n in kvrt.tp_map(heads, dst_tp, d, src_tp, spread))
        pushed = sorted((d, s, di, si, n) for s in range(src_tp)
                        for d, si, di, n in kvrt.tp_map(heads, src_tp, s, dst_tp, spread, direction="push"))
        assert pulled == pushed, (heads, dst_tp, src_tp, spread)
        # every destination head exactly once, from a rank that holds it
        where = holders(heads, src_tp)
        for d in range(dst_tp):
            first, num, _ = vllm_heads(heads, dst_tp, d)
            covered = [h for (dd, r, li, ri, n) in pulled if dd == d for h in range(li, li + n)]
            assert sorted(covered) == list(range(num)), (heads, dst_tp, src_tp, d, covered)
            for dd, r, li, ri, n in pulled:
                if dd == d:
                    assert all((r, ri + k) in where[first + li + k] for k in range(n))


def test_mla_spreads_sequences():
    """MLA (one latent head) read by one decode rank: sequences spread evenly across the prefill ranks"""
    counts = [0] * 8
    for seq in range(800):
        (rank, li, ri, n), = kvrt.tp_map(1, 1, 0, 8, spread=seq)
        assert (li, ri, n) == (0, 0, 1)
        counts[rank] += 1
    assert counts == [100] * 8, counts


def test_map_refusals():
    """maps that cannot be made raise InvalidArgumentError with libkvrt's message naming the values"""
    e = raises(kvrt.InvalidArgumentError, kvrt.tp_map, 8, 3, 0, 8)
    assert "local tensor-parallel size 3 cannot hold 8 KV heads" in e.message and "(1, 2, 4, 8)" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.tp_map, 4, 2, 0, 6)
    assert "remote tensor-parallel size 6" in e.message and "(8, 12, ...)" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.tp_map, 8, 2, 2, 8)
    assert "local rank 2" in e.message and "0 to 1" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.tp_map, 8, 0, 0, 8)
    assert "tensor-parallel size 0" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.tp_map, 8, 2, 0, 8, direction="sideways")
    assert '"sideways"' in e.message and "push, pull" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.tp_map, 8, 2, -1, 8)
    assert "local_rank -1" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.tp_map, 8, 2, 0, 8, direction="pu\x00ll")
    assert "NUL" in e.message
    assert kvrt.parallel.direction_names() == ["push", "pull"]


def test_pp_layers_match_vllm():
    """kvrt.pp_layers is get_pp_indices, with and without a partition, on every split up to 48 layers"""
    old = os.environ.pop(PP_ENV, None)
    try:
        rng = random.Random(11)
        for layers in range(1, 49):
            for pp in range(1, min(layers, 12) + 1):
                for rank in range(pp):
                    s, e = vllm_pp_indices(layers, rank, pp)
                    assert kvrt.pp_layers(layers, pp, rank) == (s, e - s), (layers, pp, rank)
                cuts = sorted(rng.sample(range(1, layers), pp - 1)) if pp > 1 else []
                parts = [b - a for a, b in zip([0] + cuts, cuts + [layers])]
                text = ",".join(str(p) for p in parts)
                for rank in range(pp):
                    s, e = vllm_pp_indices(layers, rank, pp, text)
                    assert kvrt.pp_layers(layers, pp, rank, partition=text) == (s, e - s), (layers, text, rank)
        assert kvrt.pp_partition() == (None, "default")
        os.environ[PP_ENV] = "2,3,5"
        assert kvrt.pp_partition() == ("2,3,5", "environment")
        assert [kvrt.pp_layers(10, 3, r) for r in range(3)] == [(0, 2), (2, 3), (5, 5)]
        assert kvrt.pp_layers(10, 3, 1, partition="5,4,1") == (5, 4), "a partition given wins over the variable"
        e = raises(kvrt.InvalidArgumentError, kvrt.pp_layers, 12, 3, 0)
        assert PP_ENV + '="2,3,5" (from the environment) adds up to 10' in e.message and "unset it" in e.message
    finally:
        if old is None:
            os.environ.pop(PP_ENV, None)
        else:
            os.environ[PP_ENV] = old


def test_pp_refusals():
    """partitions that do not fit raise kvrt.Error classes naming the value and what is valid"""
    e = raises(kvrt.InvalidArgumentError, kvrt.pp_layers, 8, 3, 0, partition="4,4")
    assert "has 2 entries" in e.message and "size is 3" in e.message and '"3,3,2"' in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.pp_layers, 8, 2, 0, partition="4,x")
    assert 'entry 2 "x"' in e.message
    e = raises(kvrt.SizeOverflowError, kvrt.pp_layers, 8, 2, 0, partition="99999999999999999999,1")
    assert "64 bits" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.pp_layers, 3, 4, 0)
    assert "3 layers cannot fill pipeline-parallel size 4" in e.message
    e = raises(kvrt.InvalidArgumentError, kvrt.pp_layers, 8, 2, 0, partition="4\x00,4")
    assert "NUL" in e.message
    raises(TypeError, kvrt.pp_layers, 8, 2, 0, partition=[4, 4])
    e = raises(kvrt.InvalidArgumentError, kvrt.pp_layers, 1 << 64, 2, 0)
    assert "num_layers" in e.message


def test_xfer_names_give_the_same():
    """kvrt.xfer.tp_map and kvrt.xfer.pp_layers return what kvrt's do, refusals included"""
    if kx is None:
        raise Skip(_why)
    rng = random.Random(3)
    for heads, local_tp, remote_tp in valid_groups(rng, 100):
        rank, spread = rng.randrange(local_tp), rng.randrange(64)
        for direction in ("pull", "push"):
            assert kx.tp_map(heads, local_tp, rank, remote_tp, spread, direction) == \
                kvrt.tp_map(heads, local_tp, rank, remote_tp, spread, direction)
    assert kx.tp_map(2, 4, 3, 1) == [(0, 0, 1, 1)]
    assert kx.pp_layers(10, 4, 2) == kvrt.pp_layers(10, 4, 2) == (5, 3)
    assert kx.pp_layers(10, 2, 1, partition="4,6") == (4, 6)
    e = raises(kvrt.InvalidArgumentError, kx.tp_map, 8, 2, 0, 3)
    assert "remote tensor-parallel size 3 cannot hold 8 KV heads" in e.message
