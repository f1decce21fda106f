"""TAP: kvrt.Store, the names the tests call (docs/store.md "Python").

Caches are filled with random K/V through Cache.write and compared through
Cache.read (libkvrt's paths, not the store's) as torch tensors; the keys
are recomputed with hashlib from the bytes docs/store.md lists.  Skips,
saying why, where it cannot run.

    test_store.py
"""
import hashlib
import hmac
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time

from tap_py import Skip, needs, run

torch, kvrt, kvrt_store = needs("torch", "kvrt", "kvrt.store")

T = 32
MODEL = {"layers": 3, "kv_heads": 4, "head_size": 16, "dtype": "bf16", "block_size": 16}
DTYPES = {"bf16": 2}  # enum kvrt_dtype


def cache_of(rt, layout, block_size, heads=4, blocks=40, model=MODEL):
    m = dict(model, block_size=block_size, kv_heads=heads)
    return rt.cache(model=m, layout=layout, blocks=blocks, backend="cpu")


def slots(table, n, bs):
    t = torch.as_tensor(table, dtype=torch.int64)
    pos = torch.arange(n)
    return t[pos // bs] * bs + pos % bs


def fill(cache, table, n, bs, kv):
    """kv[layer] = (k [n, H, D], v): written into the sequence's slots."""
    for layer, (k, v) in enumerate(kv):
        cache.write(layer, slots(table, n, bs), k.contiguous(), v.contiguous())


def read(cache, table, n, bs, layers=3):
    return [cache.read(layer, slots(table, n, bs)) for layer in range(layers)]


def random_kv(n, heads=4, layers=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, heads, 16, generator=g).to(torch.bfloat16),
             torch.randn(n, heads, 16, generator=g).to(torch.bfloat16)) for _ in range(layers)]


def tokens_of(n, seed=0):
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randint(0, 32000, (n,), generator=g, dtype=torch.int32)


def same(a, b, h0=0, h1=None):
    """a's layers equal b's (b may hold all heads, a the slice [h0, h1))."""
    for (ka, va), (kb, vb) in zip(a, b):
        if not (torch.equal(ka, kb[:, h0:h1]) and torch.equal(va, vb[:, h0:h1])):
            return False
    return True


def test_round_trip_across_layouts():
    """put from HND bs 16, lookup, get into NHD-like BLNHC bs 5: every token equal"""
    n = 3 * T + 9
    kv, tok = random_kv(n), tokens_of(n)
    with kvrt.Runtime() as rt:
        a, b = cache_of(rt, "HND", 16), cache_of(rt, "BLNHC", 5)
        ta, tb = list(range(39, 39 - (n + 15) // 16, -1)), list(range(3, 3 + (n + 4) // 5))
        fill(a, ta, n, 16, kv)
        with kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T, memory_bytes=1 << 24) as s:
            assert s.put(a, ta, tok) == 3 * T
            assert s.lookup(tok) == 3 * T
            assert s.lookup(tok[:T + 3]) == T
            assert s.get(b, tb, tok) == 3 * T
            got = read(b, tb, 3 * T, 5)
            assert same(got, [(k[:3 * T], v[:3 * T]) for k, v in kv])
            assert s.stats["hits_memory"] == 3 * 4


def test_heads_and_tp():
    """TP 2 ranks put heads=(0, 2) and (2, 2); TP 1 gets all; TP 4 ranks get tp=(4, r)"""
    n = 2 * T
    kv, tok = random_kv(n, seed=1), tokens_of(n, 1)
    with kvrt.Runtime() as rt, kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T) as s:
        for rank in range(2):
            c = cache_of(rt, "NHD", 16, heads=2)
            t = [rank * 10 + i for i in range(4)]
            fill(c, t, n, 16, [(k[:, 2 * rank:2 * rank + 2], v[:, 2 * rank:2 * rank + 2]) for k, v in kv])
            assert s.lookup(tok) == (0 if rank == 0 else 0), "not all heads yet"
            assert s.put(c, t, tok, heads=(2 * rank, 2)) == n
        assert s.lookup(tok) == n and s.lookup(tok, heads=(1, 2)) == n
        one = cache_of(rt, "BLHNC", 32)
        assert s.get(one, [7, 2], tok) == n
        assert same(read(one, [7, 2], n, 32), kv)
        for rank in range(4):
            c = cache_of(rt, "HND", 8, heads=1)
            t = list(range(8))
            assert s.get(c, t, tok, tp=(4, rank)) == n
            assert same(read(c, t, n, 8), kv, rank, rank + 1)
        # 2 KV heads at TP 4 are replicated: replica 1 stores nothing itself
        m2 = dict(MODEL, kv_heads=2)
        with kvrt.Store(None, model=m2, model_id="py@2", chunk_tokens=T) as s2:
            c = cache_of(rt, "HND", 16, heads=1, model=m2)
            fill(c, [0, 1, 2, 3], n, 16, [(k[:, :1], v[:, :1]) for k, v in random_kv(n, heads=2)])
            assert s2.put(c, [0, 1, 2, 3], tok, tp=(4, 1)) == 0
            assert s2.stats["put_entries"] == 0
            assert s2.put(c, [0, 1, 2, 3], tok, tp=(4, 0)) == n
            assert s2.put(c, [0, 1, 2, 3], tok, tp=(4, 1)) == n


def stage_cache(rt, layout, block_size, start, count, heads=4, blocks=40):
    """A pipeline stage's cache: the model's layers [start, start + count), named as the model's."""
    spec = {k: v for k, v in MODEL.items() if k != "layers"}
    spec.update(block_size=block_size, kv_heads=heads)
    layers = [dict(spec, name="layer.%d" % i) for i in range(start, start + count)]
    return rt.cache(model={"groups": [{"layers": layers}]}, layout=layout, blocks=blocks, backend="cpu")


def test_pipeline_stages():
    """PP 2 writers (stage 0 at TP 2) with layers_per_entry 2 of 4 layers; PP 1 and PP 4 readers, exact"""
    n, L = 2 * T, 4
    m4 = dict(MODEL, layers=L)
    kv, tok = random_kv(n, layers=L, seed=5), tokens_of(n, 5)
    with kvrt.Runtime() as rt, kvrt.Store(None, model=m4, model_id="py@pp", chunk_tokens=T,
                                          layers_per_entry=2) as s:
        for rank in range(2):  # stage 0: layers [0, 2), TP 2
            c = stage_cache(rt, "NHD", 16, 0, 2, heads=2)
            t = [rank * 10 + i for i in range(4)]
            for layer in range(2):
                k, v = kv[layer]
                c.write(layer, slots(t, n, 16), k[:, 2 * rank:2 * rank + 2].contiguous(),
                        v[:, 2 * rank:2 * rank + 2].contiguous())
            assert s.put(c, t, tok, heads=(2 * rank, 2), layers=kvrt.pp_layers(L, 2, 0)) == n
        assert s.lookup(tok, layers=(0, 2)) == n and s.lookup(tok, layers=(2, 2)) == 0 and s.lookup(tok) == 0
        c = stage_cache(rt, "HND", 32, 2, 2)  # stage 1: layers [2, 4), TP 1
        fill(c, [3, 1], n, 32, kv[2:])
        assert s.put(c, [3, 1], tok, layers=kvrt.pp_layers(L, 2, 1)) == n
        assert s.lookup(tok) == n and s.stats["memory_entries"] == 2 * 4 * 2
        one = cache_of(rt, "BLHNC", 16, model=m4)
        assert s.get(one, list(range(4)), tok) == n
        assert same(read(one, list(range(4)), n, 16, layers=L), kv)
        for rank in range(4):  # PP 4 needs layer groups of 1: refused, naming the boundaries
            start, count = kvrt.pp_layers(L, 4, rank)
            c = stage_cache(rt, "NHD", 16, start, count)
            try:
                s.get(c, list(range(4)), tok, layers=(start, count))
                raise AssertionError("a range of half a group was taken")
            except kvrt.InvalidArgumentError as e:
                assert "not whole layer groups" in str(e) and "0, 2, 4" in str(e), str(e)
        for stage in range(2):  # PP 2 readers in another layout
            start, count = kvrt.pp_layers(L, 2, stage)
            c = stage_cache(rt, "HND", 8, start, count)
            assert s.get(c, list(range(8)), tok, layers=(start, count)) == n
            assert same(read(c, list(range(8)), n, 8, layers=count), kv[start:start + count])
        for bad in ("0:2", (0,), (0, 2, 4), (-1, 2), (0, 2.5)):
            try:
                s.lookup(tok, layers=bad)
                raise AssertionError("layers=%r was taken" % (bad,))
            except (kvrt.InvalidArgumentError, TypeError) as e:
                assert "layers" in str(e) or "integer" in str(e), str(e)
        try:
            s.lookup(tok, layers=(2, 4))
            raise AssertionError("a range past the model was taken")
        except kvrt.InvalidArgumentError as e:
            assert "outside the model's 4 layers" in str(e), str(e)
    try:
        kvrt.Store(None, model=m4, model_id="py@pp", layers_per_entry=-1)
        raise AssertionError("layers_per_entry -1 was taken")
    except kvrt.InvalidArgumentError as e:
        assert "layers_per_entry" in str(e), str(e)


def tenant_chain_key():
    """The chain key docs/store.md derives from KVRT_STORE_KEY_FILE (HKDF-SHA256), or None."""
    path = os.environ.get("KVRT_STORE_KEY_FILE")
    if not path:
        return None
    ikm = open(path, "rb").read()
    if ikm.endswith(b"\n"):
        ikm = ikm[:-1]
    prk = hmac.new(b"kvrt-store/secret/v1", ikm, hashlib.sha256).digest()
    return hmac.new(prk, b"kvrt-store chunk-key chain" + b"\x01", hashlib.sha256).digest()


def test_keys_are_the_documented_sha256():
    """fingerprint and chunk keys recomputed with hashlib from docs/store.md's bytes"""
    with kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T) as s:
        fp = hashlib.sha256()
        fp.update(b"kvrt-store/fp/v1")
        fp.update(struct.pack("<IQI", 1, T, len(b"py@1")) + b"py@1")
        fp.update(struct.pack("<I", 3))
        for _ in range(3):
            fp.update(struct.pack("<IIQQQ", 0, DTYPES["bf16"], 4, 16, 16))
        tok = tokens_of(2 * T + 5, 3)
        chain = tenant_chain_key()
        prev, want = bytes(32), []
        for c in range(2):
            msg = b"kvrt-store/ck/v1" + fp.digest() + prev
            msg += struct.pack("<%dI" % T, *tok[c * T:(c + 1) * T].tolist())
            # with a tenant key (KVRT_STORE_KEY_FILE), the chain is keyed
            prev = hmac.new(chain, msg, hashlib.sha256).digest() if chain else hashlib.sha256(msg).digest()
            want.append(prev)
        assert s.keys(tok) == want
        assert s.describe()["model"]["fingerprint"] == fp.hexdigest()


def test_async_requests():
    """put_async and get_async return requests: test(), wait(), tokens, release()"""
    n = 4 * T
    kv, tok = random_kv(n, seed=2), tokens_of(n, 2)
    with kvrt.Runtime() as rt, kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T) as s:
        a, b = cache_of(rt, "HND", 16), cache_of(rt, "LHBNC", 16)
        fill(a, list(range(8)), n, 16, kv)
        p = s.put_async(a, list(range(8)), tok)
        g = s.get_async(b, list(range(20, 28)), tok)
        assert p.wait() is True and p.tokens == n
        assert g.wait(30) is True and g.tokens == n and g.test() is True
        p.release()
        g.release()
        assert same(read(b, list(range(20, 28)), n, 16), kv)
        with s.get_async(b, list(range(8)), tok) as r:
            assert r.wait() and r.tokens == n


def test_disk_survives_the_store():
    """with a path: put, flush, close; a new Store finds and loads everything from disk"""
    d = tempfile.mkdtemp(prefix="kvrt-store-py-")
    try:
        n = 2 * T
        kv, tok = random_kv(n, seed=4), tokens_of(n, 4)
        with kvrt.Runtime() as rt:
            a = cache_of(rt, "HND", 16)
            fill(a, [1, 2, 3, 4], n, 16, kv)
            with kvrt.Store(d, model=MODEL, model_id="py@1", chunk_tokens=T, disk_bytes=1 << 24) as s:
                assert s.put(a, [1, 2, 3, 4], tok) == n
                s.flush()
            with kvrt.Store(d, model=MODEL, model_id="py@1", chunk_tokens=T, memory_bytes=0) as s:
                b = cache_of(rt, "NHD", 64)
                assert s.lookup(tok) == n and s.get(b, [9], tok) == n
                assert same(read(b, [9], n, 64), kv)
                assert s.stats["hits_disk"] == 2 * 4
            with kvrt.Store(d) as inspect:  # no model: the folder as it is
                assert inspect.describe()["model"]["model_id"] == "py@1"
                assert len(inspect.entries()) == 8
                assert inspect.verify()["bad"] == 0
                slot = (128 + T * 3 * 64 + 4095) // 4096 * 4096  # an entry's slot on disk
                assert inspect.gc(4 * slot) == 4
            try:
                kvrt.Store(d, model=MODEL, model_id="py@2", chunk_tokens=T)
                raise AssertionError("another model id was accepted")
            except kvrt.InvalidArgumentError as e:
                assert 'model_id "py@1"' in str(e) and '"py@2"' in str(e), str(e)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_tenant_keys():
    """key_file: another key finds nothing in the same folder, the same key all; a readable key file is refused"""
    d = tempfile.mkdtemp(prefix="kvrt-store-py-")
    try:
        keys = []
        for i, mode in enumerate((0o600, 0o600, 0o644)):
            path = os.path.join(d, "key%d" % i)
            with open(path, "wb") as f:
                f.write(os.urandom(32) + b"\n")  # a trailing newline is not part of a key
            os.chmod(path, mode)
            keys.append(path)
        store = os.path.join(d, "store")
        n = 2 * T
        kv, tok = random_kv(n, seed=9), tokens_of(n, 9)
        with kvrt.Runtime() as rt:
            a = cache_of(rt, "HND", 16)
            fill(a, [1, 2, 3, 4], n, 16, kv)
            with kvrt.Store(store, model=MODEL, model_id="py@1", chunk_tokens=T, key_file=keys[0]) as s:
                assert s.put(a, [1, 2, 3, 4], tok) == n
                s.flush()
            with kvrt.Store(store, model=MODEL, model_id="py@1", chunk_tokens=T, memory_bytes=0,
                            key_file=keys[1]) as other:
                assert other.lookup(tok) == 0
            with kvrt.Store(store, model=MODEL, model_id="py@1", chunk_tokens=T, memory_bytes=0,
                            key_file=keys[0]) as s:
                b = cache_of(rt, "NHD", 64)
                assert s.lookup(tok) == n and s.get(b, [9], tok) == n
                assert same(read(b, [9], n, 64), kv)
                assert s.stats["rejected"] == 0
            try:
                kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T, key_file=keys[2])
                raise AssertionError("a key file others may read was accepted")
            except kvrt.InvalidArgumentError as e:
                assert keys[2] in str(e) and "0644" in str(e), str(e)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_bad_input_names_the_value():
    """refusals raise kvrt.InvalidArgumentError naming the value and what is valid"""
    with kvrt.Runtime() as rt, kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T) as s:
        c = cache_of(rt, "HND", 16)
        # a password file others may read
        fd, open_pw = tempfile.mkstemp()
        os.write(fd, b"pw\n")
        os.close(fd)
        os.chmod(open_pw, 0o644)
        cases = [
            (lambda: s.put(c, [0, 1], list(range(20)), count=64), "needs 64 token ids, but tokens has 20"),
            (lambda: s.put(c, list(range(8)), list(range(100)), first=7), "first 7 is not on a chunk boundary"),
            (lambda: s.get(c, [0], list(range(64))), "block_table has 1 blocks"),
            (lambda: s.put(c, list(range(8)), list(range(64)), heads=(3, 2)), "heads [3, 5) are outside"),
            (lambda: s.put(c, list(range(8)), [-1] + list(range(63))), "tokens[0] is -1"),
            (lambda: s.get(c, list(range(8)), list(range(64)), heads=(0,)), "heads: (start, count)"),
            (lambda: s.put(c, [0, 1, 2, 2], list(range(64))), "names block 2 twice"),
            (lambda: s.lookup(list(range(64)), tp=(3, 0)), "tensor-parallel size 3"),
            (lambda: kvrt.Store(None, model=MODEL, model_id=""), "model_id"),
            (lambda: kvrt.Store(None, model=MODEL, model_id="x", shared="tcp://h:1"), "redis://[USER@]HOST:PORT"),
            (lambda: kvrt.Store(None, model=MODEL, model_id="x", shared="redis://h:1", shared_ca_file="/x.pem"),
             "write rediss://"),
            (lambda: kvrt.Store(None, model=MODEL, model_id="x", shared="redis://h:1", shared_password_file=open_pw),
             "refusing shared_password_file \"%s\"" % open_pw),
            (lambda: kvrt.Store(None, model=MODEL, model_id="x", shared="redis://h:1", shared_password_file=3),
             "shared_password_file: a file's path"),
        ]
        for fn, text in cases:
            try:
                fn()
                raise AssertionError("accepted; expected a refusal naming %r" % text)
            except kvrt.InvalidArgumentError as e:
                assert text in str(e), "%r not in %r" % (text, str(e))
        os.unlink(open_pw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_shared_tier():
    """shared="redis://..." on a redis-server started here: one store puts, another with no disk loads"""
    server = shutil.which("redis-server")
    if not server:
        raise Skip("redis-server is not installed (Debian package redis-server)")
    d = tempfile.mkdtemp(prefix="kvrt-store-py-redis-")
    port = free_port()
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--dir", d, "--save", "",
                             "--appendonly", "no", "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        url = "redis://127.0.0.1:%d" % port
        n = 2 * T
        kv, tok = random_kv(n, seed=5), tokens_of(n, 5)
        with kvrt.Runtime() as rt:
            a = cache_of(rt, "HND", 16)
            fill(a, [1, 2, 3, 4], n, 16, kv)
            with kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T, shared=url) as s:
                assert s.put(a, [1, 2, 3, 4], tok) == n
                s.flush()
                assert s.stats["written_shared"] == 8
            with kvrt.Store(None, model=MODEL, model_id="py@1", chunk_tokens=T, shared=url) as s:
                b = cache_of(rt, "BHLNC", 32)
                assert s.lookup(tok) == n and s.get(b, [5, 6], tok) == n
                assert same(read(b, [5, 6], n, 32), kv) and s.stats["hits_shared"] == 8
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


run(globals())
