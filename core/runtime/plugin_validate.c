/* A plugin's descriptor checked before the runtime uses it: names, texts,
 * dtypes and operations.
 *
 * Layer 6 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "plugin_internal.h"

#define KNOWN_DTYPES ((1u << KVRT_NUM_DTYPES) - 1u)

/* Descriptor strings are read with a bound: a plugin's pointer may lead to
 * bytes without a terminating NUL, and strlen would run off its data. */
#define NAME_MAX_BYTES 64
#define VERSION_MAX_BYTES 64
#define DESCRIPTION_MAX_BYTES 512

static bool valid_name(const char *name)
{
    size_t n = strnlen(name, NAME_MAX_BYTES + 1);
    if (n == 0 || n > NAME_MAX_BYTES)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

enum text_fault { TEXT_OK, TEXT_UNTERMINATED, TEXT_CONTROL };

/* A descriptor text must end within `max` bytes and be one line. */
static enum text_fault check_text(const char *text, size_t max, size_t *at)
{
    size_t n = strnlen(text, max + 1);
    if (n > max)
        return TEXT_UNTERMINATED;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c == 0x7f) {
            *at = i;
            return TEXT_CONTROL;
        }
    }
    return TEXT_OK;
}

/* A descriptor is checked field by field before anything in it is trusted,
 * so a malformed plugin is skipped with the exact reason instead of crashing
 * the process later. */
int kvrt_plugin_validate(const struct kvrt_plugin_descriptor *d, char *why, size_t why_size)
{
#define REFUSE(...)                                                                                                    \
    do {                                                                                                               \
        snprintf(why, why_size, __VA_ARGS__);                                                                          \
        return KVRT_ERR_PLUGIN;                                                                                        \
    } while (0)
    if (!d)
        REFUSE("entry point returned a NULL descriptor");
    if (d->size < KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE)
        REFUSE("descriptor is too small: size %u, ABI %d.0 needs at least %zu bytes", (unsigned)d->size,
               KVRT_PLUGIN_ABI_MAJOR, (size_t)KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE);
    if (d->abi_major != KVRT_PLUGIN_ABI_MAJOR)
        REFUSE("incompatible ABI major: plugin has %u.%u, this libkvrt speaks %d.%d", (unsigned)d->abi_major,
               (unsigned)d->abi_minor, KVRT_PLUGIN_ABI_MAJOR, KVRT_PLUGIN_ABI_MINOR);
    if (!d->name)
        REFUSE("malformed descriptor: name is NULL");
    if (!valid_name(d->name)) {
        char shown[4 * NAME_MAX_BYTES + 1], head[NAME_MAX_BYTES + 1];
        memcpy(head, d->name, strnlen(d->name, NAME_MAX_BYTES));
        head[strnlen(d->name, NAME_MAX_BYTES)] = '\0';
        kvrt_escape_controls(shown, sizeof(shown), head);
        REFUSE("malformed descriptor: name \"%s\"%s is not 1-%d characters of [a-z0-9_-] followed by a NUL", shown,
               strnlen(d->name, NAME_MAX_BYTES + 1) > NAME_MAX_BYTES ? "..." : "", NAME_MAX_BYTES);
    }
    if (!d->version)
        REFUSE("malformed descriptor: version of \"%s\" is NULL", d->name);
    static const struct {
        size_t offset;
        size_t max;
        const char *name;
    } texts[] = {
        {offsetof(struct kvrt_plugin_descriptor, version), VERSION_MAX_BYTES, "version"},
        {offsetof(struct kvrt_plugin_descriptor, description), DESCRIPTION_MAX_BYTES, "description"},
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        const char *text;
        memcpy(&text, (const char *)d + texts[i].offset, sizeof(text));
        size_t at = 0;
        enum text_fault fault = text ? check_text(text, texts[i].max, &at) : TEXT_OK;
        if (fault == TEXT_UNTERMINATED)
            REFUSE("malformed descriptor: %s of \"%s\" has no terminating NUL within %zu bytes", texts[i].name, d->name,
                   texts[i].max);
        if (fault == TEXT_CONTROL)
            REFUSE("malformed descriptor: %s of \"%s\" contains control byte 0x%02x at byte %zu; it must be "
                   "one line of text",
                   texts[i].name, d->name, (unsigned)(unsigned char)text[at], at);
    }
    if (d->flags & ~KVRT_PLUGIN_ANY_LAYOUT)
        REFUSE("malformed descriptor: unknown flags 0x%x (valid: 0x%x KVRT_PLUGIN_ANY_LAYOUT)", (unsigned)d->flags,
               (unsigned)KVRT_PLUGIN_ANY_LAYOUT);
    bool any = d->flags & KVRT_PLUGIN_ANY_LAYOUT;
    if (!any && d->num_layouts == 0)
        REFUSE("malformed descriptor: declares no layouts and not KVRT_PLUGIN_ANY_LAYOUT");
    if (d->num_layouts > KVRT_NUM_LAYOUTS)
        REFUSE("malformed descriptor: %u layouts declared, at most %d exist", (unsigned)d->num_layouts,
               KVRT_NUM_LAYOUTS);
    if (d->num_layouts && !d->layouts)
        REFUSE("malformed descriptor: num_layouts is %u but layouts is NULL", (unsigned)d->num_layouts);
    bool seen[KVRT_NUM_LAYOUTS] = {false};
    for (uint32_t i = 0; i < d->num_layouts; i++) {
        int32_t l = d->layouts[i];
        if (l < 0 || l >= KVRT_NUM_LAYOUTS)
            REFUSE("malformed descriptor: layout value %d at position %u is out of range 0..%d", (int)l, (unsigned)i,
                   KVRT_NUM_LAYOUTS - 1);
        if (seen[l])
            REFUSE("malformed descriptor: layout %s declared twice", kvrt_layout_name((enum kvrt_layout)l));
        seen[l] = true;
    }
    if (d->dtypes == 0)
        REFUSE("malformed descriptor: declares no element types");
    if (d->dtypes & ~KNOWN_DTYPES)
        REFUSE("malformed descriptor: unknown element type bits 0x%x (known: 0x%x)",
               (unsigned)(d->dtypes & ~KNOWN_DTYPES), KNOWN_DTYPES);
    if (d->ops & ~KVRT_OP_ALL)
        REFUSE("malformed descriptor: unknown operation bits 0x%x (known: 0x%x)", (unsigned)(d->ops & ~KVRT_OP_ALL),
               KVRT_OP_ALL);

    static const struct {
        size_t offset;
        const char *name;
    } required[] = {
        {offsetof(struct kvrt_plugin_descriptor, probe), "probe"},
        {offsetof(struct kvrt_plugin_descriptor, bind), "bind"},
        {offsetof(struct kvrt_plugin_descriptor, unbind), "unbind"},
        {offsetof(struct kvrt_plugin_descriptor, buffer_alloc), "buffer_alloc"},
        {offsetof(struct kvrt_plugin_descriptor, buffer_free), "buffer_free"},
        {offsetof(struct kvrt_plugin_descriptor, buffer_zero), "buffer_zero"},
        {offsetof(struct kvrt_plugin_descriptor, buffer_upload), "buffer_upload"},
        {offsetof(struct kvrt_plugin_descriptor, buffer_download), "buffer_download"},
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)d + required[i].offset, sizeof(fn));
        if (!fn)
            REFUSE("malformed descriptor: required function %s is NULL", required[i].name);
    }
    static const struct {
        uint32_t op;
        size_t offset;
        const char *name;
    } per_op[] = {
        {KVRT_OP_WRITE, offsetof(struct kvrt_plugin_descriptor, write), "write"},
        {KVRT_OP_READ, offsetof(struct kvrt_plugin_descriptor, read), "read"},
        {KVRT_OP_COPY_BLOCKS, offsetof(struct kvrt_plugin_descriptor, copy_blocks), "copy_blocks"},
        {KVRT_OP_GATHER, offsetof(struct kvrt_plugin_descriptor, gather), "gather"},
        {KVRT_OP_SCATTER, offsetof(struct kvrt_plugin_descriptor, scatter), "scatter"},
        {KVRT_OP_DECODE, offsetof(struct kvrt_plugin_descriptor, decode), "decode"},
    };
    for (size_t i = 0; i < sizeof(per_op) / sizeof(per_op[0]); i++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)d + per_op[i].offset, sizeof(fn));
        if ((d->ops & per_op[i].op) && !fn)
            REFUSE("malformed descriptor: declares operation %s but its function is NULL", per_op[i].name);
    }
    if (KVRT_PLUGIN_HAS(d, decode_dtypes) && (d->decode_dtypes & ~d->dtypes))
        REFUSE("malformed descriptor: decode_dtypes 0x%x names types outside dtypes 0x%x", (unsigned)d->decode_dtypes,
               (unsigned)d->dtypes);
    if (KVRT_PLUGIN_HAS(d, decode_dtypes) && d->decode_dtypes && !(d->ops & KVRT_OP_DECODE))
        REFUSE("malformed descriptor: decode_dtypes 0x%x set but operation decode is not declared",
               (unsigned)d->decode_dtypes);
    if (kvrt_plugin_imports(d)) {
        uint64_t a = d->import_alignment;
        if (a == 0 || a > ((uint64_t)1 << 30) || (a & (a - 1)) != 0)
            REFUSE("malformed descriptor: buffer_import is set but import_alignment %llu is not a power of two "
                   "from 1 to 2^30",
                   (unsigned long long)a);
        if (!d->describe || !d->buffer_address)
            REFUSE("malformed descriptor: buffer_import is set but %s is NULL; imported memory is checked "
                   "against the memory kind describe reports and shared through buffer_address",
                   !d->describe ? "describe" : "buffer_address");
    }
#undef REFUSE
    return KVRT_OK;
}

bool kvrt_plugin_supports_dtype(const struct kvrt_plugin_descriptor *d, enum kvrt_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < KVRT_NUM_DTYPES && (d->dtypes & (1u << dtype));
}

bool kvrt_plugin_imports(const struct kvrt_plugin_descriptor *d)
{
    return KVRT_PLUGIN_HAS(d, buffer_import) && d->buffer_import;
}

uint32_t kvrt_plugin_decode_dtypes(const struct kvrt_plugin_descriptor *d)
{
    if (KVRT_PLUGIN_HAS(d, decode_dtypes) && d->decode_dtypes)
        return d->decode_dtypes;
    return d->dtypes;
}

const char *kvrt_device_type_text(int type)
{
    switch (type) {
    case KVRT_DEVICE_TYPE_CPU: return "CPU";
    case KVRT_DEVICE_TYPE_GPU: return "GPU";
    case KVRT_DEVICE_TYPE_ACCELERATOR: return "accelerator";
    default: return "unknown";
    }
}

const char *kvrt_memory_kind_text(int memory)
{
    switch (memory) {
    case KVRT_MEMORY_HOST: return "host";
    case KVRT_MEMORY_CUDA: return "cuda";
    case KVRT_MEMORY_ROCM: return "rocm";
    default: return "opaque";
    }
}

bool kvrt_plugin_declares(const struct kvrt_plugin_descriptor *d, enum kvrt_layout layout)
{
    if (d->flags & KVRT_PLUGIN_ANY_LAYOUT)
        return true;
    for (uint32_t i = 0; i < d->num_layouts; i++)
        if (d->layouts[i] == (int32_t)layout)
            return true;
    return false;
}

void kvrt_plugin_layouts_text(const struct kvrt_plugin_descriptor *d, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    if (d->flags & KVRT_PLUGIN_ANY_LAYOUT) {
        snprintf(out, size, "any");
        return;
    }
    for (uint32_t i = 0; i < d->num_layouts && len < size; i++) {
        int n =
            snprintf(out + len, size - len, "%s%s", i ? ", " : "", kvrt_layout_name((enum kvrt_layout)d->layouts[i]));
        if (n < 0)
            break;
        len += (size_t)n;
    }
}
