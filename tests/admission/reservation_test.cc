// The cost axis when cost is known only afterwards: LearnedReservation
// (converges to the critical fractile, stays in range, rejects bad options
// and observations), PredictiveReservation (Hedge follows a good predictor
// and abandons a bad one), and the metered flow through
// UnifiedAdmission::admit_reserved, whose safety lives in the meter: no
// reservation sequence, however adversarial, lets a window serve more than
// budget + largest debit - 1 (RapidCheck).

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/test_time.h"
#include "throttlekit/admission/learned_reservation.h"
#include "throttlekit/admission/predictive_reservation.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/token_budget.h"

namespace throttlekit {
namespace reservation_test {
namespace {

using testing::kEpoch;

TEST(LearnedReservation, RejectsBadOptionsNamingTheField) {
  const auto field_of = [](LearnedReservationOptions o) {
    absl::StatusOr<LearnedReservation> r = LearnedReservation::create(o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  const LearnedReservationOptions ok{.min = 1, .max = 100};
  ASSERT_TRUE(LearnedReservation::create(ok).ok());
  LearnedReservationOptions o = ok;
  o.min = 0;
  EXPECT_NE(field_of(o).find("learned_reservation.min"), std::string::npos);
  o = ok;
  o.max = 0.5;
  EXPECT_NE(field_of(o).find("learned_reservation.max"), std::string::npos);
  o = ok;
  o.over_cost = std::nan("");
  EXPECT_NE(field_of(o).find("over_cost"), std::string::npos);
  o = ok;
  o.under_cost = -1;
  EXPECT_NE(field_of(o).find("under_cost"), std::string::npos);
  o = ok;
  o.initial = 101;
  EXPECT_NE(field_of(o).find("initial"), std::string::npos);
  o = ok;
  o.step_scale = INFINITY;
  EXPECT_NE(field_of(o).find("step_scale"), std::string::npos);
}

// Costs uniform on [100, 1000], h = 1, p = 9: the pinball optimum is the
// 0.9 quantile (910). The learner ends near it.
TEST(LearnedReservation, ConvergesToTheCriticalFractile) {
  LearnedReservation r = *LearnedReservation::create(
      {.min = 1, .max = 2000, .over_cost = 1, .under_cost = 9});
  EXPECT_EQ(r.reserve(), 2000);  // starts at the safe end
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> cost(100, 1000);
  for (int i = 0; i < 50'000; ++i) r.observe(cost(rng));
  std::printf("estimate after 50000 costs: %.1f (target 910)\n", r.estimate());
  EXPECT_NEAR(r.estimate(), 910, 45);
  EXPECT_EQ(r.observed(), 50'000);
}

TEST(LearnedReservation, IgnoresNonsenseObservations) {
  LearnedReservation r = *LearnedReservation::create({.min = 1, .max = 50});
  EXPECT_FALSE(r.observe(std::nan("")));
  EXPECT_FALSE(r.observe(-3));
  EXPECT_FALSE(r.observe(INFINITY));
  EXPECT_EQ(r.observed(), 0);
  EXPECT_EQ(r.reserve(), 50);
}

RC_GTEST_PROP(LearnedReservationProperty, AlwaysWithinRange, ()) {
  const double lo = *rc::gen::inRange(1, 100);
  const double hi = lo + *rc::gen::inRange(0, 10'000);
  LearnedReservation r = *LearnedReservation::create(
      {.min = lo,
       .max = hi,
       .over_cost = *rc::gen::inRange(1, 20) / 2.0,
       .under_cost = *rc::gen::inRange(1, 20) / 2.0});
  const auto costs = *rc::gen::container<std::vector<int64_t>>(
      rc::gen::inRange<int64_t>(0, int64_t{1} << 40));
  for (int64_t c : costs) {
    r.observe(static_cast<double>(c));
    RC_ASSERT(r.reserve() >= lo);
    RC_ASSERT(r.reserve() <= hi);
  }
}

TEST(PredictiveReservation, FollowsAnAccuratePredictor) {
  PredictiveReservation p =
      *PredictiveReservation::create({.learned = {.min = 1, .max = 4000}});
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> len(50, 1500);
  for (int i = 0; i < 3000; ++i) {
    const double pred = len(rng);
    p.observe(pred, pred);  // the prediction is exact
  }
  EXPECT_GT(p.follow_weight(), 0.99);
  EXPECT_EQ(p.reserve(321), 321);
  EXPECT_EQ(p.reserve(1400), 1400);
}

TEST(PredictiveReservation, AbandonsAUselessPredictor) {
  PredictiveReservation p =
      *PredictiveReservation::create({.learned = {.min = 1, .max = 4000}});
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int> noise(1, 4000), actual(200, 300);
  for (int i = 0; i < 3000; ++i) p.observe(noise(rng), actual(rng));
  EXPECT_LT(p.follow_weight(), 0.01);
  const int64_t robust = p.robust().reserve();
  EXPECT_NEAR(static_cast<double>(p.reserve(3999)), robust, 40);
  // No prediction: the robust expert alone, and nothing charged.
  EXPECT_EQ(p.reserve(std::nan("")), robust);
  EXPECT_EQ(PredictiveReservation::create({.learned = {.max = 5}, .eta = 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// The metered flow on a token budget over a manual clock.
using Meter = RateLimiter<TokenBudget, ClockRef<ManualClock>>;
using Adm =
    BasicUnifiedAdmission<NoAxis, Meter, ClockRef<ManualClock>, MonotonicClock>;

struct Flow {
  ManualClock clock{kEpoch};
  std::shared_ptr<Meter> meter;
  std::unique_ptr<Adm> adm;
  Flow(int64_t budget, int64_t window_ms, int64_t slots) {
    meter = std::make_shared<Meter>(
        *Meter::create({.budget = budget, .window_ms = window_ms}, {},
                       ClockRef<ManualClock>(clock)));
    adm = *Adm::create({.max_inflight = slots, .cost = meter},
                       ClockRef<ManualClock>(clock));
  }
};

TEST(MeteredAdmission, GateDoesNotDebitAndStreamsDebitThroughTheMeter) {
  Flow f(100, 1000, 4);
  absl::StatusOr<Admission> a = f.adm->admit_reserved("tenant", 60);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->allowed());
  EXPECT_EQ(f.meter->peek("tenant")->remaining, 100);  // nothing debited
  EXPECT_TRUE(a->debit(30)->allowed);
  EXPECT_TRUE(a->debit(30)->allowed);
  EXPECT_EQ(a->debited(), 60);
  // 40 left: a reservation of 50 does not fit and takes no slot.
  absl::StatusOr<Admission> b = f.adm->admit_reserved("tenant", 50);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->allowed());
  EXPECT_EQ(b->binding_axis(), Axis::kCost);
  EXPECT_EQ(b->decision().retry_after_ms, 1000);  // the window's end
  EXPECT_EQ(f.adm->concurrency()->inflight(), 1);
  EXPECT_EQ(b->debit(1).status().code(), absl::StatusCode::kFailedPrecondition);
  // The stream runs past the budget: the crossing debit counts in full,
  // the next is refused (stop the stream).
  EXPECT_TRUE(a->debit(45)->allowed);
  EXPECT_FALSE(a->debit(1)->allowed);
  EXPECT_EQ(a->debited(), 105);
  // A plain admission has no meter.
  absl::StatusOr<Admission> plain = f.adm->admit_at("tenant", kEpoch, 1);
  EXPECT_EQ(plain->debit(1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Bad reservations.
  EXPECT_EQ(f.adm->admit_reserved("tenant", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.adm->admit_reserved("", 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto no_cost = UnifiedAdmission<>::create({});
  EXPECT_EQ((*no_cost)->admit_reserved("t", 5).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Streams opened with arbitrary (adversarial) reservations, debiting
// arbitrary chunks, interleaved, across windows: no window serves more
// than budget + largest debit - 1, whatever the reservations.
RC_GTEST_PROP(MeteredAdmissionProperty, NoReservationBreachesTheBudget, ()) {
  const int64_t budget = *rc::gen::inRange<int64_t>(20, 400);
  const int64_t window_ms = 1000;
  Flow f(budget, window_ms, 8);
  std::vector<Admission> open;
  std::map<int64_t, int64_t> served;  // window start -> tokens served
  int64_t largest = 1;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    const int op = *rc::gen::inRange(0, 10);
    if (op < 3) {  // open a stream with any reservation
      const double reserve = *rc::gen::inRange<int64_t>(1, 2 * budget);
      absl::StatusOr<Admission> a = f.adm->admit_reserved("t", reserve);
      RC_ASSERT(a.ok());
      if (a->allowed()) open.push_back(*std::move(a));
    } else if (op < 9 && !open.empty()) {  // debit a chunk on one stream
      const size_t s = *rc::gen::inRange<size_t>(0, open.size());
      const int64_t units = *rc::gen::inRange<int64_t>(1, budget / 2 + 2);
      absl::StatusOr<Decision> d = open[s].debit(static_cast<double>(units));
      RC_ASSERT(d.ok());
      if (d->allowed) {
        served[d->reset_at_ms - window_ms] += units;
        largest = std::max(largest, units);
      } else {
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(s));
      }
    } else {  // time passes; streams may finish
      f.clock.advance_ms(*rc::gen::inRange<int64_t>(0, 400));
      if (!open.empty() && *rc::gen::arbitrary<bool>()) open.pop_back();
    }
  }
  for (const auto& [window, tokens] : served) {
    RC_ASSERT(tokens <= budget + largest - 1);
  }
  open.clear();
  RC_ASSERT(f.adm->concurrency()->inflight() == 0);
}

}  // namespace
}  // namespace reservation_test
}  // namespace throttlekit
