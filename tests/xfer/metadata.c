/*
 * kvrt-xfer metadata: export, parse, every truncation, named corruptions,
 * random damage (never a crash, always one line), and compatibility checks
 * of kvrt_xfer_peer_load naming both values.
 *
 * usage: test-xfer-metadata [--write-corpus DIR]   (DIR: seed blobs for the fuzzer)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>
#include <kvrt/xfer.h>

#include "tap.h"

struct side {
    kvrt_runtime *rt;
    kvrt_backend *be;
    kvrt_placement *p;
    kvrt_cache *c;
    kvrt_xfer_agent *a;
    void *blob;
    size_t len;
};

static bool make_side(struct side *s, enum kvrt_layout layout, enum kvrt_dtype dtype, enum kvrt_spec_kind kind,
                      uint64_t blocks)
{
    memset(s, 0, sizeof(*s));
    struct kvrt_spec spec;
    kvrt_spec_default(&spec);
    spec.kind = kind;
    spec.dtype = dtype;
    spec.block_size = 4;
    spec.num_kv_heads = kind == KVRT_SPEC_MLA ? 1 : 2;
    spec.head_size = 16;
    if (kind == KVRT_SPEC_MLA)
        spec.head_size_v = 0;
    struct kvrt_layer_entry layers[2] = {{"a", spec}, {"b", spec}};
    struct kvrt_group g = {layers, 2};
    if (kvrt_runtime_open(NULL, &s->rt) != KVRT_OK ||
        kvrt_runtime_bind(s->rt, "cpu", kvrt_layout_name(layout), &s->be) != KVRT_OK ||
        kvrt_placement_create(layout, &g, 1, blocks, 0, &s->p) != KVRT_OK ||
        kvrt_cache_create(s->be, s->p, &s->c) != KVRT_OK)
        return false;
    if (kvrt_xfer_agent_create(s->be, s->c, NULL, &s->a) != KVRT_OK)
        return false;
    return kvrt_xfer_metadata_export(s->a, &s->blob, &s->len) == KVRT_OK;
}

static void free_side(struct side *s)
{
    kvrt_free(s->blob);
    kvrt_xfer_agent_destroy(s->a);
    kvrt_placement_destroy(s->p);
    if (s->rt)
        kvrt_runtime_close(s->rt);
}

static bool one_line(void)
{
    const char *m = kvrt_error_message();
    return m[0] != '\0' && strchr(m, '\n') == NULL;
}

/* Damage a copy at `off` with `value` (n bytes, little-endian) and expect a
 * refusal whose message contains `mention`. */
static void refuse(const struct side *s, size_t off, uint64_t value, size_t n, const char *mention, const char *what)
{
    uint8_t *b = malloc(s->len + 1);
    memcpy(b, s->blob, s->len);
    for (size_t i = 0; i < n; i++)
        b[off + i] = (uint8_t)(value >> (8 * i));
    struct kvrt_xfer_metadata_info info = {.size = sizeof(info)};
    int rc = kvrt_xfer_metadata_parse(b, s->len, &info);
    if (!tap_ok(rc == KVRT_ERR_INVALID && one_line() && strstr(kvrt_error_message(), mention), "%s: refused", what))
        tap_diag("status %d: %s", rc, kvrt_error_message());
    free(b);
}

/* The bytes of one set as docs/xfer.md gives them ("| N per set |"), or 0. */
static size_t documented_set_bytes(void)
{
    FILE *f = fopen(KVRT_DOCS_XFER, "r");
    char line[1024];
    size_t n = 0;
    while (f && n == 0 && fgets(line, sizeof(line), f)) {
        const char *at = strstr(line, " per set |");
        while (at && at > line && at[-1] >= '0' && at[-1] <= '9')
            at--;
        if (at && strstr(at, " per set |") != at)
            n = strtoul(at, NULL, 10);
    }
    if (f)
        fclose(f);
    return n;
}

static uint64_t read_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

static void write_corpus(const char *dir, const char *name, const struct side *s)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(s->blob, 1, s->len, f);
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    struct side s, other, mla;
    tap_plan_dynamic();
    if (!make_side(&s, KVRT_LAYOUT_LBHNC, KVRT_DTYPE_BF16, KVRT_SPEC_ATTENTION, 16)) {
        /* The build has UCX (or this test would not exist); a machine
         * without a usable transport is an environment problem. */
        tap_skip_all("no UCX agent on this machine: %s", kvrt_error_message());
    }
    tap_ok(make_side(&other, KVRT_LAYOUT_BLNHC, KVRT_DTYPE_FP32, KVRT_SPEC_ATTENTION, 8), "second agent (fp32)");
    tap_ok(make_side(&mla, KVRT_LAYOUT_BHLNC, KVRT_DTYPE_BF16, KVRT_SPEC_MLA, 8), "third agent (MLA)");
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
        write_corpus(argv[2], "lbhnc-bf16", &s);
        write_corpus(argv[2], "blnhc-fp32", &other);
        write_corpus(argv[2], "bhlnc-mla", &mla);
    }

    struct kvrt_xfer_metadata_info info = {.size = sizeof(info)};
    int rc = kvrt_xfer_metadata_parse(s.blob, s.len, &info);
    tap_ok(rc == KVRT_OK && info.layout == KVRT_LAYOUT_LBHNC && info.num_blocks == 16 && info.num_layers == 2 &&
               info.version == KVRT_XFER_METADATA_VERSION && info.chunk_bytes > 0,
           "the exported blob parses back (layout, blocks, layers, version, staging chunks)");
    tap_diag("blob of %zu bytes; cache addressable: %s", s.len, info.cache_addressable ? "yes" : "no");

    /* docs/xfer.md's size of a set: after the 48-byte header and the one set
     * of this cache come the addressable flag, the agent id and the chunk
     * bytes, which must read back as the parser reported them. */
    size_t per_set = documented_set_bytes();
    const uint8_t *blob = s.blob;
    bool fits = per_set > 0 && 48 + per_set + 20 <= s.len && read_le(blob + 44, 4) == 1;
    tap_ok(fits && read_le(blob + 48 + per_set, 4) == (info.cache_addressable ? 1u : 0u) &&
               read_le(blob + 48 + per_set + 4, 8) != 0 && read_le(blob + 48 + per_set + 12, 8) == info.chunk_bytes,
           "docs/xfer.md's %zu bytes per set is where the blob's flag, agent id and chunk bytes follow", per_set);

    /* Every truncation is refused with one line. */
    size_t bad = 0;
    for (size_t n = 0; n < s.len; n++) {
        rc = kvrt_xfer_metadata_parse(s.blob, n, &info);
        if (rc != KVRT_ERR_INVALID || !one_line() || !strstr(kvrt_error_message(), "truncated")) {
            if (bad++ == 0)
                tap_diag("length %zu: status %d: %s", n, rc, kvrt_error_message());
        }
    }
    tap_ok(bad == 0, "all %zu truncations refused as truncated, one line each", s.len);

    /* Named corruptions (offsets follow the documented format). */
    refuse(&s, 0, 'X', 1, "bad magic", "wrong magic");
    refuse(&s, 8, 99, 4, "format version 99", "future version");
    refuse(&s, 12, 9, 4, "layout 9", "layout out of range");
    refuse(&s, 16, 0, 8, "0 blocks", "zero blocks");
    refuse(&s, 16, 17, 8, "kvrt computes", "block count that does not match the size");
    refuse(&s, 136, 12345, 8, "disagrees", "layer stride that does not match the geometry");
    refuse(&s, 24, 12345, 8, "cache size", "wrong cache size");
    refuse(&s, 60, 7, 4, "not valid", "element type out of range");
    {
        uint8_t *b = malloc(s.len + 1);
        memcpy(b, s.blob, s.len);
        b[s.len] = 0;
        rc = kvrt_xfer_metadata_parse(b, s.len + 1, &info);
        tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "stray bytes"), "a trailing byte is refused");
        free(b);
    }
    rc = kvrt_xfer_metadata_parse(NULL, 10, &info);
    tap_ok(rc == KVRT_ERR_INVALID && one_line(), "NULL blob refused");

    /* Random damage: never a crash, and a refusal is always one line. */
    if (!tap_ok(s.len > 8, "the blob is more than its magic"))
        return tap_done();
    uint64_t x = 0x243f6a8885a308d3ull;
    size_t refused = 0, accepted = 0, multi = 0;
    uint8_t *b = malloc(s.len + 1);
    for (int it = 0; it < 2000; it++) {
        memcpy(b, s.blob, s.len);
        for (int k = 0; k < 1 + it % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            b[x % s.len] ^= (uint8_t)(x >> 32 | 1);
        }
        rc = kvrt_xfer_metadata_parse(b, s.len, &info);
        if (rc == KVRT_OK)
            accepted++;
        else if (one_line())
            refused++;
        else
            multi++;
    }
    free(b);
    tap_ok(multi == 0,
           "2000 randomly damaged blobs: %zu refused with one line, %zu still valid (keys and "
           "addresses are opaque), none crashed",
           refused, accepted);

    /* Compatibility: both values named, nothing connected. */
    kvrt_xfer_peer *peer = NULL;
    rc = kvrt_xfer_peer_load(s.a, other.blob, other.len, &peer);
    tap_ok(rc == KVRT_ERR_INVALID && peer == NULL && strstr(kvrt_error_message(), "element type") &&
               strstr(kvrt_error_message(), "bf16") && strstr(kvrt_error_message(), "fp32"),
           "an fp32 peer is refused by a bf16 cache, naming both: %s", kvrt_error_message());
    rc = kvrt_xfer_peer_load(s.a, mla.blob, mla.len, &peer);
    tap_ok(rc == KVRT_ERR_INVALID && peer == NULL && strstr(kvrt_error_message(), "kind") &&
               strstr(kvrt_error_message(), "mla"),
           "an MLA peer is refused by an attention cache: %s", kvrt_error_message());
    rc = kvrt_xfer_peer_load(other.a, s.blob, s.len - 1, &peer);
    tap_ok(rc == KVRT_ERR_INVALID && peer == NULL, "a truncated blob is refused by peer_load");

    struct side twin;
    tap_ok(make_side(&twin, KVRT_LAYOUT_BLHNC, KVRT_DTYPE_BF16, KVRT_SPEC_ATTENTION, 32), "fourth agent (BLHNC)");
    rc = kvrt_xfer_peer_load(s.a, twin.blob, twin.len, &peer);
    tap_ok(rc == KVRT_OK && peer != NULL && kvrt_xfer_peer_state(peer, NULL) == KVRT_XFER_PEER_CONNECTED,
           "a compatible peer (other layout, more blocks) loads and connects to its worker address");
    struct kvrt_xfer_request req;
    kvrt_xfer_request_default(&req);
    int64_t ids[2] = {1, 31};
    req.num_blocks = 2;
    req.local_ids = ids;
    req.remote_ids = ids;
    struct kvrt_xfer_plan plan;
    rc = kvrt_xfer_plan(s.a, peer, &req, &plan);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "local block id 31"),
           "planning refuses a local id out of range before anything moves: %s", kvrt_error_message());
    ids[1] = 7;
    rc = kvrt_xfer_plan(s.a, peer, &req, &plan);
    tap_ok(rc == KVRT_OK && plan.bytes == 2 * 2 * (2 * 4 * 64) && plan.method != KVRT_XFER_AUTO,
           "a valid request plans (%s, %llu bytes)", plan.why, (unsigned long long)plan.bytes);
    kvrt_xfer_peer_close(peer);

    free_side(&twin);
    free_side(&mla);
    free_side(&other);
    free_side(&s);
    return tap_done();
}
