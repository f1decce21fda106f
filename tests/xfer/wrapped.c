/*
 * libkvrt-xfer on caches over memory the caller owns (kvrt/wrap.h), two
 * processes and more: this program holds a wrapped cache and its agent,
 * children (this program again, --child; tests/xfer/xfer_side.h) hold
 * wrapped caches of their own and check every byte they are sent.
 *
 *   test-xfer-wrapped     TAP; UCX_TLS and friends come from the
 *                         environment (meson runs it under tcp and sm)
 *
 * For a cache over aligned_alloc memory and one over a DLPack tensor here,
 * and over mmap, aligned_alloc and DLPack memory in the children: the
 * wrapped cache is registered with UCX like an allocated one (same bytes,
 * addressable in its metadata); pushes and pulls, same layout (regions)
 * and converting, move every byte both ways; then the cache is
 * destroyed and the runtime closed while the agent lives, and transfers
 * both ways still complete, byte-exact, with the memory not handed back;
 * the agent's destroy hands it back, once, with its address.  The bytes
 * pulled after the close are read back through a new runtime over the same
 * memory.  Each child hands its memory back once, after its agent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "xfer_side.h"

static const char *self;

/* Pushes write the children's blocks below PUSHED; pulls read theirs from
 * PUSHED on, which no push touches, and write ours from PUSHED on, which
 * no push reads, so every source is known. */
enum { PUSHED = 64, PER = 4, EACH = 2 };

static bool start(struct child *c, enum kvrt_layout layout, uint64_t seed, enum side_memory memory)
{
    char seedtxt[32];
    snprintf(seedtxt, sizeof(seedtxt), "%llu", (unsigned long long)seed);
    const char *args[] = {"--layout", kvrt_layout_name(layout), "--seed",   seedtxt,
                          "--memory", side_memory_name(memory), "--listen", NULL};
    return child_start(c, self, args);
}

/* The metadata a peer would get, parsed. */
static bool exported(kvrt_xfer_agent *a, struct kvrt_xfer_metadata_info *info)
{
    void *blob = NULL;
    size_t len = 0;
    memset(info, 0, sizeof(*info));
    info->size = sizeof(*info);
    bool ok =
        kvrt_xfer_metadata_export(a, &blob, &len) == KVRT_OK && kvrt_xfer_metadata_parse(blob, len, info) == KVRT_OK;
    kvrt_free(blob);
    return ok;
}

/* The wrapped cache is registered like kvrt's own allocation of the same
 * placement: the same bytes with UCX, addressable for the peers. */
static void registered(struct side *s, const char *what)
{
    struct side twin;
    struct side_opts o = s->o;
    o.memory = SIDE_ALLOCATED;
    int rc = side_open(&twin, &o);
    struct kvrt_xfer_stats mine = {.size = sizeof(mine)}, theirs = {.size = sizeof(theirs)};
    struct kvrt_xfer_metadata_info mi, ti;
    bool ok = rc == KVRT_OK && kvrt_xfer_agent_stats(s->a, &mine) == KVRT_OK &&
              kvrt_xfer_agent_stats(twin.a, &theirs) == KVRT_OK && exported(s->a, &mi) && exported(twin.a, &ti);
    uint64_t cache = kvrt_placement_size(s->p), pool = mine.staging_chunks * mine.chunk_bytes;
    tap_ok(ok && kvrt_cache_is_wrapped(s->c) && mine.registered_bytes == cache + pool &&
               mine.registered_bytes == theirs.registered_bytes && mi.cache_addressable && ti.cache_addressable &&
               mi.cache_bytes == ti.cache_bytes,
           "%s: registered with UCX like an allocated cache (%llu bytes: cache %llu + staging %llu; allocated: %llu), "
           "addressable in its metadata",
           what, (unsigned long long)mine.registered_bytes, (unsigned long long)cache, (unsigned long long)pool,
           (unsigned long long)theirs.registered_bytes);
    if (rc != KVRT_OK)
        tap_diag("the allocated twin: %s", kvrt_error_message());
    side_close(&twin);
}

struct peers {
    struct child c[2]; /* same layout, converting */
    struct side_opts o[2];
    kvrt_xfer_peer *p[2];
    uint64_t notes[2];
};

/* One round: EACH pushes to each child and EACH pulls from each, all in
 * flight at once; the pulls' records go into what this cache should
 * hold.  `round` picks blocks no other round touches. */
static void round_trip(struct side *s, struct peers *pe, int round, const char *phase)
{
    enum { N = 2 * 2 * EACH };
    kvrt_xfer_handle *h[N];
    int64_t mine[N][PER], theirs[N][PER];
    struct xpat_record rec[N];
    for (int i = 0; i < N; i++) {
        int child = i / (2 * EACH) % 2;
        bool pull = i % 2;
        uint64_t k = (uint64_t)round * 2 * EACH + (uint64_t)(i % (2 * EACH) / 2);
        if (pull) {
            side_ids(mine[i], PER, PUSHED + (k * 2 + (uint64_t)child) * PER, 1, s->o.blocks);
            side_ids(theirs[i], PER, PUSHED + 1 + k * 5, 3, s->o.blocks);
        } else {
            side_ids(mine[i], PER, k * 3 + (uint64_t)child, 7, PUSHED);
            side_ids(theirs[i], PER, k * PER, 1, PUSHED);
        }
        const struct side_opts *source = pull ? &pe->o[child] : &s->o;
        h[i] = side_post(s, pe->p[child], source, mine[i], theirs[i], PER, pull, (uint64_t)i);
        rec[i] = (struct xpat_record){
            .src_ids = theirs[i], .dst_ids = mine[i], .num_blocks = PER, .seed = source->seed, .pull = true};
    }
    struct kvrt_xfer_plan plan[2] = {{.size = sizeof(plan[0])}, {.size = sizeof(plan[1])}};
    kvrt_xfer_handle_plan(h[0], &plan[0]);
    kvrt_xfer_handle_plan(h[2 * EACH], &plan[1]);
    int ok = 0, pushed[2] = {0, 0};
    for (int i = 0; i < N; i++) {
        int rc = h[i] ? kvrt_xfer_wait(h[i], 30) : KVRT_ERR_INVALID;
        if (rc == KVRT_OK) {
            ok++;
            if (i % 2)
                xpat_apply(&s->x, &rec[i]);
            else
                pushed[i / (2 * EACH) % 2]++;
        } else {
            tap_diag("%s, transfer %d: %s", phase, i, kvrt_error_message());
        }
        kvrt_xfer_release(h[i]);
    }
    tap_ok(ok == N && plan[0].method == KVRT_XFER_REGIONS && plan[1].method != KVRT_XFER_REGIONS,
           "%s: %d of %d pushes and pulls complete, same layout (%s) and converting (%s)", phase, ok, N,
           plan[0].method == KVRT_XFER_REGIONS ? "regions" : plan[0].why, kvrt_xfer_method_name(plan[1].method));
    /* A child is notified of our pushes and of our pulls from it. */
    for (int c = 0; c < 2; c++) {
        pe->notes[c] += (uint64_t)(pushed[c] + EACH);
        char what[160];
        snprintf(what, sizeof(what), "%s, %s peer", phase, c ? "converting" : "same-layout");
        child_verified(&pe->c[c], pe->notes[c], what);
    }
}

/* What the pulls wrote, read through a new runtime over the same memory:
 * the old one is closed, and kvrt has handed the memory back. */
static void read_back(struct side *s, const char *what)
{
    kvrt_runtime *rt = NULL;
    kvrt_backend *be = NULL;
    kvrt_cache *c = NULL;
    struct kvrt_memory m;
    kvrt_memory_default(&m);
    m.address = s->owned->address;
    m.bytes = s->owned->bytes;
    struct xpat x;
    memset(&x, 0, sizeof(x));
    char where[256] = "";
    uint64_t bad = UINT64_MAX;
    int rc = kvrt_runtime_open(NULL, &rt);
    if (rc == KVRT_OK)
        rc = kvrt_runtime_bind(rt, "cpu", kvrt_layout_name(s->o.layout), &be);
    if (rc == KVRT_OK)
        rc = kvrt_cache_wrap(be, s->p, &m, &c);
    if (rc == KVRT_OK)
        rc = xpat_init_zero(&x, be, c);
    if (rc == KVRT_OK) {
        memcpy(x.expected, s->x.expected, x.num_blocks * x.staging_per_block);
        bad = xpat_verify(&x, where, sizeof(where));
    }
    if (!tap_ok(bad == 0, "%s: every byte of the memory, read through a new runtime, as the pulls say", what))
        tap_diag("%s", rc != KVRT_OK ? kvrt_error_message() : where);
    xpat_free(&x);
    kvrt_runtime_close(rt);
}

static void scenario(enum side_memory here, enum side_memory there[2], uint64_t seed)
{
    char what[64];
    snprintf(what, sizeof(what), "%s memory", side_memory_name(here));
    struct side s;
    struct side_opts o;
    side_opts_default(&o);
    o.memory = here;
    o.seed = seed;
    if (!tap_ok(side_open(&s, &o) == KVRT_OK, "%s: a wrapped cache and its agent", what)) {
        tap_diag("%s", kvrt_error_message());
        side_close(&s);
        return;
    }
    registered(&s, what);
    struct peers pe;
    memset(&pe, 0, sizeof(pe));
    bool up = true;
    for (int c = 0; c < 2; c++) {
        side_opts_default(&pe.o[c]);
        pe.o[c].memory = there[c];
        pe.o[c].layout = c ? KVRT_LAYOUT_BLNHC : o.layout;
        pe.o[c].seed = seed + 1 + (uint64_t)c;
        up = up && start(&pe.c[c], pe.o[c].layout, pe.o[c].seed, there[c]) &&
             kvrt_xfer_connect(s.a, "127.0.0.1", (uint16_t)pe.c[c].port, &pe.p[c]) == KVRT_OK;
    }
    if (tap_ok(up, "%s: two peer processes on %s and %s memory, %s and %s, connected", what, side_memory_name(there[0]),
               side_memory_name(there[1]), kvrt_layout_name(pe.o[0].layout), kvrt_layout_name(pe.o[1].layout))) {
        round_trip(&s, &pe, 0, what);
        char where[256];
        uint64_t bad = xpat_verify(&s.x, where, sizeof(where));
        tap_ok(bad == 0, "%s: every byte here as the pulls say (%s)", what, where[0] ? where : "no mismatch");

        /* The owner lets go of the cache first, then of the runtime; the
         * agent keeps both, and their memory, until its end. */
        char phase[128];
        kvrt_cache_destroy(s.c);
        s.c = NULL;
        tap_ok(s.owned->released == 0, "%s: the cache destroyed while its agent lives: the memory is not handed back",
               what);
        snprintf(phase, sizeof(phase), "%s, after kvrt_cache_destroy", what);
        round_trip(&s, &pe, 1, phase);
        kvrt_runtime_close(s.rt);
        s.rt = NULL;
        s.be = NULL;
        tap_ok(s.owned->released == 0, "%s: the runtime closed while the agent lives: the memory is not handed back",
               what);
        snprintf(phase, sizeof(phase), "%s, after kvrt_runtime_close", what);
        round_trip(&s, &pe, 2, phase);
        side_agent_clean(s.a, phase);
        for (int c = 0; c < 2; c++) {
            kvrt_xfer_peer_close(pe.p[c]);
            child_clean(&pe.c[c], phase);
        }
        int before = s.owned->released;
        kvrt_xfer_agent_destroy(s.a);
        s.a = NULL;
        tap_ok(before == 0 && s.owned->released == 1 && !s.owned->wrong_address,
               "%s: kvrt_xfer_agent_destroy hands the memory back, once, with its address (%d times before it, %d "
               "after)",
               what, before, s.owned->released);
        read_back(&s, what);
    }
    int status[2];
    for (int c = 0; c < 2; c++)
        status[c] = pe.c[c].pid ? child_stop(&pe.c[c]) : -1;
    tap_ok(status[0] == 0 && status[1] == 0,
           "%s: the peers exit cleanly, each handing its memory back once after its agent (exit %d, %d)", what,
           status[0], status[1]);
    tap_ok(side_close(&s), "%s: nothing left to hand back here", what);
}

int main(int argc, char **argv)
{
    self = argv[0];
    int child = side_main(argc, argv);
    if (child >= 0)
        return child;
    tap_diag("UCX_TLS=%s", getenv("UCX_TLS") ? getenv("UCX_TLS") : "(all)");
    enum side_memory first[2] = {SIDE_MMAP, SIDE_DLPACK}, second[2] = {SIDE_ALIGNED, SIDE_MMAP};
    scenario(SIDE_ALIGNED, first, 10);
    scenario(SIDE_DLPACK, second, 20);
    return tap_done();
}
