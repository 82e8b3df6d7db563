#pragma once
// Pearson's chi-square test for the statistical tests: the statistic over
// pooled bins and its p-value through the regularized upper incomplete gamma
// function (series below a + 1, Lentz's continued fraction above; Numerical
// Recipes §6.2).

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace troupe::test {

/// Q(a, x) = Γ(a, x) / Γ(a) for a > 0, x >= 0, to about 1e-14 relative.
inline double regularized_gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  constexpr double epsilon = 1e-15;
  if (x < a + 1.0) {  // P(a, x) = x^a e^-x / Γ(a + 1) · Σ x^n / ((a + 1)···(a + n))
    double term = 1.0 / a, sum = term;
    for (double n = 1.0; n < 10000.0 && std::abs(term) > std::abs(sum) * epsilon; n += 1.0) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  constexpr double tiny = std::numeric_limits<double>::min() / epsilon;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (double i = 1.0; i < 10000.0; i += 1.0) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < epsilon) break;
  }
  return std::exp(log_prefix) * h;
}

/// P(X > statistic) for X chi-square distributed with `degrees` degrees of freedom.
inline double chi_square_p_value(double statistic, int degrees) {
  return regularized_gamma_q(0.5 * degrees, 0.5 * statistic);
}

/// The chi-square test of `observed` counts against `probabilities` (same
/// length; the probabilities sum to 1): cells expecting fewer than 5 are
/// pooled into one bin. Returns the p-value.
inline double chi_square_test(const std::vector<long>& observed, const std::vector<double>& probabilities) {
  double total = 0.0;
  for (long n : observed) total += static_cast<double>(n);
  double statistic = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
  int bins = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    const double expected = probabilities[i] * total;
    if (expected < 5.0) {
      pooled_expected += expected;
      pooled_observed += static_cast<double>(observed[i]);
      continue;
    }
    const double diff = static_cast<double>(observed[i]) - expected;
    statistic += diff * diff / expected;
    ++bins;
  }
  if (pooled_expected > 0.0) {
    const double diff = pooled_observed - pooled_expected;
    statistic += diff * diff / pooled_expected;
    ++bins;
  } else if (pooled_observed > 0.0) {
    return 0.0;  // a draw where nothing may fall
  }
  return chi_square_p_value(statistic, bins - 1);
}

}  // namespace troupe::test
