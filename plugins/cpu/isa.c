/*
 * kvrt CPU backend — CPU feature detection for the decode kernels.
 *
 * Asked with cpuid directly: __builtin_cpu_supports does not know "f16c" or
 * "avx512bf16" in every compiler this project supports, and it does not
 * check that the OS saves the wider registers (XCR0).
 */
#include "isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

static const char *const isa_names[CPU_ISA_COUNT] = {"generic", "avx2", "avx512"};

const char *cpu_isa_name(enum cpu_isa isa)
{
    return isa >= 0 && isa < CPU_ISA_COUNT ? isa_names[isa] : "unknown";
}

#if defined(CPU_HAVE_X86_KERNELS) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>

struct x86_features {
    bool avx2;   /* AVX2, FMA, F16C, and the OS saves the YMM state */
    bool avx512; /* the above, AVX-512 F/BW/VL/DQ/BF16, and ZMM/opmask state */
};

static struct x86_features x86_features(void)
{
    struct x86_features f = {false, false};
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return f;
    const unsigned fma = 1u << 12, osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (fma | osxsave | avx | f16c)) != (fma | osxsave | avx | f16c))
        return f;
    /* XCR0: SSE and AVX state (bits 1, 2); opmask, ZMM upper halves and
     * ZMM16-31 (bits 5, 6, 7). */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & 6u) != 6u || __get_cpuid_max(0, NULL) < 7)
        return f;
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = (b & (1u << 5)) != 0;
    const unsigned f512 = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
    bool base512 = f.avx2 && (b & (f512 | dq | bw | vl)) == (f512 | dq | bw | vl) && (lo & 0xe0u) == 0xe0u;
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512 = base512 && (a & (1u << 5)) != 0; /* AVX512_BF16 */
    return f;
}

bool cpu_isa_runs(enum cpu_isa isa)
{
    struct x86_features f = x86_features();
    switch (isa) {
    case CPU_ISA_GENERIC: return true;
    case CPU_ISA_AVX2: return f.avx2;
    case CPU_ISA_AVX512: return f.avx512;
    default: return false;
    }
}

#else

bool cpu_isa_runs(enum cpu_isa isa)
{
    return isa == CPU_ISA_GENERIC;
}

#endif

static const char *const isa_needs[CPU_ISA_COUNT] = {
    "nothing",
    "AVX2, FMA and F16C with the AVX state saved by the OS",
    "AVX-512 F, BW, VL, DQ and BF16 with the ZMM state saved by the OS",
};

int cpu_isa_choose(enum cpu_isa *out, kvrt_plugin_error *err)
{
    enum cpu_isa best = CPU_ISA_GENERIC;
    for (int i = CPU_ISA_COUNT - 1; i > CPU_ISA_GENERIC; i--)
        if (cpu_isa_runs((enum cpu_isa)i)) {
            best = (enum cpu_isa)i;
            break;
        }
    *out = best;
    const char *want = getenv("KVRT_CPU_ISA");
    if (!want || !*want || strcmp(want, "auto") == 0)
        return KVRT_OK;
    int isa = 0;
    while (isa < CPU_ISA_COUNT && strcmp(isa_names[isa], want) != 0)
        isa++;
    if (isa == CPU_ISA_COUNT)
        return cpu_fail(err, KVRT_ERR_INVALID,
                        "KVRT_CPU_ISA=\"%.64s\" is not a decode kernel; valid values are auto, "
                        "avx512, avx2 and generic",
                        want);
    if (!cpu_isa_runs((enum cpu_isa)isa)) {
        char runs[64] = "";
        for (int i = CPU_ISA_COUNT - 1; i >= 0; i--)
            if (cpu_isa_runs((enum cpu_isa)i)) {
                size_t used = strlen(runs);
                snprintf(runs + used, sizeof(runs) - used, "%s%s", used ? ", " : "", isa_names[i]);
            }
        return cpu_fail(err, KVRT_ERR_UNSUPPORTED,
                        "KVRT_CPU_ISA=%s: the %s kernel needs %s, which %s; kernels that run "
                        "here: %s",
                        want, want, isa_needs[isa],
#if defined(CPU_HAVE_X86_KERNELS)
                        "this CPU lacks",
#else
                        "this build of the module does not target",
#endif
                        runs);
    }
    *out = (enum cpu_isa)isa;
    return KVRT_OK;
}
