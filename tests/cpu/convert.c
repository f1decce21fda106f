/*
 * The CPU backend's element conversions (plugins/cpu/convert.h), checked
 * against exact references computed here in double precision: round to
 * nearest even at every boundary, infinities, NaNs, subnormals, and
 * exhaustive round trips of every 16- and 8-bit pattern.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "convert.h"
#include "tap.h"

static uint64_t state = 0x853c49e6748fea9bull;
static uint32_t rnd32(void)
{
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(state >> 32);
}

/* Exact value of a small float format, or NaN. */
static double mini_value(uint32_t bits, int ebits, int mbits, int bias, int ieee)
{
    uint32_t sign = bits >> (ebits + mbits) & 1, e = bits >> mbits & ((1u << ebits) - 1),
             m = bits & ((1u << mbits) - 1);
    double v;
    if (ieee && e == (1u << ebits) - 1)
        v = m ? NAN : INFINITY;
    else if (!ieee && e == (1u << ebits) - 1 && m == (1u << mbits) - 1)
        v = NAN;
    else if (e == 0)
        v = ldexp(m, 1 - bias - mbits);
    else
        v = ldexp((double)((1u << mbits) + m), (int)e - bias - mbits);
    return sign ? -v : v;
}

/* Reference narrowing: the nearest representable value, ties to the even
 * pattern, by scanning the (monotonic) positive patterns. */
static uint32_t mini_ref(double x, int ebits, int mbits, int bias, int ieee, uint32_t maxpat, uint32_t overflow)
{
    uint32_t sign = signbit(x) ? 1u << (ebits + mbits) : 0;
    double a = fabs(x);
    uint32_t lo = 0, hi = maxpat;
    if (a >= mini_value(maxpat, ebits, mbits, bias, ieee)) {
        double top = mini_value(maxpat, ebits, mbits, bias, ieee);
        double ulp = top - mini_value(maxpat - 1, ebits, mbits, bias, ieee);
        /* Past the largest finite value by half an ulp or more (a tie goes
         * to the even pattern above, which is out of range). */
        if (a > top + ulp / 2 || (a == top + ulp / 2 && (maxpat & 1)))
            return sign | overflow;
        if (a >= top)
            return sign | maxpat;
    }
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (mini_value(mid, ebits, mbits, bias, ieee) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double dl = a - mini_value(lo, ebits, mbits, bias, ieee);
    double dh = mini_value(hi, ebits, mbits, bias, ieee) - a;
    uint32_t pick = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
    return sign | pick;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Random floats around the interesting ranges of the 16-bit formats. */
static float rnd_float(int lo_exp, int hi_exp)
{
    uint32_t e = (uint32_t)(lo_exp + (int)(rnd32() % (uint32_t)(hi_exp - lo_exp + 1)));
    return from_bits((rnd32() & 0x80000000u) | e << 23 | (rnd32() & 0x7fffffu));
}

int main(void)
{
    tap_plan_dynamic();

    /* ---- bf16 ---- */
    struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } bf[] = {
        {0x3f800000, 0x3f80, "1.0"},
        {0x3f808000, 0x3f80, "tie to even (down)"},
        {0x3f818000, 0x3f82, "tie to even (up)"},
        {0x3f808001, 0x3f81, "just above a tie"},
        {0x3f807fff, 0x3f80, "just below a tie"},
        {0x7f800000, 0x7f80, "+inf"},
        {0xff800000, 0xff80, "-inf"},
        {0x7f7fffff, 0x7f80, "FLT_MAX rounds to inf"},
        {0x7f7f7fff, 0x7f7f, "largest that stays finite"},
        {0x00010000, 0x0001, "subnormal kept"},
        {0x00008000, 0x0000, "half the smallest subnormal: tie to 0"},
        {0x00018000, 0x0002, "subnormal tie to even (up)"},
        {0x80000000, 0x8000, "-0"},
    };
    for (size_t i = 0; i < sizeof(bf) / sizeof(bf[0]); i++) {
        uint16_t got = cpu_f32_to_bf16(from_bits(bf[i].in));
        tap_ok(got == bf[i].out, "bf16 of 0x%08x (%s) = 0x%04x (got 0x%04x)", bf[i].in, bf[i].what, bf[i].out, got);
    }
    uint16_t nan16 = cpu_f32_to_bf16(from_bits(0x7f800001));
    tap_ok((nan16 & 0x7f80) == 0x7f80 && (nan16 & 0x7f), "bf16 of a NaN with low payload stays NaN (0x%04x)", nan16);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = cpu_bf16_to_f32((uint16_t)h);
        uint16_t back = cpu_f32_to_bf16(f);
        bool nan = ((h & 0x7f80) == 0x7f80) && (h & 0x7f);
        bad += nan ? !isnan(f) || (back & 0x7fff) <= 0x7f80 : back != h;
    }
    tap_ok(bad == 0, "bf16 -> fp32 -> bf16 returns all 65536 patterns (%d differ)", bad);
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float f = rnd_float(0, 254);
        uint16_t want = (uint16_t)mini_ref(f, 8, 7, 127, 1, 0x7f7f, 0x7f80);
        bad += cpu_f32_to_bf16(f) != want;
    }
    tap_ok(bad == 0, "bf16 narrowing matches the exact reference on 200000 floats (%d differ)", bad);

    /* ---- fp16 ---- */
    struct {
        float in;
        uint16_t out;
        const char *what;
    } hf[] = {
        {1.0f, 0x3c00, "1.0"},
        {65504.0f, 0x7bff, "largest finite"},
        {65519.996f, 0x7bff, "just below the overflow tie"},
        {65520.0f, 0x7c00, "overflow tie rounds to inf"},
        {INFINITY, 0x7c00, "+inf"},
        {-INFINITY, 0xfc00, "-inf"},
        {0x1p-14f, 0x0400, "smallest normal"},
        {0x1p-24f, 0x0001, "smallest subnormal"},
        {0x1p-25f, 0x0000, "half the smallest subnormal: tie to 0"},
        {0x1.000002p-25f, 0x0001, "just above that tie"},
        {0x3p-25f, 0x0002, "subnormal tie to even (up)"},
        {0x1.ff8p-15f, 0x03ff, "largest subnormal"},
        {0x1.ffcp-15f, 0x0400, "tie rounds up into the normals (even)"},
        {0x1.ffbp-15f, 0x03ff, "just below that tie"},
        {1.0f + 0x1p-11f, 0x3c00, "normal tie to even (down)"},
        {1.0f + 0x3p-11f, 0x3c02, "normal tie to even (up)"},
        {-0.0f, 0x8000, "-0"},
        {1e-10f, 0x0000, "underflow"},
    };
    for (size_t i = 0; i < sizeof(hf) / sizeof(hf[0]); i++) {
        uint16_t got = cpu_f32_to_f16(hf[i].in);
        tap_ok(got == hf[i].out, "fp16 of %a (%s) = 0x%04x (got 0x%04x)", (double)hf[i].in, hf[i].what, hf[i].out, got);
    }
    uint16_t hn = cpu_f32_to_f16(NAN);
    tap_ok((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff), "fp16 of NaN is NaN (0x%04x)", hn);
    tap_ok(isnan(cpu_f16_to_f32(0x7c01)) && isinf(cpu_f16_to_f32(0xfc00)) && cpu_f16_to_f32(0xfc00) < 0 &&
               cpu_f16_to_f32(0x0001) == 0x1p-24f && cpu_f16_to_f32(0x03ff) == 0x1.ff8p-15f &&
               signbit(cpu_f16_to_f32(0x8000)),
           "fp16 widening: NaN, -inf, subnormals, -0");
    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = cpu_f16_to_f32((uint16_t)h);
        double want = mini_value(h, 5, 10, 15, 1);
        uint16_t back = cpu_f32_to_f16(f);
        if (isnan(want))
            bad += !isnan(f) || !((back & 0x7c00) == 0x7c00 && (back & 0x3ff));
        else
            bad += (double)f != want || back != h;
    }
    tap_ok(bad == 0, "fp16 widening exact and round trip on all 65536 patterns (%d differ)", bad);
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float f = rnd_float(90, 150);
        uint16_t want = (uint16_t)mini_ref(f, 5, 10, 15, 1, 0x7bff, 0x7c00);
        uint16_t got = cpu_f32_to_f16(f);
        if (got != want && bad++ < 3)
            tap_diag("  %a: got 0x%04x want 0x%04x", (double)f, got, want);
    }
    tap_ok(bad == 0, "fp16 narrowing matches the exact reference on 200000 floats (%d differ)", bad);

    /* ---- fp8 ---- */
    bad = 0;
    for (uint32_t b = 0; b < 256; b++) {
        double w4 = mini_value(b, 4, 3, 7, 0), w5 = mini_value(b, 5, 2, 15, 1);
        float f4 = cpu_e4m3_to_f32((uint8_t)b), f5 = cpu_e5m2_to_f32((uint8_t)b);
        bad += isnan(w4) ? !isnan(f4) || (cpu_f32_to_e4m3(f4) & 0x7f) != 0x7f
                         : (double)f4 != w4 || cpu_f32_to_e4m3(f4) != b;
        bad += isnan(w5) ? !isnan(f5) || (cpu_f32_to_e5m2(f5) & 0x7f) <= 0x7c
                         : (double)f5 != w5 || cpu_f32_to_e5m2(f5) != b;
    }
    tap_ok(bad == 0, "fp8 e4m3/e5m2 widening exact and round trip on all 256 patterns (%d differ)", bad);
    bad = 0;
    for (int i = 0; i < 100000; i++) {
        float f = rnd_float(100, 150);
        uint8_t w4 = (uint8_t)mini_ref(f, 4, 3, 7, 0, 0x7e, 0x7e); /* saturating */
        uint8_t w5 = (uint8_t)mini_ref(f, 5, 2, 15, 1, 0x7b, 0x7c);
        uint8_t g4 = cpu_f32_to_e4m3(f), g5 = cpu_f32_to_e5m2(f);
        if ((g4 != w4 || g5 != w5) && bad++ < 3)
            tap_diag("  %a: e4m3 0x%02x/0x%02x e5m2 0x%02x/0x%02x", (double)f, g4, w4, g5, w5);
    }
    tap_ok(bad == 0, "fp8 narrowing matches the exact reference on 100000 floats (%d differ)", bad);
    tap_ok(cpu_f32_to_e4m3(448.0f) == 0x7e && cpu_f32_to_e4m3(1e6f) == 0x7e && cpu_f32_to_e4m3(-INFINITY) == 0xfe &&
               cpu_f32_to_e4m3(0x1p-9f) == 0x01 && cpu_f32_to_e4m3(0x1p-10f) == 0x00 &&
               cpu_f32_to_e4m3(0x1.8p-10f) == 0x01,
           "e4m3: 448, saturation, -inf saturates, subnormals and the zero tie");
    tap_ok(cpu_f32_to_e5m2(57344.0f) == 0x7b && cpu_f32_to_e5m2(61440.0f) == 0x7c &&
               cpu_f32_to_e5m2(-INFINITY) == 0xfc && cpu_f32_to_e5m2(0x1p-16f) == 0x01,
           "e5m2: largest finite, overflow tie to inf, -inf, smallest subnormal");
    return tap_done();
}
