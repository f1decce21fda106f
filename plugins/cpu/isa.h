/*
 * kvrt CPU backend — which decode kernel runs: the instruction sets the
 * module was built for, what the running CPU executes, KVRT_CPU_ISA.
 */
#ifndef KVRT_CPU_ISA_H
#define KVRT_CPU_ISA_H

#include <stdbool.h>

#include <kvrt/plugin.h>

enum cpu_isa { CPU_ISA_GENERIC, CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_ISA_COUNT };

/* "generic", "avx2", "avx512": the values KVRT_CPU_ISA takes. */
const char *cpu_isa_name(enum cpu_isa isa);

/* The kernel was built into the module and this CPU (and OS) can run it. */
bool cpu_isa_runs(enum cpu_isa isa);

/* KVRT_CPU_ISA when set (a kernel name, or "auto"), else the best kernel the
 * CPU runs.  An unknown value is KVRT_ERR_INVALID and a kernel the CPU
 * cannot run KVRT_ERR_UNSUPPORTED, each with a one-line message. */
int cpu_isa_choose(enum cpu_isa *out, kvrt_plugin_error *err);

#endif
