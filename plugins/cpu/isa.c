/*
 * kvrt CPU backend — CPU feature detection for the decode kernel.
 *
 * Asked with cpuid directly: __builtin_cpu_supports does not know "f16c" in
 * every compiler this project supports.
 */
#include "isa.h"

#include <stdlib.h>
#include <string.h>

#if defined(CPU_HAVE_AVX2_KERNEL) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>

static bool cpu_has_avx2_fma_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return false;
    const unsigned fma = 1u << 12, osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (fma | osxsave | avx | f16c)) != (fma | osxsave | avx | f16c))
        return false;
    /* The OS must save the SSE and AVX register state (XCR0 bits 1, 2). */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 6u) != 6u)
        return false;
    if (__get_cpuid_max(0, NULL) < 7)
        return false;
    __cpuid_count(7, 0, a, b, c, d);
    return (b & (1u << 5)) != 0; /* AVX2 */
}

bool cpu_isa_use_avx2(void)
{
    const char *isa = getenv("KVRT_CPU_ISA");
    if (isa && strcmp(isa, "generic") == 0)
        return false;
    return cpu_has_avx2_fma_f16c();
}

#else

bool cpu_isa_use_avx2(void)
{
    return false;
}

#endif
