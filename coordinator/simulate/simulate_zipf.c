/*
 * simulate_zipf.c: the random numbers of `ringctl simulate`: a seeded
 * PRNG and a Zipf sampler, both deterministic across runs and machines
 * (IEEE doubles, libm's log/exp family only).
 *
 * Sections: SplitMix64; Zipf by rejection-inversion.
 */
#include "simulate.h"

#include <math.h>

/* -------------------------------------------------------------- SplitMix64 */

uint64_t sim_rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double sim_rng_unit(uint64_t *state) { return (double)(sim_rng_next(state) >> 11) * 0x1p-53; }

/* -------------------------------------------- Zipf by rejection-inversion */

/* Hoermann and Derflinger, "Rejection-inversion to generate variates from
 * monotone discrete distributions" (1996), as in Apache Commons RNG's
 * RejectionInversionZipfSampler: draw from the continuous hat function
 * h(x) = x^-s by inverting its integral H, round to a rank, and accept
 * unless the draw fell in the hat's excess over the rank's mass. */

/* log1p(x)/x and expm1(x)/x, by their series near 0 where dividing loses
 * every digit (and at s = 1, where (1-s) log x is exactly 0). */
static double log1p_over(double x) {
  return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}

static double expm1_over(double x) {
  return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x * (1.0 / 3) * (1 + 0.25 * x));
}

static double hat(double s, double x) { return exp(-s * log(x)); }

/* H(x) = (x^(1-s) - 1) / (1-s), log x at s = 1. */
static double hat_integral(double s, double x) {
  const double lx = log(x);
  return expm1_over((1 - s) * lx) * lx;
}

static double hat_integral_inverse(double s, double x) {
  double t = x * (1 - s);
  if (t < -1)
    t = -1; /* rounding can step just past the domain */
  return exp(log1p_over(t) * x);
}

void sim_zipf_init(sim_zipf *z, uint64_t n, double s) {
  z->n = n;
  z->s = s;
  z->h_x1 = hat_integral(s, 1.5) - 1;
  z->h_n = hat_integral(s, (double)n + 0.5);
  z->accept = 2 - hat_integral_inverse(s, hat_integral(s, 2.5) - hat(s, 2));
}

uint64_t sim_zipf_draw(const sim_zipf *z, uint64_t *rng) {
  if (z->n == 1)
    return 1;
  for (;;) {
    const double u = z->h_n + sim_rng_unit(rng) * (z->h_x1 - z->h_n);
    const double x = hat_integral_inverse(z->s, u);
    double k = floor(x + 0.5);
    k = k < 1 ? 1 : k > (double)z->n ? (double)z->n : k;
    if (k - x <= z->accept || u >= hat_integral(z->s, k + 0.5) - hat(z->s, k))
      return (uint64_t)k;
  }
}
