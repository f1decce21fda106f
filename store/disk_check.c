/* The structure of a data file, checked before LMDB reads it.  LMDB trusts
 * its file: a damaged page number or node offset in a tree page sends its
 * reads outside the map, and the process dies of SIGSEGV or SIGBUS.  So
 * when a process first opens a directory, every tree page of the snapshot
 * it will read is read here with pread and checked: page numbers within
 * the file, page types, node offsets and sizes within their page, child
 * pages at the depth their tree says, each page reached once, overflow runs
 * within the file, and each table's keys in order and of the sizes its
 * records have (disk_tables): LMDB's writes move and split nodes trusting
 * both.  A file that fails is refused, naming the page and what is wrong;
 * payload bytes are the checksums' business (entry.c).
 *
 * This reads LMDB 0.9's on-disk format (lmdb.h's MDB_DATA_VERSION 1, the
 * page and node layouts of its mdb.c), which is stable across 0.9 releases
 * and is checked here against the file's own magic and version.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "disk.h"

#define LMDB_MAGIC 0xBEEFC0DEu
#define LMDB_DATA_VERSION 1u
#define PAGE_HEADER 16u /* pgno 8, pad 2, flags 2, lower 2, upper 2 */
#define NODE_HEADER 8u  /* lo 2, hi 2, flags 2, ksize 2 */
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define P_OVERFLOW 0x04u
#define P_META 0x08u
#define F_BIGDATA 0x01u
#define F_SUBDATA 0x02u
#define F_DUPDATA 0x04u
#define P_INVALID UINT64_MAX
#define MAX_DEPTH 32u /* LMDB's cursor stack */
#define DB_BYTES 48u  /* MDB_db */
#define MDB_INTEGERKEY_FLAG 0x08u
#define MAX_KEY 511u /* LMDB's MDB_MAXKEYSIZE, as Debian builds it */

/* What a tree's leaves must hold, and the last key seen (leaves are
 * walked left to right, so each key must be above the one before). */
struct tree {
    bool free_table;                /* LMDB's free-page table: integer keys */
    bool main_table;                /* the table of tables */
    const struct disk_table *shape; /* a store table; NULL for the two above */
    uint8_t last[MAX_KEY];
    unsigned last_len;
    bool have_last;
};

struct check {
    int fd;
    const char *file;
    uint64_t psize, last_pg, file_pages;
    uint8_t *seen;  /* a bit per page: in a tree */
    uint8_t *freed; /* a bit per page: on a free-page list */
    uint8_t *page;
    char why[256];
};

static bool fail(struct check *c, uint64_t pg, const char *what)
{
    if (!c->why[0])
        snprintf(c->why, sizeof(c->why), "page %llu %s", ULL(pg), what);
    return false;
}

static bool read_page(struct check *c, uint64_t pg, uint8_t *buf)
{
    return pread(c->fd, buf, c->psize, (off_t)(pg * c->psize)) == (ssize_t)c->psize;
}

static bool walk(struct check *c, uint64_t pg, unsigned depth, unsigned want_depth, struct tree *t, uint64_t *entries);

/* LMDB's order: integer keys by value, others bytewise, a prefix first. */
static int key_cmp(const struct tree *t, const uint8_t *a, unsigned alen, const uint8_t *b, unsigned blen)
{
    if (t->free_table) {
        uint64_t x = base_get_le64(a), y = base_get_le64(b);
        return (x > y) - (x < y);
    }
    unsigned n = alen < blen ? alen : blen;
    int r = n ? memcmp(a, b, n) : 0;
    return r ? r : (alen > blen) - (alen < blen);
}

static const struct disk_table *table_named(const uint8_t *name, unsigned len)
{
    for (int i = 0; i < DISK_TABLES; i++)
        if (strlen(disk_tables[i].name) == len && memcmp(disk_tables[i].name, name, len) == 0)
            return &disk_tables[i];
    return NULL;
}

/* A tree described by an MDB_db record: the free-page table, the table of
 * tables (shape NULL), or a store table. */
static bool check_db(struct check *c, const uint8_t *db, uint64_t at, bool free_table, const struct disk_table *shape,
                     uint64_t *entries)
{
    /* the flags change how LMDB reads the tree: the free-page table is
     * integer-keyed, every other table of a store has none */
    if (base_get_le16(db + 4) != (free_table ? MDB_INTEGERKEY_FLAG : 0))
        return fail(c, at, "describes a table with flags no store table has");
    unsigned depth = base_get_le16(db + 6);
    uint64_t root = base_get_le64(db + 40), count = base_get_le64(db + 32);
    if (root == P_INVALID)
        return depth == 0 || fail(c, at, "describes an empty tree with a depth");
    if (depth == 0 || depth > MAX_DEPTH)
        return fail(c, at, "describes a tree deeper than LMDB can walk");
    uint64_t n = 0;
    struct tree *t = calloc(1, sizeof(*t));
    if (!t)
        return fail(c, at, "cannot be checked (out of memory)");
    t->free_table = free_table;
    t->main_table = !free_table && !shape;
    t->shape = shape;
    bool ok = walk(c, root, 1, depth, t, &n);
    free(t);
    if (!ok)
        return false;
    if (n != count)
        return fail(c, at, "counts other entries than its tree holds");
    if (entries)
        *entries += n;
    return true;
}

/* A record of the free-page table: a list of page numbers, its length
 * first, each within the database and in descending order (LMDB merges
 * them trusting both). */
static bool check_free_list(struct check *c, uint64_t pg, const uint8_t *inline_data, uint64_t ov, uint64_t size)
{
    if (size < 8 || size % 8)
        return fail(c, pg, "holds a free-page list of a size that is no list");
    uint8_t *buf = malloc(size);
    if (!buf)
        return fail(c, pg, "cannot be checked (out of memory)");
    bool ok = true;
    if (inline_data)
        memcpy(buf, inline_data, size);
    else if (pread(c->fd, buf, size, (off_t)(ov * c->psize + PAGE_HEADER)) != (ssize_t)size)
        ok = fail(c, ov, "cannot be read");
    uint64_t n = ok ? base_get_le64(buf) : 0;
    if (ok && n != size / 8 - 1)
        ok = fail(c, pg, "holds a free-page list whose length is not its size");
    for (uint64_t i = 1; ok && i <= n; i++) {
        uint64_t id = base_get_le64(buf + 8 * i);
        if (id < 2 || id > c->last_pg || (i > 1 && id >= base_get_le64(buf + 8 * (i - 1))))
            ok = fail(c, pg, "holds a free-page list out of range or order");
        else if (c->freed[id / 8] & (1u << (id % 8)))
            ok = fail(c, pg, "lists a page that another free-page list lists too");
        else
            c->freed[id / 8] |= (uint8_t)(1u << (id % 8));
    }
    free(buf);
    return ok;
}

static int cmp_span(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* LMDB keeps a page's nodes packed from `upper` to the end, each an even
 * number of bytes; it moves bytes between them trusting that (deleting a
 * node shifts the ones below it), so nodes that overlap or leave the page
 * would make it write outside the page. */
static bool check_tiling(struct check *c, uint64_t pg, const uint8_t *p, size_t keys, unsigned upper, bool leaf)
{
    uint32_t *spans = malloc(2 * keys * sizeof(*spans));
    if (!spans)
        return fail(c, pg, "cannot be checked (out of memory)");
    bool ok = true;
    for (size_t i = 0; ok && i < keys; i++) {
        unsigned off = base_get_le16(p + PAGE_HEADER + 2 * i);
        if (off < upper || off + NODE_HEADER > c->psize) {
            ok = fail(c, pg, "has a node outside the page");
            break;
        }
        const uint8_t *n = p + off;
        uint64_t size = NODE_HEADER + base_get_le16(n + 6);
        if (leaf)
            size += base_get_le16(n + 4) & F_BIGDATA
                        ? 8
                        : ((uint64_t)base_get_le16(n) | (uint64_t)base_get_le16(n + 2) << 16);
        size += size & 1;
        if (off + size > c->psize)
            ok = fail(c, pg, "has a node past the page");
        spans[2 * i] = off;
        spans[2 * i + 1] = (uint32_t)size;
    }
    if (ok) {
        qsort(spans, keys, 2 * sizeof(*spans), cmp_span);
        uint64_t at = upper;
        for (size_t i = 0; ok && i < keys; i++) {
            if (spans[2 * i] != at)
                ok = fail(c, pg, "has nodes that overlap or leave gaps");
            at = spans[2 * i] + (uint64_t)spans[2 * i + 1];
        }
        if (ok && at != c->psize)
            ok = fail(c, pg, "has nodes that do not end at the page's end");
    }
    free(spans);
    return ok;
}

static bool walk(struct check *c, uint64_t pg, unsigned depth, unsigned want_depth, struct tree *t, uint64_t *entries)
{
    bool free_table = t->free_table;
    if (pg < 2 || pg > c->last_pg)
        return fail(c, pg, "is outside the database's pages");
    if (pg >= c->file_pages)
        return fail(c, pg, "is past the end of the file (it was cut short)");
    if (c->seen[pg / 8] & (1u << (pg % 8)))
        return fail(c, pg, "is reached twice");
    c->seen[pg / 8] |= (uint8_t)(1u << (pg % 8));
    uint8_t *p = malloc(c->psize);
    if (!p || !read_page(c, pg, p)) {
        free(p);
        return fail(c, pg, "cannot be read");
    }
    bool ok = true;
    unsigned flags = base_get_le16(p + 10), lower = base_get_le16(p + 12), upper = base_get_le16(p + 14);
    bool leaf = (flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META)) == P_LEAF;
    bool branch = (flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META)) == P_BRANCH;
    if (base_get_le64(p) != pg)
        ok = fail(c, pg, "holds another page number");
    else if (!leaf && !branch)
        ok = fail(c, pg, "is neither a branch nor a leaf page where the tree needs one");
    else if (leaf != (depth == want_depth))
        ok = fail(c, pg, "is at another depth than its tree says");
    else if (lower < PAGE_HEADER || lower > upper || upper > c->psize || (lower - PAGE_HEADER) % 2)
        ok = fail(c, pg, "has its free space out of bounds");
    size_t keys = ok ? (lower - PAGE_HEADER) / 2 : 0;
    if (ok && keys == 0)
        ok = fail(c, pg, "holds no nodes");
    if (ok)
        ok = check_tiling(c, pg, p, keys, upper, leaf);
    for (size_t i = 0; ok && i < keys; i++) {
        unsigned off = base_get_le16(p + PAGE_HEADER + 2 * i);
        if (off < upper || off + NODE_HEADER > c->psize) {
            ok = fail(c, pg, "has a node outside the page");
            break;
        }
        const uint8_t *n = p + off;
        unsigned nflags = base_get_le16(n + 4), ksize = base_get_le16(n + 6);
        uint64_t lohi = (uint64_t)base_get_le16(n) | (uint64_t)base_get_le16(n + 2) << 16;
        if (off + NODE_HEADER + ksize > c->psize) {
            ok = fail(c, pg, "has a key past the page");
            break;
        }
        const uint8_t *data = n + NODE_HEADER + ksize;
        uint64_t room = c->psize - (off + NODE_HEADER + ksize);
        if (ksize > MAX_KEY) {
            ok = fail(c, pg, "has a key longer than LMDB's limit");
            break;
        }
        if (branch) {
            uint64_t child = lohi | (uint64_t)nflags << 32;
            ok = walk(c, child, depth + 1, want_depth, t, entries);
            continue;
        }
        (*entries)++;
        const uint8_t *key = n + NODE_HEADER;
        if ((free_table && ksize != 8) || (!free_table && ksize == 0)) {
            ok = fail(c, pg,
                      free_table ? "holds a free-page record whose key is not a transaction id"
                                 : "holds an empty key, which no store table has");
            break;
        }
        if (t->have_last && key_cmp(t, t->last, t->last_len, key, ksize) >= 0) {
            ok = fail(c, pg, "holds keys out of order");
            break;
        }
        memcpy(t->last, key, ksize);
        t->last_len = ksize;
        t->have_last = true;
        const struct disk_table *sub = t->main_table ? table_named(key, ksize) : NULL;
        if (t->main_table && (!sub || nflags != F_SUBDATA)) {
            ok = fail(c, pg, "holds a record no store table has");
        } else if (!t->main_table && (nflags & F_SUBDATA)) {
            ok = fail(c, pg, "holds a table inside a table");
        } else if (t->shape &&
                   ((t->shape->key_bytes && ksize != t->shape->key_bytes) ||
                    (t->shape->value_bytes != DISK_ANY && (lohi != t->shape->value_bytes || (nflags & F_BIGDATA))))) {
            ok = fail(c, pg, "holds a record of another size than its table's");
        } else if (nflags & F_DUPDATA) {
            ok = fail(c, pg, "holds duplicate-sorted data, which no store table has");
        } else if (nflags & F_BIGDATA) {
            uint64_t ov = room >= 8 ? base_get_le64(data) : 0;
            uint64_t pages = (lohi + PAGE_HEADER + c->psize - 1) / c->psize;
            if (room < 8 || ov < 2 || ov > c->last_pg || pages > c->last_pg - ov + 1)
                ok = fail(c, pg, "points at overflow pages outside the database");
            else if (ov + pages > c->file_pages)
                ok = fail(c, pg, "points at overflow pages past the end of the file (it was cut short)");
            for (uint64_t k = 0; ok && k < pages; k++) {
                if (c->seen[(ov + k) / 8] & (1u << ((ov + k) % 8)))
                    ok = fail(c, ov + k, "is reached twice");
                c->seen[(ov + k) / 8] |= (uint8_t)(1u << ((ov + k) % 8));
            }
            if (ok && free_table)
                ok = check_free_list(c, pg, NULL, ov, lohi);
        } else if (nflags & F_SUBDATA) {
            if (lohi != DB_BYTES || room < DB_BYTES)
                ok = fail(c, pg, "holds a table record of the wrong size");
            else
                ok = check_db(c, data, pg, false, sub, NULL);
        } else if (lohi > room) {
            ok = fail(c, pg, "has a value past the page");
        } else if (free_table) {
            ok = check_free_list(c, pg, data, 0, lohi);
        }
    }
    free(p);
    return ok;
}

#define META_BYTES (PAGE_HEADER + 160u)

/* Both meta pages, as LMDB's open reads them: it takes the page size from
 * the newer and maps the file with it before any transaction, so a damaged
 * one must be refused before LMDB sees the file.  Opens c->fd; closes it
 * again on a refusal. */
static int open_metas(struct check *c, const char *path, char *file, size_t size, uint8_t meta[2][META_BYTES])
{
    snprintf(file, size, "%s/data.mdb", path);
    memset(c, 0, sizeof(*c));
    c->file = file;
    c->fd = open(file, O_RDONLY | O_CLOEXEC);
    if (c->fd < 0) {
        int e = errno;
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: cannot read \"%s\": %s", file, strerror(e));
    }
    struct stat st;
    uint8_t head[META_BYTES];
    if (fstat(c->fd, &st) != 0 || pread(c->fd, head, sizeof(head), 0) != (ssize_t)sizeof(head)) {
        close(c->fd);
        return BASE_FAIL(
            KVRT_ERR_INVALID,
            "kvrt-store: \"%s\" is damaged: its first meta page cannot be read; restore it or remove the folder", file);
    }
    /* the page size is in the free table's record of the first meta page */
    c->psize = base_get_le32(head + PAGE_HEADER + 24);
    if (c->psize < 512 || c->psize > 65536 || (c->psize & (c->psize - 1))) {
        close(c->fd);
        return BASE_FAIL(
            KVRT_ERR_INVALID,
            "kvrt-store: \"%s\" is damaged: its page size %llu is not LMDB's; restore it or remove the folder", file,
            ULL(c->psize));
    }
    c->file_pages = (uint64_t)st.st_size / c->psize;
    for (int i = 0; i < 2; i++) {
        /* both must be sound: LMDB reads both, and takes the page size from
         * the newer, which need not be the one it reads the tree from */
        const uint8_t *mm = meta[i] + PAGE_HEADER;
        if (pread(c->fd, meta[i], META_BYTES, (off_t)(i * c->psize)) != (ssize_t)META_BYTES ||
            base_get_le32(mm) != LMDB_MAGIC || base_get_le32(mm + 4) != LMDB_DATA_VERSION ||
            !(base_get_le16(meta[i] + 10) & P_META) || base_get_le32(mm + 24) != c->psize ||
            base_get_le64(meta[i]) != (uint64_t)i) {
            close(c->fd);
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-store: \"%s\" is damaged: meta page %d is not LMDB's (format %u, page size %llu); "
                             "restore it or remove the folder",
                             file, i, LMDB_DATA_VERSION, ULL(c->psize));
        }
        /* LMDB reads a transaction's tree from meta page txnid & 1 (a
         * commit writes the page its new id selects), so a meta page whose
         * id says the other page would send LMDB to trees never checked;
         * a new file has id 0 in both */
        uint64_t id = base_get_le64(mm + 128);
        if (id != 0 && (id & 1) != (uint64_t)i) {
            close(c->fd);
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-store: \"%s\" is damaged: meta page %d holds transaction %llu, which belongs on "
                             "meta page %d; restore it or remove the folder",
                             file, i, ULL(id), (int)(id & 1));
        }
        /* the page count sizes LMDB's map */
        if (base_get_le64(mm + 120) > (1ull << 40)) {
            close(c->fd);
            return BASE_FAIL(
                KVRT_ERR_INVALID,
                "kvrt-store: \"%s\" is damaged: meta page %d counts %llu pages; restore it or remove the folder", file,
                i, ULL(base_get_le64(mm + 120)));
        }
    }
    return KVRT_OK;
}

int disk_check_metas(const char *path)
{
    char file[4200];
    struct check c;
    uint8_t meta[2][META_BYTES];
    int rc = open_metas(&c, path, file, sizeof(file), meta);
    if (rc == KVRT_OK)
        close(c.fd);
    return rc;
}

int disk_check_file(const char *path, uint64_t txnid)
{
    char file[4200];
    struct check c;
    uint8_t meta[2][META_BYTES];
    int rc = open_metas(&c, path, file, sizeof(file), meta);
    if (rc != KVRT_OK)
        return rc;
    /* the meta page LMDB reads transaction txnid's trees from */
    const uint8_t *m = meta[txnid & 1] + PAGE_HEADER;
    if (base_get_le64(m + 128) != txnid)
        m = NULL;
    if (!m) {
        close(c.fd);
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-store: \"%s\" is damaged: no meta page of LMDB format %u describes its last "
                         "transaction (%llu)",
                         file, LMDB_DATA_VERSION, ULL(txnid));
    }
    /* The file need not reach the last page the database counts: pages a
     * transaction took and gave back before its commit are never written.
     * Every page that is read must be in it (checked page by page). */
    c.last_pg = base_get_le64(m + 120);
    c.seen = calloc(c.last_pg / 8 + 1, 1);
    c.freed = calloc(c.last_pg / 8 + 1, 1);
    if (!c.seen || !c.freed) {
        free(c.seen);
        free(c.freed);
        close(c.fd);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory checking \"%s\"", file);
    }
    uint64_t entries = 0;
    /* the free-page table, then the main table (which holds the others) */
    bool ok = check_db(&c, m + 24, 0, true, NULL, NULL) && check_db(&c, m + 24 + DB_BYTES, 0, false, NULL, &entries);
    /* a page listed free and still in a tree would be handed out by the
     * next write while the tree uses it (LMDB asserts, or overwrites it) */
    for (uint64_t i = 0; ok && i <= c.last_pg / 8; i++)
        if (c.seen[i] & c.freed[i]) {
            unsigned bit = 0;
            while (!((c.seen[i] & c.freed[i]) & (1u << bit)))
                bit++;
            ok = fail(&c, 8 * i + bit, "is listed free and is in use");
        }
    if (!ok)
        rc = BASE_FAIL(KVRT_ERR_INVALID,
                       "kvrt-store: \"%s\" is damaged: %s; restore it, or remove the folder to start an empty "
                       "store",
                       file, c.why);
    free(c.seen);
    free(c.freed);
    close(c.fd);
    return rc;
}
