/*
 * Faults inside a plugin: a failed allocation, a write that fails halfway,
 * a lost device.  The caller gets an error naming the backend and the
 * operation, nothing leaks, other caches keep working, and slots written
 * before the failure keep their contents.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

#define H 2
#define D 4
#define BLOCK 4
#define BLOCKS 4

static int (*control)(int, const char *);
static long (*live_buffers)(void);

static kvrt_placement *make_placement(void)
{
    struct kvrt_spec s = fixture_attention(KVRT_DTYPE_FP32, BLOCK, H, D);
    kvrt_placement *p = NULL;
    fixture_placement(KVRT_LAYOUT_LBHNC, &s, 2, BLOCKS, &p);
    return p;
}

/* Write tokens with values base + index into slots first..first+n-1. */
static int write_tokens(kvrt_cache *c, kvrt_backend *b, int64_t first, int n, float base)
{
    float k[16 * H * D], v[16 * H * D];
    int64_t slots[16];
    for (int t = 0; t < n; t++) {
        slots[t] = first + t;
        for (int i = 0; i < H * D; i++) {
            k[t * H * D + i] = base + (float)(t * H * D + i);
            v[t * H * D + i] = -(base + (float)(t * H * D + i));
        }
    }
    kvrt_buffer *kb = NULL, *vb = NULL;
    uint64_t bytes = (uint64_t)n * H * D * sizeof(float);
    int st = kvrt_buffer_create(b, bytes, &kb);
    if (st == KVRT_OK)
        st = kvrt_buffer_create(b, bytes, &vb);
    if (st == KVRT_OK)
        st = kvrt_buffer_upload(kb, 0, k, bytes);
    if (st == KVRT_OK)
        st = kvrt_buffer_upload(vb, 0, v, bytes);
    if (st == KVRT_OK)
        st = kvrt_cache_write(c, 0, (uint64_t)n, slots, kb, 0, vb, 0);
    char msg[2048];
    snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
    kvrt_buffer_destroy(kb);
    kvrt_buffer_destroy(vb);
    if (st != KVRT_OK)
        tap_diag("write: %s", msg);
    return st;
}

static bool tokens_hold(kvrt_cache *c, kvrt_backend *b, int64_t first, int n, float base)
{
    float k[16 * H * D], v[16 * H * D];
    int64_t slots[16];
    for (int t = 0; t < n; t++)
        slots[t] = first + t;
    kvrt_buffer *kb = NULL, *vb = NULL;
    uint64_t bytes = (uint64_t)n * H * D * sizeof(float);
    bool ok = kvrt_buffer_create(b, bytes, &kb) == KVRT_OK && kvrt_buffer_create(b, bytes, &vb) == KVRT_OK &&
              kvrt_cache_read(c, 0, (uint64_t)n, slots, kb, 0, vb, 0) == KVRT_OK &&
              kvrt_buffer_download(kb, 0, k, bytes) == KVRT_OK && kvrt_buffer_download(vb, 0, v, bytes) == KVRT_OK;
    for (int i = 0; ok && i < n * H * D; i++)
        ok = k[i] == base + (float)i && v[i] == -(base + (float)i);
    kvrt_buffer_destroy(kb);
    kvrt_buffer_destroy(vb);
    return ok;
}

int main(void)
{
    const char *path = getenv("KVRT_TEST_FAULT_PLUGIN");
    if (!path)
        tap_skip_all("KVRT_TEST_FAULT_PLUGIN is not set; run through meson test");
    tap_plan_dynamic();
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    o.plugin_path = path;
    o.search_default_paths = false;
    kvrt_runtime *rt = NULL;
    if (!tap_ok(kvrt_runtime_open(&o, &rt) == KVRT_OK, "runtime opens with the fault plugin"))
        return tap_done();
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    void *c_sym = h ? dlsym(h, "kvrt_fault_control") : NULL;
    void *l_sym = h ? dlsym(h, "kvrt_fault_live_buffers") : NULL;
    memcpy(&control, &c_sym, sizeof(control));
    memcpy(&live_buffers, &l_sym, sizeof(live_buffers));
    if (!tap_ok(control && live_buffers, "fault controls reachable"))
        return tap_done();

    kvrt_backend *b0 = NULL, *b1 = NULL;
    tap_ok(kvrt_runtime_bind(rt, "fault", "LBHNC", &b0) == KVRT_OK &&
               kvrt_runtime_bind(rt, "fault", "LBHNC", &b1) == KVRT_OK,
           "two fault devices bound");
    kvrt_placement *p = make_placement();

    /* 1. Allocation fails. */
    control(0, "alloc");
    kvrt_cache *a = NULL;
    int st = kvrt_cache_create(b0, p, &a);
    const char *m = kvrt_error_message();
    tap_ok(st == KVRT_ERR_NOMEM && a == NULL, "a failed allocation fails cache creation (%s)", kvrt_status_name(st));
    tap_ok(strstr(m, "\"fault\"") && strstr(m, "allocating") && strstr(m, "FAULT_ALLOC"),
           "the error names the backend and the operation");
    tap_diag("%s", m);
    tap_ok(live_buffers() == 0, "nothing is leaked by the failed creation");
    control(0, "none");

    /* 1b. Success without a buffer: the handle would be passed back. */
    control(1, "nullbuf");
    kvrt_buffer *nb = NULL;
    st = kvrt_buffer_create(b1, 64, &nb);
    m = kvrt_error_message();
    tap_ok(st == KVRT_ERR_PLUGIN && nb == NULL && strstr(m, "\"fault\"") && strstr(m, "NULL handle"),
           "buffer_alloc returning success with a NULL buffer is refused as KVRT_ERR_PLUGIN");
    tap_diag("%s", m);
    kvrt_cache *nc = NULL;
    st = kvrt_cache_create(b1, p, &nc);
    tap_ok(st == KVRT_ERR_PLUGIN && nc == NULL, "... and so is a cache on it (%s)", kvrt_status_name(st));

    /* 1c. Plugin error text with control bytes stays one line. */
    control(1, "ctlmsg");
    st = kvrt_buffer_create(b1, 64, &nb);
    m = kvrt_error_message();
    bool one_line = true;
    for (const char *c = m; *c; c++)
        one_line = one_line && (unsigned char)*c >= 0x20 && *c != 0x7f;
    tap_ok(st == KVRT_ERR_DEVICE && one_line && strstr(m, "FAULT_CTLMSG\\nsecond line\\x1b[31m\\r\\t\\x7f end"),
           "a plugin's error text reaches the message with its control bytes escaped");
    tap_diag("%s", m);
    control(1, "none");

    kvrt_cache *b = NULL;
    tap_ok(kvrt_cache_create(b0, p, &a) == KVRT_OK && kvrt_cache_create(b1, p, &b) == KVRT_OK,
           "caches on both devices are created after the fault clears");

    /* 2. A write fails halfway. */
    tap_ok(write_tokens(a, b0, 0, 8, 100.0f) == KVRT_OK, "tokens 0..7 written");
    control(0, "midway");
    st = write_tokens(a, b0, 8, 8, 500.0f);
    tap_ok(st == KVRT_ERR_DEVICE, "a write that fails halfway reports a device error");
    control(0, "none");
    tap_ok(tokens_hold(a, b0, 0, 8, 100.0f), "slots written before the failed write are intact");
    tap_ok(live_buffers() == 2, "the failed write leaked no staging buffer (2 caches live)");

    /* 3. The device is lost. */
    control(0, "lost");
    kvrt_buffer *buf = NULL;
    st = kvrt_buffer_create(b0, 64, &buf);
    m = kvrt_error_message();
    tap_ok(st == KVRT_ERR_DEVICE && strstr(m, "\"fault\"") && strstr(m, "FAULT_DEVICE_LOST"),
           "a lost device reports device errors naming the backend");
    tap_diag("%s", m);
    tap_ok(write_tokens(b, b1, 0, 8, 7.0f) == KVRT_OK && tokens_hold(b, b1, 0, 8, 7.0f),
           "the cache on the other device keeps working");

    kvrt_cache_destroy(a);
    kvrt_cache_destroy(b);
    tap_ok(live_buffers() == 0, "destroying the caches frees every device buffer");
    kvrt_placement_destroy(p);
    kvrt_runtime_close(rt);
    return tap_done();
}
