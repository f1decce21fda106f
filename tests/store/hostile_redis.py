#!/usr/bin/python3
"""A server that speaks the Redis protocol badly, for the shared tier's
tests: it answers CLUSTER SLOTS as a plain server would and EXISTS with
0 (so the store opens and goes on to its GETs) unless the mode is about
those, and the rest in the way the mode names:

  slow       everything: one byte of a long, well-formed reply per second
  endless    GET: a value that claims 10^12 bytes, then bytes without end
  longline   EXISTS and GET: an integer reply whose line never ends
  negative   GET: a value of length -5
  wrongtype  GET: an integer where a value is due
  exists     EXISTS: a value where an integer is due
  truncated  GET: a value of 1000 bytes, 10 of them sent, then the close
  slotmap    CLUSTER SLOTS: an array of 10^9 elements, then bytes
  garbage    everything: random bytes, CRLFs and type characters among
             them, then the close (seeded: the same bytes every run)
  deaf       SET: stops reading at its name and never answers: the
             client's writes fill the socket and wait, or its reads do

Prints its port on stdout, serves until killed.
    hostile_redis.py MODE
"""
import random
import socket
import sys
import threading
import time

MODE = sys.argv[1]
GARBAGE_SEED = [0]  # one seed per reply, the same sequence every run
NO_CLUSTER = b"-ERR This instance has cluster support disabled\r\n"


def commands(conn):
    """Yield each command's name (upper case) as it arrives."""
    buf = b""
    while True:
        while b"\r\n" not in buf or not buf.startswith(b"*"):
            data = conn.recv(65536)
            if not data:
                return
            buf += data
        # *N\r\n$L\r\nNAME\r\n... : the name is enough; skip the rest
        # by counting the arguments' lines
        try:
            head, rest = buf.split(b"\r\n", 1)
            n = int(head[1:])
            parts, pos = [], 0
            for _ in range(n):
                while rest.find(b"\r\n", pos) < 0:
                    more = conn.recv(65536)
                    if not more:
                        return
                    rest += more
                end = rest.index(b"\r\n", pos)
                ln = int(rest[pos + 1:end])
                while len(rest) < end + 2 + ln + 2:
                    more = conn.recv(1 << 20)
                    if not more:
                        return
                    rest += more
                parts.append(rest[end + 2:end + 2 + ln])
                pos = end + 2 + ln + 2
                if MODE == "deaf" and parts[0].upper() == b"SET":
                    yield b"SET"  # and read no more
                    return
            buf = rest[pos:]
            yield parts[0].upper()
        except ValueError:
            return


def answer(conn, name):
    if name == b"CLUSTER" and MODE not in ("slotmap", "slow", "garbage"):
        conn.sendall(NO_CLUSTER)
        return True
    if name == b"EXISTS" and MODE not in ("slow", "longline", "exists", "garbage"):
        conn.sendall(b":0\r\n")  # the store's open goes on to its gets
        return True
    if MODE == "deaf":
        if name == b"SET":
            time.sleep(3600)
        conn.sendall(b"$-1\r\n")
        return True
    if MODE == "slow":
        for b in b"$1000\r\n" + b"x" * 1000 + b"\r\n":
            conn.sendall(bytes([b]))
            time.sleep(1.0)
    elif MODE == "endless":
        conn.sendall(b"$1000000000000\r\n")
        while True:
            conn.sendall(b"x" * 65536)
    elif MODE == "longline":
        conn.sendall(b":")
        while True:
            conn.sendall(b"1" * 65536)
    elif MODE == "negative":
        conn.sendall(b"$-5\r\n")
    elif MODE == "wrongtype":
        conn.sendall(b":1\r\n")
    elif MODE == "exists":
        conn.sendall(b"$3\r\nabc\r\n" if name == b"EXISTS" else b"$-1\r\n")
    elif MODE == "truncated":
        conn.sendall(b"$1000\r\n" + b"y" * 10)
        return False
    elif MODE == "garbage":
        GARBAGE_SEED[0] += 1
        rng = random.Random(GARBAGE_SEED[0])
        alphabet = b"$*:+-0123456789\r\n" + bytes(range(256))
        conn.sendall(bytes(rng.choice(alphabet) for _ in range(65536)))
        return False
    elif MODE == "slotmap":
        conn.sendall(b"*1000000000\r\n")
        while True:
            conn.sendall(b"*3\r\n:0\r\n" * 4096)
    return True


def serve(conn):
    try:
        for name in commands(conn):
            if not answer(conn, name):
                break
    except OSError:
        pass
    finally:
        conn.close()


def main():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if MODE == "deaf":
        # a small receive window from the start (loopback lets it grow to
        # tens of MiB otherwise), so that the client's writes wait
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    print(s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
