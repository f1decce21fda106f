#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_plugin.h"
#include "tap.h"

const char *gpu_layout_name(int layout)
{
    static const char *const names[] = {"LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"};
    return layout >= 0 && layout < 6 ? names[layout] : "?";
}

const struct kvrt_plugin_descriptor *gpu_plugin_load(void)
{
    const char *path = getenv("KVRT_TEST_PLUGIN");
    if (!path) {
        tap_ok(false, "KVRT_TEST_PLUGIN names the module to test");
        return NULL;
    }
    /* Never dlclose: GPU runtimes must stay loaded (TOOLCHAIN.md). */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        tap_ok(false, "dlopen %s", path);
        tap_diag("%s", dlerror());
        return NULL;
    }
    kvrt_plugin_entry_fn entry;
    void *sym = dlsym(h, KVRT_PLUGIN_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof(entry));
    if (!entry) {
        tap_ok(false, "%s exports " KVRT_PLUGIN_ENTRY_SYMBOL, path);
        return NULL;
    }
    return entry();
}

bool gpu_plugin_check_descriptor(const struct kvrt_plugin_descriptor *d, const char *name)
{
    bool all = true;
    all &= tap_ok(d != NULL, "entry returns a descriptor");
    if (!d)
        return false;
    all &= TAP_EQ_U64(d->size, sizeof(struct kvrt_plugin_descriptor), "descriptor size");
    all &= tap_ok(d->size >= KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE, "descriptor covers ABI 1.0");
    all &= TAP_EQ_U64(d->abi_major, KVRT_PLUGIN_ABI_MAJOR, "ABI major");
    all &= tap_ok(d->name && strcmp(d->name, name) == 0, "name is '%s' (got '%s')", name, d->name ? d->name : "(null)");
    all &= tap_ok(d->version && d->version[0], "version string set");
    all &= tap_ok(d->description && d->description[0], "description set");

    bool seen[KVRT_NUM_LAYOUTS] = {false};
    bool layouts_ok = d->layouts != NULL && d->num_layouts == KVRT_NUM_LAYOUTS;
    for (uint32_t i = 0; layouts_ok && i < d->num_layouts; i++) {
        int l = d->layouts[i];
        layouts_ok = l >= 0 && l < KVRT_NUM_LAYOUTS && !seen[l];
        if (layouts_ok)
            seen[l] = true;
    }
    all &= tap_ok(layouts_ok, "declares all six layouts once each");
    all &= tap_ok((d->flags & KVRT_PLUGIN_ANY_LAYOUT) == 0, "explicit layout list, not 'any'");

    const uint32_t want_types = (1u << KVRT_DTYPE_FP32) | (1u << KVRT_DTYPE_FP16) | (1u << KVRT_DTYPE_BF16);
    all &= tap_ok((d->dtypes & want_types) == want_types, "declares fp32, fp16 and bf16");
    all &= tap_ok((d->dtypes >> KVRT_NUM_DTYPES) == 0, "no unknown element types");
    all &= TAP_EQ_U64(d->ops, KVRT_OP_ALL, "declares every operation");

    all &= tap_ok(d->probe && d->bind && d->unbind && d->buffer_alloc && d->buffer_free && d->buffer_zero &&
                      d->buffer_upload && d->buffer_download,
                  "required functions present");
    all &= tap_ok(d->write && d->read && d->copy_blocks && d->gather && d->scatter && d->decode,
                  "one function per declared operation");
    return all;
}
