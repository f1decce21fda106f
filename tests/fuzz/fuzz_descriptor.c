/*
 * fuzz-descriptor: plugin descriptor validation (kvrt_plugin_validate).
 *
 * The input builds a descriptor field by field: its size (the descriptor is
 * copied into a heap block of exactly that many bytes, so a read past the
 * declared size is an ASan error), ABI version, name bytes or NULL (or 65+
 * bytes without a NUL, in a block that ends there), version and
 * description (fixed, NULL, raw bytes with control bytes, or a block just
 * past the limit without a NUL), flags,
 * the layouts array (allocated with exactly the entries the input gives),
 * element type and operation bits, and which function pointers are NULL.
 * The functions abort when called: validation must run no plugin code.
 *
 * An oracle written from plugin.h decides whether the descriptor is valid;
 * kvrt_plugin_validate must agree, write its reason inside the buffer it was
 * given, and an accepted descriptor must answer kvrt_plugin_declares and
 * kvrt_plugin_layouts_text consistently.
 */
#include <stdbool.h>

#include <kvrt/plugin.h>

#include "fuzz.h"
#include "plugin_internal.h"

#define CANARY 0xa5
#define MAX_LAYOUTS_GIVEN 16

/* Stand-ins for plugin functions: validation must never call them. */
#define NEVER(what) fuzz_fail(__FILE__, __LINE__, what, "validation called a plugin function")
static int f_probe(kvrt_plugin_error *why)
{
    (void)why;
    NEVER("probe");
}
static int f_bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err)
{
    (void)info, (void)out, (void)err;
    NEVER("bind");
}
static void f_unbind(kvrt_plugin_device *dev)
{
    (void)dev;
    NEVER("unbind");
}
static int f_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    (void)dev, (void)bytes, (void)out, (void)err;
    NEVER("buffer_alloc");
}
static void f_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev, (void)buf;
    NEVER("buffer_free");
}
static int f_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                  kvrt_plugin_error *err)
{
    (void)dev, (void)buf, (void)offset, (void)bytes, (void)err;
    NEVER("buffer_zero");
}
static int f_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src, uint64_t bytes,
                    kvrt_plugin_error *err)
{
    (void)dev, (void)buf, (void)offset, (void)src, (void)bytes, (void)err;
    NEVER("buffer_upload");
}
static int f_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst, uint64_t bytes,
                      kvrt_plugin_error *err)
{
    (void)dev, (void)buf, (void)offset, (void)dst, (void)bytes, (void)err;
    NEVER("buffer_download");
}
static int f_rw(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
                kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    (void)dev, (void)cache, (void)cache_buf, (void)layer, (void)num_tokens, (void)slots, (void)k;
    (void)k_offset, (void)v, (void)v_offset, (void)err;
    NEVER("write/read");
}
static int f_copy(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                  uint64_t num_pairs, const int64_t *pairs, kvrt_plugin_error *err)
{
    (void)dev, (void)cache, (void)cache_buf, (void)num_pairs, (void)pairs, (void)err;
    NEVER("copy_blocks");
}
static int f_stage(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                   uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
                   kvrt_plugin_error *err)
{
    (void)dev, (void)cache, (void)cache_buf, (void)num_blocks, (void)block_ids, (void)staging;
    (void)staging_offset, (void)err;
    NEVER("gather/scatter");
}
static int f_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err)
{
    (void)dev, (void)cache, (void)cache_buf, (void)layer, (void)args, (void)err;
    NEVER("decode");
}

enum { NUM_FUNCTIONS = 14 };

static void set_functions(struct kvrt_plugin_descriptor *d, uint32_t null_mask)
{
#define SET(i, field, fn) d->field = (null_mask & (1u << (i))) ? NULL : (fn)
    SET(0, probe, f_probe);
    SET(1, bind, f_bind);
    SET(2, unbind, f_unbind);
    SET(3, buffer_alloc, f_alloc);
    SET(4, buffer_free, f_free);
    SET(5, buffer_zero, f_zero);
    SET(6, buffer_upload, f_upload);
    SET(7, buffer_download, f_download);
    SET(8, write, f_rw);
    SET(9, read, f_rw);
    SET(10, copy_blocks, f_copy);
    SET(11, gather, f_stage);
    SET(12, scatter, f_stage);
    SET(13, decode, f_decode);
#undef SET
}

/* A value that is mostly one of a few interesting ones. */
static uint32_t pick_u32(struct fuzz_input *in, const uint32_t *common, size_t n)
{
    const uint8_t sel = fuzz_u8(in);
    if (sel < 0xc0)
        return common[sel % n];
    return (uint32_t)fuzz_bytes_u64(in, 4);
}

/* ---- the oracle: every rule of plugin.h -------------------------------- */

static bool name_ok(const char *name)
{
    const size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_' ||
              name[i] == '-'))
            return false;
    return true;
}

/* A descriptor text: terminated within max bytes, no control bytes.
 * `terminated` says whether the input gave a NUL (blocks without one are
 * made at least max + 1 bytes long, so a bounded read stays inside). */
static bool text_ok(const char *text, size_t max, bool terminated)
{
    if (!terminated || strlen(text) > max)
        return false;
    for (const char *c = text; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return false;
    return true;
}

struct text {
    char *block;     /* heap block of exactly the bytes given, or NULL */
    const char *ptr; /* what the descriptor points to */
    bool terminated;
};

/* A fixed string, NULL, raw bytes up to a NUL, or a block of exactly
 * `max + 1 + extra` bytes without a NUL (a read past the bound is then an
 * ASan error at the block's end). */
static void make_text(struct fuzz_input *in, const char *fixed, size_t max, struct text *t)
{
    const uint8_t sel = fuzz_u8(in);
    t->block = NULL;
    t->ptr = fixed;
    t->terminated = true;
    if (sel < 0x80)
        return;
    if (sel < 0x90) {
        t->ptr = NULL;
        return;
    }
    if (sel < 0xe0) {
        char raw[256];
        size_t n = 0;
        while (n + 1 < sizeof(raw) && (raw[n] = (char)fuzz_u8(in)) != '\0')
            n++;
        raw[n] = '\0';
        t->block = malloc(n + 1);
        if (t->block)
            memcpy(t->block, raw, n + 1);
    } else {
        const size_t n = max + 1 + (sel & 0x0f);
        t->block = malloc(n);
        if (t->block)
            for (size_t i = 0; i < n; i++) {
                const uint8_t b = fuzz_u8(in);
                t->block[i] = (char)(b ? b : 'x');
            }
        t->terminated = false;
    }
    t->ptr = t->block ? t->block : fixed;
    t->terminated = t->block ? t->terminated : true;
}

static struct text name_text, version_text, description_text;

static void free_texts(void)
{
    free(name_text.block);
    free(version_text.block);
    free(description_text.block);
}

static bool oracle(const struct kvrt_plugin_descriptor *d, size_t layouts_given)
{
    if (d->size < KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE || d->abi_major != KVRT_PLUGIN_ABI_MAJOR)
        return false;
    if (!name_text.terminated || !name_ok(d->name) || !d->version)
        return false;
    if (!text_ok(d->version, 64, version_text.terminated))
        return false;
    if (d->description && !text_ok(d->description, 512, description_text.terminated))
        return false;
    if (d->flags & ~(uint32_t)KVRT_PLUGIN_ANY_LAYOUT)
        return false;
    if (!(d->flags & KVRT_PLUGIN_ANY_LAYOUT) && d->num_layouts == 0)
        return false;
    if (d->num_layouts > KVRT_NUM_LAYOUTS || (d->num_layouts > 0 && !d->layouts))
        return false;
    FUZZ_CHECK(d->num_layouts <= layouts_given, "oracle: test bug, %u layouts but %zu given", (unsigned)d->num_layouts,
               layouts_given);
    bool seen[KVRT_NUM_LAYOUTS] = {false};
    for (uint32_t i = 0; i < d->num_layouts; i++) {
        const int32_t l = d->layouts[i];
        if (l < 0 || l >= KVRT_NUM_LAYOUTS || seen[l])
            return false;
        seen[l] = true;
    }
    if (d->dtypes == 0 || (d->dtypes >> KVRT_NUM_DTYPES) != 0)
        return false;
    if (d->ops & ~(uint32_t)KVRT_OP_ALL)
        return false;
    if (!d->probe || !d->bind || !d->unbind || !d->buffer_alloc || !d->buffer_free || !d->buffer_zero ||
        !d->buffer_upload || !d->buffer_download)
        return false;
    if (((d->ops & KVRT_OP_WRITE) && !d->write) || ((d->ops & KVRT_OP_READ) && !d->read) ||
        ((d->ops & KVRT_OP_COPY_BLOCKS) && !d->copy_blocks) || ((d->ops & KVRT_OP_GATHER) && !d->gather) ||
        ((d->ops & KVRT_OP_SCATTER) && !d->scatter) || ((d->ops & KVRT_OP_DECODE) && !d->decode))
        return false;
    return true;
}

/* ---- the target ---------------------------------------------------------- */

static void check_accepted(const struct kvrt_plugin_descriptor *d, struct fuzz_input *in)
{
    for (int l = -1; l <= KVRT_NUM_LAYOUTS; l++) {
        bool listed = (d->flags & KVRT_PLUGIN_ANY_LAYOUT) && kvrt_layout_valid(l);
        for (uint32_t i = 0; i < d->num_layouts; i++)
            listed = listed || d->layouts[i] == l;
        if (kvrt_layout_valid(l) || !(d->flags & KVRT_PLUGIN_ANY_LAYOUT))
            FUZZ_CHECK(kvrt_plugin_declares(d, (enum kvrt_layout)l) == listed,
                       "kvrt_plugin_declares(%d) is %d, declaration says %d", l, !listed, listed);
    }
    /* The text fits any buffer it is given, truncated if need be. */
    char text[160];
    const size_t size = 1 + fuzz_u8(in) % 128;
    memset(text, CANARY, sizeof(text));
    kvrt_plugin_layouts_text(d, text, size);
    FUZZ_CHECK(memchr(text, '\0', size) != NULL, "layouts text is not terminated inside its %zu bytes", size);
    for (size_t i = size; i < sizeof(text); i++)
        FUZZ_CHECK((unsigned char)text[i] == CANARY, "layouts text wrote byte %zu of a %zu-byte buffer", i, size);
    if (size == 128 && !(d->flags & KVRT_PLUGIN_ANY_LAYOUT))
        for (uint32_t i = 0; i < d->num_layouts; i++)
            FUZZ_CHECK(fuzz_contains(text, kvrt_layout_name((enum kvrt_layout)d->layouts[i])),
                       "layouts text \"%s\" lacks a declared layout", text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = {data, size};
    struct kvrt_plugin_descriptor d;
    /* Static: the texts of the descriptor are kept in globals. */
    static char version[8] = "1.0", description[8] = "fuzz";
    char name[80];
    int32_t *layouts = NULL;
    size_t layouts_given = 0;

    memset(&d, 0, sizeof(d));
    memset(&name_text, 0, sizeof(name_text));
    name_text.terminated = true;
    static const uint32_t sizes[] = {
        (uint32_t)sizeof(struct kvrt_plugin_descriptor),
        (uint32_t)KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE,
        (uint32_t)KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE - 1,
        (uint32_t)sizeof(struct kvrt_plugin_descriptor) + 16,
        0,
        4,
    };
    d.size = pick_u32(&in, sizes, sizeof(sizes) / sizeof(sizes[0]));
    static const uint32_t majors[] = {KVRT_PLUGIN_ABI_MAJOR, KVRT_PLUGIN_ABI_MAJOR, 0, KVRT_PLUGIN_ABI_MAJOR + 1};
    d.abi_major = (uint16_t)pick_u32(&in, majors, sizeof(majors) / sizeof(majors[0]));
    d.abi_minor = (uint16_t)fuzz_u8(&in);

    const uint8_t name_sel = fuzz_u8(&in);
    if (name_sel & 0x80) {
        /* Raw bytes up to a NUL: any length 0..79, any byte. */
        size_t n = 0;
        while (n + 1 < sizeof(name) && (name[n] = (char)fuzz_u8(&in)) != '\0')
            n++;
        name[n] = '\0';
        d.name = name;
    } else if (name_sel & 0x40) {
        d.name = NULL;
    } else {
        snprintf(name, sizeof(name), "p%u", (unsigned)(name_sel & 0x3f));
        d.name = name;
    }
    if (name_sel & 0x80 && (name_sel & 0x20)) {
        /* 65 or more name bytes without a NUL: validation may read at most
         * 65 (the block ends there or later). */
        const size_t n = 65 + (name_sel & 0x0f);
        name_text.block = malloc(n);
        if (name_text.block) {
            for (size_t i = 0; i < n; i++)
                name_text.block[i] = (char)('a' + fuzz_u8(&in) % 26);
            d.name = name_text.block;
            name_text.terminated = false;
        }
    }
    const uint8_t strings = fuzz_u8(&in);
    make_text(&in, version, 64, &version_text);
    make_text(&in, description, 512, &description_text);
    d.version = version_text.ptr;
    d.description = description_text.ptr;

    static const uint32_t flag_values[] = {0, KVRT_PLUGIN_ANY_LAYOUT, 0, 2};
    d.flags = pick_u32(&in, flag_values, sizeof(flag_values) / sizeof(flag_values[0]));
    static const uint32_t counts[] = {1, 2, 3, 6, 0, 7, 4, 5};
    d.num_layouts = pick_u32(&in, counts, sizeof(counts) / sizeof(counts[0]));
    if (!(strings & 0x10)) {
        /* Exactly as many entries as the input gives (at most 16), so a
         * validator that reads past num_layouts trips ASan. */
        layouts_given = d.num_layouts < MAX_LAYOUTS_GIVEN ? d.num_layouts : MAX_LAYOUTS_GIVEN;
        layouts = malloc(layouts_given ? layouts_given * sizeof(*layouts) : 1);
        if (!layouts) {
            free_texts();
            return 0;
        }
        for (size_t i = 0; i < layouts_given; i++) {
            const uint8_t v = fuzz_u8(&in);
            layouts[i] = v < 0xf0 ? (int32_t)(v % (KVRT_NUM_LAYOUTS + 1)) : (int32_t)fuzz_bytes_u64(&in, 4);
        }
        d.layouts = layouts;
    }
    static const uint32_t dtype_values[] = {1u << KVRT_DTYPE_FP32, (1u << KVRT_NUM_DTYPES) - 1, 0x6,
                                            1u << KVRT_NUM_DTYPES, 0};
    d.dtypes = pick_u32(&in, dtype_values, sizeof(dtype_values) / sizeof(dtype_values[0]));
    static const uint32_t op_values[] = {KVRT_OP_ALL, 0, KVRT_OP_WRITE | KVRT_OP_READ, KVRT_OP_DECODE, KVRT_OP_ALL + 1};
    d.ops = pick_u32(&in, op_values, sizeof(op_values) / sizeof(op_values[0]));
    const uint8_t null_sel = fuzz_u8(&in);
    /* Mostly all present or one missing: a random mask almost always
     * misses a required function. */
    const uint32_t null_mask = null_sel < 0x80   ? 0
                               : null_sel < 0xf0 ? 1u << ((null_sel - 0x80) % NUM_FUNCTIONS)
                                                 : (uint32_t)fuzz_bytes_u64(&in, 2);
    set_functions(&d, null_mask);
    /* The descriptor lives in a block of exactly `size` bytes (at least
     * the size field, at most the whole struct): the core must not read a
     * field at or past the size the plugin was compiled with.  (Today the
     * minimum is the whole ABI 1.0 struct; this starts to matter when the
     * struct grows.) */
    size_t block = d.size < sizeof(d.size) ? sizeof(d.size) : d.size;
    if (block > sizeof(d))
        block = sizeof(d);
    struct kvrt_plugin_descriptor *copy = malloc(block);
    if (!copy) {
        free(layouts);
        free_texts();
        return 0;
    }
    memcpy(copy, &d, block);

    char why[512 + 16];
    const size_t why_size = 1 + fuzz_u8(&in) % 512;
    memset(why, CANARY, sizeof(why));
    const bool valid = oracle(&d, layouts_given);
    const int rc = kvrt_plugin_validate(copy, why, why_size);
    FUZZ_LOG("descriptor: oracle %s, validate %s\n", valid ? "valid" : "invalid", rc == KVRT_OK ? "ok" : why);
    for (size_t i = why_size; i < sizeof(why); i++)
        FUZZ_CHECK((unsigned char)why[i] == CANARY, "reason wrote byte %zu of a %zu-byte buffer", i, why_size);
    if (valid) {
        FUZZ_CHECK(rc == KVRT_OK, "a valid descriptor was refused: %.*s", (int)why_size, why);
        check_accepted(copy, &in);
    } else {
        FUZZ_CHECK(rc == KVRT_ERR_PLUGIN, "an invalid descriptor was %s (rc %d)",
                   rc == KVRT_OK ? "accepted" : "refused with the wrong status", rc);
        FUZZ_CHECK(memchr(why, '\0', why_size) != NULL, "reason is not terminated inside its %zu bytes", why_size);
        FUZZ_CHECK(why_size < 2 || why[0] != '\0', "refused without a reason");
    }
    free(copy);
    free(layouts);
    free_texts();
    return 0;
}
