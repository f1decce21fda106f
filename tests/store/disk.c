/*
 * The disk tier: entries survive the process; a directory of another model,
 * chunk size or format is refused naming the field; damaged entries are
 * dropped with one line and never loaded; a truncated file, an unwritable
 * path and a full disk give clear errors and change nothing; capacity and
 * recency order; the directory inspected as it is.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lmdb.h>

#include "store_test.h"
#include "tap.h"

#define T 32

static kvrt_runtime *rt;
static struct st_model model;

static bool contains(const char *msg, const char *a, const char *b)
{
    return strstr(msg, a) && (!b || strstr(msg, b));
}

/* Open with a log that keeps the warnings. */
static kvrt_store *open_logged(const struct st_model *m, const char *id, uint64_t memory, const char *path,
                               uint64_t disk, struct st_log *lg)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &m->group;
    o.num_groups = 1;
    o.model_id = id;
    o.chunk_tokens = T;
    o.memory_bytes = memory;
    o.path = path;
    o.disk_bytes = disk;
    o.log = st_log_fn;
    o.log_user = lg;
    kvrt_store *s = NULL;
    if (kvrt_store_open(&o, &s) != KVRT_OK)
        tap_diag("kvrt_store_open: %s", kvrt_error_message());
    return s;
}

/* A sequence of n tokens written with pattern `seed` into a fresh cache. */
struct seq {
    struct st_cache c;
    int64_t table[64];
    int32_t tokens[16 * T];
    uint64_t n, blocks;
};

static bool seq_make(struct seq *q, enum kvrt_layout layout, uint64_t bs, uint64_t n, uint64_t seed, bool fill)
{
    q->n = n;
    q->blocks = (n + bs - 1) / bs;
    if (!st_cache_make(&q->c, rt, "cpu", &model, layout, bs, 0, q->blocks + 2, 0, model.heads))
        return false;
    st_table(&q->c, q->table, q->blocks, seed + 5);
    st_tokens(q->tokens, n, seed);
    return !fill || st_fill(&q->c, q->table, 0, n, seed);
}

static struct kvrt_store_span seq_span(struct seq *q, uint64_t first, uint64_t count)
{
    return st_span(&q->c, q->table, q->blocks, q->tokens, q->n, first, count);
}

static uint64_t put(kvrt_store *s, struct seq *q)
{
    struct kvrt_store_span sp = seq_span(q, 0, KVRT_UNSET);
    uint64_t stored = 0;
    if (kvrt_store_put(s, &sp, &stored) != KVRT_OK)
        tap_diag("put: %s", kvrt_error_message());
    return stored;
}

/* Get into a fresh cache of another layout; the tokens loaded, and whether
 * they are exact and the rest untouched (zero). */
static uint64_t get_check(kvrt_store *s, const struct seq *src, uint64_t seed, bool *exact)
{
    struct seq q;
    *exact = false;
    if (!seq_make(&q, KVRT_LAYOUT_BLNHC, 8, src->n, 0, false))
        return 0;
    memcpy(q.tokens, src->tokens, src->n * sizeof(int32_t));
    struct kvrt_store_span sp = seq_span(&q, 0, KVRT_UNSET);
    uint64_t loaded = 0;
    if (kvrt_store_get(s, &sp, &loaded) != KVRT_OK)
        tap_diag("get: %s", kvrt_error_message());
    char where[128];
    uint64_t bad = st_check(&q.c, q.table, 0, loaded, seed, where, sizeof(where));
    if (bad)
        tap_diag("%llu cells differ, first at %s", (unsigned long long)bad, where);
    /* what was not loaded must still be zero: check against a zero cache */
    struct seq z;
    bool untouched = seq_make(&z, KVRT_LAYOUT_BLNHC, 8, src->n, 0, false);
    (void)untouched;
    *exact = bad == 0;
    st_cache_free(&z.c);
    st_cache_free(&q.c);
    return loaded;
}

static void persist(const char *dir)
{
    struct seq q;
    bool ok = seq_make(&q, KVRT_LAYOUT_LBHNC, 16, 3 * T + 5, 1, true);
    kvrt_store *s = st_open(&model, "tiny@1", T, 16 << 20, dir, 0, NULL);
    ok = ok && s && put(s, &q) == 3 * T && kvrt_store_flush(s) == KVRT_OK;
    struct kvrt_store_stats st = {0};
    ok = ok && kvrt_store_stats(s, &st) == KVRT_OK;
    tap_ok(ok && st.disk_entries == 3 * model.heads && st.written_disk == 3 * model.heads,
           "put and flush: %llu entries on disk", (unsigned long long)st.disk_entries);
    kvrt_store_close(s);
    s = st_open(&model, "tiny@1", T, 16 << 20, dir, 0, NULL);
    uint64_t hit = 0;
    bool exact = false;
    ok = s && kvrt_store_lookup(s, q.tokens, q.n, 0, 0, &hit) == KVRT_OK;
    uint64_t loaded = ok ? get_check(s, &q, 1, &exact) : 0;
    memset(&st, 0, sizeof(st));
    kvrt_store_stats(s, &st);
    tap_ok(ok && hit == 3 * T && loaded == 3 * T && exact && st.hits_disk == 3 * model.heads && st.hits_memory == 0,
           "a new store on the folder finds them (lookup %llu) and loads them from disk, exact (%llu disk hits)",
           (unsigned long long)hit, (unsigned long long)st.hits_disk);
    loaded = get_check(s, &q, 1, &exact);
    memset(&st, 0, sizeof(st));
    kvrt_store_stats(s, &st);
    tap_ok(loaded == 3 * T && exact && st.hits_memory == 3 * model.heads,
           "the second get hits the memory tier (promoted)");
    kvrt_store_close(s);
    st_cache_free(&q.c);
}

static void refusals(const char *dir)
{
    struct {
        const char *id;
        uint64_t chunk;
        enum kvrt_dtype dtype;
        uint64_t heads;
        const char *a, *b;
    } cases[] = {
        {"tiny@2", T, KVRT_DTYPE_BF16, 2, "model_id \"tiny@1\"", "\"tiny@2\""},
        {"tiny@1", 2 * T, KVRT_DTYPE_BF16, 2, "chunk_tokens 32", "chunk_tokens 64"},
        {"tiny@1", T, KVRT_DTYPE_FP16, 2, "layer \"layer.0\"'s dtype \"bf16\"", "\"fp16\""},
        {"tiny@1", T, KVRT_DTYPE_BF16, 4, "num_heads (the model's KV heads) 2", " 4 "},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct st_model m;
        st_model_init(&m, KVRT_SPEC_ATTENTION, cases[i].dtype, model.layers, cases[i].heads, 16, 16);
        kvrt_store *s = st_open(&m, cases[i].id, cases[i].chunk, 0, dir, 0, NULL);
        const char *msg = kvrt_error_message();
        tap_ok(!s && contains(msg, cases[i].a, cases[i].b), "another %s is refused naming the field: %s",
               i == 0   ? "model id"
               : i == 1 ? "chunk size"
               : i == 2 ? "dtype"
                        : "head count",
               msg);
        kvrt_store_close(s);
    }
    /* a record of another format version, written into the database */
    char copy[4096];
    snprintf(copy, sizeof(copy), "%s-v2", dir);
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    kvrt_store_close(s);
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    bool ok = mdb_env_create(&env) == 0 && mdb_env_set_maxdbs(env, 8) == 0 && mdb_env_open(env, copy, 0, 0644) == 0 &&
              mdb_txn_begin(env, NULL, 0, &txn) == 0 && mdb_dbi_open(txn, "meta", 0, &dbi) == 0;
    if (ok) {
        const char *rec = "{\"format\": \"kvrt-store\", \"format_version\": 2}";
        MDB_val k = {5, "store"}, v = {strlen(rec), (void *)rec};
        ok = mdb_put(txn, dbi, &k, &v, 0) == 0 && mdb_txn_commit(txn) == 0;
    }
    mdb_env_close(env);
    s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    tap_ok(ok && !s && contains(kvrt_error_message(), "format_version 2", "reads version 1"),
           "a directory of format version 2 is refused: %s", kvrt_error_message());
    kvrt_store_close(s);
    st_rmdir(copy);
}

/* Offsets in the slot file where entries start (their magic). */
static size_t find_entries(const char *dir, long *at, size_t max)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/slots.dat", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size);
    size_t n = 0;
    if (buf && fread(buf, 1, (size_t)size, f) == (size_t)size)
        for (long i = 0; i + 8 <= size && n < max; i++)
            if (memcmp(buf + i, "KVRTSENT", 8) == 0 || memcmp(buf + i, "KVRTSEAL", 8) == 0)
                at[n++] = i;
    free(buf);
    fclose(f);
    return n;
}

static bool flip(const char *dir, long offset)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/slots.dat", dir);
    int fd = open(path, O_RDWR);
    unsigned char b = 0;
    bool ok = fd >= 0 && pread(fd, &b, 1, offset) == 1;
    b ^= 0x10;
    ok = ok && pwrite(fd, &b, 1, offset) == 1;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void count_bad(void *user, const struct kvrt_store_entry_info *e, const char *why)
{
    (void)e;
    tap_diag("verify: %s", why);
    (*(int *)user)++;
}

static void damage(const char *dir)
{
    struct seq q;
    bool ok = seq_make(&q, KVRT_LAYOUT_LBHNC, 16, 3 * T, 1, true);
    long at[16] = {0};
    size_t n = find_entries(dir, at, 16);
    /* the payload of one entry, then the fingerprint in another's header */
    ok = ok && n == 3 * model.heads && flip(dir, at[1] + 128 + 77) && flip(dir, at[4] + 20);
    struct st_log lg = {.n = 0};
    kvrt_store *s = open_logged(&model, "tiny@1", 0, dir, 0, &lg);
    int bad = 0;
    struct kvrt_store_verify_report r = {0};
    ok = ok && s && kvrt_store_verify(s, false, count_bad, &bad, &r) == KVRT_OK;
    tap_ok(ok && r.entries == 6 && r.bad == 2 && bad == 2, "verify finds the 2 damaged entries of 6");
    bool exact = false;
    uint64_t loaded = ok ? get_check(s, &q, 1, &exact) : 99;
    struct kvrt_store_stats st = {0};
    kvrt_store_stats(s, &st);
    tap_ok(loaded < 3 * T && exact, "a get stops before the first damaged entry (%llu tokens loaded, all exact)",
           (unsigned long long)loaded);
    tap_ok(lg.n >= 1 && strstr(lg.lines[0], "dropped disk entry") &&
               (strstr(lg.lines[0], "checksum mismatch") || strstr(lg.lines[0], "fingerprint") ||
                strstr(lg.lines[0], "seal does not verify")),
           "one warning line per dropped entry: %s", lg.n ? lg.lines[0] : "(none)");
    tap_ok(st.dropped >= 1, "counted as dropped (%llu) and missed (%llu)", (unsigned long long)st.dropped,
           (unsigned long long)st.misses);
    ok = ok && kvrt_store_flush(s) == KVRT_OK;
    memset(&r, 0, sizeof(r));
    bad = 0;
    ok = ok && kvrt_store_verify(s, true, count_bad, &bad, &r) == KVRT_OK && r.bad <= 1 &&
         kvrt_store_verify(s, false, NULL, NULL, &r) == KVRT_OK;
    tap_ok(ok && r.bad == 0 && r.entries == 4, "dropped and verify --drop: 4 good entries left, none bad");
    /* a new put writes them again */
    ok = ok && put(s, &q) == 3 * T && kvrt_store_flush(s) == KVRT_OK &&
         kvrt_store_verify(s, false, NULL, NULL, &r) == KVRT_OK;
    tap_ok(ok && r.entries == 6 && r.bad == 0, "put again: 6 good entries");
    kvrt_store_close(s);
    st_cache_free(&q.c);
}

/* Whether the file system under dir takes O_DIRECT (the store reads and
 * writes slots so where it can, and through the page cache where not). */
static bool takes_direct(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/direct-probe", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd >= 0)
        close(fd);
    unlink(path);
    return fd >= 0;
}

/* A damaged entry in a later chunk of a long get: read by the get's read-
 * ahead thread, with O_DIRECT into the entry's buffer, while the chunks
 * before it are checked and copied.  The get loads exactly the chunks
 * before it; the entry is dropped with one line; the chunk after it,
 * read ahead too, is let go. */
static void damage_ahead(const char *parent)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/ahead", parent);
    struct seq q;
    bool ok = seq_make(&q, KVRT_LAYOUT_LBHNC, 16, 6 * T, 3, true);
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, dir, 0, NULL);
    ok = ok && s && put(s, &q) == 6 * T && kvrt_store_flush(s) == KVRT_OK;
    kvrt_store_close(s);
    tap_diag("the test folder's file system %s O_DIRECT", takes_direct(parent) ? "takes" : "refuses");
    /* slots in the order put wrote them: chunk c, head h at c x heads + h */
    long at[16] = {0};
    size_t n = find_entries(dir, at, 16);
    ok = ok && n == 6 * model.heads && flip(dir, at[3 * model.heads + 1] + 128 + 1000);
    struct st_log lg = {.n = 0};
    s = open_logged(&model, "tiny@1", 0, dir, 0, &lg);
    bool exact = false;
    uint64_t loaded = ok && s ? get_check(s, &q, 3, &exact) : 99;
    struct kvrt_store_stats st = {0};
    if (s)
        kvrt_store_stats(s, &st);
    tap_ok(ok && loaded == 3 * T && exact && st.hits_disk == 3 * model.heads && st.dropped == 1 && lg.n == 1 &&
               strstr(lg.lines[0], "dropped disk entry") &&
               (strstr(lg.lines[0], "checksum mismatch") || strstr(lg.lines[0], "seal does not verify")),
           "a bit flipped in chunk 3 of 6, read ahead with O_DIRECT: the get loads chunks 0-2 exactly (%llu "
           "tokens), drops it with one line: %s",
           (unsigned long long)loaded, lg.n ? lg.lines[0] : "(none)");
    /* a slot file cut inside chunk 4: chunks 0-3 load once the dropped
     * entry is deleted (flush) and put again */
    ok = ok && s && kvrt_store_flush(s) == KVRT_OK && put(s, &q) == 6 * T && kvrt_store_flush(s) == KVRT_OK;
    kvrt_store_close(s);
    char slots[4300];
    snprintf(slots, sizeof(slots), "%s/slots.dat", dir);
    n = find_entries(dir, at, 16);
    /* slots 0-11 as before (the dropped entry was put again into its freed
     * slot or past them): chunk 4's first entry is still the ninth */
    ok = ok && n >= 6 * model.heads && truncate(slots, at[4 * model.heads] + 128 + 500) == 0;
    lg.n = 0;
    s = open_logged(&model, "tiny@1", 0, dir, 0, &lg);
    loaded = ok && s ? get_check(s, &q, 3, &exact) : 99;
    tap_ok(ok && loaded == 4 * T && exact && lg.n == 2 && strstr(lg.lines[0], "dropped disk entry") &&
               strstr(lg.lines[0], "bytes; an entry of this store is"),
           "the slot file cut inside chunk 4: the get loads chunks 0-3 exactly (%llu tokens), one line for each of "
           "chunk 4's cut entries (chunk 5, read ahead, is let go unread): %s",
           (unsigned long long)loaded, lg.n ? lg.lines[0] : "(none)");
    kvrt_store_close(s);
    st_cache_free(&q.c);
}

/* A copy of the store at dir, "<dir>-<suffix>", to damage; its data file's
 * path in data. */
static bool copy_store(const char *dir, const char *suffix, char *copy, size_t copy_size, char *data, size_t data_size)
{
    char cmd[9000];
    snprintf(copy, copy_size, "%s-%s", dir, suffix);
    snprintf(data, data_size, "%s/data.mdb", copy);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -r '%s' '%s'", copy, dir, copy);
    return system(cmd) == 0;
}

static uint64_t le_at(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The first bytes of both meta pages of an open data file (LMDB 0.9's
 * format, read on its own): *psize from the first, and which is newer. */
static bool read_metas(FILE *f, uint8_t m[2][176], uint64_t *psize, int *newer)
{
    bool ok = f && fread(m[0], 1, 176, f) == 176;
    *psize = ok ? le_at(m[0] + 16 + 24, 4) : 0;
    ok = ok && *psize >= 512 && fseek(f, (long)*psize, SEEK_SET) == 0 && fread(m[1], 1, 176, f) == 176;
    *newer = ok && le_at(m[1] + 16 + 128, 8) > le_at(m[0] + 16 + 128, 8) ? 1 : 0;
    return ok;
}

static void truncated(const char *dir)
{
    char copy[4200], data[4300];
    bool ok = copy_store(dir, "trunc", copy, sizeof(copy), data, sizeof(data));
    struct stat st;
    ok = ok && stat(data, &st) == 0 && truncate(data, st.st_size / 2) == 0;
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    tap_ok(ok && !s && contains(kvrt_error_message(), "past the end of the file (it was cut short)", "restore it"),
           "a data file cut to half is refused: %s", kvrt_error_message());
    ok = ok && truncate(data, 100) == 0;
    s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    tap_ok(ok && !s && contains(kvrt_error_message(), "truncated or damaged: 100 bytes", NULL),
           "a data file of 100 bytes is refused: %s", kvrt_error_message());
    struct stat after;
    tap_ok(stat(data, &after) == 0 && after.st_size == 100, "and left as it was (100 bytes)");
    st_rmdir(copy);
}

struct last_key {
    uint8_t dbkey[KVRT_STORE_KEY_BYTES + 4];
    bool any;
};

/* The entry whose index key (chunk key, then the head big-endian) is last. */
static int keep_last(void *user, const struct kvrt_store_entry_info *e)
{
    struct last_key *l = user;
    uint8_t k[KVRT_STORE_KEY_BYTES + 4];
    memcpy(k, e->key, KVRT_STORE_KEY_BYTES);
    for (int i = 0; i < 4; i++)
        k[KVRT_STORE_KEY_BYTES + i] = (uint8_t)(e->head >> (24 - 8 * i));
    if (!l->any || memcmp(k, l->dbkey, sizeof(k)) > 0)
        memcpy(l->dbkey, k, sizeof(k));
    l->any = true;
    return 0;
}

/* LMDB moves and splits nodes trusting a page's keys to be in order: a
 * file whose index has the last key made the smallest is refused at open,
 * not handed to LMDB. */
static void disordered(const char *dir)
{
    char copy[4200], data[4300];
    bool ok = copy_store(dir, "order", copy, sizeof(copy), data, sizeof(data));
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.path = copy;
    kvrt_store *s = NULL;
    struct last_key l = {.any = false};
    ok = ok && kvrt_store_open(&o, &s) == KVRT_OK && kvrt_store_list(s, keep_last, &l) == KVRT_OK && l.any;
    kvrt_store_close(s);
    FILE *f = fopen(data, "r+b");
    long at = -1;
    if (ok && f) {
        /* its first copy (the entries table or the ticks table, both in
         * index-key order) gets a first byte of 0 */
        static uint8_t buf[1 << 20];
        size_t n = fread(buf, 1, sizeof(buf), f);
        for (size_t i = 0; i + sizeof(l.dbkey) <= n && at < 0; i++)
            if (memcmp(buf + i, l.dbkey, sizeof(l.dbkey)) == 0)
                at = (long)i;
        uint8_t zero = 0;
        ok = at >= 0 && l.dbkey[0] != 0 && fseek(f, at, SEEK_SET) == 0 && fwrite(&zero, 1, 1, f) == 1;
    }
    if (f)
        ok = fclose(f) == 0 && ok;
    s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    tap_ok(ok && !s && contains(kvrt_error_message(), "holds keys out of order", "restore it"),
           "an index whose last key was made the first is refused: %s", kvrt_error_message());
    kvrt_store_close(s);
    st_rmdir(copy);
}

/* A free-page list of LMDB's free table that names a page a tree still
 * uses: the next write would be handed that page while the tree holds it.
 * Read here from LMDB 0.9's format on its own (the newer meta page, the
 * free table's root leaf, its first record), the record's first (largest)
 * page replaced by a larger page that no list names. */
static void freed_in_use(const char *dir)
{
    char copy[4200], data[4300];
    bool ok = copy_store(dir, "freed", copy, sizeof(copy), data, sizeof(data));
    static uint8_t f[1 << 22];
    FILE *fp = fopen(data, "r+b");
    size_t size = ok && fp ? fread(f, 1, sizeof(f), fp) : 0;
    uint64_t psize = size > 64 ? le_at(f + 16 + 24 + 0, 4) : 0; /* the free table's md_pad holds the page size */
    ok = ok && psize >= 512 && size >= 2 * psize;
    const uint8_t *m0 = f + 16, *m1 = ok ? f + psize + 16 : f + 16;
    const uint8_t *m = le_at(m1 + 128, 8) > le_at(m0 + 128, 8) ? m1 : m0;
    uint64_t last = le_at(m + 120, 8), depth = le_at(m + 24 + 6, 2), root = le_at(m + 24 + 40, 8);
    /* the free table: one leaf page, its first record a list held in it */
    uint8_t *leaf = ok && depth == 1 && (root + 1) * psize <= size ? f + root * psize : NULL;
    uint8_t *node = leaf && le_at(leaf + 12, 2) > 16 ? leaf + le_at(leaf + 16, 2) : NULL;
    bool inline_list = node && !(le_at(node + 4, 2) & 1) && le_at(node + 6, 2) == 8;
    uint8_t *list = inline_list ? node + 8 + 8 : NULL;
    uint64_t first = list ? le_at(list + 8, 8) : 0, pick = 0;
    /* every page a list names */
    static uint8_t named[1 << 16];
    memset(named, 0, sizeof(named));
    for (uint64_t k = 0; leaf && k < (le_at(leaf + 12, 2) - 16) / 2 && last < sizeof(named); k++) {
        uint8_t *nd = leaf + le_at(leaf + 16 + 2 * k, 2);
        if (le_at(nd + 4, 2) & 1)
            continue;
        uint8_t *l = nd + 8 + le_at(nd + 6, 2);
        for (uint64_t j = 1; j <= le_at(l, 8) && le_at(l + 8 * j, 8) < sizeof(named); j++)
            named[le_at(l + 8 * j, 8)] = 1;
    }
    for (uint64_t pg = last; list && pg > first && last < sizeof(named); pg--)
        if (!named[pg]) {
            pick = pg;
            break;
        }
    if (pick) {
        for (int i = 0; i < 8; i++)
            list[8 + i] = (uint8_t)(pick >> (8 * i));
        ok = fseek(fp, (long)(list + 8 - f), SEEK_SET) == 0 && fwrite(list + 8, 1, 8, fp) == 8;
    }
    if (fp)
        ok = fclose(fp) == 0 && ok;
    if (!pick) {
        tap_skip("no free-page list to damage in this store (free table depth %llu)", (unsigned long long)depth);
        st_rmdir(copy);
        return;
    }
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    char want[64];
    snprintf(want, sizeof(want), "page %llu is listed free and is in use", (unsigned long long)pick);
    tap_ok(ok && !s && contains(kvrt_error_message(), want, "restore it"),
           "a free-page list that names a page in use (%llu) is refused: %s", (unsigned long long)pick,
           kvrt_error_message());
    kvrt_store_close(s);
    st_rmdir(copy);
}

/* LMDB maps the file with the page size of its newer meta page before any
 * transaction: a damaged one must be refused before LMDB opens the file
 * (a page size of 4096 + 89 * 65536 made LMDB's open die of SIGBUS). */
static void meta_page_size(const char *dir)
{
    char copy[4200], data[4300];
    bool ok = copy_store(dir, "meta", copy, sizeof(copy), data, sizeof(data));
    uint8_t m[2][176];
    uint64_t psize = 0;
    int newer = 0; /* the one LMDB takes its page size from */
    FILE *f = fopen(data, "r+b");
    ok = ok && read_metas(f, m, &psize, &newer);
    uint8_t b = 89;
    ok = ok && fseek(f, (long)(newer * psize + 16 + 24 + 2), SEEK_SET) == 0 && fwrite(&b, 1, 1, f) == 1;
    if (f)
        ok = fclose(f) == 0 && ok;
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    tap_ok(ok && !s && contains(kvrt_error_message(), "is damaged", "restore it"),
           "meta page %d (the newer) with a page size of %llu is refused before LMDB maps the file: %s", newer,
           (unsigned long long)(psize + (89ull << 16)), kvrt_error_message());
    kvrt_store_close(s);
    st_rmdir(copy);
}

/* LMDB reads a transaction's trees from meta page txnid & 1: the older
 * meta page given a transaction id above the newer one's, of the newer
 * one's parity, would send LMDB to the trees of the other page while the
 * check walked these (a read then met a page past the file's end: SIGBUS). */
static void meta_parity(const char *dir)
{
    char copy[4200], data[4300];
    bool ok = copy_store(dir, "parity", copy, sizeof(copy), data, sizeof(data));
    uint8_t m[2][176];
    uint64_t psize = 0;
    int newer = 0;
    FILE *f = fopen(data, "r+b");
    ok = ok && read_metas(f, m, &psize, &newer);
    int older = 1 - newer;
    uint64_t id = le_at(m[newer] + 16 + 128, 8) + 2;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(id >> (8 * i));
    ok = ok && fseek(f, (long)(older * psize + 16 + 128), SEEK_SET) == 0 && fwrite(b, 1, 8, f) == 8;
    if (f)
        ok = fclose(f) == 0 && ok;
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, copy, 0, NULL);
    char want[96];
    snprintf(want, sizeof(want), "meta page %d holds transaction %llu, which belongs on meta page %d", older,
             (unsigned long long)id, newer);
    tap_ok(ok && !s && contains(kvrt_error_message(), want, "is damaged"),
           "the older meta page given transaction %llu (the newer's parity) is refused: %s", (unsigned long long)id,
           kvrt_error_message());
    kvrt_store_close(s);
    st_rmdir(copy);
}

static void paths(const char *dir)
{
    char file[4400], below[4500], other[4200];
    snprintf(file, sizeof(file), "%s-file", dir);
    snprintf(below, sizeof(below), "%s/store", file);
    FILE *f = fopen(file, "w");
    if (f)
        fclose(f);
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, below, 0, NULL);
    tap_ok(!s && contains(kvrt_error_message(), "cannot use the store folder", "Not a directory"),
           "a path below a file is refused: %s", kvrt_error_message());
    s = st_open(&model, "tiny@1", T, 0, file, 0, NULL);
    tap_ok(!s && contains(kvrt_error_message(), "is not a folder", NULL), "a file as the path is refused: %s",
           kvrt_error_message());
    unlink(file);
    snprintf(other, sizeof(other), "%s-other", dir);
    mkdir(other, 0755);
    snprintf(file, sizeof(file), "%s/notes.txt", other);
    f = fopen(file, "w");
    if (f)
        fclose(f);
    s = st_open(&model, "tiny@1", T, 0, other, 0, NULL);
    tap_ok(!s && contains(kvrt_error_message(), "holds other files and no store", NULL),
           "a folder of other files is refused: %s", kvrt_error_message());
    st_rmdir(other);
}

/* The child of full_disk (this program again, --full-disk PATH FD): a
 * store with entries flushed, then a file size limit and more puts; it
 * writes what flush said to FD. */
static int full_disk_child(const char *path, int fd)
{
    signal(SIGXFSZ, SIG_IGN);
    struct seq q;
    if (!seq_make(&q, KVRT_LAYOUT_LBHNC, 16, 2 * T, 1, true))
        return 2;
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, path, 0, NULL);
    int a = s && put(s, &q) == 2 * T && kvrt_store_flush(s) == KVRT_OK;
    struct rlimit rl = {200 * 1024, 200 * 1024};
    setrlimit(RLIMIT_FSIZE, &rl);
    struct seq big;
    if (!seq_make(&big, KVRT_LAYOUT_LBHNC, 16, 16 * T, 2, true))
        return 2;
    uint64_t stored = put(s, &big);
    int rc = kvrt_store_flush(s);
    char msg[1024];
    snprintf(msg, sizeof(msg), "%d %d %llu %s\n", a, rc, (unsigned long long)stored, kvrt_error_message());
    ssize_t w = write(fd, msg, strlen(msg));
    (void)w;
    kvrt_store_close(s);
    return 0;
}

static const char *self;

/* A full disk, made with a file size limit in a child (started with exec:
 * a forked copy of a process with threads must not go on using them). */
static void full_disk(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s-full", dir);
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        tap_skip("no pipe");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        char fd[16];
        snprintf(fd, sizeof(fd), "%d", pipefd[1]);
        execl(self, self, "--full-disk", path, fd, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    char msg[1024] = "";
    ssize_t r = read(pipefd[0], msg, sizeof(msg) - 1);
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    msg[r > 0 ? r : 0] = '\0';
    int a = 0, rc = 0;
    sscanf(msg, "%d %d", &a, &rc);
    tap_ok(a == 1 && rc == KVRT_ERR_DEVICE && strstr(msg, "could not be written to the disk tier") &&
               strstr(msg, "File too large"),
           "a put beyond the disk's room: flush fails naming the entries and why: %s", msg);
    kvrt_store *s = st_open(&model, "tiny@1", T, 0, path, 0, NULL);
    struct kvrt_store_verify_report vr = {0};
    struct seq q;
    bool ok = s && seq_make(&q, KVRT_LAYOUT_LBHNC, 16, 2 * T, 1, false) &&
              kvrt_store_verify(s, false, NULL, NULL, &vr) == KVRT_OK;
    bool exact = false;
    uint64_t loaded = ok ? get_check(s, &q, 1, &exact) : 0;
    tap_ok(ok && vr.bad == 0 && loaded == 2 * T && exact,
           "the store reopens: what was flushed before is there and exact, no damaged entry (%llu entries)",
           (unsigned long long)vr.entries);
    kvrt_store_close(s);
    if (ok)
        st_cache_free(&q.c);
    st_rmdir(path);
}

static void capacity(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s-cap", dir);
    struct seq q;
    bool ok = seq_make(&q, KVRT_LAYOUT_LBHNC, 16, 4 * T, 3, true);
    struct st_model one;
    st_model_init(&one, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, model.layers, 1, 16, 16);
    struct st_cache c1;
    ok = ok && st_cache_make(&c1, rt, "cpu", &one, KVRT_LAYOUT_LBHNC, 16, 0, q.blocks + 2, 0, 1);
    int64_t table[16];
    st_table(&c1, table, q.blocks, 4);
    ok = ok && st_fill(&c1, table, 0, q.n, 3);
    /* what one entry takes on disk: header and payload in a 4 KiB-rounded slot */
    uint64_t value = (128 + T * model.layers * 2 * 16 * 2 + 4095) / 4096 * 4096;
    /* memory 0: every get reads the disk, so reads order the disk's LRU */
    kvrt_store *s = st_open(&one, "cap", T, 0, path, 3 * value, NULL);
    uint64_t stored = 0, loaded = 0, hit = 0;
    /* one chunk a batch: each its own tick, so the order of the least
     * recently used does not fall to the keys' order (random with a key) */
    struct kvrt_store_span sp;
    for (uint64_t c = 0; c < 3; c++) {
        sp = st_span(&c1, table, q.blocks, q.tokens, q.n, 0, (c + 1) * T);
        ok = ok && s && kvrt_store_put(s, &sp, &stored) == KVRT_OK && kvrt_store_flush(s) == KVRT_OK;
    }
    /* read chunk 0 again: it becomes the newest */
    sp = st_span(&c1, table, q.blocks, q.tokens, q.n, 0, T);
    ok = ok && kvrt_store_get(s, &sp, &loaded) == KVRT_OK && loaded == T && kvrt_store_flush(s) == KVRT_OK;
    sp = st_span(&c1, table, q.blocks, q.tokens, q.n, 3 * T, T);
    ok = ok && kvrt_store_put(s, &sp, &stored) == KVRT_OK && kvrt_store_flush(s) == KVRT_OK;
    struct kvrt_store_stats st = {0};
    kvrt_store_stats(s, &st);
    uint64_t h0 = 0, h01 = 0;
    kvrt_store_lookup(s, q.tokens, T, 0, 0, &h0);
    kvrt_store_lookup(s, q.tokens, 2 * T, 0, 0, &h01);
    if (!tap_ok(ok && st.disk_entries == 3 && st.evicted_disk == 1 && h0 == T && h01 == T,
                "a disk of 3 entries: the 4th put evicts the least recently used (chunk 1, not chunk 0 read since)"))
        tap_diag("  calls %s, disk entries %llu, evicted %llu, lookups %llu and %llu tokens", ok ? "ok" : "failed",
                 (unsigned long long)st.disk_entries, (unsigned long long)st.evicted_disk, (unsigned long long)h0,
                 (unsigned long long)h01);
    uint64_t evicted = 0;
    ok = ok && kvrt_store_gc(s, value, &evicted) == KVRT_OK;
    kvrt_store_stats(s, &st);
    kvrt_store_lookup(s, q.tokens, T, 0, 0, &hit);
    tap_ok(ok && evicted == 2 && st.disk_entries == 1 && hit == 0, "gc to one entry evicts 2, keeps the newest");
    kvrt_store_close(s);
    st_cache_free(&c1);
    st_cache_free(&q.c);
    st_rmdir(path);
}

static int count_entry(void *user, const struct kvrt_store_entry_info *e)
{
    (void)e;
    (*(int *)user)++;
    return 0;
}

static void inspect(const char *dir)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.path = dir;
    kvrt_store *s = NULL;
    int rc = kvrt_store_open(&o, &s);
    char *json = NULL;
    int n = 0;
    bool ok = rc == KVRT_OK && kvrt_store_describe_json(s, &json) == KVRT_OK &&
              kvrt_store_list(s, count_entry, &n) == KVRT_OK;
    tap_ok(ok && json && strstr(json, "\"model_id\": \"tiny@1\"") && strstr(json, "\"entries\": 6") && n == 6,
           "opened without a model: the description names the model, 6 entries listed");
    if (json && !(n == 6 && strstr(json, "\"entries\": 6")))
        tap_diag("%s", json);
    kvrt_free(json);
    struct seq q;
    if (s && seq_make(&q, KVRT_LAYOUT_LBHNC, 16, T, 1, false)) {
        struct kvrt_store_span sp = seq_span(&q, 0, KVRT_UNSET);
        tap_ok(kvrt_store_put(s, &sp, NULL) == KVRT_ERR_STATE && strstr(kvrt_error_message(), "to inspect"),
               "and puts are refused: %s", kvrt_error_message());
        st_cache_free(&q.c);
    } else {
        tap_ok(false, "inspect: cache");
    }
    kvrt_store_close(s);
    o.path = "/nonexistent/kvrt-store";
    tap_ok(kvrt_store_open(&o, &s) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "no store at"),
           "inspecting a missing folder: %s", kvrt_error_message());
}

/* A counter past JSON's integers (a damaged or foreign directory): the
 * description refuses it by name, never prints a clamped or wrapped
 * number. */
static void huge_count(const char *dir)
{
    char copy[4096], data[4200];
    bool ok = copy_store(dir, "huge", copy, sizeof(copy), data, sizeof(data));
    MDB_env *env = NULL;
    MDB_txn *txn;
    MDB_dbi dbi;
    ok = ok && mdb_env_create(&env) == 0 && mdb_env_set_maxdbs(env, 8) == 0 && mdb_env_open(env, copy, 0, 0644) == 0 &&
         mdb_txn_begin(env, NULL, 0, &txn) == 0 && mdb_dbi_open(txn, "meta", 0, &dbi) == 0;
    if (ok) {
        uint8_t le[8] = {0, 0, 0, 0, 0, 0, 0, 0x80}; /* 2^63, INT64_MAX + 1 */
        MDB_val k = {4, "hits"}, v = {sizeof(le), le};
        ok = mdb_put(txn, dbi, &k, &v, 0) == 0 && mdb_txn_commit(txn) == 0;
    }
    if (env)
        mdb_env_close(env);
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.path = copy;
    kvrt_store *s = NULL;
    char *json = NULL;
    int rc = ok ? kvrt_store_open(&o, &s) : KVRT_ERR_STATE;
    if (rc == KVRT_OK)
        rc = kvrt_store_describe_json(s, &json);
    tap_ok(ok && rc == KVRT_ERR_OVERFLOW && !json && strstr(kvrt_error_message(), "disk.hits 9223372036854775808"),
           "a count past INT64_MAX is refused by name, not clamped: %s", kvrt_error_message());
    kvrt_free(json);
    kvrt_store_close(s);
    st_rmdir(copy);
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc == 4 && strcmp(argv[1], "--full-disk") == 0) {
        struct kvrt_runtime_options o;
        kvrt_runtime_options_default(&o);
        if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
            return 2;
        st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
        int rc = full_disk_child(argv[2], atoi(argv[3]));
        kvrt_runtime_close(rt);
        return rc;
    }
    tap_plan_dynamic();
    struct kvrt_runtime_options ro;
    kvrt_runtime_options_default(&ro);
    if (kvrt_runtime_open(&ro, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    char *dir = st_tempdir("disk");
    if (!dir) {
        tap_skip_all("no temporary folder");
        return 0;
    }
    persist(dir);
    refusals(dir);
    truncated(dir);
    disordered(dir);
    freed_in_use(dir);
    meta_page_size(dir);
    meta_parity(dir);
    damage(dir);
    damage_ahead(dir);
    inspect(dir);
    huge_count(dir);
    paths(dir);
    full_disk(dir);
    capacity(dir);
    if (!getenv("KVRT_TEST_KEEP"))
        st_rmdir(dir);
    free(dir);
    kvrt_runtime_close(rt);
    return tap_done();
}
