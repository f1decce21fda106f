/*
 * kvrt CPU backend — byte moves for the block operations, with a
 * non-temporal variant for moves bigger than the last-level cache.
 *
 * A move larger than the LLC cannot leave its destination in cache for a
 * later reader anyway; ordinary stores would first read every destination
 * line (read-for-ownership) and evict the source lines still to come, so a
 * copy costs three memory transfers per byte instead of two.  Streaming
 * stores write whole lines straight to memory.  They need SSE2 (every
 * x86-64); elsewhere the variant is plain memcpy.
 */
#ifndef KVRT_CPU_MOVE_H
#define KVRT_CPU_MOVE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>

/* Streaming stores for the 16-byte-aligned middle of dst. */
static inline void cpu_move_stream(unsigned char *dst, const unsigned char *src, uint64_t n)
{
    uint64_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (n < head + 64) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));
        _mm_stream_si128((__m128i *)(void *)dst, a);
        _mm_stream_si128((__m128i *)(void *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(void *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(void *)(dst + 48), d);
    }
    memcpy(dst, src, n);
}

/* Streaming stores are weakly ordered: a thread fences once after its
 * share, before the pool reports the job done. */
static inline void cpu_move_fence(void)
{
    _mm_sfence();
}

#else

static inline void cpu_move_stream(unsigned char *dst, const unsigned char *src, uint64_t n)
{
    memcpy(dst, src, n);
}

static inline void cpu_move_fence(void)
{
}

#endif

static inline void cpu_move(unsigned char *dst, const unsigned char *src, uint64_t n, bool stream)
{
    if (stream)
        cpu_move_stream(dst, src, n);
    else
        memcpy(dst, src, n);
}

#endif
