/* The integer helpers of core/values/intmath.h, which the core (spec equality) and
 * the tool (a model's query heads) share. */
#include <stdint.h>

#include "intmath.h"
#include "tap.h"

int main(void)
{
    tap_plan_dynamic();
    tap_ok(kvrt_gcd_u64(12, 18) == 6 && kvrt_gcd_u64(18, 12) == 6, "gcd(12, 18) is 6 either way round");
    tap_ok(kvrt_gcd_u64(7, 0) == 7 && kvrt_gcd_u64(0, 7) == 7 && kvrt_gcd_u64(0, 0) == 0,
           "gcd with 0 is the other number (gcd(0, 0) is 0)");
    tap_ok(kvrt_gcd_u64(UINT64_MAX, UINT64_MAX - 1) == 1, "consecutive numbers at the top are coprime");

    uint64_t l = 0;
    tap_ok(!kvrt_lcm_overflow(4, 6, &l) && l == 12, "lcm(4, 6) is 12");
    tap_ok(!kvrt_lcm_overflow(8, 2, &l) && l == 8, "lcm(8, 2) is 8");
    /* Divided first: the plain product 2^63 x 2 would overflow. */
    tap_ok(!kvrt_lcm_overflow((uint64_t)1 << 63, 2, &l) && l == (uint64_t)1 << 63, "lcm(2^63, 2) is 2^63");
    /* 16777217 x 1099511562241 = 2^64 + 16711681: wrapped, it would pass for
     * a small number. */
    tap_ok(kvrt_lcm_overflow(16777217, 1099511562241ULL, &l), "lcm(16777217, 1099511562241) overflows");
    tap_ok(kvrt_lcm_overflow(UINT64_MAX, UINT64_MAX - 1, &l), "lcm of two coprime numbers near 2^64 overflows");
    return tap_done();
}
