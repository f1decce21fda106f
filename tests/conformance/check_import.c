/*
 * Caches over memory the caller owns (kvrt_cache_wrap, plugin ABI 1.2
 * buffer_import).  The memory comes from a second runtime of the same
 * plugin: a buffer there is memory of the right kind on the right device
 * that no buffer of the runtime under test overlaps, on every backend,
 * without this program knowing any device API.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <kvrt/dlpack.h>

#include "conformance.h"

static kvrt_backend *owner_bind(struct conf_plugin *p, enum kvrt_layout layout)
{
    if (!p->owner) {
        int status = kvrt_runtime_open(p->options, &p->owner);
        if (status != KVRT_OK) {
            conf_diag_status("the owner runtime: kvrt_runtime_open", status);
            p->owner = NULL;
            return NULL;
        }
    }
    if (!p->owner_bound[layout]) {
        int status = kvrt_runtime_bind(p->owner, p->info.name, kvrt_layout_name(layout), &p->owner_bound[layout]);
        if (status != KVRT_OK) {
            conf_diag_status("the owner runtime: kvrt_runtime_bind", status);
            p->owner_bound[layout] = NULL;
        }
    }
    return p->owner_bound[layout];
}

void conf_plugin_finish(struct conf_plugin *p)
{
    kvrt_runtime_close(p->owner);
    p->owner = NULL;
}

bool conf_memory_get(struct conf_plugin *p, enum kvrt_layout layout, uint64_t bytes, const void *init,
                     struct conf_memory *m)
{
    memset(m, 0, sizeof(*m));
    kvrt_backend *b = owner_bind(p, layout);
    if (!b)
        return false;
    int status = kvrt_buffer_create(b, bytes, &m->buf);
    if (status == KVRT_OK)
        status = init ? kvrt_buffer_upload(m->buf, 0, init, bytes) : kvrt_buffer_zero(m->buf, 0, bytes);
    if (status == KVRT_OK)
        status = kvrt_buffer_address(m->buf, &m->address, &m->kind);
    struct kvrt_device_info info;
    if (status == KVRT_OK)
        status = kvrt_backend_device_info(b, &info);
    if (status != KVRT_OK) {
        conf_diag_status("memory from the owner runtime", status);
        kvrt_buffer_destroy(m->buf);
        m->buf = NULL;
        return false;
    }
    m->device_id = m->kind == KVRT_MEMORY_HOST ? 0 : info.device_id;
    m->bytes = bytes;
    return true;
}

static void release(void *user, void *address)
{
    struct conf_memory *m = user;
    m->released++;
    m->address_seen = address == m->address;
    kvrt_buffer_destroy(m->buf);
    m->buf = NULL;
}

void conf_memory_describe(struct conf_memory *m, struct kvrt_memory *out)
{
    kvrt_memory_default(out);
    out->kind = m->kind;
    out->device_id = m->device_id;
    out->address = m->address;
    out->bytes = m->bytes;
    out->release = release;
    out->release_user = m;
}

void conf_memory_drop(struct conf_memory *m)
{
    kvrt_buffer_destroy(m->buf);
    m->buf = NULL;
}

/* A refused wrap: the status, a message naming `needle`, no cache, and
 * the memory never adopted (no release ran). */
static void expect_refused(kvrt_backend *b, const kvrt_placement *pl, const struct kvrt_memory *km,
                           const struct conf_memory *m, int want, const char *needle, const char *what)
{
    kvrt_cache *c = NULL;
    int status = kvrt_cache_wrap(b, pl, km, &c);
    const char *msg = kvrt_error_message();
    bool ok = status == want && !c && strstr(msg, needle) && m->released == 0;
    if (!ok)
        tap_diag("  returned %s: \"%s\" (release ran %d times)", kvrt_status_name(status), msg, m->released);
    tap_ok(ok, "%s: %s is refused (%s, naming %s), and the memory is not adopted", kvrt_backend_name(b), what,
           kvrt_status_name(want), needle);
    kvrt_cache_destroy(c);
}

static void check_misuse(struct conf_plugin *p, kvrt_backend *b, const kvrt_placement *pl, struct conf_memory *m)
{
    const char *name = p->info.name;
    struct kvrt_memory km;
    conf_memory_describe(m, &km);
    km.bytes = m->bytes - 1;
    expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "needs", "memory one byte short of the placement");
    if (p->info.import_alignment > 1) {
        conf_memory_describe(m, &km);
        km.address = (char *)m->address + 1;
        expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "alignment", "an address off the declared alignment");
    } else {
        tap_skip("%s: a misaligned address: the backend declares alignment 1", name);
    }
    conf_memory_describe(m, &km);
    km.address = NULL;
    expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "NULL", "a NULL address");
    conf_memory_describe(m, &km);
    km.kind = m->kind == KVRT_MEMORY_HOST ? KVRT_MEMORY_CUDA : KVRT_MEMORY_HOST;
    km.device_id = 0;
    expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "memory", "memory of another kind");
    conf_memory_describe(m, &km);
    km.device_id = m->device_id + 1;
    expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "device", "memory of another device");
    conf_memory_describe(m, &km);
    km.reserved[0] = 1;
    expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "reserved", "non-zero reserved bytes");

    /* What only the backend's device API can tell. */
    uint64_t bytes = m->bytes, page = (uint64_t)sysconf(_SC_PAGESIZE);
    if (m->kind == KVRT_MEMORY_HOST) {
        /* A range that was mapped and is no longer: the bottom of a 64 MiB
         * hole.  The kernel places new mappings at the top of the highest
         * gap that fits, so a hole just the range's size was sometimes
         * taken again (by ASan's allocator, by another thread) before the
         * wrap looked at it. */
        uint64_t span = (bytes + page - 1) / page * page, hole = span + (64u << 20);
        void *gone = mmap(NULL, hole, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (gone == MAP_FAILED) {
            tap_skip("%s: unmapped memory: mmap failed", name);
        } else {
            munmap(gone, hole);
            conf_memory_describe(m, &km);
            km.address = gone;
            expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "not mapped", "a range not mapped in the process");
        }
    } else {
        /* Host memory said to be device memory. */
        void *host = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        if (!host) {
            tap_skip("%s: host memory given as device memory: out of memory", name);
        } else {
            conf_memory_describe(m, &km);
            km.address = host;
            expect_refused(b, pl, &km, m, KVRT_ERR_INVALID, "device pointer",
                           "host memory given as device memory (the driver's pointer attributes)");
            free(host);
        }
    }
}

/* The adopted memory's bytes are kept, kvrt_cache_buffer is that memory,
 * views point into it, and each reference holds it until its last. */
static void check_lifetime(struct conf_plugin *p, kvrt_backend *b, const kvrt_placement *pl)
{
    const char *name = p->info.name;
    uint64_t bytes = kvrt_placement_size(pl);
    uint8_t *pattern = malloc(bytes);
    struct conf_memory *m = calloc(1, sizeof(*m));
    if (!pattern || !m ||
        !conf_memory_get(p, kvrt_backend_layout(b), bytes, (conf_sentinel(pattern, bytes), pattern), m)) {
        tap_ok(false, "%s: memory for a wrapped cache", name);
        free(pattern);
        free(m);
        return;
    }
    struct kvrt_memory km;
    conf_memory_describe(m, &km);
    kvrt_cache *c = NULL;
    int status = kvrt_cache_wrap(b, pl, &km, &c);
    if (status != KVRT_OK) {
        conf_diag_status("kvrt_cache_wrap", status);
        tap_ok(false, "%s: a cache over caller memory", name);
        conf_memory_drop(m);
        free(pattern);
        free(m);
        return;
    }
    void *addr = NULL;
    enum kvrt_memory_kind kind;
    kvrt_buffer *buf = kvrt_cache_buffer(c);
    tap_ok(kvrt_cache_is_wrapped(c) && kvrt_buffer_address(buf, &addr, &kind) == KVRT_OK && addr == m->address &&
               kind == m->kind && kvrt_buffer_size(buf) == bytes,
           "%s: the cache's buffer is the memory (address and kind) and the placement's %llu bytes", name,
           (unsigned long long)bytes);
    uint8_t *got = conf_download(buf);
    tap_ok(got && conf_first_diff(got, pattern, bytes) < 0, "%s: the memory's bytes are kept, not zeroed", name);
    free(got);

    /* A tensor and a retained reference outlive the cache. */
    DLManagedTensor *t = NULL;
    status = kvrt_cache_export_layer(c, 1, KVRT_VIEW_ALL, &t);
    struct kvrt_view v;
    bool view_ok = status == KVRT_OK && kvrt_placement_layer_view(kvrt_cache_placement(c), 0, 1, &v) == KVRT_OK &&
                   t->dl_tensor.data == (char *)m->address + v.offset_bytes;
    if (status != KVRT_OK)
        conf_diag_status("kvrt_cache_export_layer", status);
    tap_ok(view_ok, "%s: layer 1's DLPack view points at the memory plus the layer's offset", name);
    tap_ok(kvrt_cache_retain(c) == KVRT_OK, "%s: kvrt_cache_retain takes a reference", name);
    kvrt_cache_destroy(c);
    tap_ok(m->released == 0, "%s: destroyed with a tensor and a reference alive, the memory is still held", name);
    if (t)
        t->deleter(t);
    tap_ok(m->released == 0, "%s: the tensor's deleter ran; the reference still holds the memory", name);
    kvrt_cache_release(c);
    tap_ok(m->released == 1 && m->address_seen,
           "%s: the last reference released: the callback ran once, with the memory's address", name);

    /* Misuse, with fresh memory: nothing adopted, nothing released. */
    struct conf_memory *fresh = calloc(1, sizeof(*fresh));
    if (fresh && conf_memory_get(p, kvrt_backend_layout(b), bytes, NULL, fresh)) {
        check_misuse(p, b, pl, fresh);
        /* The same memory twice: the second overlaps the first cache. */
        conf_memory_describe(fresh, &km);
        kvrt_cache *first = NULL;
        status = kvrt_cache_wrap(b, pl, &km, &first);
        if (status == KVRT_OK)
            expect_refused(b, pl, &km, fresh, KVRT_ERR_INVALID, "overlaps", "the memory of a live cache again");
        else
            tap_ok(false, "%s: wrap for the overlap check: %s", name, kvrt_error_message());
        kvrt_cache_destroy(first);
        tap_ok(fresh->released == (status == KVRT_OK), "%s: after the misuse, one release for the one cache", name);
        if (status != KVRT_OK)
            conf_memory_drop(fresh);
    } else {
        tap_ok(false, "%s: memory for the misuse checks", name);
    }
    free(fresh);
    free(pattern);
    free(m);
}

void conf_check_import(struct conf_plugin *p)
{
    const char *name = p->info.name;
    enum kvrt_layout layout = p->layouts[0];
    kvrt_backend *b = conf_bind(p, layout);
    int first_type = 0;
    while (first_type < KVRT_NUM_DTYPES && !(p->info.dtypes & (1u << first_type)))
        first_type++;
    kvrt_placement *pl = NULL;
    if (!b || conf_placement(CONF_SHAPE_BASIC, layout, (enum kvrt_dtype)first_type, false, &pl) != KVRT_OK) {
        tap_ok(false, "%s: caller memory: bind and placement", name);
        return;
    }
    if (p->info.import_alignment == 0) {
        /* Declared unable: refused by name, before any memory is looked at. */
        static char some[64];
        struct kvrt_memory km;
        kvrt_memory_default(&km);
        km.kind = p->info.memory;
        km.address = some;
        km.bytes = kvrt_placement_size(pl);
        kvrt_cache *c = NULL;
        int status = kvrt_cache_wrap(b, pl, &km, &c);
        bool ok = status == KVRT_ERR_UNSUPPORTED && !c && strstr(kvrt_error_message(), name);
        if (!ok)
            tap_diag("  returned %s: \"%s\"", kvrt_status_name(status), kvrt_error_message());
        tap_ok(ok, "%s: does not adopt caller memory, and kvrt_cache_wrap is refused naming it", name);
        kvrt_cache_destroy(c);
    } else {
        tap_diag("  adopts caller memory aligned to %u bytes", p->info.import_alignment);
        check_lifetime(p, b, pl);
    }
    kvrt_placement_destroy(pl);
}
