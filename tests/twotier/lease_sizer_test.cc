#include "throttlekit/twotier/lease_sizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace throttlekit {
namespace lease_sizer_test {
namespace {

LeaseSizer make(LeaseSizer::Options o = {}) {
  absl::StatusOr<LeaseSizer> s = LeaseSizer::create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LeaseSizer, EoqMinimisesTheWindowCost) {
  const LeaseSizer s = make({.order_cost = 2, .strand_penalty = 0.05});
  const double demand = 4000;
  const double best = LeaseSizer::eoq(2, demand, 0.05);
  EXPECT_DOUBLE_EQ(best, std::sqrt(2 * 2 * 4000 / 0.05));
  for (double f : {0.5, 0.9, 1.1, 2.0}) {
    EXPECT_LT(s.cost(best, demand), s.cost(best * f, demand));
  }
}

TEST(LeaseSizer, ConvergesToTheEoqOnSteadyDemand) {
  LeaseSizer s = make({.initial_batch = 2});
  const double best = LeaseSizer::eoq(1, 5000, 0.01);  // 1000
  for (int t = 0; t < 2000; ++t) s.observe(5000);
  EXPECT_NEAR(static_cast<double>(s.batch()), best, best * 0.05);
}

// Total cost over T windows of the learner minus that of the best fixed
// batch in hindsight.
double regret(const std::vector<double>& demand, LeaseSizer s) {
  double learner = 0;
  double mean = 0;
  for (double d : demand) {
    learner += s.cost(static_cast<double>(s.batch()), d);
    s.observe(d);
    mean += d;
  }
  mean /= static_cast<double>(demand.size());
  // f is convex in b with sum_t f_t minimised at the EOQ of the mean demand.
  const double best_b = LeaseSizer::eoq(1, mean, 0.01);
  double fixed = 0;
  for (double d : demand) fixed += s.cost(best_b, d);
  return learner - fixed;
}

TEST(LeaseSizer, RegretIsSublinear) {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> noisy(std::log(3000.0), 0.5);
  std::vector<double> demand(40000);
  for (double& d : demand) d = noisy(rng);
  const LeaseSizer s = make({.initial_batch = 1});
  std::vector<double> per_window;
  for (size_t t : {2500, 10000, 40000}) {
    std::vector<double> prefix(demand.begin(), demand.begin() + t);
    const double r = regret(prefix, s);
    EXPECT_GE(r, -1e-6 * static_cast<double>(t));  // hindsight is optimal
    per_window.push_back(r / static_cast<double>(t));
  }
  // Average regret per window falls as T grows (sublinear total regret).
  EXPECT_LT(per_window[1], per_window[0] * 0.75);
  EXPECT_LT(per_window[2], per_window[1] * 0.75);
}

TEST(LeaseSizer, TracksADriftingOptimumBetterThanAnyFixedBatch) {
  // Demand drifts from 100 to 100000 per window over the run.
  std::vector<double> demand(6000);
  for (size_t t = 0; t < demand.size(); ++t) {
    demand[t] = 100 * std::pow(1000.0, static_cast<double>(t) / 6000.0);
  }
  LeaseSizer s = make({.initial_batch = 10});
  double learner = 0;
  for (double d : demand) {
    learner += s.cost(static_cast<double>(s.batch()), d);
    s.observe(d);
  }
  double best_fixed = INFINITY;
  for (double b = 1; b <= 1e6; b *= 1.05) {
    double c = 0;
    for (double d : demand) c += s.cost(b, d);
    best_fixed = std::min(best_fixed, c);
  }
  EXPECT_LT(learner, best_fixed);
  EXPECT_NEAR(static_cast<double>(s.batch()),
              LeaseSizer::eoq(1, demand.back(), 0.01),
              LeaseSizer::eoq(1, demand.back(), 0.01) * 0.15);
}

TEST(LeaseSizer, StaysInItsRangeAndIgnoresBadDemand) {
  LeaseSizer s = make({.min_batch = 4, .max_batch = 64, .initial_batch = 1});
  EXPECT_EQ(s.batch(), 4);
  for (int t = 0; t < 1000; ++t) s.observe(1e12);
  EXPECT_EQ(s.batch(), 64);
  LeaseSizer idle =
      make({.min_batch = 4, .max_batch = 64, .initial_batch = 64});
  for (int t = 0; t < 1000; ++t) idle.observe(0);
  EXPECT_EQ(idle.batch(), 4);
  const int64_t before = s.batch();
  s.observe(std::nan(""));
  s.observe(-5);
  s.observe(INFINITY);
  EXPECT_EQ(s.batch(), before);
}

TEST(LeaseSizer, OptionsAreValidated) {
  EXPECT_FALSE(LeaseSizer::create({.order_cost = 0}).ok());
  EXPECT_FALSE(LeaseSizer::create({.strand_penalty = -1}).ok());
  EXPECT_FALSE(LeaseSizer::create({.min_batch = 0}).ok());
  EXPECT_FALSE(LeaseSizer::create({.min_batch = 10, .max_batch = 5}).ok());
  EXPECT_FALSE(LeaseSizer::create({.learning_rate = std::nan("")}).ok());
  EXPECT_EQ(LeaseSizer::create({.max_batch = 0}).status().message(),
            "lease_sizer.max_batch must be in [1, 9007199254740991]; got 0");
}

}  // namespace
}  // namespace lease_sizer_test
}  // namespace throttlekit
