/*
 * Element types.  One table holds size and name so that the two can never
 * disagree; the enum value indexes it.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/dtype.h>

#include "error.h"

struct dtype_entry {
    const char *name;
    size_t size;
};

/* clang-format off */
static const struct dtype_entry dtypes[KVRT_NUM_DTYPES] = {
    [KVRT_DTYPE_FP32] = {"fp32", 4},
    [KVRT_DTYPE_FP16] = {"fp16", 2},
    [KVRT_DTYPE_BF16] = {"bf16", 2},
    [KVRT_DTYPE_FP8_E4M3] = {"fp8_e4m3", 1},
    [KVRT_DTYPE_FP8_E5M2] = {"fp8_e5m2", 1},
    [KVRT_DTYPE_INT8] = {"int8", 1},
    [KVRT_DTYPE_UINT8] = {"uint8", 1},
};
/* clang-format on */

/* The long spellings torch users type ("torch.float16" minus the module). */
static const struct {
    const char *name;
    enum kvrt_dtype dtype;
} aliases[] = {
    {"float32", KVRT_DTYPE_FP32},
    {"float16", KVRT_DTYPE_FP16},
    {"bfloat16", KVRT_DTYPE_BF16},
};

/* Every spelling, written once from the tables above. */
static char valid_names[160];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void write_names(void)
{
    size_t n = 0;
    for (int i = 0; i < KVRT_NUM_DTYPES; i++)
        n += (size_t)snprintf(valid_names + n, sizeof(valid_names) - n, "%s%s", i ? ", " : "", dtypes[i].name);
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        n += (size_t)snprintf(valid_names + n, sizeof(valid_names) - n, ", %s", aliases[i].name);
}

const char *kvrt_dtype_valid_names(void)
{
    pthread_once(&names_once, write_names);
    return valid_names;
}

static int dtype_valid(enum kvrt_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < KVRT_NUM_DTYPES;
}

size_t kvrt_dtype_size(enum kvrt_dtype dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].size : 0;
}

const char *kvrt_dtype_name(enum kvrt_dtype dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].name : NULL;
}

int kvrt_dtype_parse(const char *name, enum kvrt_dtype *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_dtype_parse: out is NULL");
    if (!name)
        return kvrt_fail(KVRT_ERR_INVALID, "dtype name is NULL; valid names are %s", kvrt_dtype_valid_names());
    for (int i = 0; i < KVRT_NUM_DTYPES; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (enum kvrt_dtype)i;
            return KVRT_OK;
        }
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(name, aliases[i].name) == 0) {
            *out = aliases[i].dtype;
            return KVRT_OK;
        }
    }
    /* Names come from config files and the command line: quoting escapes
     * control bytes (a newline or a terminal escape would otherwise end up
     * raw in the message) and bounds the length, as for layout names. */
    char quoted[128];
    kvrt_quote(quoted, sizeof(quoted), name);
    return kvrt_fail(KVRT_ERR_INVALID, "unknown dtype \"%s\"; valid names (exact, case-sensitive) are %s", quoted,
                     kvrt_dtype_valid_names());
}
