// The chi-square helpers of the statistical tests against closed forms and
// published quantiles.

#include "tests/kernels/chi_square.hpp"

#include <gtest/gtest.h>

namespace troupe {
namespace {

using test::chi_square_p_value;
using test::chi_square_test;
using test::regularized_gamma_q;

TEST(ChiSquare, GammaQMatchesClosedForms) {
  for (double x : {0.01, 0.3, 1.0, 2.5, 7.0, 30.0, 90.0}) {
    EXPECT_NEAR(regularized_gamma_q(1.0, x), std::exp(-x), 1e-13 * std::max(1.0, std::exp(-x)) + 1e-300) << x;
    EXPECT_NEAR(regularized_gamma_q(2.0, x), std::exp(-x) * (1.0 + x), 1e-12) << x;
    EXPECT_NEAR(regularized_gamma_q(0.5, x), std::erfc(std::sqrt(x)), 1e-12) << x;
  }
  EXPECT_EQ(regularized_gamma_q(3.0, 0.0), 1.0);
}

TEST(ChiSquare, PValuesMatchPublishedQuantiles) {
  // scipy.stats.chi2.ppf(1 - alpha, df)
  EXPECT_NEAR(chi_square_p_value(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_p_value(6.634896601021214, 1), 0.01, 1e-9);
  EXPECT_NEAR(chi_square_p_value(18.307038053275146, 10), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_p_value(135.80672317102676, 100), 0.01, 1e-9);
  EXPECT_NEAR(chi_square_p_value(124.34211340400407, 100), 0.05, 1e-9);
}

TEST(ChiSquare, TestPoolsSmallCellsAndRejectsImpossibleDraws) {
  EXPECT_NEAR(chi_square_test({50, 50}, {0.5, 0.5}), 1.0, 1e-12);
  // 60 vs 40 of a fair coin: statistic 4, one degree of freedom.
  EXPECT_NEAR(chi_square_test({60, 40}, {0.5, 0.5}), chi_square_p_value(4.0, 1), 1e-12);
  // The two rare cells pool into one bin expecting 2 + 2.
  EXPECT_NEAR(chi_square_test({48, 48, 2, 2}, {0.48, 0.48, 0.02, 0.02}), 1.0, 1e-12);
  EXPECT_EQ(chi_square_test({99, 1}, {1.0, 0.0}), 0.0);
}

}  // namespace
}  // namespace troupe
