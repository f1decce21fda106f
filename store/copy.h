/* Copies of large runs between a cache and entries with non-temporal
 * stores.  The destination of a put (an entry on its way to the tiers) or
 * a get (cache blocks the engine reads much later, or a device reads over
 * DMA) is not read again soon, and a sequence is far larger than the CPU's
 * caches: plain stores first read every destination line into the cache
 * (a third stream of memory traffic beside the read and the write) and
 * evict what the copy reads next.  glibc's memcpy switches to such stores
 * only for single copies larger than about the L3 cache, never for the
 * 0.5-8 KiB runs a cache is made of.  Inline, because an NHD-like layout
 * copies a 512-byte cell at a time and a call costs a fifth of that.  The
 * caller fences once (store_copy_fence) before another thread may read
 * what was stored.
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_COPY_H
#define KVRT_STORE_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE2__))
#include <emmintrin.h>
#define STORE_COPY_STREAM 1
#endif

/* Below this a run goes through memcpy: a few lines gain nothing. */
#define STORE_STREAM_MIN_BYTES 256u
/* How far ahead of the copy its source is fetched: the hardware
 * prefetchers lose the stream at each run's start. */
#define STORE_PREFETCH_BYTES 512u

static inline void store_copy_stream(void *dst, const void *src, size_t n)
{
#ifdef STORE_COPY_STREAM
    if (n >= STORE_STREAM_MIN_BYTES) {
        uint8_t *d = dst;
        const uint8_t *s = src;
        size_t head = (16 - ((uintptr_t)d & 15)) & 15;
        if (head) {
            memcpy(d, s, head);
            d += head;
            s += head;
            n -= head;
        }
        for (; n >= 64; n -= 64, d += 64, s += 64) {
            _mm_prefetch((const char *)s + STORE_PREFETCH_BYTES, _MM_HINT_T0);
            __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
            _mm_stream_si128((__m128i *)d, a);
            _mm_stream_si128((__m128i *)(d + 16), b);
            _mm_stream_si128((__m128i *)(d + 32), c);
            _mm_stream_si128((__m128i *)(d + 48), e);
        }
        if (n)
            memcpy(d, s, n);
        return;
    }
#endif
    memcpy(dst, src, n);
}

static inline void store_copy_fence(void)
{
#ifdef STORE_COPY_STREAM
    _mm_sfence();
#endif
}

#endif
