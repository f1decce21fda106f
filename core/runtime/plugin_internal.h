/*
 * Internal, the plugin layer: the plugins a runtime found and what it asks
 * of each outside a binding (plugin.c: the set, probe and description,
 * plugin status translation; plugin_validate.c: the descriptor's checks and
 * declarations; log.c: the log).  It calls only the loader below it; the
 * buffer and cache layer and the runtime build on it.
 *
 * Layer 6 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_PLUGIN_INTERNAL_H
#define KVRT_CORE_PLUGIN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvrt/plugin.h>
#include <kvrt/runtime.h>

#include "format.h"

/* Where reports go: the caller's callback, else stderr under KVRT_DEBUG. */
struct kvrt_log {
    void (*fn)(void *user, enum kvrt_log_level level, const char *message);
    void *user;
};

/* Report one line, control bytes escaped (log.c). */
void kvrt_log(const struct kvrt_log *log, enum kvrt_log_level level, const char *fmt, ...) KVRT_PRINTF(3, 4);

struct kvrt_loaded_plugin {
    char *path;
    void *handle;
    const struct kvrt_plugin_descriptor *desc;
    bool probed;
    bool available;
    char *reason; /* why not available ("" when available) */
    /* From the plugin's describe after a successful probe; type UNKNOWN,
     * memory OPAQUE, name "" when it has none (ABI 1.0) or it failed. */
    struct kvrt_plugin_device_info device;
    /* "failed to bind layout X: <plugin's message>" after its bind failed,
     * until one succeeds; NULL otherwise. */
    char *bind_failure;
};

struct kvrt_skipped_plugin {
    char *path;
    char *reason;
};

/* What discovery found: accepted plugins in search order, files passed
 * over with their reasons. */
struct kvrt_plugins {
    struct kvrt_loaded_plugin *loaded;
    size_t num_loaded;
    struct kvrt_skipped_plugin *skipped;
    size_t num_skipped;
    const struct kvrt_log *log;
};

/* Discover through the loader: each module validated, the first of a name
 * kept.  Fills *set (release it even on failure). */
int kvrt_plugins_discover(struct kvrt_plugins *set, const char *plugin_path, bool search_default_paths,
                          const struct kvrt_log *log);
void kvrt_plugins_release(struct kvrt_plugins *set);
/* The plugin called `name`, or NULL. */
struct kvrt_loaded_plugin *kvrt_plugins_find(const struct kvrt_plugins *set, const char *name);

/* Probe a plugin once, lazily, and ask it to describe its device. */
void kvrt_plugin_probe(struct kvrt_loaded_plugin *p, const struct kvrt_log *log);

/* A plugin function's failure as a kvrt error naming the backend and the
 * operation; a status outside the kvrt range is the plugin's fault. */
int kvrt_plugin_status(const struct kvrt_loaded_plugin *p, int status, const kvrt_plugin_error *err, const char *op);

/* Descriptor validation (plugin_validate.c); why gets the reason. */
int kvrt_plugin_validate(const struct kvrt_plugin_descriptor *d, char *why, size_t why_size);

/* Layouts a plugin declares, as text ("LBNHC, LBHNC" or "any"). */
void kvrt_plugin_layouts_text(const struct kvrt_plugin_descriptor *d, char *out, size_t size);
bool kvrt_plugin_declares(const struct kvrt_plugin_descriptor *d, enum kvrt_layout layout);
/* Whether the plugin stores attention/MLA layers of this element type. */
bool kvrt_plugin_supports_dtype(const struct kvrt_plugin_descriptor *d, enum kvrt_dtype dtype);
/* Whether the plugin adopts caller memory (ABI 1.2 buffer_import). */
bool kvrt_plugin_imports(const struct kvrt_plugin_descriptor *d);
/* Element types decode computes on (ABI 1.1 decode_dtypes, else dtypes). */
uint32_t kvrt_plugin_decode_dtypes(const struct kvrt_plugin_descriptor *d);
/* Device type and memory kind names for messages ("CPU", "GPU", "host", ...). */
const char *kvrt_device_type_text(int type);
const char *kvrt_memory_kind_text(int memory);

#endif
