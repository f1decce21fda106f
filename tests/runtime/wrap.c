/*
 * Caches over caller memory (kvrt/wrap.h) beyond what the conformance
 * suite checks on every backend: kvrt's operations and the caller see the
 * same bytes; the release callback runs once in every order of teardown
 * (destroy, runtime close, the last tensor after the close) and may call
 * kvrt; a reference holder keeps working with its buffers through the
 * runtime's close; a backend that cannot adopt memory is refused by name; a plugin
 * that declares the import operation badly is passed over.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/dlpack.h>
#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

static const char *cpu_path, *plugin_dir;

struct owned {
    void *memory;
    int released;
    bool address_seen;
    kvrt_buffer *destroy_too; /* a buffer of the same runtime the callback destroys */
};

static void release(void *user, void *address)
{
    struct owned *o = user;
    o->released++;
    o->address_seen = address == o->memory;
    /* kvrt from inside the callback: no kvrt lock is held. */
    kvrt_buffer_destroy(o->destroy_too);
    o->destroy_too = NULL;
}

static struct kvrt_memory host_memory(struct owned *o, uint64_t bytes)
{
    struct kvrt_memory m;
    kvrt_memory_default(&m);
    m.address = o->memory;
    m.bytes = bytes;
    m.release = release;
    m.release_user = o;
    return m;
}

/* Written through kvrt, read straight from the caller's array, and back. */
static void check_aliasing(kvrt_backend *b, const kvrt_placement *p)
{
    uint64_t bytes = kvrt_placement_size(p);
    struct owned o = {.memory = aligned_alloc(64, bytes)};
    memset(o.memory, 0, bytes);
    struct kvrt_memory m = host_memory(&o, bytes);
    kvrt_cache *c = NULL;
    tap_ok(kvrt_cache_wrap(b, p, &m, &c) == KVRT_OK, "cpu wraps %llu bytes of host memory", (unsigned long long)bytes);
    struct kvrt_view v;
    kvrt_placement_layer_view(p, 0, 1, &v);
    /* One token of layer 1 into slot 5 (block 1, token 1 with blocks of 4). */
    float k[2 * 4], vv[2 * 4];
    for (int i = 0; i < 8; i++)
        k[i] = (float)i + 1, vv[i] = -(float)i - 1;
    kvrt_buffer *kb = NULL, *vb = NULL;
    kvrt_buffer_create(b, sizeof(k), &kb);
    kvrt_buffer_create(b, sizeof(vv), &vb);
    kvrt_buffer_upload(kb, 0, k, sizeof(k));
    kvrt_buffer_upload(vb, 0, vv, sizeof(vv));
    int64_t slot = 5;
    int rc = kvrt_cache_write(c, 1, 1, &slot, kb, 0, vb, 0);
    const unsigned char *cell = (const unsigned char *)o.memory + v.offset_bytes + 1 * v.strides_bytes[0] +
                                1 * v.strides_bytes[1] + 1 * v.strides_bytes[2];
    float got[8];
    memcpy(got, cell, sizeof(got)); /* head 1: K then V */
    tap_ok(rc == KVRT_OK && got[0] == k[4] && got[3] == k[7] && got[4] == vv[4] && got[7] == vv[7],
           "a write through kvrt is in the caller's memory at the layout's cell (layer 1, slot 5, head 1)");
    /* The caller writes the other head; kvrt reads it back. */
    float mine[8] = {9, 8, 7, 6, 5, 4, 3, 2};
    memcpy((unsigned char *)o.memory + v.offset_bytes + v.strides_bytes[0] + v.strides_bytes[2], mine, sizeof(mine));
    rc = kvrt_cache_read(c, 1, 1, &slot, kb, 0, vb, 0);
    float rk[8], rv[8];
    kvrt_buffer_download(kb, 0, rk, sizeof(rk));
    kvrt_buffer_download(vb, 0, rv, sizeof(rv));
    tap_ok(rc == KVRT_OK && rk[0] == 9 && rk[3] == 6 && rv[0] == 5 && rv[3] == 2 && rk[4] == k[4],
           "bytes the caller writes into its memory are what kvrt reads");

    /* The release may call kvrt: it destroys a buffer of this runtime. */
    o.destroy_too = kb;
    kvrt_cache_destroy(c);
    tap_ok(o.released == 1 && o.address_seen && !o.destroy_too,
           "destroying the cache runs the release once, with the address; the callback called kvrt");
    kvrt_buffer_destroy(vb);
    free(o.memory);
}

/* The runtime's close hands back what its caches held: at once without
 * references, after the last tensor with one. */
static void check_close(const kvrt_placement *p)
{
    uint64_t bytes = kvrt_placement_size(p);
    kvrt_runtime *rt = fixture_runtime(cpu_path, NULL);
    kvrt_backend *b = NULL;
    struct owned a = {.memory = aligned_alloc(64, bytes)}, t = {.memory = aligned_alloc(64, bytes)};
    struct kvrt_memory ma = host_memory(&a, bytes), mt = host_memory(&t, bytes);
    kvrt_cache *ca = NULL, *ct = NULL;
    DLManagedTensor *tensor = NULL;
    bool ok = rt && kvrt_runtime_bind(rt, "cpu", kvrt_layout_name(kvrt_placement_layout(p)), &b) == KVRT_OK &&
              kvrt_cache_wrap(b, p, &ma, &ca) == KVRT_OK && kvrt_cache_wrap(b, p, &mt, &ct) == KVRT_OK &&
              kvrt_cache_export_layers(ct, KVRT_VIEW_K, &tensor) == KVRT_OK;
    tap_ok(ok, "two wrapped caches on one runtime, one with an exported tensor");
    kvrt_runtime_close(rt);
    tap_ok(a.released == 1 && t.released == 0,
           "kvrt_runtime_close releases the cache without references, and holds the one with a tensor");
    if (tensor)
        tensor->deleter(tensor);
    tap_ok(t.released == 1 && t.address_seen, "the tensor's deleter, after the close, releases the memory once");
    free(a.memory);
    free(t.memory);
}

/* A reference holder (a transfer agent) works on through the close: the
 * buffers made on the held cache's backend stay until the last reference
 * goes, which hands the memory back and finishes the close. */
static void check_close_held(const kvrt_placement *p)
{
    uint64_t bytes = kvrt_placement_size(p), staging = 0;
    kvrt_runtime *rt = fixture_runtime(cpu_path, NULL);
    kvrt_backend *b = NULL;
    struct owned o = {.memory = aligned_alloc(64, bytes)};
    struct kvrt_memory m = host_memory(&o, bytes);
    kvrt_cache *c = NULL;
    kvrt_buffer *buf = NULL;
    memset(o.memory, 0x5a, bytes);
    bool ok = rt && kvrt_runtime_bind(rt, "cpu", kvrt_layout_name(kvrt_placement_layout(p)), &b) == KVRT_OK &&
              kvrt_cache_wrap(b, p, &m, &c) == KVRT_OK && kvrt_cache_staging_bytes(c, 1, &staging) == KVRT_OK &&
              kvrt_buffer_create(b, staging, &buf) == KVRT_OK && kvrt_cache_retain(c) == KVRT_OK;
    tap_ok(ok, "a wrapped cache held by a reference, and a buffer made on its backend");
    kvrt_runtime_close(rt);
    uint8_t *got = calloc(staging ? staging : 1, 1);
    int64_t id = 1;
    ok = ok && got && kvrt_cache_gather(c, 1, &id, buf, 0) == KVRT_OK &&
         kvrt_buffer_download(buf, 0, got, staging) == KVRT_OK;
    uint64_t same = 0;
    while (ok && same < staging && got[same] == 0x5a)
        same++;
    tap_ok(ok && same == staging && o.released == 0,
           "after kvrt_runtime_close the holder gathers a block into its buffer (%llu of %llu bytes as the memory "
           "holds); the memory is not handed back",
           (unsigned long long)same, (unsigned long long)staging);
    kvrt_buffer_destroy(buf);
    if (ok)
        kvrt_cache_release(c);
    tap_ok(o.released == 1 && o.address_seen, "the last reference finishes the close: the memory is handed back once");
    free(got);
    free(o.memory);
}

/* Backends that cannot adopt memory are refused by name; so is every
 * backend asked with a struct whose reserved bytes are set. */
static void check_refusals(const kvrt_placement *p)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/ranking/kvrt-realgpu.so", plugin_dir);
    kvrt_runtime *rt = fixture_runtime(path, NULL);
    kvrt_backend *b = NULL;
    uint64_t bytes = kvrt_placement_size(p);
    struct owned o = {.memory = aligned_alloc(64, bytes)};
    struct kvrt_memory m = host_memory(&o, bytes);
    kvrt_cache *c = NULL;
    int rc = rt && kvrt_runtime_bind(rt, "realgpu", kvrt_layout_name(kvrt_placement_layout(p)), &b) == KVRT_OK
                 ? kvrt_cache_wrap(b, p, &m, &c)
                 : KVRT_ERR_INTERNAL;
    tap_ok(rc == KVRT_ERR_UNSUPPORTED && !c && strstr(kvrt_error_message(), "\"realgpu\"") &&
               strstr(kvrt_error_message(), "buffer_import") && o.released == 0,
           "a plugin without buffer_import: KVRT_ERR_UNSUPPORTED naming it (%s)", kvrt_error_message());
    kvrt_runtime_close(rt);
    free(o.memory);

    snprintf(path, sizeof(path), "%s/kvrt-badimport.so", plugin_dir);
    rt = fixture_runtime(path, NULL);
    const char *why = NULL;
    for (size_t i = 0; rt && i < kvrt_runtime_num_skipped(rt); i++)
        kvrt_runtime_skipped(rt, i, NULL, &why);
    tap_ok(rt && kvrt_runtime_num_plugins(rt) == 0 && why && strstr(why, "import_alignment 3"),
           "a plugin declaring import_alignment 3 is passed over with the reason (%s)", why ? why : "not skipped");
    kvrt_runtime_close(rt);
}

int main(void)
{
    fixture_test_plugins(&plugin_dir, &cpu_path);
    tap_plan_dynamic();
    struct kvrt_spec spec = fixture_attention(KVRT_DTYPE_FP32, 4, 2, 4);
    kvrt_placement *p = NULL;
    kvrt_runtime *rt = fixture_runtime(cpu_path, NULL);
    kvrt_backend *b = NULL;
    if (fixture_placement(KVRT_LAYOUT_LBHNC, &spec, 2, 6, &p) != KVRT_OK || !rt ||
        kvrt_runtime_bind(rt, "cpu", "LBHNC", &b) != KVRT_OK) {
        tap_ok(false, "placement and cpu binding: %s", kvrt_error_message());
        kvrt_runtime_close(rt);
        return tap_done();
    }
    check_aliasing(b, p);
    kvrt_runtime_close(rt);
    check_close(p);
    check_close_held(p);
    check_refusals(p);
    kvrt_placement_destroy(p);
    return tap_done();
}
