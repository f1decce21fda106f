#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_vectors.h"
#include "tap.h"
#include "vectors_json.h"

json_t *cv_load(int argc, char **argv, const char *file)
{
    return vectors_load(vectors_dir_arg(argc, argv), file);
}

bool cv_u64(const json_t *obj, const char *key, uint64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = KVRT_UNSET;
        return true;
    }
    return vectors_u64(v, out);
}

/* The vectors give only an element size; any type of that size lays out the
 * same bytes. */
static bool dtype_of_size(uint64_t size, enum kvrt_dtype *out)
{
    switch (size) {
    case 1: *out = KVRT_DTYPE_FP8_E4M3; return true;
    case 2: *out = KVRT_DTYPE_FP16; return true;
    case 4: *out = KVRT_DTYPE_FP32; return true;
    default: return false;
    }
}

bool cv_spec(const json_t *obj, struct kvrt_spec *out, const char **why)
{
    struct kvrt_spec s;
    uint64_t dsize;
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const json_t *tps = json_object_get(obj, "tokens_per_state");

    kvrt_spec_default(&s);
    *why = "malformed spec";
    if (!kind)
        return false;
    if (strcmp(kind, "attention") == 0)
        s.kind = KVRT_SPEC_ATTENTION;
    else if (strcmp(kind, "mla") == 0)
        s.kind = KVRT_SPEC_MLA;
    else if (strcmp(kind, "state") == 0)
        s.kind = KVRT_SPEC_STATE;
    else
        return false;
    if (!cv_u64(obj, "dtype_size", &dsize))
        return false;
    if (dsize != KVRT_UNSET && !dtype_of_size(dsize, &s.dtype)) {
        *why = "dtype_size has no matching dtype";
        return false;
    }
    uint64_t heads = 0, hs = 0;
    if (!cv_u64(obj, "block_size", &s.block_size) || !cv_u64(obj, "num_head_slots", &s.num_head_slots) ||
        !cv_u64(obj, "state_content_bytes", &s.state_content_bytes) ||
        !cv_u64(obj, "page_size_padded", &s.page_size_padded))
        return false;
    /* Head fields are absent from state specs; kvrt_spec_default's 0 is
     * the "not used" value there. */
    if (!cv_u64(obj, "num_kv_heads", &heads) || !cv_u64(obj, "head_size", &hs) ||
        !cv_u64(obj, "head_size_v", &s.head_size_v))
        return false;
    s.num_kv_heads = heads == KVRT_UNSET ? 0 : heads;
    s.head_size = hs == KVRT_UNSET ? 0 : hs;
    if (json_is_array(tps)) {
        if (json_array_size(tps) != 2 || !json_is_integer(json_array_get(tps, 0)) ||
            !json_is_integer(json_array_get(tps, 1)))
            return false;
        s.tokens_per_state_num = (uint64_t)json_integer_value(json_array_get(tps, 0));
        s.tokens_per_state_den = (uint64_t)json_integer_value(json_array_get(tps, 1));
    }
    *out = s;
    *why = NULL;
    return true;
}

bool cv_mentions(const json_t *strings, const char *msg)
{
    size_t i;
    const json_t *s;
    bool ok = true;
    json_array_foreach(strings, i, s)
    {
        const char *want = json_string_value(s);
        if (want && !strstr(msg, want)) {
            tap_diag("  message lacks \"%s\": %s", want, msg);
            ok = false;
        }
    }
    return ok;
}

bool cv_eq_array(const json_t *want, const uint64_t *got, size_t n)
{
    char w[512] = "", g[512] = "";
    size_t wl = 0, gl = 0;
    bool ok = json_is_array(want) && json_array_size(want) == n;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(want, i);
        long long wv = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
        if (wv < 0 || (uint64_t)wv != got[i])
            ok = false;
        if (wl < sizeof(w))
            wl += (size_t)snprintf(w + wl, sizeof(w) - wl, " %lld", wv);
        if (gl < sizeof(g))
            gl += (size_t)snprintf(g + gl, sizeof(g) - gl, " %llu", (unsigned long long)got[i]);
    }
    if (!ok)
        tap_diag("  got [%s ], want [%s ]", g, w);
    return ok;
}
