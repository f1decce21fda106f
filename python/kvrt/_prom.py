"""Prometheus metrics of kvrt's companion libraries: a store's counters
(kvrt_store_metrics) and a transfer agent's (kvrt_xfer_agent_metrics), in
Prometheus' text exposition format.

    text = kvrt.metrics(store=store, agent=agent)      # the text, both parts

    from prometheus_client import REGISTRY, start_http_server
    REGISTRY.register(kvrt.MetricsCollector(store=store, agent=agent))
    start_http_server(9400)

kvrt never imports prometheus_client at load: MetricsCollector.collect() parses
the libraries' text with prometheus_client's own parser when it is called
(by a registry, which has prometheus_client loaded already).  Store and
agent are duck-typed (anything with a metrics() method returning the text),
so this module imports neither libkvrt-store nor libkvrt-xfer.
"""
import ctypes as C
import sys

from ._errors import InvalidArgumentError
from ._lib import check


def text_of(fn, handle):
    """A C library's text: its size asked, then the text, asked again
    while it grew in between (a counter gained a digit)."""
    need = C.c_size_t()
    for _ in range(8):
        check(fn(handle, None, 0, C.byref(need)))
        buf = C.create_string_buffer(need.value + 256)
        got = C.c_size_t()
        rc = fn(handle, buf, len(buf), C.byref(got))
        if rc == 0:
            return buf.value.decode("utf-8", "replace")
        if got.value <= len(buf):
            check(rc)
    raise InvalidArgumentError("the metrics text kept growing while it was read")


def _sources(store, agent):
    out = []
    for name, obj in (("store", store), ("agent", agent)):
        if obj is None:
            continue
        if not callable(getattr(obj, "metrics", None)):
            raise InvalidArgumentError("%s: a kvrt.Store or kvrt.xfer.Agent (with a metrics() method); got %s"
                                       % (name, type(obj).__name__))
        out.append(obj)
    return out


def metrics(store=None, agent=None):
    """The Prometheus text of a store, an agent or both (concatenated: their
    metric names do not overlap)."""
    return "".join(obj.metrics() for obj in _sources(store, agent))


class MetricsCollector:
    """A prometheus_client collector: each collect() reads the store's and
    the agent's counters afresh and yields them as metric families (parsed
    by prometheus_client's own parser, imported then)."""

    def __init__(self, store=None, agent=None):
        self._sources = _sources(store, agent)

    def collect(self):
        parser = sys.modules.get("prometheus_client.parser")
        if parser is None:
            from prometheus_client import parser
        for obj in self._sources:
            yield from parser.text_string_to_metric_families(obj.metrics())

    def describe(self):
        # no description ahead: the registry then calls collect() to learn
        # the names, which is exact
        return []
