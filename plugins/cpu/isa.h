/*
 * kvrt CPU backend — which decode kernel the running CPU can execute.
 */
#ifndef KVRT_CPU_ISA_H
#define KVRT_CPU_ISA_H

#include <stdbool.h>

/* true when the AVX2 kernel was built, the CPU has AVX2, FMA and F16C, the
 * OS saves the AVX registers, and KVRT_CPU_ISA is not "generic". */
bool cpu_isa_use_avx2(void);

#endif
