/* Tensor parallelism: the KV heads a rank holds, and who sends which heads
 * to whom between two groups of different sizes (kvrt/parallel.h,
 * docs/parallel.md).
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/parallel.h>

#include "error.h"
#include "layout_internal.h"

static const char *const direction_names[] = {
    [KVRT_TP_PUSH] = "push",
    [KVRT_TP_PULL] = "pull",
};
#define NUM_DIRECTIONS (sizeof(direction_names) / sizeof(direction_names[0]))

const char *kvrt_tp_direction_name(enum kvrt_tp_direction direction)
{
    return (unsigned)direction < NUM_DIRECTIONS ? direction_names[direction] : NULL;
}

static char direction_list[64];
static pthread_once_t direction_once = PTHREAD_ONCE_INIT;

static void write_direction_list(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NUM_DIRECTIONS; i++)
        n +=
            (size_t)snprintf(direction_list + n, sizeof(direction_list) - n, "%s%s", i ? ", " : "", direction_names[i]);
}

const char *kvrt_tp_direction_valid_names(void)
{
    pthread_once(&direction_once, write_direction_list);
    return direction_list;
}

int kvrt_tp_direction_parse(const char *name, enum kvrt_tp_direction *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_tp_direction_parse: out is NULL");
    for (size_t i = 0; name && i < NUM_DIRECTIONS; i++) {
        if (strcmp(name, direction_names[i]) == 0) {
            *out = (enum kvrt_tp_direction)i;
            return KVRT_OK;
        }
    }
    char quoted[128] = "NULL";
    if (name)
        kvrt_quote(quoted, sizeof(quoted), name);
    return kvrt_fail(KVRT_ERR_INVALID,
                     "%s%s%s is not a transfer direction; valid directions (exact, case-sensitive) are %s",
                     name ? "\"" : "", quoted, name ? "\"" : "", kvrt_tp_direction_valid_names());
}

/* ---- the heads of one rank ------------------------------------------------ */

/* "1, 2, 4, 8": the divisors of heads up to the largest size kvrt maps,
 * for the message that refuses a size. */
static void list_divisors(uint64_t heads, char *buf, size_t size)
{
    size_t n = 0, shown = 0;
    buf[0] = '\0';
    for (uint64_t d = 1; d <= heads && d <= KVRT_TP_MAX_SIZE; d++) {
        if (heads % d)
            continue;
        if (shown == 12) {
            snprintf(buf + n, size - n, ", ...");
            return;
        }
        n += (size_t)snprintf(buf + n, size - n, "%s%llu", shown ? ", " : "", ULL(d));
        shown++;
    }
}

/* `side` is "" or "local " / "remote ", so that a map says which group is
 * wrong.  rank is checked only when check_rank. */
static int check_group(const char *side, uint64_t heads, uint64_t tp, uint64_t rank, bool check_rank)
{
    if (heads == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "0 KV heads: a layer has at least 1 (MLA and state layers have 1)");
    if (tp == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "%stensor-parallel size 0: it must be at least 1", side);
    if (tp > KVRT_TP_MAX_SIZE)
        return kvrt_fail(KVRT_ERR_INVALID, "%stensor-parallel size %llu is over %u, the largest kvrt maps", side,
                         ULL(tp), KVRT_TP_MAX_SIZE);
    if (check_rank && rank >= tp)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%srank %llu is out of range for tensor-parallel size %llu: ranks are 0 to %llu", side,
                         ULL(rank), ULL(tp), ULL(tp - 1));
    if (tp <= heads ? heads % tp == 0 : tp % heads == 0)
        return KVRT_OK;
    char divisors[160];
    list_divisors(heads, divisors, sizeof(divisors));
    char multiples[64] = "";
    if (heads <= KVRT_TP_MAX_SIZE / 2)
        snprintf(multiples, sizeof(multiples), " or a multiple of them (%llu, %llu, ...) to replicate each",
                 ULL(2 * heads), ULL(3 * heads));
    return kvrt_fail(KVRT_ERR_INVALID,
                     "%stensor-parallel size %llu cannot hold %llu KV heads: as in vLLM's QKVParallelLinear, "
                     "the size must divide the heads (%s) to split them%s",
                     side, ULL(tp), ULL(heads), divisors, multiples);
}

/* The rule itself, for a group check_group accepted. */
static struct kvrt_tp_heads heads_of(uint64_t heads, uint64_t tp, uint64_t rank)
{
    struct kvrt_tp_heads h;
    memset(&h, 0, sizeof(h));
    if (tp <= heads) {
        h.num_heads = heads / tp;
        h.head_start = rank * h.num_heads;
        h.replicas = 1;
    } else {
        h.replicas = tp / heads;
        h.head_start = rank / h.replicas;
        h.num_heads = 1;
        h.replica = rank % h.replicas;
    }
    return h;
}

int kvrt_tp_heads(uint64_t total_kv_heads, uint64_t tp_size, uint64_t rank, struct kvrt_tp_heads *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_tp_heads: out is NULL");
    int rc = check_group("", total_kv_heads, tp_size, rank, true);
    if (rc != KVRT_OK)
        return rc;
    *out = heads_of(total_kv_heads, tp_size, rank);
    kvrt_clear_error();
    return KVRT_OK;
}

/* ---- the destination rule --------------------------------------------------- */

/* Where destination rank `dst` reads the model's head `head` from, in a
 * source group of src_tp: the source rank, the head's index in that rank's
 * cache, and one past the last head that rank holds from `head` on (a run
 * ends there).  A replicated head is read from replica (dst + spread) mod
 * replicas, so that the destination ranks holding one head spread over its
 * replicas, and the caller's key spreads sequences further. */
struct source {
    uint64_t rank, index, run_end;
};

static struct source source_of(uint64_t heads, uint64_t src_tp, uint64_t dst, uint64_t spread, uint64_t head)
{
    struct source s;
    if (src_tp <= heads) {
        uint64_t per = heads / src_tp;
        s.rank = head / per;
        s.index = head % per;
        s.run_end = (s.rank + 1) * per;
    } else {
        uint64_t replicas = src_tp / heads;
        s.rank = head * replicas + (dst % replicas + spread % replicas) % replicas;
        s.index = 0;
        s.run_end = head + 1;
    }
    return s;
}

/* Entries are counted always and written while they fit. */
struct sink {
    struct kvrt_tp_entry *at;
    size_t capacity, count;
};

static void emit(struct sink *k, uint64_t remote_rank, uint64_t local_start, uint64_t remote_start, uint64_t n)
{
    if (k->at && k->count < k->capacity) {
        struct kvrt_tp_entry *e = &k->at[k->count];
        memset(e, 0, sizeof(*e));
        e->remote_rank = remote_rank;
        e->local_head_start = local_start;
        e->remote_head_start = remote_start;
        e->num_heads = n;
    }
    k->count++;
}

/* The destination rule walked over heads [from, to) of destination rank dst,
 * whose heads start at dst_start: one run per source rank, in head order.
 * only_source < src_tp keeps the runs read from that source rank alone,
 * written the other way round (the source view). */
static void walk(uint64_t heads, uint64_t src_tp, uint64_t dst, uint64_t dst_start, uint64_t from, uint64_t to,
                 uint64_t spread, uint64_t only_source, struct sink *k)
{
    for (uint64_t h = from; h < to;) {
        struct source s = source_of(heads, src_tp, dst, spread, h);
        uint64_t n = (s.run_end < to ? s.run_end : to) - h;
        if (only_source >= src_tp)
            emit(k, s.rank, h - dst_start, s.index, n);
        else if (s.rank == only_source)
            emit(k, dst, s.index, h - dst_start, n);
        h += n;
    }
}

static void pull_view(uint64_t heads, uint64_t local_tp, uint64_t local_rank, uint64_t remote_tp, uint64_t spread,
                      struct sink *k)
{
    struct kvrt_tp_heads mine = heads_of(heads, local_tp, local_rank);
    walk(heads, remote_tp, local_rank, mine.head_start, mine.head_start, mine.head_start + mine.num_heads, spread,
         UINT64_MAX, k);
}

/* Every remote rank that holds one of this rank's heads, in rank order,
 * walked with the destination rule as it would walk itself (this group
 * being its source), keeping what it reads from here. */
static void push_view(uint64_t heads, uint64_t local_tp, uint64_t local_rank, uint64_t remote_tp, uint64_t spread,
                      struct sink *k)
{
    struct kvrt_tp_heads mine = heads_of(heads, local_tp, local_rank);
    uint64_t first = mine.head_start, end = mine.head_start + mine.num_heads;
    uint64_t lo, hi; /* remote ranks [lo, hi] */
    if (remote_tp <= heads) {
        uint64_t per = heads / remote_tp;
        lo = first / per;
        hi = (end - 1) / per;
    } else {
        uint64_t replicas = remote_tp / heads;
        lo = first * replicas;
        hi = end * replicas - 1;
    }
    for (uint64_t d = lo; d <= hi; d++) {
        struct kvrt_tp_heads theirs = heads_of(heads, remote_tp, d);
        uint64_t from = theirs.head_start > first ? theirs.head_start : first;
        uint64_t to = theirs.head_start + theirs.num_heads < end ? theirs.head_start + theirs.num_heads : end;
        walk(heads, local_tp, d, theirs.head_start, from, to, spread, local_rank, k);
    }
}

int kvrt_tp_map(uint64_t kv_heads, uint64_t local_tp, uint64_t local_rank, uint64_t remote_tp, uint64_t spread,
                enum kvrt_tp_direction direction, struct kvrt_tp_entry *entries, size_t capacity, size_t *count)
{
    if (!count)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_tp_map: count is NULL");
    if (!entries && capacity)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kvrt_tp_map: entries is NULL with capacity %zu; pass an array of that many entries, or "
                         "capacity 0 to learn the count",
                         capacity);
    if (!kvrt_tp_direction_name(direction))
        return kvrt_fail(
            KVRT_ERR_INVALID, "kvrt_tp_map: direction %d is not valid; valid directions are %d (%s) and %d (%s)",
            (int)direction, KVRT_TP_PUSH, direction_names[KVRT_TP_PUSH], KVRT_TP_PULL, direction_names[KVRT_TP_PULL]);
    int rc = check_group("local ", kv_heads, local_tp, local_rank, true);
    if (rc == KVRT_OK)
        rc = check_group("remote ", kv_heads, remote_tp, 0, false);
    if (rc != KVRT_OK)
        return rc;

    void (*view)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, struct sink *) =
        direction == KVRT_TP_PULL ? pull_view : push_view;
    struct sink k = {NULL, 0, 0};
    view(kv_heads, local_tp, local_rank, remote_tp, spread, &k);
    *count = k.count;
    if (entries && k.count > capacity)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kvrt_tp_map: %zu entries needed (%s view of %llu KV heads, local rank %llu of %llu, remote "
                         "tensor-parallel size %llu), but capacity is %zu; *count holds the number needed",
                         k.count, direction == KVRT_TP_PULL ? "destination" : "source", ULL(kv_heads), ULL(local_rank),
                         ULL(local_tp), ULL(remote_tp), capacity);
    if (entries) {
        k = (struct sink){entries, capacity, 0};
        view(kv_heads, local_tp, local_rank, remote_tp, spread, &k);
    }
    kvrt_clear_error();
    return KVRT_OK;
}
