/*
 * fuzz-model: config.json and kvrt model files through libkvrt's model
 * readers (kvrt/model.h), the JSON of the model and of its plan included.
 *
 * Any input must give either a clean refusal (a documented status and a
 * non-empty one-line message) or a model whose every group places: the
 * parsed specs are fed to kvrt_placement_create under the first layout the
 * model allows, which must succeed or refuse cleanly too.
 */
#include <kvrt/kvrt.h>

#include "fuzz.h"

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
    /* The last byte picks an attention backend and a block size, so the
     * backend rules see every combination the corpus' models allow. */
    if (size > 1) {
        static const uint64_t blocks[] = {0, 0, 8, 16, 24, 64, 128, 4096};
        const uint8_t last = data[size - 1];
        opt.attention_backend = (enum kvrt_attention_backend)((last >> 3) % KVRT_NUM_ATTENTION_BACKENDS);
        opt.block_size = blocks[last & 7];
    }
    kvrt_model *model = NULL;
    int rc = kvrt_model_parse((const char *)data, size, "fuzz.json", &opt, &model);
    if (rc != KVRT_OK) {
        const char *err = kvrt_error_message();
        FUZZ_CHECK(rc < 0 && rc >= KVRT_ERR_INTERNAL, "parse returned %d, not a documented status", rc);
        FUZZ_CHECK(err[0] != '\0', "parse failed with %d but left no message", rc);
        FUZZ_CHECK(strchr(err, '\n') == NULL, "message is not one line: %s", err);
        FUZZ_CHECK(model == NULL, "a failed parse returned a model");
        return 0;
    }
    const struct kvrt_model_info *m = kvrt_model_get_info(model);
    FUZZ_CHECK(m != NULL && m->num_groups > 0, "a successful parse returned no groups");
    uint64_t layers = 0;
    for (size_t g = 0; g < m->num_groups; g++) {
        FUZZ_CHECK(m->groups[g].num_layers > 0, "group %zu has no layers", g);
        FUZZ_CHECK(m->placement_groups[g].layers == m->groups[g].layers &&
                       m->placement_groups[g].num_layers == m->groups[g].num_layers,
                   "placement group %zu is not group %zu", g, g);
        layers += m->groups[g].num_layers;
    }
    FUZZ_CHECK(layers == m->num_layers, "groups hold %llu layers, the model says %llu", (unsigned long long)layers,
               (unsigned long long)m->num_layers);
    if (layers <= 4096) {
        static const enum kvrt_layout order[] = {KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_LBNHC};
        for (size_t i = 0; i < 2; i++) {
            kvrt_placement *p = NULL;
            int st = kvrt_placement_create(order[i], m->placement_groups, m->num_groups, 4, 0, &p);
            if (st == KVRT_OK)
                FUZZ_CHECK(kvrt_placement_size(p) > 0, "a placed model has size 0");
            else
                fuzz_check_error(st, "kvrt_placement_create");
            kvrt_placement_destroy(p);
            /* The plan's JSON places the same groups, with vLLM's figures
             * for a budget: it is built or refused cleanly. */
            struct kvrt_model_plan_request req;
            kvrt_model_plan_request_default(&req);
            req.layout = order[i];
            req.budget_bytes = (uint64_t)1 << 34;
            char *text = NULL;
            st = kvrt_model_plan_json(model, &req, &text);
            if (st == KVRT_OK)
                FUZZ_CHECK(text && text[0] == '{', "a plan's JSON is not an object");
            else
                fuzz_check_error(st, "kvrt_model_plan_json");
            kvrt_free(text);
        }
    }
    kvrt_model_destroy(model);
    return 0;
}
