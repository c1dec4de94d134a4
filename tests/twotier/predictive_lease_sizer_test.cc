#include "throttlekit/twotier/predictive_lease_sizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace throttlekit {
namespace predictive_lease_sizer_test {
namespace {

const LeaseSizer::Options kOptions{.order_cost = 1,
                                   .strand_penalty = 0.01,
                                   .min_batch = 1,
                                   .max_batch = 100'000,
                                   .initial_batch = 16,
                                   .learning_rate = 1.0};

// Total window cost over a demand sequence for a sizer fed `predict(t)`.
template <class Predict>
double run(PredictiveLeaseSizer& sizer, const std::vector<double>& demand,
           Predict predict) {
  double total = 0;
  for (size_t t = 0; t < demand.size(); ++t) {
    const int64_t b = sizer.batch(predict(t));
    total += sizer.robust().cost(static_cast<double>(b), demand[t]);
    sizer.observe(demand[t]);
  }
  return total;
}

double clairvoyant(const std::vector<double>& demand) {
  const LeaseSizer s = *LeaseSizer::create(kOptions);
  double total = 0;
  for (double d : demand) {
    total += s.cost(std::clamp(LeaseSizer::eoq(1, d, 0.01), 1.0, 100'000.0), d);
  }
  return total;
}

double robust_only(const std::vector<double>& demand) {
  LeaseSizer s = *LeaseSizer::create(kOptions);
  double total = 0;
  for (double d : demand) {
    total += s.cost(static_cast<double>(s.batch()), d);
    s.observe(d);
  }
  return total;
}

// Demand that jumps between regimes every 20 windows: hard for a learner
// that only looks back, easy for a good forecast.
std::vector<double> regime_demand(int windows) {
  std::mt19937_64 rng(7);
  std::vector<double> d;
  double level = 1000;
  for (int t = 0; t < windows; ++t) {
    if (t % 20 == 0) level = std::pow(10.0, 1 + (rng() % 4));  // 10 .. 1e4
    d.push_back(level * (0.9 + 0.2 * (rng() % 1000) / 1000.0));
  }
  return d;
}

TEST(PredictiveLeaseSizer, AccurateForecastsApproachTheClairvoyantOptimum) {
  const std::vector<double> demand = regime_demand(2000);
  PredictiveLeaseSizer sizer = *PredictiveLeaseSizer::create(kOptions);
  const double cost = run(sizer, demand, [&](size_t t) { return demand[t]; });
  const double best = clairvoyant(demand);
  EXPECT_LT(cost, 1.05 * best);
  EXPECT_LT(cost, 0.9 * robust_only(demand));
  EXPECT_GT(sizer.prediction_weight(), 0.9);
}

TEST(PredictiveLeaseSizer, UselessForecastsFallBackToTheRobustLearner) {
  const std::vector<double> demand = regime_demand(2000);
  PredictiveLeaseSizer sizer = *PredictiveLeaseSizer::create(kOptions);
  // A forecast wrong by a factor of 10^4 either way.
  const double cost = run(sizer, demand, [&](size_t t) {
    return t % 2 == 0 ? demand[t] * 1e4 : demand[t] / 1e4;
  });
  const double robust = robust_only(demand);
  // Hedge's regret between two experts is O(sqrt(T)) windows of loss at
  // most one optimum each.
  EXPECT_LT(cost, robust + 3 * std::sqrt(2000.0) * clairvoyant(demand) / 2000);
  EXPECT_LT(sizer.prediction_weight(), 0.1);
}

TEST(PredictiveLeaseSizer, NoForecastIsTheRobustLearner) {
  const std::vector<double> demand = regime_demand(300);
  PredictiveLeaseSizer sizer = *PredictiveLeaseSizer::create(kOptions);
  LeaseSizer plain = *LeaseSizer::create(kOptions);
  for (double d : demand) {
    ASSERT_EQ(sizer.batch(std::nan("")), plain.batch());
    sizer.observe(d);
    plain.observe(d);
  }
  EXPECT_EQ(sizer.prediction_weight(), 0.5);
}

TEST(PredictiveLeaseSizer, KeepsTheRangeAndIgnoresBadDemand) {
  auto o = kOptions;
  o.min_batch = 4;
  o.max_batch = 64;
  PredictiveLeaseSizer sizer = *PredictiveLeaseSizer::create(o);
  for (double p : {0.0, 1e300, 5.0, -1.0}) {
    const int64_t b = sizer.batch(p);
    EXPECT_GE(b, 4);
    EXPECT_LE(b, 64);
    sizer.observe(std::nan(""));
    sizer.observe(-3);
    sizer.observe(std::numeric_limits<double>::infinity());
  }
  auto bad = PredictiveLeaseSizer::create({.order_cost = -1});
  EXPECT_NE(bad.status().message().find("order_cost"), std::string::npos);
}

}  // namespace
}  // namespace predictive_lease_sizer_test
}  // namespace throttlekit
