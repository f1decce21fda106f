/* Pipeline parallelism: the layers a stage holds, as vLLM's get_pp_indices
 * splits them (kvrt/parallel.h, docs/parallel.md).
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/parallel.h>
#include <kvrt/settings.h>

#include "checked.h"
#include "error.h"
#include "layout_internal.h"

int kvrt_pp_partition_env(const char **value, const char **source)
{
    if (!value)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_pp_partition_env: value is NULL");
    /* The one read of the variable: kvrt_pp_layers and every binding come
     * through here, so the value and where it came from cannot disagree. */
    enum kvrt_setting_source from;
    int rc = kvrt_setting_get(KVRT_SETTING_PP_PARTITION, NULL, value, &from);
    if (rc == KVRT_OK && source)
        *source = kvrt_setting_source_name(from);
    return rc;
}

/* vLLM's even split: the extra layers go one each to the stages just
 * before the last, counting back from it. */
static void even_split(uint64_t num_layers, uint64_t pp_size, uint64_t rank, uint64_t *start, uint64_t *count)
{
    uint64_t per = num_layers / pp_size, extra = num_layers % pp_size;
    uint64_t first_extra = pp_size - 1 - extra; /* the stages [first_extra, pp_size - 1) get one more */
    uint64_t before = rank <= first_extra ? 0 : rank - first_extra;
    *start = rank * per + (before < extra ? before : extra);
    *count = per + (rank >= first_extra && rank < pp_size - 1 ? 1 : 0);
}

/* "4,4" as an example of a partition that would do, when it is short
 * enough to read; "" otherwise. */
static void example(uint64_t num_layers, uint64_t pp_size, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    if (pp_size > 16)
        return;
    n += (size_t)snprintf(buf + n, size - n, " (vLLM's even split is \"");
    for (uint64_t r = 0; r < pp_size && n < size; r++) {
        uint64_t s, c;
        even_split(num_layers, pp_size, r, &s, &c);
        n += (size_t)snprintf(buf + n, size - n, "%s%llu", r ? "," : "", ULL(c));
    }
    if (n < size)
        snprintf(buf + n, size - n, "\")");
}

static int check_stages(uint64_t num_layers, uint64_t pp_size, uint64_t rank)
{
    if (pp_size == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "pipeline-parallel size 0: it must be at least 1");
    if (rank >= pp_size)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "rank %llu is out of range for pipeline-parallel size %llu: ranks are 0 to %llu", ULL(rank),
                         ULL(pp_size), ULL(pp_size - 1));
    if (num_layers == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "0 layers: a model has at least 1");
    if (num_layers < pp_size)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%llu layers cannot fill pipeline-parallel size %llu: every stage holds at least one layer, "
                         "so the size can be at most %llu",
                         ULL(num_layers), ULL(pp_size), ULL(num_layers));
    return KVRT_OK;
}

/* What a message calls the partition, and what it tells the user to do. */
struct partition_text {
    char name[320];
    char remedy[256];
};

static void describe(const char *partition, bool from_env, uint64_t num_layers, uint64_t pp_size,
                     struct partition_text *t)
{
    char quoted[256], split[128];
    kvrt_quote(quoted, sizeof(quoted), partition);
    example(num_layers, pp_size, split, sizeof(split));
    if (from_env)
        snprintf(t->name, sizeof(t->name), "%s=\"%s\" (from the environment)", KVRT_PP_PARTITION_ENV, quoted);
    else
        snprintf(t->name, sizeof(t->name), "layer partition \"%s\"", quoted);
    snprintf(t->remedy, sizeof(t->remedy),
             "give %llu comma-separated layer counts, each at least 1, adding up to %llu%s%s", ULL(pp_size),
             ULL(num_layers), split, from_env ? ", or unset it" : "");
}

/* One entry, [p, end): decimal digits, spaces around them allowed. */
static int parse_entry(const char *p, const char *end, size_t index, const struct partition_text *t, uint64_t *out)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    char entry[48];
    size_t len = (size_t)(end - p);
    memcpy(entry, p, len < sizeof(entry) - 1 ? len : sizeof(entry) - 1);
    entry[len < sizeof(entry) - 1 ? len : sizeof(entry) - 1] = '\0';
    char quoted[96];
    kvrt_quote(quoted, sizeof(quoted), entry);
    uint64_t v = 0;
    if (p == end)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: entry %zu is empty; %s", t->name, index, t->remedy);
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return kvrt_fail(KVRT_ERR_INVALID, "%s: entry %zu \"%s\" is not a number of layers; %s", t->name, index,
                             quoted, t->remedy);
        if (kvrt_mul_overflow(v, 10, &v) || kvrt_add_overflow(v, (uint64_t)(*p - '0'), &v))
            return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: entry %zu \"%s\" does not fit in 64 bits; %s", t->name, index,
                             quoted, t->remedy);
    }
    if (v == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: entry %zu is 0, and every stage holds at least one layer; %s", t->name,
                         index, t->remedy);
    *out = v;
    return KVRT_OK;
}

static int from_partition(uint64_t num_layers, uint64_t pp_size, uint64_t rank, const char *partition, bool from_env,
                          uint64_t *start, uint64_t *count)
{
    struct partition_text t;
    describe(partition, from_env, num_layers, pp_size, &t);
    uint64_t sum = 0, before = 0, mine = 0;
    size_t entries = 0;
    for (const char *p = partition;; p++) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        uint64_t v = 0;
        int rc = parse_entry(p, end, entries + 1, &t, &v);
        if (rc != KVRT_OK)
            return rc;
        if (kvrt_add_overflow(sum, v, &sum))
            return kvrt_fail(KVRT_ERR_OVERFLOW, "%s adds up to more than 64 bits hold; %s", t.name, t.remedy);
        if (entries == rank)
            mine = v;
        else if (entries < rank)
            before += v;
        entries++;
        if (!comma)
            break;
        p = comma;
    }
    if (entries != pp_size)
        return kvrt_fail(KVRT_ERR_INVALID, "%s has %zu entr%s, but the pipeline-parallel size is %llu; %s", t.name,
                         entries, entries == 1 ? "y" : "ies", ULL(pp_size), t.remedy);
    if (sum != num_layers)
        return kvrt_fail(KVRT_ERR_INVALID, "%s adds up to %llu layers, but the model has %llu; %s", t.name, ULL(sum),
                         ULL(num_layers), t.remedy);
    *start = before;
    *count = mine;
    return KVRT_OK;
}

static int pp_layers(const char *fn, uint64_t num_layers, uint64_t pp_size, uint64_t rank, const char *partition,
                     bool from_env, uint64_t *start, uint64_t *count)
{
    if (!start || !count)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: start and count must not be NULL", fn);
    int rc = check_stages(num_layers, pp_size, rank);
    if (rc == KVRT_OK && partition)
        rc = from_partition(num_layers, pp_size, rank, partition, from_env, start, count);
    else if (rc == KVRT_OK)
        even_split(num_layers, pp_size, rank, start, count);
    if (rc == KVRT_OK)
        kvrt_clear_error();
    return rc;
}

int kvrt_pp_layers_partition(uint64_t num_layers, uint64_t pp_size, uint64_t rank, const char *partition,
                             uint64_t *start, uint64_t *count)
{
    return pp_layers("kvrt_pp_layers_partition", num_layers, pp_size, rank, partition, false, start, count);
}

int kvrt_pp_layers(uint64_t num_layers, uint64_t pp_size, uint64_t rank, uint64_t *start, uint64_t *count)
{
    const char *value = NULL;
    kvrt_pp_partition_env(&value, NULL);
    return pp_layers("kvrt_pp_layers", num_layers, pp_size, rank, value, true, start, count);
}
