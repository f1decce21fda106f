/*
 * The tensor-parallel rules (kvrt_tp_heads, kvrt_tp_map): vLLM's examples
 * written out by hand, then every group pair of 1..16 heads and sizes
 * 1..16 -- each head of each rank read exactly once from a rank that holds
 * it, the source views of one group adding up to the destination views of
 * the other, replicas spread -- and every refusal's message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/parallel.h>

#include "tap.h"

#define MAX_ENTRIES 4096

static bool has(const char *needle)
{
    return strstr(kvrt_error_message(), needle) != NULL;
}

static bool heads_are(uint64_t heads, uint64_t tp, uint64_t rank, uint64_t start, uint64_t n, uint64_t replicas,
                      uint64_t replica)
{
    struct kvrt_tp_heads h;
    memset(&h, 0xff, sizeof(h));
    if (kvrt_tp_heads(heads, tp, rank, &h) != KVRT_OK)
        return false;
    for (size_t i = 0; i < sizeof(h.reserved); i++)
        if (h.reserved[i])
            return false;
    return h.head_start == start && h.num_heads == n && h.replicas == replicas && h.replica == replica;
}

/* vLLM's QKVParallelLinear, by hand. */
static void check_heads_examples(void)
{
    bool ok = true;
    for (uint64_t r = 0; r < 2; r++)
        ok = ok && heads_are(8, 2, r, 4 * r, 4, 1, 0);
    tap_ok(ok, "8 heads, tp 2: rank r holds heads 4r..4r+3, not replicated");
    ok = true;
    for (uint64_t r = 0; r < 8; r++)
        ok = ok && heads_are(8, 8, r, r, 1, 1, 0);
    tap_ok(ok, "8 heads, tp 8: rank r holds head r");
    ok = true;
    for (uint64_t r = 0; r < 16; r++)
        ok = ok && heads_are(8, 16, r, r / 2, 1, 2, r % 2);
    tap_ok(ok, "8 heads, tp 16: rank r holds head r/2, 2 replicas, replica r%%2");
    tap_ok(heads_are(2, 4, 0, 0, 1, 2, 0) && heads_are(2, 4, 1, 0, 1, 2, 1) && heads_are(2, 4, 2, 1, 1, 2, 0) &&
               heads_are(2, 4, 3, 1, 1, 2, 1),
           "2 heads, tp 4: ranks 0 and 1 hold head 0, ranks 2 and 3 head 1");
    ok = true;
    for (uint64_t r = 0; r < 4; r++)
        ok = ok && heads_are(1, 4, r, 0, 1, 4, r);
    tap_ok(ok, "MLA (1 head), tp 4: every rank holds the latent head, 4 replicas");
    tap_ok(heads_are(48, 1, 0, 0, 48, 1, 0), "48 heads, tp 1: all of them");
}

struct want {
    uint64_t remote_rank, local_start, remote_start, n;
};

static bool map_is(uint64_t heads, uint64_t local_tp, uint64_t rank, uint64_t remote_tp, uint64_t spread,
                   enum kvrt_tp_direction dir, const struct want *want, size_t n_want)
{
    struct kvrt_tp_entry e[64];
    size_t n = 0;
    if (kvrt_tp_map(heads, local_tp, rank, remote_tp, spread, dir, e, 64, &n) != KVRT_OK) {
        tap_diag("  refused: %s", kvrt_error_message());
        return false;
    }
    bool same = n == n_want;
    for (size_t i = 0; same && i < n; i++)
        same = e[i].remote_rank == want[i].remote_rank && e[i].local_head_start == want[i].local_start &&
               e[i].remote_head_start == want[i].remote_start && e[i].num_heads == want[i].n;
    if (!same)
        for (size_t i = 0; i < n; i++)
            tap_diag("  got {%llu, %llu, %llu, %llu}", (unsigned long long)e[i].remote_rank,
                     (unsigned long long)e[i].local_head_start, (unsigned long long)e[i].remote_head_start,
                     (unsigned long long)e[i].num_heads);
    return same;
}

#define MAP_IS(heads, ltp, rank, rtp, spread, dir, ...)                                                                \
    map_is(heads, ltp, rank, rtp, spread, dir, (const struct want[]){__VA_ARGS__},                                     \
           sizeof((const struct want[]){__VA_ARGS__}) / sizeof(struct want))

static void check_map_examples(void)
{
    tap_ok(MAP_IS(8, 1, 0, 1, 0, KVRT_TP_PULL, {0, 0, 0, 8}), "tp 1 from tp 1: one entry of all 8 heads");
    tap_ok(MAP_IS(8, 2, 1, 8, 0, KVRT_TP_PULL, {4, 0, 0, 1}, {5, 1, 0, 1}, {6, 2, 0, 1}, {7, 3, 0, 1}),
           "8 heads, rank 1 of tp 2 pulls from tp 8: one head from each of ranks 4..7");
    tap_ok(MAP_IS(8, 8, 3, 2, 0, KVRT_TP_PULL, {0, 0, 3, 1}),
           "8 heads, rank 3 of tp 8 pulls from tp 2: head 3 of rank 0's four");
    tap_ok(MAP_IS(16, 2, 1, 4, 0, KVRT_TP_PULL, {2, 0, 0, 4}, {3, 4, 0, 4}),
           "16 heads, rank 1 of tp 2 pulls from tp 4: four contiguous heads each from ranks 2 and 3");
    tap_ok(MAP_IS(8, 2, 0, 8, 0, KVRT_TP_PUSH, {0, 0, 0, 1}, {1, 1, 0, 1}, {2, 2, 0, 1}, {3, 3, 0, 1}),
           "8 heads, rank 0 of tp 2 pushes to tp 8: its head i to rank i");
    tap_ok(MAP_IS(8, 8, 5, 2, 0, KVRT_TP_PUSH, {1, 0, 1, 1}),
           "8 heads, rank 5 of prefill tp 8 pushes to decode tp 2: into head 1 of rank 1");
    tap_ok(MAP_IS(2, 1, 0, 4, 0, KVRT_TP_PUSH, {0, 0, 0, 1}, {1, 0, 0, 1}, {2, 1, 0, 1}, {3, 1, 0, 1}),
           "2 heads, tp 1 pushes to tp 4: head 0 to ranks 0 and 1, head 1 to ranks 2 and 3");
    tap_ok(MAP_IS(2, 4, 2, 1, 0, KVRT_TP_PULL, {0, 0, 1, 1}), "2 heads, rank 2 of tp 4 pulls head 1 from tp 1");
    tap_ok(MAP_IS(2, 1, 0, 4, 0, KVRT_TP_PULL, {0, 0, 0, 1}, {2, 1, 0, 1}) &&
               MAP_IS(2, 1, 0, 4, 1, KVRT_TP_PULL, {1, 0, 0, 1}, {3, 1, 0, 1}),
           "2 heads, tp 1 pulls from tp 4: spread 0 reads the first replicas, spread 1 the second");
    bool ok = true;
    for (uint64_t s = 0; s < 8; s++)
        ok = ok && MAP_IS(1, 1, 0, 4, s, KVRT_TP_PULL, {s % 4, 0, 0, 1});
    tap_ok(ok, "MLA, tp 1 pulls from tp 4: sequence s reads from rank s %% 4");
    ok = true;
    for (uint64_t r = 0; r < 4; r++)
        ok = ok && MAP_IS(1, 4, r, 4, 0, KVRT_TP_PULL, {r, 0, 0, 1}) &&
             MAP_IS(1, 4, r, 4, 0, KVRT_TP_PUSH, {r, 0, 0, 1});
    tap_ok(ok, "MLA, tp 4 with tp 4: rank r with rank r, both views");
    size_t others = 0, n = 0;
    for (uint64_t r = 1; r < 4; r++)
        others += kvrt_tp_map(1, 4, r, 1, 0, KVRT_TP_PUSH, NULL, 0, &n) == KVRT_OK ? n : 99;
    tap_ok(MAP_IS(1, 4, 0, 1, 0, KVRT_TP_PUSH, {0, 0, 0, 1}) && others == 0,
           "MLA, tp 4 pushes to tp 1 with spread 0: only rank 0 sends");
    tap_ok(MAP_IS(1, 4, 3, 1, 3, KVRT_TP_PUSH, {0, 0, 0, 1}), "MLA, tp 4 pushes to tp 1 with spread 3: rank 3 sends");
}

/* ---- every pair of small groups ------------------------------------------ */

static bool group_valid(uint64_t heads, uint64_t tp)
{
    return tp <= heads ? heads % tp == 0 : tp % heads == 0;
}

/* A run as a transfer sees it: destination rank and index, source rank and
 * index, length. */
struct run {
    uint64_t dst, dst_index, src, src_index, n;
};

static int cmp_run(const void *a, const void *b)
{
    const struct run *x = a, *y = b;
    const uint64_t kx[] = {x->dst, x->src, x->dst_index, x->src_index, x->n};
    const uint64_t ky[] = {y->dst, y->src, y->dst_index, y->src_index, y->n};
    for (size_t i = 0; i < 5; i++)
        if (kx[i] != ky[i])
            return kx[i] < ky[i] ? -1 : 1;
    return 0;
}

static struct run pulls[MAX_ENTRIES], pushes[MAX_ENTRIES];
static struct kvrt_tp_entry buf[MAX_ENTRIES];

/* Destination group (dst_tp) pulls from the source group (src_tp): every
 * head of every destination rank is covered once, from a rank that holds
 * it; the runs are in order and merged.  Then the source group's push views
 * hold exactly the same runs.  Returns a description of the first problem,
 * or NULL. */
static const char *check_pair(uint64_t heads, uint64_t dst_tp, uint64_t src_tp, uint64_t spread, char *why, size_t size)
{
    size_t np = 0, ns = 0;
    for (uint64_t d = 0; d < dst_tp; d++) {
        struct kvrt_tp_heads mine, theirs;
        size_t n = 0;
        if (kvrt_tp_heads(heads, dst_tp, d, &mine) != KVRT_OK ||
            kvrt_tp_map(heads, dst_tp, d, src_tp, spread, KVRT_TP_PULL, buf, MAX_ENTRIES, &n) != KVRT_OK)
            return snprintf(why, size, "rank %llu refused: %s", (unsigned long long)d, kvrt_error_message()), why;
        uint64_t next = 0; /* covered in order, exactly once */
        for (size_t i = 0; i < n; i++) {
            const struct kvrt_tp_entry *e = &buf[i];
            if (e->local_head_start != next || e->num_heads == 0)
                return snprintf(why, size, "rank %llu entry %zu starts at %llu, expected %llu", (unsigned long long)d,
                                i, (unsigned long long)e->local_head_start, (unsigned long long)next),
                       why;
            if (e->remote_rank >= src_tp || kvrt_tp_heads(heads, src_tp, e->remote_rank, &theirs) != KVRT_OK ||
                e->remote_head_start + e->num_heads > theirs.num_heads ||
                theirs.head_start + e->remote_head_start != mine.head_start + e->local_head_start)
                return snprintf(why, size, "rank %llu entry %zu reads heads the remote rank %llu does not hold",
                                (unsigned long long)d, i, (unsigned long long)e->remote_rank),
                       why;
            if (i > 0 && buf[i - 1].remote_rank == e->remote_rank &&
                buf[i - 1].remote_head_start + buf[i - 1].num_heads == e->remote_head_start)
                return snprintf(why, size, "rank %llu entries %zu and %zu are not merged", (unsigned long long)d, i - 1,
                                i),
                       why;
            next += e->num_heads;
            pulls[np++] = (struct run){d, e->local_head_start, e->remote_rank, e->remote_head_start, e->num_heads};
        }
        if (next != mine.num_heads)
            return snprintf(why, size, "rank %llu covers %llu of its %llu heads", (unsigned long long)d,
                            (unsigned long long)next, (unsigned long long)mine.num_heads),
                   why;
    }
    for (uint64_t s = 0; s < src_tp; s++) {
        size_t n = 0;
        if (kvrt_tp_map(heads, src_tp, s, dst_tp, spread, KVRT_TP_PUSH, buf, MAX_ENTRIES, &n) != KVRT_OK)
            return snprintf(why, size, "source rank %llu refused: %s", (unsigned long long)s, kvrt_error_message()),
                   why;
        for (size_t i = 0; i < n; i++) {
            if (i > 0 && (buf[i].remote_rank < buf[i - 1].remote_rank ||
                          (buf[i].remote_rank == buf[i - 1].remote_rank &&
                           buf[i].remote_head_start < buf[i - 1].remote_head_start)))
                return snprintf(why, size, "source rank %llu entries out of order", (unsigned long long)s), why;
            pushes[ns++] = (struct run){buf[i].remote_rank, buf[i].remote_head_start, s, buf[i].local_head_start,
                                        buf[i].num_heads};
        }
    }
    qsort(pulls, np, sizeof(pulls[0]), cmp_run);
    qsort(pushes, ns, sizeof(pushes[0]), cmp_run);
    if (np != ns || memcmp(pulls, pushes, np * sizeof(pulls[0])) != 0)
        return snprintf(why, size, "%zu pulled runs, %zu pushed, and they differ", np, ns), why;
    return NULL;
}

static void check_exhaustive(void)
{
    size_t pairs = 0, refused_ok = 0, refused_bad = 0;
    char why[512];
    const char *first = NULL;
    char where[128] = "";
    for (uint64_t heads = 1; heads <= 16; heads++)
        for (uint64_t a = 1; a <= 16; a++)
            for (uint64_t b = 1; b <= 16; b++) {
                if (!group_valid(heads, a) || !group_valid(heads, b)) {
                    /* The invalid side is named, and nothing else is said. */
                    size_t n = 7;
                    int rc = kvrt_tp_map(heads, a, 0, b, 0, KVRT_TP_PULL, buf, MAX_ENTRIES, &n);
                    char side[64];
                    snprintf(side, sizeof(side), "%s tensor-parallel size %llu cannot hold %llu KV heads",
                             group_valid(heads, a) ? "remote" : "local",
                             (unsigned long long)(group_valid(heads, a) ? b : a), (unsigned long long)heads);
                    if (rc == KVRT_ERR_INVALID && has(side))
                        refused_ok++;
                    else
                        refused_bad++;
                    continue;
                }
                for (uint64_t spread = 0; spread < 3; spread++) {
                    const char *bad = check_pair(heads, a, b, spread, why, sizeof(why));
                    pairs++;
                    if (bad && !first) {
                        first = bad;
                        snprintf(where, sizeof(where), "heads %llu, destination tp %llu, source tp %llu, spread %llu",
                                 (unsigned long long)heads, (unsigned long long)a, (unsigned long long)b,
                                 (unsigned long long)spread);
                    }
                }
            }
    if (!tap_ok(first == NULL, "%zu group pairs and spreads: every head once, from a holder; pushes == pulls", pairs))
        tap_diag("  %s: %s", where, first);
    tap_ok(refused_bad == 0 && refused_ok > 0, "%zu invalid pairs refused naming the side and the size (%zu not)",
           refused_ok, refused_bad);
}

/* Where a head is replicated, the destination ranks that hold it and the
 * spread keys between them reach every replica. */
static void check_spread(void)
{
    size_t cases = 0, bad = 0;
    for (uint64_t heads = 1; heads <= 8; heads++)
        for (uint64_t dst_tp = 1; dst_tp <= 16; dst_tp++)
            for (uint64_t src_tp = heads + 1; src_tp <= 16; src_tp++) {
                if (!group_valid(heads, dst_tp) || !group_valid(heads, src_tp))
                    continue;
                uint64_t replicas = src_tp / heads;
                for (uint64_t d = 0; d < dst_tp; d++) {
                    /* one destination rank, spread keys 0..replicas-1 */
                    uint64_t seen = 0;
                    for (uint64_t s = 0; s < replicas; s++) {
                        struct kvrt_tp_entry e[16];
                        size_t n = 0;
                        if (kvrt_tp_map(heads, dst_tp, d, src_tp, s, KVRT_TP_PULL, e, 16, &n) == KVRT_OK && n >= 1)
                            seen |= 1ull << (e[0].remote_rank % replicas);
                    }
                    cases++;
                    if (seen != (replicas == 64 ? ~0ull : (1ull << replicas) - 1))
                        bad++;
                }
                if (dst_tp > heads) { /* one spread key, the ranks that hold head 0 */
                    uint64_t seen = 0, holders = dst_tp / heads;
                    for (uint64_t d = 0; d < holders; d++) {
                        struct kvrt_tp_entry e[1];
                        size_t n = 0;
                        if (kvrt_tp_map(heads, dst_tp, d, src_tp, 0, KVRT_TP_PULL, e, 1, &n) == KVRT_OK && n == 1)
                            seen |= 1ull << (e[0].remote_rank % replicas);
                    }
                    uint64_t want = holders < replicas ? holders : replicas;
                    cases++;
                    if ((uint64_t)__builtin_popcountll(seen) != want)
                        bad++;
                }
            }
    tap_ok(bad == 0 && cases > 0,
           "%zu cases: spread keys reach every replica, and the ranks holding a head read distinct replicas (%zu not)",
           cases, bad);
}

/* ---- the array and the refusals -------------------------------------------- */

static void check_capacity(void)
{
    size_t n = 0;
    tap_ok(kvrt_tp_map(8, 2, 0, 8, 0, KVRT_TP_PULL, NULL, 0, &n) == KVRT_OK && n == 4,
           "entries NULL, capacity 0: the count (4)");
    struct kvrt_tp_entry e[3];
    memset(e, 0xab, sizeof(e));
    n = 0;
    int rc = kvrt_tp_map(8, 2, 0, 8, 0, KVRT_TP_PULL, e, 3, &n);
    tap_ok(rc == KVRT_ERR_INVALID && n == 4 && has("4 entries needed") && has("capacity is 3") &&
               e[0].remote_rank == 0xababababababababull,
           "capacity 3 for 4 entries: refused naming both, count set, nothing written");
    tap_diag("%s", kvrt_error_message());
    tap_ok(kvrt_tp_map(8, 2, 0, 8, 0, KVRT_TP_PULL, NULL, 3, &n) == KVRT_ERR_INVALID && has("entries is NULL") &&
               has("capacity 3"),
           "entries NULL with a capacity: refused");
    tap_ok(kvrt_tp_map(8, 2, 0, 8, 0, KVRT_TP_PULL, e, 3, NULL) == KVRT_ERR_INVALID && has("count is NULL"),
           "count NULL: refused");
    tap_ok(kvrt_tp_map(8, 2, 0, 8, 0, (enum kvrt_tp_direction)7, e, 3, &n) == KVRT_ERR_INVALID && has("direction 7") &&
               has("0 (push)") && has("1 (pull)"),
           "direction 7: refused listing 0 (push) and 1 (pull)");
}

static void check_refusals(void)
{
    struct kvrt_tp_heads h;
    size_t n = 0;
    tap_ok(kvrt_tp_heads(8, 0, 0, &h) == KVRT_ERR_INVALID && has("tensor-parallel size 0") && has("at least 1"),
           "tp 0: refused, at least 1");
    tap_ok(kvrt_tp_heads(8, 4, 4, &h) == KVRT_ERR_INVALID && has("rank 4") && has("size 4") && has("0 to 3"),
           "rank 4 of tp 4: refused, ranks 0 to 3");
    tap_ok(kvrt_tp_heads(0, 1, 0, &h) == KVRT_ERR_INVALID && has("0 KV heads") && has("at least 1"),
           "0 heads: refused");
    tap_ok(kvrt_tp_heads(8, 3, 0, &h) == KVRT_ERR_INVALID && has("size 3") && has("8 KV heads") &&
               has("(1, 2, 4, 8)") && has("(16, 24, ...)"),
           "8 heads over tp 3: refused, listing the divisors and multiples");
    tap_diag("%s", kvrt_error_message());
    tap_ok(kvrt_tp_heads(4, 6, 0, &h) == KVRT_ERR_INVALID && has("size 6") && has("4 KV heads") && has("(1, 2, 4)") &&
               has("(8, 12, ...)"),
           "4 heads over tp 6: neither divides nor replicates");
    tap_ok(kvrt_tp_heads(8, KVRT_TP_MAX_SIZE + 1, 0, &h) == KVRT_ERR_INVALID && has("65537") && has("65536"),
           "tp past KVRT_TP_MAX_SIZE: refused naming the limit");
    tap_ok(kvrt_tp_heads(40000, 3, 0, &h) == KVRT_ERR_INVALID && has("size 3") && !has("multiple"),
           "heads past half the limit: no multiples offered");
    tap_ok(kvrt_tp_heads(8, 2, 0, NULL) == KVRT_ERR_INVALID && has("kvrt_tp_heads: out is NULL"), "out NULL: refused");
    tap_ok(kvrt_tp_map(8, 2, 0, 3, 0, KVRT_TP_PULL, NULL, 0, &n) == KVRT_ERR_INVALID &&
               has("remote tensor-parallel size 3"),
           "a bad remote size is named as the remote one");
    tap_ok(kvrt_tp_map(8, 2, 2, 8, 0, KVRT_TP_PUSH, NULL, 0, &n) == KVRT_ERR_INVALID && has("local rank 2") &&
               has("0 to 1"),
           "a local rank out of range is named as local");
    tap_ok(kvrt_tp_map(8, 0, 0, 8, 0, KVRT_TP_PULL, NULL, 0, &n) == KVRT_ERR_INVALID &&
               has("local tensor-parallel size 0"),
           "local tp 0: refused");
    tap_ok(kvrt_tp_map(8, 1, 0, 0, 0, KVRT_TP_PULL, NULL, 0, &n) == KVRT_ERR_INVALID &&
               has("remote tensor-parallel size 0"),
           "remote tp 0: refused");
}

static void check_names(void)
{
    enum kvrt_tp_direction d = KVRT_TP_PUSH;
    tap_ok(kvrt_tp_direction_parse("pull", &d) == KVRT_OK && d == KVRT_TP_PULL &&
               kvrt_tp_direction_parse("push", &d) == KVRT_OK && d == KVRT_TP_PUSH,
           "\"pull\" and \"push\" parse");
    tap_ok(strcmp(kvrt_tp_direction_name(KVRT_TP_PULL), "pull") == 0 &&
               strcmp(kvrt_tp_direction_name(KVRT_TP_PUSH), "push") == 0 &&
               kvrt_tp_direction_name((enum kvrt_tp_direction)2) == NULL,
           "names of the two directions; NULL past them");
    tap_ok(strcmp(kvrt_tp_direction_valid_names(), "push, pull") == 0, "valid names in enum order: \"%s\"",
           kvrt_tp_direction_valid_names());
    tap_ok(kvrt_tp_direction_parse("Pull", &d) == KVRT_ERR_INVALID && has("\"Pull\"") && has("push, pull"),
           "\"Pull\": refused, quoting it and listing the names");
    tap_ok(kvrt_tp_direction_parse(NULL, &d) == KVRT_ERR_INVALID && has("NULL"), "NULL name: refused");
}

int main(void)
{
    tap_plan_dynamic();
    check_heads_examples();
    check_map_examples();
    check_exhaustive();
    check_spread();
    check_capacity();
    check_refusals();
    check_names();
    return tap_done();
}
