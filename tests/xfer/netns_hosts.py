#!/usr/bin/env python3
"""Two hosts on one machine: `kvrt xfer serve` and `kvrt xfer send` in two
network namespaces joined by a veth pair, over tcp.

usage: netns_hosts.py KVRT [matrix short|full]

The link gets `tc netem` delay (50 us each way) and rate (10 Gbit/s) when
the kernel has netem, else a `tbf` rate alone; loss is netem's, else an
nftables rule that drops 1 in 100 packets at random (numgen) on each side.
Cases: a converting transfer and a pull across the link, byte-exact; the
same with 1 % packet loss; the link taken down in
the middle of a stream of transfers (both sides fail within their timeout,
naming the peer, without a hang or an abort, and the serving agent goes on
to serve the next peer once the link is back); a sender that stops
progressing (SIGSTOP: the server fails its session in time).  Everything
stays inside the namespaces this test makes, removed at the end.  Needs
root and iproute2; skips with the reason otherwise.  TAP on stdout.

With `matrix`, the two hosts instead differ in what UCX may use: each pair
of device lists from default (every device), NIC only, NIC + lo, two
NICs, an IPv6-only NIC (UCX_TCP_AF_PRIO=inet6, connected over IPv6) and
dual-stack (inet6 first, then inet) -- the receiver packing a worker
address its sender's own devices would not (an 18-byte loopback tcp
entry beside a 6-byte IPv4 one, IPv6 entries) -- must connect and move
bytes exactly, and the full matrix takes the link down on one end then
the other.  UCX 1.13 carries a connection only between tcp interfaces of
its family (see FAMILIES): a pair of different families must be refused
in one line (by UCX, or by kvrt for an IPv6 connection on an agent with
IPv4 interfaces), not as a malformed address, never crash or hang.
`short` runs a few pairs (the default suite), `full` all 36 (suite
slow).
"""
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("xfer_cli", os.path.join(HERE, "xfer_cli.py"))
xfer_cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(xfer_cli)
HARD = xfer_cli.HARD
KEY = xfer_cli.COMMON  # --key-file KEY for every serve and send: a listener off loopback needs one
NET = "10.231.%d" % (os.getpid() % 200 + 20)
NET2 = "10.232.%d" % (os.getpid() % 200 + 20)
NET6 = "fd00:6b76:%x::" % (os.getpid() % 0xffff)
NET6B = "fd00:6b77:%x::" % (os.getpid() % 0xffff)  # the IPv6-only pair


def run(*cmd, check=True):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r


class Hosts:
    """Namespaces a and b, veth va (in a, NET.1) and vb (in b, NET.2)."""

    def __init__(self):
        tag = "%d" % os.getpid()
        self.ns = {"a": "kvrt-a-" + tag, "b": "kvrt-b-" + tag}
        self.dev = {"a": "kva" + tag[-8:], "b": "kvb" + tag[-8:]}
        self.addr = {"a": NET + ".1", "b": NET + ".2"}
        self.made = []
        self.netem = False
        self.second = False

    def setup(self):
        for side in "ab":
            run("ip", "netns", "add", self.ns[side])
            self.made.append(self.ns[side])
        run("ip", "link", "add", self.dev["a"], "netns", self.ns["a"], "type", "veth", "peer", "name",
            self.dev["b"], "netns", self.ns["b"])
        for side in "ab":
            self.ip(side, "addr", "add", self.addr[side] + "/24", "dev", self.dev[side])
            self.ip(side, "link", "set", self.dev[side], "up")
            self.ip(side, "link", "set", "lo", "up")
        for side in "ab":
            self.wait_carrier(side)
        self.netem = self.shape("add", []) is None
        self.shaped = "netem 50 us each way, 10 Gbit/s" if self.netem else None
        if not self.netem and shutil.which("tc"):
            ok = all(run("ip", "netns", "exec", self.ns[side], "tc", "qdisc", "add", "dev", self.dev[side], "root",
                         "tbf", "rate", "10gbit", "burst", "1mb", "latency", "10ms", check=False).returncode == 0
                     for side in "ab")
            self.shaped = "tbf 10 Gbit/s (no netem in this kernel: no delay)" if ok else None

    def add_second_nic_and_ipv6(self):
        """A second veth pair with IPv4 (NET2) and IPv6 (NET6), and a third
        with IPv6 addresses only (NET6B), for the matrix."""
        self.dev2 = {"a": "kwa" + self.dev["a"][3:], "b": "kwb" + self.dev["b"][3:]}
        run("ip", "link", "add", self.dev2["a"], "netns", self.ns["a"], "type", "veth", "peer", "name",
            self.dev2["b"], "netns", self.ns["b"])
        for i, side in enumerate("ab"):
            # IPv6 only where the matrix puts it, and no link-local address
            # (a tentative one would be taken by an inet6-first UCX and
            # make a run depend on DAD's timing).
            run("ip", "netns", "exec", self.ns[side], "sysctl", "-qw",
                "net.ipv6.conf.%s.disable_ipv6=1" % self.dev[side])
            self.ip(side, "link", "set", self.dev2[side], "addrgenmode", "none")
            self.ip(side, "addr", "add", "%s.%d/24" % (NET2, i + 1), "dev", self.dev2[side])
            self.ip(side, "link", "set", self.dev2[side], "up")
            self.ip(side, "-6", "addr", "add", "%s%d/64" % (NET6, i + 1), "dev", self.dev2[side], "nodad")
        self.dev3 = {"a": "kxa" + self.dev["a"][3:], "b": "kxb" + self.dev["b"][3:]}
        self.addr6 = {"a": NET6B + "1", "b": NET6B + "2"}
        run("ip", "link", "add", self.dev3["a"], "netns", self.ns["a"], "type", "veth", "peer", "name",
            self.dev3["b"], "netns", self.ns["b"])
        for side in "ab":
            self.ip(side, "link", "set", self.dev3[side], "addrgenmode", "none")
            self.ip(side, "link", "set", self.dev3[side], "up")
            self.ip(side, "-6", "addr", "add", self.addr6[side] + "/64", "dev", self.dev3[side], "nodad")
        for side in "ab":
            self.wait_carrier(side, self.dev2[side])
            self.wait_carrier(side, self.dev3[side])
        self.second = True

    def wait_carrier(self, side, dev=None):
        """UCX takes only running interfaces: wait for the veth's carrier."""
        dev = dev or self.dev[side]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = self.ip(side, "link", "show", "dev", dev, check=False)
            if "LOWER_UP" in r.stdout:
                return
            time.sleep(0.05)
        raise RuntimeError("veth %s has no carrier after 10 s" % dev)

    def dropped(self):
        """Packets the loss rules dropped (netem: its qdisc's drop count)."""
        total = 0
        for side in "ab":
            if self.netem:
                r = run("ip", "netns", "exec", self.ns[side], "tc", "-s", "qdisc", "show", "dev", self.dev[side],
                        check=False)
                m = re.search(r"dropped (\d+)", r.stdout)
            else:
                r = run("ip", "netns", "exec", self.ns[side], "nft", "list", "table", "inet", "kvrt_loss", check=False)
                m = re.search(r"packets (\d+)", r.stdout)
            total += int(m.group(1)) if m else 0
        return total

    def lossy(self, on):
        """1 % loss each way: netem's, else nftables; None, or why not."""
        if self.netem:
            return self.shape("change", ["loss", "1%"] if on else [])
        if not shutil.which("nft"):
            return "neither tc netem (kernel) nor nft (package nftables) is available"
        for side in "ab":
            if on:
                rules = ("table inet kvrt_loss {\n chain out {\n  type filter hook output priority 0;\n"
                         "  oifname \"%s\" numgen random mod 100 < 1 counter drop\n }\n}\n" % self.dev[side])
                r = subprocess.run(["ip", "netns", "exec", self.ns[side], "nft", "-f", "-"], input=rules,
                                   capture_output=True, text=True, timeout=30)
            else:
                r = run("ip", "netns", "exec", self.ns[side], "nft", "delete", "table", "inet", "kvrt_loss",
                        check=False)
            if r.returncode != 0:
                return "nft: " + r.stderr.strip()
        return None

    def ip(self, side, *args, check=True):
        return run("ip", "-n", self.ns[side], *args, check=check)

    def shape(self, verb, extra):
        """tc netem on both ends: delay and rate, plus `extra`; None, or why not."""
        if not shutil.which("tc"):
            return "tc (iproute2) is not installed"
        for side in "ab":
            r = run("ip", "netns", "exec", self.ns[side], "tc", "qdisc", verb, "dev", self.dev[side], "root", "netem",
                    "delay", "50us", "rate", "10gbit", *extra, check=False)
            if r.returncode != 0:
                return "tc netem: " + r.stderr.strip()
        return None

    def link(self, side, state):
        """That end's links (both NICs, once the matrix made the second)."""
        self.ip(side, "link", "set", self.dev[side], state)
        if self.second:
            self.ip(side, "link", "set", self.dev2[side], state)
            self.ip(side, "link", "set", self.dev3[side], state)
            if state == "up":
                # A link going down takes its IPv6 addresses with it.
                i = "ab".index(side) + 1
                self.ip(side, "-6", "addr", "replace", "%s%d/64" % (NET6, i), "dev", self.dev2[side], "nodad")
                self.ip(side, "-6", "addr", "replace", self.addr6[side] + "/64", "dev", self.dev3[side], "nodad")

    def exec_prefix(self, side):
        return ["ip", "netns", "exec", self.ns[side]]

    def env(self, side, devices=None):
        e = dict(os.environ)
        e.pop("VLLM_KV_CACHE_LAYOUT", None)
        e.pop("UCX_TCP_AF_PRIO", None)
        e["KVRT_BACKEND"] = "cpu"
        e["UCX_TLS"] = "tcp"
        e["UCX_NET_DEVICES"] = self.dev[side]
        e.setdefault("UCX_LOG_LEVEL", "error")
        if devices:
            e.pop("UCX_NET_DEVICES")
            e.update(DEVICE_LISTS[devices](self, side))
        return e

    def teardown(self):
        for ns in self.made:
            run("ip", "netns", "del", ns, check=False)


def model(blocks=64):
    return ["--layers", "4", "--kv-heads", "2", "--head-size", "64", "--dtype", "bf16", "--block-size", "16",
            "--blocks", str(blocks)]


def Serve(h, kvrt, tmp, args):
    """xfer_cli's serve, in namespace b on the veth's address."""
    return xfer_cli.Serve(kvrt, args, h.env("b"), tmp, host=h.addr["b"], prefix=h.exec_prefix("b"))


def send_cmd(h, kvrt, port, args):
    return xfer_cli.send_cmd(kvrt, port, args, host=h.addr["b"], prefix=h.exec_prefix("a"))


def send(h, kvrt, port, args, timeout=HARD):
    return xfer_cli.send(kvrt, port, args, h.env("a"), timeout, host=h.addr["b"], prefix=h.exec_prefix("a"))


def across(t, h, kvrt, tmp, label, repeat=4):
    """A converting push and a pull across the link, both byte-exact."""
    s = Serve(h, kvrt, tmp, ["--layout", "LBHNC", "--sessions", "2"] + model())
    if not t.ok(s.port is not None, "%s: serve listening in namespace b at %s" % (label, h.addr["b"]),
                s.finish(5)[3] if s.port is None else None):
        return
    rc, doc, out, err = send(h, kvrt, s.port, ["--layout", "BLNHC", "--ids", "0-31", "--remote-ids", "32-63",
                                               "--repeat", str(repeat)] + model())
    t.ok(rc == 0 and doc and doc.get("transfers") == repeat,
         "%s: BLNHC -> LBHNC push of 32 blocks x %d from namespace a (%s)" % (label, repeat, doc and doc.get("method")),
         "exit %s\n%s\n%s" % (rc, out, err))
    rc, doc, out, err = send(h, kvrt, s.port, ["--layout", "LBNHC", "--pull", "--ids", "5-20", "--remote-ids",
                                               "0-15"] + model())
    t.ok(rc == 0 and doc and doc.get("verified") is True, "%s: pull of 16 blocks into LBNHC, verified" % label,
         "exit %s\n%s\n%s" % (rc, out, err))
    rc, doc, out, err = s.finish()
    t.ok(rc == 0 and doc and doc.get("verified") is True and doc.get("transfers") == repeat + 1,
         "%s: the server verified every pushed byte (%d transfers)" % (label, repeat + 1), "exit %s\n%s\n%s" % (rc, out, err))


def link_down(t, h, kvrt, tmp):
    s = Serve(h, kvrt, tmp, ["--layout", "LBHNC", "--sessions", "2", "--keep-going", "--timeout", "4"] + model(256))
    if not t.ok(s.port is not None, "link down: serve listening", s.finish(5)[3] if s.port is None else None):
        return
    p = subprocess.Popen(send_cmd(h, kvrt, s.port, ["--layout", "LBHNC", "--timeout", "4", "--repeat", "100000",
                                                    "--inflight", "4"] + model(256)),
                         env=h.env("a"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    h.link("a", "down")
    t0 = time.monotonic()
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        err += "\n(killed: still running 30 s after the link went down)"
    took = time.monotonic() - t0
    t.ok(p.returncode not in (0, None) and p.returncode > 0 and took < 15 and h.addr["b"] in err,
         "link down: the sender fails in %.1f s (timeout 4 s), exit %s, naming the peer" % (took, p.returncode),
         err)
    h.link("a", "up")
    h.wait_carrier("a")
    h.wait_carrier("b")
    # The server's session fails the same way (its timeout is 4 s too); it
    # then serves the next peer.
    time.sleep(1.0)
    for attempt in range(int(os.environ.get("KVRT_NETNS_TRIES", "1"))):
        rc, doc, out2, err2 = send(h, kvrt, s.port, ["--layout", "BLHNC", "--ids", "0-7", "--timeout", "10"]
                                   + model(256))
        if os.environ.get("KVRT_NETNS_DEBUG"):
            print("# attempt %d at %.1f s: rc %s %s" % (attempt, time.monotonic() - t0, rc, err2.strip()[-200:]))
        if rc == 0:
            break
        time.sleep(1)
    t.ok(rc == 0 and doc and doc.get("transfers") == 1,
         "link up again: the same server takes the next peer (--keep-going)", "exit %s\n%s\n%s" % (rc, out2, err2))
    rc, doc, out, err = s.finish()
    t.ok(rc > 0 and "session 1" in err and ("failed" in err or "silent" in err) and doc is not None
         and doc.get("sessions") == 2 and doc.get("transfers", 0) >= 2,
         "link down: the server failed session 1 with the reason (exit %s), no abort" % rc, err)
    if os.environ.get("KVRT_NETNS_DEBUG"):
        print("# server stderr:\n" + "\n".join("#  " + l for l in err.splitlines()))


def stopped_peer(t, h, kvrt, tmp):
    s = Serve(h, kvrt, tmp, ["--layout", "LBHNC", "--timeout", "3"] + model(256))
    if not t.ok(s.port is not None, "stopped peer: serve listening", s.finish(5)[3] if s.port is None else None):
        return
    p = subprocess.Popen(send_cmd(h, kvrt, s.port, ["--layout", "LBHNC", "--repeat", "100000", "--inflight", "4"]
                                  + model(256)), env=h.env("a"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(1.5)
    # ip netns exec runs kvrt as its child after exec: the pid is kvrt's.
    os.kill(p.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    rc, doc, out, err = s.finish(30)
    took = time.monotonic() - t0
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    t.ok(rc > 0 and took < 15 and ("silent" in err or "failed" in err),
         "stopped peer: the server fails its session in %.1f s (timeout 3 s), exit %s" % (took, rc), err)


# What UCX may use on one host of the matrix (environment for that side).
DEVICE_LISTS = {
    "default": lambda h, s: {},
    "nic": lambda h, s: {"UCX_NET_DEVICES": h.dev[s]},
    "nic+lo": lambda h, s: {"UCX_NET_DEVICES": h.dev[s] + ",lo"},
    "two-nics": lambda h, s: {"UCX_NET_DEVICES": h.dev[s] + "," + h.dev2[s]},
    "ipv6": lambda h, s: {"UCX_NET_DEVICES": h.dev3[s], "UCX_TCP_AF_PRIO": "inet6"},
    "dual": lambda h, s: {"UCX_NET_DEVICES": h.dev[s] + "," + h.dev2[s], "UCX_TCP_AF_PRIO": "inet6,inet"},
}
# The family of the tcp interfaces each list gives UCX, and so of the
# connection: UCX 1.13 gives an interface the first family of
# UCX_TCP_AF_PRIO it has an address of.  "ipv6" is a NIC with IPv6
# addresses only (no link-local one either), connected over IPv6 ([addr]:
# port); every other list connects over IPv4.  UCX 1.13 carries a
# connection only between interfaces of its family: an IPv4 connection to
# a peer whose interface is IPv6 finds no lane ("Destination is
# unreachable", refused by UCX, cleanly), and kvrt refuses an IPv6
# connection on an agent with an IPv4 interface itself (UCX would write
# past an endpoint's address there: docs/xfer.md, "Connections").
FAMILIES = {"default": "inet", "nic": "inet", "nic+lo": "inet", "two-nics": "inet", "ipv6": "inet6",
            "dual": "inet6,inet"}
# Lists that give UCX more than one tcp interface a peer in another
# namespace can reach.  Between two such workers (or one such and any
# other) UCX 1.13's tcp wire-up, under kvrt's connection and the two data
# endpoints opened towards each other, resets a fresh connection in some
# runs (both sides fail in one line; docs/xfer.md, "Faults"): those pairs
# must end cleanly, moved and verified or refused, and are counted.
MULTI = {"default", "two-nics", "dual"}
SHORT = [("nic+lo", "nic"), ("nic", "nic+lo"), ("nic+lo", "nic+lo"), ("dual", "two-nics"), ("ipv6", "ipv6"),
         ("ipv6", "nic"), ("dual", "dual")]


def host_of(h, recv):
    """Where a receiver with `recv`'s devices listens: IPv6 in brackets on
    the IPv6-only NIC, else its first NIC's IPv4 address."""
    return "[%s]" % h.addr6["b"] if recv == "ipv6" else h.addr["b"]


def serve_for(h, kvrt, tmp, recv):
    return xfer_cli.Serve(kvrt, ["--layout", "LBHNC", "--timeout", "4"] + model(), h.env("b", recv), tmp,
                          host=host_of(h, recv), prefix=h.exec_prefix("b"))


def clean_end(rc, err):
    """Ended by itself: no signal (an abort is -6), no UCX assertion."""
    return rc is not None and rc >= 0 and "Assertion" not in err and "malformed" not in err


def push_once(h, kvrt, tmp, recv, sender):
    """One serve and one push of 8 blocks: (sent ok, server verified, why)."""
    s = serve_for(h, kvrt, tmp, recv)
    if s.port is None:
        return False, False, "serve did not listen: " + s.finish(5)[3]
    rc, doc, out, err = xfer_cli.send(kvrt, s.port, ["--layout", "BLNHC", "--ids", "0-7", "--remote-ids", "8-15",
                                                     "--timeout", "4"] + model(), h.env("a", sender), 30,
                                      host=host_of(h, recv), prefix=h.exec_prefix("a"))
    src, sdoc, sout, serr = s.finish(30)
    sent = rc == 0 and doc is not None and doc.get("transfers") == 1
    verified = src == 0 and sdoc is not None and sdoc.get("verified") is True and sdoc.get("transfers") == 1
    clean = clean_end(rc, err) and clean_end(src, serr) and rc != 124
    why = "sender exit %s: %s\nserver exit %s: %s" % (rc, err.strip()[-300:], src, serr.strip()[-300:])
    return (sent, verified, why) if clean else (None, None, why)


def pair(t, h, kvrt, tmp, recv, sender, down):
    """Receiver (serve, namespace b) with `recv`'s devices, sender (namespace
    a) with `sender`'s: a push of 8 blocks the server verifies, or (where UCX
    has no lane) a refusal in one line; never a crash, a hang or kvrt's
    "malformed".  UCX 1.13's tcp wire-up with several interfaces now and
    then resets a fresh connection (both sides fail in one line): up to
    three tries, counted in the line.  With `down` ("a" or "b"), that end's
    link then goes down under a stream of transfers."""
    label = "%s <- %s" % (recv, sender)
    must = FAMILIES[recv] == FAMILIES[sender] and not ({recv, sender} & MULTI)
    tries, sent, verified, why = 0, False, False, ""
    # only a pair with several interfaces is retried: a refusal elsewhere
    # is the answer, and each try waits out the server's timeout
    retries = 3 if {recv, sender} & MULTI else 1
    while tries < retries and not (sent and verified):
        tries += 1
        sent, verified, why = push_once(h, kvrt, tmp, recv, sender)
        if sent is None:
            break
    if must:
        t.ok(sent and verified, "%s: connects, pushes 8 blocks, the server verifies them (try %d)" % (label, tries),
             why)
    else:
        t.ok(sent is not None and sent == verified,
             "%s: %s (try %d)" % (label, "moved and verified 8 blocks" if sent else
                                  "refused in one line, cleanly", tries), why if not sent else None)
        if not sent:
            print("#   " + why.replace("\n", "\n#   "))
    if not (down and sent and verified):
        return
    s = serve_for(h, kvrt, tmp, recv)
    p = subprocess.Popen(xfer_cli.send_cmd(kvrt, s.port, ["--layout", "LBHNC", "--timeout", "4", "--repeat",
                                                          "100000", "--inflight", "2"] + model(),
                                           host=host_of(h, recv), prefix=h.exec_prefix("a")),
                         env=h.env("a", sender), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    h.link(down, "down")
    t1 = time.monotonic()
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        err += "\n(killed: still running 30 s after the link went down)"
    took = time.monotonic() - t1
    h.link(down, "up")
    h.wait_carrier(down)
    h.wait_carrier(down, h.dev2[down])
    h.wait_carrier(down, h.dev3[down])
    src, sdoc, sout, serr = s.finish(30)
    t.ok(p.returncode is not None and p.returncode > 0 and took < 15 and host_of(h, recv) in err and clean_end(src, serr),
         "%s: link down at %s: the sender fails in %.1f s naming the peer, the server ends cleanly (exit %s)"
         % (label, down, took, src), err + "\n" + serr)


def matrix(t, h, kvrt, tmp, full):
    pairs = [(r, s) for r in DEVICE_LISTS for s in DEVICE_LISTS] if full else SHORT
    for i, (recv, sender) in enumerate(pairs):
        down = ("a" if i % 2 else "b") if full or i < 2 else None
        pair(t, h, kvrt, tmp, recv, sender, None if os.environ.get("KVRT_NETNS_NODOWN") else down)


def main():
    kvrt = sys.argv[1]
    mode = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "matrix" else None
    why = None
    if kvrt == "skip":
        why = "kvrt was built without UCX (install libucx-dev; meson option ucx)"
    elif os.geteuid() != 0:
        why = "network namespaces need root"
    elif not shutil.which("ip"):
        why = "ip (iproute2) is not installed"
    if why:
        print("1..0 # SKIP " + why)
        return 0
    h = Hosts()
    t = xfer_cli.Tap()
    try:
        try:
            h.setup()
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            h.teardown()
            print("1..0 # SKIP cannot make network namespaces here: %s" % e)
            return 0
        with tempfile.TemporaryDirectory(prefix="kvrt-netns-") as tmp:
            key = os.path.join(tmp, "key")
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, os.urandom(32))
            os.close(fd)
            KEY.extend(["--key-file", key])
            if mode:
                h.add_second_nic_and_ipv6()
                matrix(t, h, kvrt, tmp, mode == "full")
                print("1..%d" % t.n, flush=True)
                return 0
            across(t, h, kvrt, tmp, "veth, " + (h.shaped or "unshaped (no tc)"))
            why = h.lossy(True)
            if why is None:
                across(t, h, kvrt, tmp, "1 % loss", repeat=64)
                n = h.dropped()
                t.ok(n > 0, "1 %% loss: the link dropped %d packets meanwhile" % n)
                h.lossy(False)
            else:
                t.ok(True, "1 %% packet loss # SKIP %s" % why)
            link_down(t, h, kvrt, tmp)
            stopped_peer(t, h, kvrt, tmp)
    finally:
        h.teardown()
    print("1..%d" % t.n, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
