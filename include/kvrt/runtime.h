/*
 * kvrt — the runtime: plugins, resolution across them, and binding.
 *
 *   kvrt_runtime_open()       discover plugins (KVRT_PLUGIN_PATH, install dir)
 *   kvrt_runtime_resolve()    one layout across the backends that touch a cache
 *   kvrt_runtime_bind()       check the layout against the declaration, then bind
 *   kvrt_cache_create()       one device allocation laid out by a placement
 *   kvrt_cache_write() ...    device work
 *   kvrt_runtime_close()      release everything
 *
 * The bound backend, its buffers, caches and the operations on them have
 * headers of their own (kvrt/backend.h, kvrt/buffer.h, kvrt/cache.h,
 * kvrt/ops.h); this one includes them all, so a program that includes it
 * has the whole runtime.
 *
 * Handles are opaque.  A runtime and its backends may be shared by threads;
 * different caches may be used from different threads at once; one cache is
 * used by one thread at a time.
 */
#ifndef KVRT_RUNTIME_H
#define KVRT_RUNTIME_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/device.h>
#include <kvrt/layout.h>
#include <kvrt/dtype.h>
#include <kvrt/placement.h>
#include <kvrt/settings.h>
#include <kvrt/trace.h>
#include <kvrt/backend.h>
#include <kvrt/buffer.h>
#include <kvrt/cache.h>
#include <kvrt/ops.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvrt_runtime kvrt_runtime;

/* Log levels of the runtime's log callback. */
enum kvrt_log_level {
    KVRT_LOG_ERROR = 0,
    KVRT_LOG_WARNING = 1,
    KVRT_LOG_INFO = 2,
    KVRT_LOG_DEBUG = 3,
};

struct kvrt_runtime_options {
    /* Colon-separated directories or plugin files searched first.  NULL:
     * KVRT_PLUGIN_PATH (ignored in setuid/setgid processes). */
    const char *plugin_path;
    /* Also search the build tree (when libkvrt runs uninstalled) and
     * <libdir>/kvrt/plugins.  Default true. */
    bool search_default_paths;
    /* Receives every report (skipped plugins, passed-over backends, layout
     * warnings).  NULL: messages at KVRT_LOG_WARNING and above go to stderr
     * when KVRT_DEBUG is set, else they are only kept for kvrt_runtime_*(). */
    void (*log)(void *user, enum kvrt_log_level level, const char *message);
    void *log_user;
    uint8_t reserved[64];
};

/** Defaults: plugin_path NULL, search_default_paths true, no log callback. */
KVRT_API void kvrt_runtime_options_default(struct kvrt_runtime_options *options);

/** Discover plugins.  A bad plugin is skipped with a reason, never fatal. */
KVRT_API int kvrt_runtime_open(const struct kvrt_runtime_options *options, kvrt_runtime **out);
/** Destroy every cache, buffer and backend of the runtime, then the runtime.
 *  A cache with references alive (DLPack tensors, kvrt_cache_retain) lives
 *  on, with its backend, the buffers made on that backend and the plugin,
 *  until the last reference goes, which finishes the close. */
KVRT_API void kvrt_runtime_close(kvrt_runtime *rt);

struct kvrt_plugin_info {
    const char *name;
    const char *path;
    const char *version;
    const char *description;
    unsigned abi_major, abi_minor;
    bool any_layout;
    size_t num_layouts;
    enum kvrt_layout layouts[KVRT_NUM_LAYOUTS]; /* in the plugin's preference order */
    uint32_t dtypes;                            /* 1u << enum kvrt_dtype */
    uint32_t ops;                               /* enum kvrt_op bits (kvrt/plugin.h) */
    bool available;                             /* probe found a device */
    const char *reason;                         /* why not available, "" otherwise */
    /* Since API 1.0 (plugin ABI 1.1); UNKNOWN / OPAQUE / "" when the plugin
     * does not describe its device or probe failed. */
    enum kvrt_device_type device_type;
    enum kvrt_memory_kind memory;
    const char *device_name;
    uint32_t decode_dtypes; /* 1u << enum kvrt_dtype that decode computes on */
    /* Since API 1.1 (plugin ABI 1.2): the alignment kvrt_cache_wrap needs of
     * the memory's address; 0 when the backend cannot adopt memory. */
    uint32_t import_alignment;
    /* Room for fields of later API minors; libkvrt writes zeroes. */
    uint8_t reserved[28];
};

KVRT_API size_t kvrt_runtime_num_plugins(const kvrt_runtime *rt);
/** Plugin i in search order; strings stay valid with the runtime. */
KVRT_API int kvrt_runtime_plugin_info(const kvrt_runtime *rt, size_t i, struct kvrt_plugin_info *out);
/** Index of the plugin called `name` (index may be NULL to ask only
 *  whether it exists); KVRT_ERR_NODEV listing the names if none. */
KVRT_API int kvrt_runtime_find_plugin(const kvrt_runtime *rt, const char *name, size_t *index);
/** true when plugin i declares `layout` (or any). */
KVRT_API bool kvrt_runtime_plugin_admits(const kvrt_runtime *rt, size_t i, enum kvrt_layout layout);

/** Files passed over during discovery, each with its reason (path and
 *  reason may each be NULL). */
KVRT_API size_t kvrt_runtime_num_skipped(const kvrt_runtime *rt);
KVRT_API int kvrt_runtime_skipped(const kvrt_runtime *rt, size_t i, const char **path, const char **reason);

/**
 * The order automatic selection tries backends in, as one line of text for
 * messages, help and docs (docs/runtime.md): the built-in device backends,
 * then third-party plugins in search order, then cpu, and last any other
 * backend whose device is the host CPU (an OpenCL CPU device such as PoCL
 * emulates what "cpu" runs natively).  Rendered from the table selection
 * ranks by, so it cannot drift from it.
 */
KVRT_API const char *kvrt_runtime_backend_priority(void);

/**
 * The backend that binding would choose without a layout constraint:
 * KVRT_BACKEND when set, else the first plugin in priority order
 * (kvrt_runtime_backend_priority) that has a device and binds.
 * To know that a backend binds, each candidate not bound yet is bound once,
 * at the layout it would most likely get (VLLM_KV_CACHE_LAYOUT when it
 * declares it, else its first choice); the binding is kept and handed out
 * by the next kvrt_runtime_bind of that backend and layout.  A backend whose
 * bind fails is passed over (a "passed over" trace step and a warning in
 * the log) and never asked again by automatic choice in this runtime.
 * @return KVRT_ERR_NODEV listing each backend's reason when none works.
 */
KVRT_API int kvrt_runtime_default_backend(const kvrt_runtime *rt, const char **name);

/**
 * The backend binding would use, with where its name came from: `name`
 * when not NULL (source ARGUMENT), else KVRT_BACKEND when set
 * (ENVIRONMENT; set but empty is an error), else the choice of
 * kvrt_runtime_default_backend (DEFAULT).  A name given either way must be
 * a plugin found.  *out stays valid with the runtime; *source may be NULL,
 * and kvrt_setting_origin words it for output.
 * @return KVRT_OK; KVRT_ERR_INVALID for KVRT_BACKEND set but empty;
 *   KVRT_ERR_NODEV for an unknown name (naming the plugins found) or when
 *   no backend works.
 */
KVRT_API int kvrt_runtime_choose_backend(const kvrt_runtime *rt, const char *name, const char **out,
                                         enum kvrt_setting_source *source);

/**
 * Resolve one layout (docs/design.md §7) across the named backends (their
 * declarations are read, no device code runs).  backends NULL / n 0: the
 * default backend.  preference: a soft preference as spelled, or NULL.
 * The result is recorded in the runtime: a later, different result is
 * KVRT_ERR_STATE.  kvrt_runtime_trace() explains every step.
 */
KVRT_API int kvrt_runtime_resolve(kvrt_runtime *rt, const char *const *backends, size_t num_backends, bool mixed_shapes,
                                  const char *preference, enum kvrt_layout *out);

/**
 * kvrt_runtime_resolve for the layers the cache will hold: their shapes
 * narrow the candidates as kvrt_resolver_set_groups says, so the result is
 * a layout kvrt_placement_create accepts for these groups.
 */
KVRT_API int kvrt_runtime_resolve_groups(kvrt_runtime *rt, const char *const *backends, size_t num_backends,
                                         const struct kvrt_group *groups, size_t num_groups, const char *preference,
                                         enum kvrt_layout *out);
/**
 * The resolution and selection trace so far, one step per line, rendered
 * from the steps below.  Valid until the next call that adds to the trace
 * (kvrt_runtime_resolve, kvrt_runtime_bind, kvrt_runtime_default_backend)
 * or kvrt_runtime_close.
 */
KVRT_API const char *kvrt_runtime_trace(const kvrt_runtime *rt);

/** How many steps the runtime's trace holds. */
KVRT_API size_t kvrt_runtime_num_trace_steps(const kvrt_runtime *rt);

/**
 * Step i (0 = oldest) of the runtime's trace into *out (kvrt/trace.h): the
 * steps of each kvrt_runtime_resolve, then the runtime's own (recorded,
 * refused, preferred, bound, passed over).  The strings stay valid as
 * kvrt_runtime_trace()'s text does.  KVRT_ERR_INVALID for i out of range.
 */
KVRT_API int kvrt_runtime_trace_step(const kvrt_runtime *rt, size_t i, struct kvrt_trace_step *out);

/**
 * Every step of the runtime's trace as one JSON array, oldest first, each
 * step as kvrt_resolver_json writes its "steps" ({"step": the kind's name,
 * "text", and "layout" and "backend" where set}): what `kvrt explain
 * --json` prints as "steps" and Runtime.trace_steps returns.  *out is the
 * caller's: kvrt_free it.
 */
KVRT_API int kvrt_runtime_trace_json(const kvrt_runtime *rt, char **out);

/**
 * Bind a backend for `layout_name` (as the user spelled it).
 * backend NULL: KVRT_BACKEND, else the first backend in priority order
 * (kvrt_runtime_backend_priority) that admits the layout, has a device and binds; each one passed over (an
 * undeclared layout, no device, a bind that failed) is reported in the trace
 * and the log, and only when all fail is it KVRT_ERR_NODEV listing each
 * one's reason.  A backend named (argument or KVRT_BACKEND) fails hard.
 * The layout is checked against the plugin's declaration before any plugin
 * function other than reading the descriptor runs.
 * @return KVRT_OK; KVRT_ERR_INVALID for a bad name; KVRT_ERR_REFUSED when
 *   the backend does not declare the layout (names the layout as spelled,
 *   the backend and its layouts); KVRT_ERR_NODEV when no device.
 */
KVRT_API int kvrt_runtime_bind(kvrt_runtime *rt, const char *backend, const char *layout_name, kvrt_backend **out);

/**
 * kvrt_runtime_bind for a layout already parsed (or resolved): the same
 * choice of backend, checks and refusals, naming the layout canonically.
 * Names are parsed once, where they come in; this is the call for the
 * value they became.
 * @return as kvrt_runtime_bind; KVRT_ERR_INVALID for a value outside
 *   enum kvrt_layout.
 */
KVRT_API int kvrt_runtime_bind_layout(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout,
                                      kvrt_backend **out);

#ifdef __cplusplus
}
#endif
#endif
