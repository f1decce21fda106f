/* Entry buffers: slot-sized, 4 KiB-aligned buffers carved out of slabs of
 * transparent huge pages, and kept for new entries once released.
 *
 * Why slabs: the disk tier writes and reads slots with O_DIRECT straight
 * from these buffers, and a request to the device can only hold so many
 * separate pieces of memory (max_segments, 254 on the build machine's
 * virtio disk): a 1 MiB entry on 4 KiB pages is 257 pieces, so requests
 * stop at about 1 MiB, while on 2 MiB pages an entry is one or two pieces
 * and a request grows to the device's limit (4 MiB there).  Measured on
 * that machine, O_DIRECT writes of 64 MiB ran at 0.27-0.56 GB/s from
 * 4 KiB pages and 0.59-0.66 GB/s from huge pages (docs/store.md "Speed").
 * Why keep them: a buffer the kernel hands out fresh is zeroed page by page
 * on first touch, which cost a disk put a fifth of its time when the
 * queue's buffers went back to the system after each batch.  The pool
 * therefore never shrinks while the store is open: it holds at most what
 * the memory tier, the queue and the gets in flight held at once.
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "buffers.h"

#define HUGE_PAGE (2ull << 20)
/* What one slab holds, at least one buffer. */
#define SLAB_TARGET (32ull << 20)

int buf_pool_init(struct buf_pool *p, uint64_t buf_bytes)
{
    memset(p, 0, sizeof(*p));
    p->buf_bytes = buf_bytes;
    p->per_slab = buf_bytes < SLAB_TARGET ? SLAB_TARGET / buf_bytes : 1;
    if (buf_bytes > UINT64_MAX / p->per_slab - HUGE_PAGE)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: entries of %llu bytes are too large to allocate",
                         ULL(buf_bytes));
    p->slab_bytes = (p->per_slab * buf_bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    return KVRT_OK;
}

void buf_pool_free(struct buf_pool *p)
{
    for (uint64_t i = 0; i < p->num_slabs; i++)
        munmap(p->slabs[i], p->slab_bytes);
    // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
    free(p->slabs);
    // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
    free(p->spare);
    memset(p, 0, sizeof(*p));
}

/* A new slab, aligned to a huge page; false when out of memory. */
static bool add_slab(struct buf_pool *p)
{
    /* room for every buffer of every slab on the spare list, so that
     * releasing one never allocates */
    uint64_t total = (p->num_slabs + 1) * p->per_slab;
    if (p->num_slabs + 1 > UINT64_MAX / p->per_slab || total > SIZE_MAX / sizeof(uint8_t *))
        return false;
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    uint8_t **spare = realloc(p->spare, total * sizeof(*spare));
    if (!spare)
        return false;
    p->spare = spare;
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    uint8_t **slabs = realloc(p->slabs, (p->num_slabs + 1) * sizeof(*slabs));
    if (!slabs)
        return false;
    p->slabs = slabs;
    size_t len = (size_t)(p->slab_bytes + HUGE_PAGE);
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return false;
    uint8_t *base = m + (HUGE_PAGE - (uintptr_t)m % HUGE_PAGE) % HUGE_PAGE;
    if (base > m)
        munmap(m, (size_t)(base - m));
    if (base + p->slab_bytes < m + len)
        munmap(base + p->slab_bytes, (size_t)(m + len - (base + p->slab_bytes)));
#ifdef MADV_HUGEPAGE
    madvise(base, (size_t)p->slab_bytes, MADV_HUGEPAGE); /* advice: without it, 4 KiB pages */
#endif
    p->slabs[p->num_slabs++] = base;
    p->carve = base;
    p->carve_left = p->per_slab;
    return true;
}

uint8_t *buf_pool_get(struct buf_pool *p)
{
    if (p->num_spare > 0)
        return p->spare[--p->num_spare];
    if (p->carve_left == 0 && !add_slab(p))
        return NULL;
    uint8_t *b = p->carve;
    p->carve += p->buf_bytes;
    p->carve_left--;
    return b;
}

void buf_pool_put(struct buf_pool *p, uint8_t *buf)
{
    if (buf)
        p->spare[p->num_spare++] = buf;
}
