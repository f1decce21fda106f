"""TAP: the Prometheus metrics of libkvrt-store and libkvrt-xfer, read by
prometheus_client's own parser (python3-prometheus-client): every line
parses, every family has HELP and TYPE, and each value equals the stats
struct it renders (docs/store.md "Metrics", docs/xfer.md "Metrics").  Also
kvrt.metrics(), kvrt.MetricsCollector in a registry, and `kvrt store stat
DIR --prometheus` (argv[1]: the kvrt tool).  Skips, saying why, where it
cannot run.

    metrics.py KVRT_EXE
"""
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

from tap_py import Skip, needs, run

torch, parser, prometheus_client, kvrt, _ = needs("torch", "prometheus_client.parser", "prometheus_client",
                                                 "kvrt", "kvrt.store")

KVRT_EXE = sys.argv[1] if len(sys.argv) > 1 else None
T = 16
HEADS = 2
MODEL = {"layers": 2, "kv_heads": HEADS, "head_size": 16, "dtype": "bf16", "block_size": 16}
ENTRY = T * 2 * (16 + 16) * 2


def parse(text):
    """{(sample name, labels as a sorted tuple): value}, after checking that
    every sample line was parsed and every family has HELP and TYPE."""
    assert text.endswith("\n"), "the text does not end in a newline"
    lines = text.split("\n")[:-1]
    samples = [ln for ln in lines if not ln.startswith("#")]
    assert all(ln for ln in samples), "an empty line"
    helps = {ln.split()[2] for ln in lines if ln.startswith("# HELP ")}
    types = {ln.split()[2]: ln.split()[3] for ln in lines if ln.startswith("# TYPE ")}
    out, n = {}, 0
    for fam in parser.text_string_to_metric_families(text):
        name = fam.name + ("_total" if fam.type == "counter" else "")
        assert name in helps and types.get(name) == fam.type, "%s: HELP or TYPE missing" % name
        assert fam.documentation, "%s: no HELP text" % name
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, "%r twice" % (key,)
            out[key] = s.value
            n += 1
    assert n == len(samples), "%d sample lines, %d parsed" % (len(samples), n)
    return out


def v(m, name, **labels):
    return m[(name, tuple(sorted(labels.items())))]


def tokens_of(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 32000, (n,), generator=g, dtype=torch.int32).tolist()


def work(d):
    """A store with some of everything done; its stats and metrics."""
    rt = kvrt.Runtime()
    cache = rt.cache(model=MODEL, layout="HND", blocks=64, backend="cpu")
    s = kvrt.Store(d, model=MODEL, model_id='metrics "quoted" \\ id\nline', chunk_tokens=T,
                   memory_bytes=3 * HEADS * ENTRY)
    seqs = [tokens_of(4 * T, seed) for seed in range(3)]
    for tok in seqs:
        s.put(cache, list(range(4)), tok)
    s.flush()
    s.get(cache, list(range(4)), seqs[0])
    s.get(cache, list(range(4)), tokens_of(2 * T, 99))   # misses
    s.put(cache, list(range(4)), seqs[1])                 # present
    s.flush()
    return rt, s


def test_store_metrics_equal_stats():
    """every line parses; each value is the stats struct's; the model id escaped as a label value"""
    d = tempfile.mkdtemp(prefix="kvrt-metrics-")
    try:
        rt, s = work(d)
        with rt, s:
            text, st = s.metrics(), s.stats
            assert text == kvrt.metrics(store=s)
            m = parse(text)
            E = st["entry_bytes"]
            assert v(m, "kvrt_store_info", model_id='metrics "quoted" \\ id\nline', chunk_tokens=str(T),
                     entry_bytes=str(E)) == 1
            for tier in ("memory", "disk", "shared"):
                assert v(m, "kvrt_store_hits_total", tier=tier) == st["hits_" + tier]
                assert v(m, "kvrt_store_loaded_bytes_total", tier=tier) == st["hits_" + tier] * E
            for tier in ("memory", "disk"):
                assert v(m, "kvrt_store_entries", tier=tier) == st[tier + "_entries"]
                assert v(m, "kvrt_store_stored_bytes", tier=tier) == st[tier + "_bytes"]
                assert v(m, "kvrt_store_capacity_bytes", tier=tier) == st[tier + "_capacity"]
                assert v(m, "kvrt_store_evictions_total", tier=tier) == st["evicted_" + tier]
            for tier in ("disk", "shared"):
                assert v(m, "kvrt_store_written_entries_total", tier=tier) == st["written_" + tier]
            pairs = {"kvrt_store_misses_total": "misses", "kvrt_store_put_entries_total": "put_entries",
                     "kvrt_store_put_present_entries_total": "put_present",
                     "kvrt_store_write_failures_total": "write_failures",
                     "kvrt_store_dropped_entries_total": "dropped", "kvrt_store_queue_entries": "queued_entries",
                     "kvrt_store_queue_bytes": "queued_bytes"}
            for name, field in pairs.items():
                assert v(m, name) == st[field], "%s %r, stats %s %r" % (name, v(m, name), field, st[field])
            assert v(m, "kvrt_store_put_bytes_total") == st["put_entries"] * E
            assert st["misses"] > 0 and st["put_present"] > 0 and st["evicted_memory"] > 0, st
            desc = s.describe()["disk"]
            for name in ("hits", "misses", "writes", "evictions"):
                assert v(m, "kvrt_store_directory_%s_total" % name) == desc[name], name
            assert not any(k[0].startswith("kvrt_store_events") for k in m), "event metrics with events off"
            assert not any(k[0].startswith("kvrt_store_shared") for k in m), "shared-tier metrics without one"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_collector_and_sizes():
    """MetricsCollector in a registry; the size query; a short buffer refused; a bad source refused"""
    import ctypes as C
    d = tempfile.mkdtemp(prefix="kvrt-metrics-")
    try:
        rt, s = work(d)
        with rt, s:
            reg = prometheus_client.CollectorRegistry()
            reg.register(kvrt.MetricsCollector(store=s))
            out = prometheus_client.generate_latest(reg).decode()
            assert reg.get_sample_value("kvrt_store_hits_total", {"tier": "disk"}) == s.stats["hits_disk"]
            assert "kvrt_store_put_entries_total %s" % float(s.stats["put_entries"]) in out
            slib = kvrt.store.slib
            need = C.c_size_t()
            assert slib.kvrt_store_metrics(s._h, None, 0, C.byref(need)) == 0
            assert need.value == len(s.metrics().encode()) + 1
            assert slib.kvrt_store_metrics(None, None, 0, None) != 0
            assert slib.kvrt_store_metrics(s._h, None, 10, None) != 0, "a size without a buffer was taken"
            buf = C.create_string_buffer(need.value - 1)
            rc = slib.kvrt_store_metrics(s._h, buf, len(buf), C.byref(need))
            assert rc != 0 and buf.value == b"", "a short buffer was taken"
            assert str(need.value) in kvrt._lib.lib.kvrt_error_message().decode()
            try:
                kvrt.metrics(store=object())
                raise AssertionError("a bad source was taken")
            except kvrt.InvalidArgumentError as e:
                assert "store" in str(e)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_cli_prometheus():
    """kvrt store stat DIR --prometheus: the directory's counters, every process's"""
    if not KVRT_EXE or not os.path.exists(KVRT_EXE):
        raise Skip("no kvrt tool given (argv[1])")
    d = tempfile.mkdtemp(prefix="kvrt-metrics-")
    try:
        rt, s = work(d)
        with rt, s:
            pass
        rt, s = work(d)   # a second process's worth of counters on the same folder
        with rt, s:
            pass
        with kvrt.Store(d) as s:
            desc, st = s.describe()["disk"], s.stats
        r = subprocess.run([KVRT_EXE, "store", "stat", d, "--prometheus"], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        m = parse(r.stdout)
        for name in ("hits", "misses", "writes", "evictions"):
            assert v(m, "kvrt_store_directory_%s_total" % name) == desc[name], name
        assert v(m, "kvrt_store_entries", tier="disk") == st["disk_entries"] == desc["entries"]
        assert desc["hits"] > 0 and desc["writes"] > 0
        bad = subprocess.run([KVRT_EXE, "store", "stat", d, "--prometheus", "--json"], capture_output=True,
                             text=True, timeout=60)
        assert bad.returncode == 2 and "--prometheus" in bad.stderr, (bad.returncode, bad.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_shared_tier_metrics():
    """the shared tier's node families on a redis-server started here: up, map learnt, then killed: a node down"""
    server = shutil.which("redis-server")
    if not server:
        raise Skip("redis-server is not installed (Debian package redis-server)")
    import socket
    import time
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    d = tempfile.mkdtemp(prefix="kvrt-metrics-redis-")
    proc = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--dir", d, "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        rt = kvrt.Runtime()
        cache = rt.cache(model=MODEL, layout="HND", blocks=64, backend="cpu")
        tok = tokens_of(4 * T, 7)
        with rt, kvrt.Store(None, model=MODEL, model_id="metrics-shared", chunk_tokens=T, memory_bytes=0,
                            shared="redis://127.0.0.1:%d" % port, shared_timeout=0.5) as s:
            s.put(cache, list(range(4)), tok)
            s.flush()
            assert s.get(cache, list(range(4)), tok) == 4 * T
            m, st = parse(s.metrics()), s.stats
            assert st["shared_map_refreshes"] >= 1 and st["shared_nodes_down"] == 0, st
            pairs = {"kvrt_store_shared_nodes_down": "shared_nodes_down",
                     "kvrt_store_shared_failovers_total": "shared_failovers",
                     "kvrt_store_shared_map_refreshes_total": "shared_map_refreshes", "kvrt_store_shared_up": "shared_up"}
            for name, field in pairs.items():
                assert v(m, name) == st[field], "%s %r, stats %s %r" % (name, v(m, name), field, st[field])
            assert v(m, "kvrt_store_shared_redirects_total", kind="moved") == st["shared_moved"] == 0
            assert v(m, "kvrt_store_shared_redirects_total", kind="ask") == st["shared_ask"] == 0
            proc.kill()
            proc.wait()
            assert s.get(cache, list(range(4)), tok) == 0
            m, st = parse(s.metrics()), s.stats
            assert st["shared_nodes_down"] == 1 and not st["shared_up"], st
            assert v(m, "kvrt_store_shared_nodes_down") == 1 and v(m, "kvrt_store_shared_up") == 0
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def test_xfer_metrics_equal_stats():
    """kvrt_xfer_agent_metrics: every line parses, each value the agent's stats"""
    try:
        kx = importlib.import_module("kvrt.xfer")
    except ImportError as e:
        raise Skip("kvrt.xfer: %s" % e)
    with kvrt.Runtime() as rt:
        cache = rt.cache(model=MODEL, layout="HND", blocks=16, backend="cpu")
        with kx.Agent(cache) as a:
            text, st = a.metrics(), a.stats
            assert text == kvrt.metrics(agent=a)
            m = parse(text)
            assert v(m, "kvrt_xfer_peers") == st["peers"] and v(m, "kvrt_xfer_handles") == st["handles"]
            assert v(m, "kvrt_xfer_transfers_total", result="completed") == st["completed"]
            assert v(m, "kvrt_xfer_transfers_total", result="failed") == st["failed"]
            for reason, field in (("connection", "refused"), ("protocol", "violations"),
                                  ("stranger", "strangers"), ("not_granted", "denied")):
                assert v(m, "kvrt_xfer_refusals_total", reason=reason) == st[field]
            assert v(m, "kvrt_xfer_sent_bytes_total") == st["bytes_sent"]
            assert v(m, "kvrt_xfer_received_bytes_total") == st["bytes_received"]
            assert v(m, "kvrt_xfer_staging_chunks", state="all") == st["staging_chunks"]
            assert v(m, "kvrt_xfer_registered_bytes") == st["registered_bytes"] > 0
            assert abs(v(m, "kvrt_xfer_registration_seconds") - st["registration_s"]) <= 1e-6 * max(
                1.0, st["registration_s"])


run(globals())
