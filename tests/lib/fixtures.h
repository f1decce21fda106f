/*
 * Fixtures the tests build again and again: an attention spec of a given
 * shape, a placement of identical layers in one group, a runtime over
 * given plugins.  They link
 * against whichever libkvrt the test links (the shared library or the
 * core's internal archive).
 */
#ifndef KVRT_TESTS_FIXTURES_H
#define KVRT_TESTS_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include <kvrt/kvrt.h>

/* Most layers a fixture placement holds; their names are l0, l1, ... */
#define FIXTURE_MAX_LAYERS 64

/* An attention spec (K and V of head_size each) with every other field at
 * its default. */
struct kvrt_spec fixture_attention(enum kvrt_dtype dtype, uint64_t block_size, uint64_t num_kv_heads,
                                   uint64_t head_size);

/* `num_layers` layers of `spec`, named l0, l1, ..., in one group, placed
 * under `layout` for `num_blocks` blocks.  On failure the reason is a TAP
 * diagnostic and the status is libkvrt's (KVRT_ERR_INVALID above
 * FIXTURE_MAX_LAYERS). */
int fixture_placement(enum kvrt_layout layout, const struct kvrt_spec *spec, size_t num_layers, uint64_t num_blocks,
                      kvrt_placement **out);

/* Bind `backend` to `layout` on `rt` and allocate a cache of
 * fixture_placement(); the placement is released again (the cache keeps
 * what it needs).  NULL, with a TAP diagnostic, on failure. */
kvrt_cache *fixture_cache(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout, const struct kvrt_spec *spec,
                          size_t num_layers, uint64_t num_blocks);

/* A runtime that loads exactly `plugin_path` (colon-separated), no default
 * folders, logging to `log` (may be NULL).  NULL, with a TAP diagnostic,
 * on failure. */
kvrt_runtime *fixture_runtime(const char *plugin_path, void (*log)(void *, enum kvrt_log_level, const char *));

/* The test plugins' folder and the cpu module meson passes the runtime
 * tests (KVRT_TEST_PLUGIN_DIR, KVRT_TEST_CPU_PLUGIN).  When either is
 * missing the whole test is skipped with that reason (tap_skip_all exits). */
void fixture_test_plugins(const char **dir, const char **cpu_path);

#endif
