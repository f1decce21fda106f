/*
 * fuzz-model: config.json and kvrt model files through the model readers.
 *
 * Any input must give either a clean refusal (a documented status and a
 * non-empty one-line message) or a model whose every group places: the
 * parsed specs are fed to kvrt_placement_create under the first layout the
 * model allows, which must succeed or refuse cleanly too.
 */
#include <kvrt/kvrt.h>

#include "fuzz.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    struct kvrt_model_options opt;
    kvrt_model_options_default(&opt);
    if (size && (data[0] & 1)) {
        opt.dtype_given = true;
        opt.dtype = KVRT_DTYPE_FP8_E4M3;
    }
    struct kvrt_model *m = NULL;
    char err[1024];
    err[0] = '\0';
    int rc = kvrt_model_parse_buffer((const char *)data, size, "fuzz.json", &opt, &m, err, sizeof(err));
    if (rc != KVRT_OK) {
        FUZZ_CHECK(rc < 0 && rc >= KVRT_ERR_INTERNAL, "parse returned %d, not a documented status", rc);
        FUZZ_CHECK(err[0] != '\0', "parse failed with %d but left no message", rc);
        FUZZ_CHECK(strchr(err, '\n') == NULL, "message is not one line: %s", err);
        FUZZ_CHECK(m == NULL, "a failed parse returned a model");
        return 0;
    }
    FUZZ_CHECK(m != NULL && m->num_groups > 0, "a successful parse returned no groups");
    uint64_t layers = 0;
    struct kvrt_group groups[64];
    size_t n = m->num_groups < 64 ? m->num_groups : 64;
    for (size_t g = 0; g < m->num_groups; g++) {
        FUZZ_CHECK(m->groups[g].num_layers > 0, "group %zu has no layers", g);
        layers += m->groups[g].num_layers;
        if (g < n) {
            groups[g].layers = m->groups[g].layers;
            groups[g].num_layers = m->groups[g].num_layers;
        }
    }
    FUZZ_CHECK(layers == m->num_layers, "groups hold %llu layers, the model says %llu", (unsigned long long)layers,
               (unsigned long long)m->num_layers);
    if (layers <= 4096) {
        static const enum kvrt_layout order[] = {KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_LBNHC};
        for (size_t i = 0; i < 2; i++) {
            kvrt_placement *p = NULL;
            int st = kvrt_placement_create(order[i], groups, n, 4, 0, &p);
            if (st == KVRT_OK)
                FUZZ_CHECK(kvrt_placement_size(p) > 0, "a placed model has size 0");
            else
                fuzz_check_error(st, "kvrt_placement_create");
            kvrt_placement_destroy(p);
        }
    }
    kvrt_model_free(m);
    return 0;
}
