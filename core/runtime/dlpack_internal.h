/* Internal: what DLPack export and import share (dlpack.c).
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_DLPACK_INTERNAL_H
#define KVRT_CORE_DLPACK_INTERNAL_H

#include <stdint.h>

#include <dlpack/dlpack.h>

#include <kvrt/plugin.h>
#include <kvrt/runtime.h>

/* The DLPack type of a layer's elements (state layers: bytes). */
int kvrt_dlpack_dtype(const struct kvrt_plugin_layer *L, DLDataType *out);

/* Elements from one layer to the next when every layer has layer 0's view
 * and they are evenly spaced, so that the layers are one 5-D tensor; else
 * KVRT_ERR_INVALID naming the first layer that breaks it, then `advice`. */
int kvrt_dlpack_layer_stride(const kvrt_cache *c, const char *fn, const char *advice, uint64_t *stride);

#endif
