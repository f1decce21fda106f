"""TAP: the store's KV events for routers, read as a router reads vLLM's
(docs/store.md "KV events"): a subscriber of its own (python3-zmq,
python3-msgpack) decodes every batch by vLLM's schema (KVEventBatch
[ts, events, data_parallel_rank]; BlockStored, BlockRemoved,
AllBlocksCleared as tagged arrays) and rebuilds, from the events alone, the
chunks each tier holds; they must equal what the store's listing, stats and
the Redis server hold after puts, promotions, evictions of small tiers and
a gc.  A subscriber that joins late recovers everything through the replay
socket.  Skips, saying why, where it cannot run.

    events.py
"""
import shutil
import socket
import subprocess
import tempfile
import time

from tap_py import needs, run

torch, zmq, msgpack, kvrt, _ = needs("torch", "zmq", "msgpack", "kvrt", "kvrt.store")

T = 16
HEADS = 4
MODEL = {"layers": 2, "kv_heads": HEADS, "head_size": 16, "dtype": "bf16", "block_size": 16}
ENTRY = T * 2 * (16 + 16) * 2          # one chunk of one head, every layer
SLOT = (128 + ENTRY + 4095) // 4096 * 4096
MEDIUMS = {"CPU", "DISK", "SHARED"}
END = (-1).to_bytes(8, "big", signed=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tokens_of(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 32000, (n,), generator=g, dtype=torch.int32).tolist()


def check_event(ev, where):
    """One event, by vLLM's schema (msgspec array_like, tag first)."""
    assert isinstance(ev, list) and ev and isinstance(ev[0], str), "%s: not a tagged array: %r" % (where, ev)
    tag = ev[0]
    if tag == "BlockStored":
        assert len(ev) == 7, "%s: BlockStored has %d fields" % (where, len(ev))
        _, hashes, parent, token_ids, block_size, lora_id, medium = ev
        assert isinstance(hashes, list) and len(hashes) == 1 and all(
            isinstance(h, bytes) and len(h) == 32 for h in hashes), "%s: block_hashes %r" % (where, hashes)
        assert parent is None or (isinstance(parent, bytes) and len(parent) == 32), where
        assert isinstance(token_ids, list) and all(isinstance(t, int) for t in token_ids), where
        assert block_size == T and len(token_ids) == T * len(hashes), "%s: block_size %r" % (where, block_size)
        assert lora_id is None and medium in MEDIUMS, "%s: lora_id %r medium %r" % (where, lora_id, medium)
    elif tag == "BlockRemoved":
        assert len(ev) == 3, "%s: BlockRemoved has %d fields" % (where, len(ev))
        assert isinstance(ev[1], list) and all(isinstance(h, bytes) and len(h) == 32 for h in ev[1]), where
        assert ev[2] in MEDIUMS, where
    else:
        assert ev == ["AllBlocksCleared"], "%s: unknown event %r" % (where, ev)


def decode(seq_bytes, payload):
    assert len(seq_bytes) == 8
    seq = int.from_bytes(seq_bytes, "big")
    batch = msgpack.unpackb(payload, raw=False)
    assert isinstance(batch, list) and len(batch) == 3, "batch %d: %r" % (seq, batch)
    ts, events, dp_rank = batch
    assert isinstance(ts, float) and abs(ts - time.time()) < 600, "batch %d: ts %r" % (seq, ts)
    assert dp_rank == 0 and isinstance(events, list) and events, "batch %d" % seq
    for i, ev in enumerate(events):
        check_event(ev, "batch %d event %d" % (seq, i))
    return seq, events


class Router:
    """What a KV-aware router keeps: per medium, the chunks stored there,
    with the tokens and parent BlockStored named."""

    def __init__(self):
        self.held = {m: set() for m in MEDIUMS}
        self.chunk = {}

    def apply(self, events):
        for ev in events:
            if ev[0] == "BlockStored":
                for h in ev[1]:
                    self.held[ev[6]].add(h)
                    self.chunk[h] = (ev[2], ev[3])
            elif ev[0] == "BlockRemoved":
                for h in ev[1]:
                    self.held[ev[2]].discard(h)
            else:
                for m in MEDIUMS:
                    self.held[m].clear()


class Subscriber:
    def __init__(self, ctx, endpoint, bind=False):
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.setsockopt(zmq.LINGER, 0)
        (self.sub.bind if bind else self.sub.connect)(endpoint)
        self.batches = {}

    def drain(self, quiet_s=0.3):
        """Read until nothing came for quiet_s."""
        while self.sub.poll(int(quiet_s * 1000)):
            topic, seq_bytes, payload = self.sub.recv_multipart()
            assert topic == b""
            seq, events = decode(seq_bytes, payload)
            self.batches[seq] = events

    def close(self):
        self.sub.close()


def replay(ctx, endpoint, start, timeout_s=5.0):
    """vLLM's replay protocol: ask from start, read (seq, payload) until -1."""
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    s.send_multipart([b"", start.to_bytes(8, "big")])
    got = {}
    deadline = time.time() + timeout_s
    try:
        while True:
            left = deadline - time.time()
            assert left > 0 and s.poll(int(left * 1000)), "no end marker from the replay socket"
            frames = s.recv_multipart()
            assert len(frames) == 3 and frames[0] == b"", "replay reply %r" % (frames[:2],)
            if frames[1] == END:
                assert frames[2] == b""
                return got
            seq, events = decode(frames[1], frames[2])
            got[seq] = events
    finally:
        s.close()


def rebuild(batches):
    r = Router()
    seqs = sorted(batches)
    assert seqs == list(range(len(seqs))), "sequence numbers %r are not 0, 1, ... without gaps" % seqs[:20]
    assert batches[0][0] == ["AllBlocksCleared"], "the first event is %r" % (batches[0][0],)
    for s in seqs:
        r.apply(batches[s])
    return r


def start_redis():
    server = shutil.which("redis-server")
    if not server:
        return None, None, None
    d = tempfile.mkdtemp(prefix="kvrt-events-redis-")
    port = free_port()
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--dir", d, "--save", "",
                             "--appendonly", "no", "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, d, port


def shared_keys(port):
    """Chunk keys whose head-0 entry the server holds (keys kvrt:<key><head BE>)."""
    import redis
    r = redis.Redis(host="127.0.0.1", port=port)
    out = set()
    for k in r.scan_iter(match=b"kvrt:*", count=1000):
        body = k[5:]
        if len(body) == 36 and body[32:] == b"\0\0\0\0":
            out.add(body[:32])
    return out


def test_tiers_rebuilt_from_events():
    """puts, promotions, evictions and a gc: the events rebuild each tier's chunks, parents and tokens"""
    ctx = zmq.Context()
    pub_port, replay_port = free_port(), free_port()
    proc, rdir, rport = start_redis()
    d = tempfile.mkdtemp(prefix="kvrt-events-")
    sub = Subscriber(ctx, "tcp://127.0.0.1:%d" % pub_port)
    try:
        with kvrt.Runtime() as rt:
            cache = rt.cache(model=MODEL, layout="HND", blocks=64, backend="cpu")
            seqs = [tokens_of(4 * T, seed) for seed in range(4)]
            table = list(range(4))
            # memory: 3 chunks of 4 heads; disk: 6 chunks
            opts = dict(model=MODEL, model_id="events@1", chunk_tokens=T, memory_bytes=3 * HEADS * ENTRY,
                        disk_bytes=6 * HEADS * SLOT, events="tcp://*:%d" % pub_port,
                        events_replay="tcp://127.0.0.1:%d" % replay_port)
            if proc:
                opts["shared"] = "redis://127.0.0.1:%d" % rport
            with kvrt.Store(d, **opts) as s:
                time.sleep(0.3)  # the subscriber's connection (missed batches come back by replay anyway)
                for i, tok in enumerate(seqs[:3]):
                    if i == 2:   # posted: the request keeps its own copy of the tokens
                        req = s.put_async(cache, table, list(tok))
                        assert req.wait(30) and req.tokens == 4 * T
                        req.release()
                    else:
                        assert s.put(cache, table, tok) == 4 * T
                    s.flush()
                loaded = s.get(cache, table, seqs[0])   # promotions from disk (or shared) to memory
                s.put(cache, table, seqs[3])
                s.flush()
                s.gc(4 * HEADS * SLOT)                  # the disk down to 4 chunks
                s.flush()
                time.sleep(0.2)
                sub.drain()
                st = s.stats
                missing = [q for q in range(max(sub.batches, default=-1) + 1) if q not in sub.batches]
                got = dict(sub.batches)
                if missing or 0 not in got:
                    got.update(replay(ctx, "tcp://127.0.0.1:%d" % replay_port, 0))
                r = rebuild(got)
                disk = {bytes.fromhex(e["key"]) for e in s.entries() if e["head"] == 0}
                assert r.held["DISK"] == disk, "disk: events say %d chunks, the listing %d" % (
                    len(r.held["DISK"]), len(disk))
                assert st["evicted_disk"] > 0 and st["evicted_memory"] > 0, st
                assert len(r.held["CPU"]) * HEADS == st["memory_entries"], "memory: %d chunks by events, %d " \
                    "entries held" % (len(r.held["CPU"]), st["memory_entries"])
                if proc:
                    assert r.held["SHARED"] == shared_keys(rport), "shared tier differs"
                # every chunk's BlockStored named its tokens and its parent
                for tok in seqs:
                    keys = s.keys(tok)
                    for c, k in enumerate(keys):
                        if k in r.chunk:
                            parent, token_ids = r.chunk[k]
                            assert token_ids == tok[c * T:(c + 1) * T], "chunk %d: tokens differ" % c
                            assert parent == (keys[c - 1] if c else None), "chunk %d: parent differs" % c
                # what the events say is in memory is found there, and what
                # they say is not, is not
                assert loaded == 4 * T
                inside = [(tok, c) for tok in seqs for c, k in enumerate(s.keys(tok)) if k in r.held["CPU"]]
                outside = [(tok, c) for tok in seqs for c, k in enumerate(s.keys(tok))
                           if k not in r.held["CPU"] and k in r.held["DISK"]]
                assert inside and outside, "%d chunks in memory, %d on disk only" % (len(inside), len(outside))
                for (tok, c), gain in ((inside[0], HEADS), (outside[0], 0)):
                    before = s.stats["hits_memory"]
                    assert s.get(cache, table, tok, first=c * T, count=T) == T
                    assert s.stats["hits_memory"] == before + gain, "chunk %d: %d memory hits, not %d" % (
                        c, s.stats["hits_memory"] - before, gain)
                m = s.metrics()
                assert "kvrt_store_events_published_total" in m
    finally:
        sub.close()
        ctx.term()
        if proc:
            proc.kill()
            proc.wait()
            shutil.rmtree(rdir, ignore_errors=True)
        shutil.rmtree(d, ignore_errors=True)
    if not proc:
        print("# the shared tier was not checked: redis-server is not installed")


def test_late_subscriber_replays():
    """a subscriber that joins late recovers every batch through the replay socket; a bad request is refused"""
    ctx = zmq.Context()
    pub_port, replay_port = free_port(), free_port()
    d = tempfile.mkdtemp(prefix="kvrt-events-")
    # a router that binds; the store connects to it (vLLM's rule for a host name)
    early = Subscriber(ctx, "tcp://127.0.0.1:%d" % pub_port, bind=True)
    try:
        with kvrt.Runtime() as rt:
            cache = rt.cache(model=MODEL, layout="NHD", blocks=64, backend="cpu")
            with kvrt.Store(d, model=MODEL, model_id="events@1", chunk_tokens=T, memory_bytes=1 << 20,
                            events="tcp://127.0.0.1:%d" % pub_port,
                            events_replay="tcp://127.0.0.1:%d" % replay_port) as s:
                for seed in range(3):
                    s.put(cache, list(range(4)), tokens_of(4 * T, 10 + seed))
                    s.flush()
                    time.sleep(0.05)
                time.sleep(0.2)
                early.drain()
                late = replay(ctx, "tcp://127.0.0.1:%d" % replay_port, 0)
                r = rebuild(late)
                disk = {bytes.fromhex(e["key"]) for e in s.entries() if e["head"] == 0}
                assert r.held["DISK"] == disk and len(disk) == 12, "%d %d" % (len(r.held["DISK"]), len(disk))
                # what the early one saw is what the late one got, batch for batch
                for q, events in early.batches.items():
                    assert late[q] == events, "batch %d differs" % q
                tail = replay(ctx, "tcp://127.0.0.1:%d" % replay_port, max(late))
                assert list(tail) == [max(late)]
                # a malformed request (4 bytes) gets the end marker alone, and the store goes on
                bad = ctx.socket(zmq.DEALER)
                bad.setsockopt(zmq.LINGER, 0)
                bad.connect("tcp://127.0.0.1:%d" % replay_port)
                bad.send_multipart([b"", b"\0\0\0\1"])
                assert bad.poll(5000), "no answer to a malformed replay request"
                assert bad.recv_multipart() == [b"", END, b""]
                bad.close()
                s.put(cache, list(range(4)), tokens_of(4 * T, 20))
                s.flush()
                assert "kvrt_store_events_replays_refused_total 1" in s.metrics()
    finally:
        early.close()
        ctx.term()
        shutil.rmtree(d, ignore_errors=True)


def test_refusals():
    """a bad endpoint, a taken port and a replay socket without events are refused naming them"""
    port = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    cases = [(dict(events="nonsense"), "nonsense"), (dict(events_replay="tcp://127.0.0.1:1"), "events_replay"),
             (dict(events=""), "events"), (dict(events="tcp://127.0.0.1:%d" % free_port(), events_replay="tcp://"
                                                "127.0.0.1:%d" % port), str(port)),
             (dict(events=5), "events")]
    # a store opened to inspect a folder has no model to publish for
    d = tempfile.mkdtemp(prefix="kvrt-events-")
    with kvrt.Store(d, model=MODEL, model_id="events@1", chunk_tokens=T):
        pass
    try:
        kvrt.Store(d, events="tcp://*:%d" % free_port())
        raise AssertionError("events were taken without a model")
    except kvrt.InvalidArgumentError as e:
        assert "without a model" in str(e)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    try:
        for kw, text in cases:
            try:
                with kvrt.Store(None, model=MODEL, model_id="events@1", chunk_tokens=T, **kw):
                    pass
                raise AssertionError("%r was taken" % (kw,))
            except kvrt.InvalidArgumentError as e:
                assert text in str(e), "%r not in %r" % (text, str(e))
    finally:
        holder.close()


run(globals())
