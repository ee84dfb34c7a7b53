/*
** half.c
** The low-precision formats (float16, bfloat16, float8_e4m3, float8_e5m2):
** rounding a double into one, and widening one back, with the results of
** CUDA's __double2half, __double2bfloat16 and __nv_cvt_double_to_fp8(...,
** __NV_SATFINITE, ...) bit for bit (doc/dtypes.md states the rules). A float
** widens to a double exactly, so rounding (double)f is __float2half_rn(f)
** and the others too: one rounding serves both widths.
**
** The formats differ in a few numbers only, so one routine, driven by a
** table, does all four: a bug is then a bug in every format, which the
** tests over every bit pattern catch at once.
*/

#include "config.h"

#include <math.h>

#include "culua_int.h"


typedef struct Format {
  int m;               /* stored mantissa bits */
  int bias;
  unsigned sign;       /* the sign bit */
  unsigned maxfinite;  /* bits of the largest finite value */
  unsigned overflow;   /* what a value past it becomes: inf, or maxfinite (SATFINITE) */
  unsigned nan;        /* the NaN every NaN becomes */
  int ieee;            /* an all-ones exponent is inf or NaN (not e4m3's) */
} Format;

static const Format formats[] = {
  /* float16 */      {10, 15, 0x8000, 0x7bff, 0x7c00, 0x7fff, 1},
  /* bfloat16 */     {7, 127, 0x8000, 0x7f7f, 0x7f80, 0x7fff, 1},
  /* float8_e4m3 */  {3, 7, 0x80, 0x7e, 0x7e, 0x7f, 0},
  /* float8_e5m2 */  {2, 15, 0x80, 0x7b, 0x7b, 0x7f, 1},
};


static const Format *format (culua_Dtype t) {
  return &formats[t - CULUA_FLOAT16];
}


/*
** Round x to nearest, ties to even, written out rather than left to rint()
** so that no rounding mode a host program set can change the answer.
** s is below 2^53 and its fraction exact, so the subtraction is too.
*/
static double round_even (double s) {
  double fl = floor(s), d = s - fl;
  if (d > 0.5 || (d == 0.5 && fmod(fl, 2.0) != 0)) fl += 1;
  return fl;
}


/*
** The bits of a = |x| (not NaN) in format f, before overflow is handled:
** more than f->maxfinite when a rounds past the largest finite value.
** Scale a so that one unit is the format's spacing at a's exponent (held at
** the least normal exponent below it, which makes the subnormals), round
** once, then the bits are the exponent steps above the least normal one,
** times 2^m, plus the rounded count: a count that carries to 2^(m+1) lands
** on the next exponent by itself, and a subnormal that rounds up to 2^m on
** the least normal value.
*/
static unsigned round_mag (const Format *f, double a) {
  int emin = 1 - f->bias, e;
  if (a >= ldexp(1.0, f->bias + 2)) return ~0u;   /* past every format's range, inf too */
  if (a == 0) return 0;
  (void)frexp(a, &e);
  e -= 1;                        /* a = 1.x * 2^e */
  if (e < emin) e = emin;
  return ((unsigned)(e - emin) << f->m) + (unsigned)round_even(ldexp(a, f->m - e));
}


unsigned culua_lowp_round (culua_Dtype t, double x) {
  const Format *f = format(t);
  unsigned sign = signbit(x) ? f->sign : 0, bits;
  if (isnan(x)) return f->nan;   /* the sign of a NaN is dropped, as CUDA's float paths do */
  bits = round_mag(f, fabs(x));
  return sign | (bits > f->maxfinite ? f->overflow : bits);
}


/*
** 1 when rounding x into t keeps it: NaN, an infinity where t has one, a
** finite number that rounds to a finite value. 0 where it overflows (to
** inf, or saturating to the largest finite value).
*/
int culua_lowp_fits (culua_Dtype t, double x) {
  const Format *f = format(t);
  if (isnan(x)) return 1;
  if (isinf(x)) return f->overflow != f->maxfinite;
  return round_mag(f, fabs(x)) <= f->maxfinite;
}


/* the exact value of the bits b of format t */
double culua_lowp_widen (culua_Dtype t, unsigned b) {
  const Format *f = format(t);
  unsigned mag = b & (f->sign - 1), ebits = mag >> f->m, frac = mag & ((1u << f->m) - 1);
  unsigned eall = (f->sign - 1) >> f->m;   /* an all-ones exponent field */
  double v;
  if (f->ieee ? ebits == eall : mag == f->nan) {
    if (f->ieee && frac == 0) v = HUGE_VAL;
    else return NAN;
  }
  else if (ebits == 0) v = ldexp((double)frac, 1 - f->bias - f->m);
  else v = ldexp((double)(frac | (1u << f->m)), (int)ebits - f->bias - f->m);
  return (b & f->sign) ? -v : v;
}


/* the largest finite value of format t (error messages, saturation) */
double culua_lowp_max (culua_Dtype t) {
  return culua_lowp_widen(t, format(t)->maxfinite);
}
