#include "throttlekit/concurrency/adaptive_concurrency.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "support/allocation_counter.h"
#include "throttlekit/concurrency/aimd.h"
#include "throttlekit/concurrency/gradient2.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace adaptive_concurrency_test {
namespace {

using Limiter = BasicAdaptiveConcurrency<NanoClockRef<ManualMonotonicClock>>;
using Outcome = Limiter::Outcome;

// A large monotonic start (ns), so no arithmetic leans on small values.
constexpr int64_t kStartNs = 1'700'000'000'000 * int64_t{1'000'000};

// A limiter on a manual clock, with verbs in the manner of Envoy's
// controller tests: `hold` occupies slots (so later samples count as
// utilized), `sample` runs one request of a given latency.
class Harness {
 public:
  explicit Harness(const AdaptiveConcurrencyOptions& options) {
    auto created = Limiter::create(options, NanoClockRef(clock));
    EXPECT_TRUE(created.ok()) << created.status();
    limiter = *std::move(created);
  }

  // Acquires `n` more slots and keeps them until `drop_holds`.
  void hold(int n) {
    for (int i = 0; i < n; ++i) {
      Limiter::Permit lease = limiter->acquire();
      ASSERT_TRUE(lease) << "hold " << i;
      held.push_back(std::move(lease));
    }
  }
  void drop_holds() { held.clear(); }

  // One request that takes `rtt_ns` and ends with `outcome`.
  void sample(int64_t rtt_ns, Outcome outcome = Outcome::kSuccess) {
    Limiter::Permit lease = limiter->acquire();
    ASSERT_TRUE(lease);
    clock.advance_ns(rtt_ns);
    lease.release(outcome);
  }

  Limiter::Stats stats() const { return limiter->stats(); }

  ManualMonotonicClock clock{kStartNs};
  std::unique_ptr<Limiter> limiter;
  std::vector<Limiter::Permit> held;  // destroyed before `limiter`
};

// The per-sample law (one step per success, rolling window, no pins), which
// most of these tests pin formula by formula; the defaults have their own
// tests below ("Defaults").
AdaptiveConcurrencyOptions gradient2_options(int64_t initial = 20) {
  AdaptiveConcurrencyOptions o =
      AdaptiveConcurrencyOptions::per_sample_gradient2();
  o.initial_limit = initial;
  o.min_limit = 1;
  o.max_limit = 1000;
  o.rtt_window = 10;
  return o;
}

// ---- Leases -------------------------------------------------------------

TEST(AdaptiveConcurrency, GrantsUpToTheLimitThenRejects) {
  Harness h(gradient2_options(3));
  Limiter::Permit a = h.limiter->acquire();
  Limiter::Permit b = h.limiter->acquire();
  Limiter::Permit c = h.limiter->acquire();
  Limiter::Permit d = h.limiter->acquire();
  EXPECT_TRUE(a && b && c);
  EXPECT_FALSE(d);
  EXPECT_EQ(h.limiter->inflight(), 3);
  EXPECT_EQ(c.inflight_at_acquire(), 3);
  EXPECT_EQ(c.limit_at_acquire(), 3);
  a.release(Outcome::kIgnored);
  EXPECT_TRUE(h.limiter->acquire());  // a temporary: granted, then ignored
  EXPECT_EQ(h.limiter->inflight(), 2);
}

TEST(AdaptiveConcurrency, ReleaseRecordsOutcomeExactlyOnce) {
  Harness h(gradient2_options());
  Limiter::Permit lease = h.limiter->acquire();
  h.clock.advance_ns(700);
  lease.release(Outcome::kSuccess);
  EXPECT_FALSE(lease);
  lease.release(Outcome::kDropped);
  lease.release(Outcome::kSuccess);
  const Limiter::Stats s = h.stats();
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.samples, 1);
  EXPECT_EQ(s.skipped_samples, 0);  // uncontended: every sample folds in
  EXPECT_EQ(s.drops, 0);
  EXPECT_EQ(s.last_rtt_ns, 700);
}

TEST(AdaptiveConcurrency, DestroyedLeaseFreesSlotAndFeedsNoSample) {
  Harness h(gradient2_options(1));
  {
    Limiter::Permit lease = h.limiter->acquire();
    ASSERT_TRUE(lease);
    EXPECT_FALSE(h.limiter->acquire());
    h.clock.advance_ns(1'000'000);
  }
  const Limiter::Stats s = h.stats();
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.samples, 0);
  EXPECT_EQ(s.drops, 0);
  EXPECT_DOUBLE_EQ(s.estimate, 1.0);
  EXPECT_TRUE(h.limiter->acquire());
}

TEST(AdaptiveConcurrency, MovedFromLeaseHoldsNothing) {
  Harness h(gradient2_options());
  Limiter::Permit a = h.limiter->acquire();
  const int64_t start = a.start_ns();
  Limiter::Permit b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): pinned behaviour
  EXPECT_TRUE(b);
  EXPECT_EQ(b.start_ns(), start);
  a.release(Outcome::kSuccess);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(h.limiter->inflight(), 1);
  EXPECT_EQ(h.stats().samples, 0);
  b.release(Outcome::kSuccess);
  EXPECT_EQ(h.limiter->inflight(), 0);
  EXPECT_EQ(h.stats().samples, 1);
}

TEST(AdaptiveConcurrency, MoveAssignOverGrantedLeaseIgnoresIt) {
  Harness h(gradient2_options());
  Limiter::Permit a = h.limiter->acquire();
  Limiter::Permit b = h.limiter->acquire();
  EXPECT_EQ(h.limiter->inflight(), 2);
  a = std::move(b);
  EXPECT_EQ(h.limiter->inflight(), 1);
  EXPECT_TRUE(a);
  EXPECT_EQ(h.stats().samples + h.stats().drops, 0);
}

TEST(AdaptiveConcurrency, RejectedLeaseAllocatesNothingAndTakesNoSlot) {
  Harness h(gradient2_options(2));
  h.hold(2);
  const long before = ::throttlekit::testing::allocations();
  for (int i = 0; i < 1000; ++i) {
    Limiter::Permit lease = h.limiter->acquire();
    ASSERT_FALSE(lease);
    lease.release(Outcome::kSuccess);  // no-op on a rejection
  }
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
  EXPECT_EQ(h.limiter->inflight(), 2);
  EXPECT_EQ(h.stats().samples, 0);
}

TEST(AdaptiveConcurrency, GrantAndSettleAllocateNothing) {
  Harness h(gradient2_options());
  h.sample(1000);  // nothing lazy left
  const long before = ::throttlekit::testing::allocations();
  for (int i = 0; i < 1000; ++i) {
    h.sample(1000 + i % 7, i % 5 == 0 ? Outcome::kDropped : Outcome::kSuccess);
  }
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
}

// ---- gradient2 ----------------------------------------------------------

TEST(AdaptiveConcurrency, Gradient2GrowsBySqrtHeadroomWhenUtilized) {
  Harness h(gradient2_options(20));
  h.hold(9);       // the sample's acquire sees inflight 10: 2 * 10 >= 20
  h.sample(1000);  // rtt == rtt_noload: gradient 1
  const double expected = 0.8 * 20 + 0.2 * (20 + std::sqrt(20.0));
  EXPECT_DOUBLE_EQ(h.stats().estimate, expected);
  EXPECT_DOUBLE_EQ(h.stats().estimate,
                   gradient2_next_estimate(20, 1.0, 0.2, true, 1, 1000));
  EXPECT_EQ(h.stats().limit, 20);  // floor(20.89...)
}

TEST(AdaptiveConcurrency, Gradient2UnderUtilizationGuardBlocksGrowth) {
  Harness h(gradient2_options(20));
  h.hold(8);  // inflight 9 at the sample's acquire: 2 * 9 < 20
  h.sample(1000);
  EXPECT_DOUBLE_EQ(h.stats().estimate, 20.0);
  h.hold(1);  // inflight 10: exactly half, utilized
  h.sample(1000);
  EXPECT_GT(h.stats().estimate, 20.0);
}

TEST(AdaptiveConcurrency, Gradient2UnderUtilizedSampleStillShrinks) {
  Harness h(gradient2_options(20));
  h.sample(1000);  // rtt_noload 1000
  h.sample(4000);  // gradient 1.5 * 1000 / 4000 = 0.375 -> 0.5
  EXPECT_DOUBLE_EQ(h.stats().estimate,
                   gradient2_next_estimate(20, 0.5, 0.2, false, 1, 1000));
  EXPECT_LT(h.stats().estimate, 20.0);
}

TEST(AdaptiveConcurrency, Gradient2FollowsTheLawSampleBySample) {
  Harness h(gradient2_options(40));
  h.hold(30);
  double e = 40;
  const int64_t rtts[] = {1000, 1200, 1800, 2500, 3500, 1000, 1100, 900, 2000};
  int64_t window_min = std::numeric_limits<int64_t>::max();
  for (int64_t rtt : rtts) {
    h.sample(rtt);
    window_min = std::min(window_min, rtt);  // fewer than 10 samples
    const int64_t limit_before = static_cast<int64_t>(std::floor(e));
    const bool utilized = 2 * 31 >= limit_before;
    e = gradient2_next_estimate(e, gradient2_gradient(1.5, window_min, rtt),
                                0.2, utilized, 1, 1000);
    ASSERT_DOUBLE_EQ(h.stats().estimate, e) << rtt;
    ASSERT_EQ(h.stats().limit, static_cast<int64_t>(std::floor(e)));
    ASSERT_EQ(h.stats().rtt_noload_ns, window_min);
    ASSERT_EQ(h.stats().last_rtt_ns, rtt);
  }
}

TEST(AdaptiveConcurrency, Gradient2DropUsesFloorGradientAndNeverGrows) {
  Harness h(gradient2_options(2));
  h.hold(1);
  h.sample(1000, Outcome::kDropped);
  // 2 * 0.5 + sqrt(2) > 2, yet a drop may not grow the limit.
  EXPECT_DOUBLE_EQ(h.stats().estimate, 2.0);
  EXPECT_EQ(h.stats().drops, 1);
  EXPECT_EQ(h.stats().samples, 0);

  Harness big(gradient2_options(100));
  big.hold(60);
  big.sample(1000, Outcome::kDropped);
  EXPECT_DOUBLE_EQ(big.stats().estimate,
                   gradient2_next_estimate(100, 0.5, 0.2, false, 1, 1000));
  EXPECT_EQ(big.stats().rtt_noload_ns, 0);  // a drop is no latency sample
}

TEST(AdaptiveConcurrency, LimitIsFloorOfEstimateAndGatesAcquire) {
  Harness h(gradient2_options(2));
  // Utilized, unqueued samples grow the estimate by the sqrt headroom.
  while (h.stats().limit < 5) {
    h.hold(static_cast<int>(h.stats().limit - 1) -
           static_cast<int>(h.held.size()));
    h.sample(1000);
  }
  EXPECT_EQ(h.stats().limit, 5);
  EXPECT_EQ(h.stats().effective_limit, 5);
  h.drop_holds();
  h.hold(5);
  EXPECT_FALSE(h.limiter->acquire());
}

TEST(AdaptiveConcurrency, ClampsToMaxLimitUnderEndlessGrowth) {
  AdaptiveConcurrencyOptions o = gradient2_options(8);
  o.min_limit = 4;
  o.max_limit = 12;
  Harness h(o);
  for (int i = 0; i < 500; ++i) {
    h.drop_holds();
    h.hold(static_cast<int>(h.stats().limit) - 1);
    h.sample(1000);
  }
  EXPECT_DOUBLE_EQ(h.stats().estimate, 12.0);
  EXPECT_EQ(h.stats().limit, 12);
}

TEST(AdaptiveConcurrency, ClampsToMinLimitUnderEndlessQueueing) {
  AdaptiveConcurrencyOptions o = gradient2_options(40);
  o.min_limit = 4;
  o.rtt_window = 1000;  // the 1000 ns baseline stays in the window
  Harness h(o);
  h.sample(1000);
  for (int i = 0; i < 500; ++i) h.sample(1'000'000);  // gradient 0.5
  // 0.5 e + sqrt(e) = e at e = 4: the min clamp or the law's own floor.
  EXPECT_NEAR(h.stats().estimate, 4.0, 1e-6);
  EXPECT_GE(h.stats().estimate, 4.0);
  EXPECT_EQ(h.stats().limit, 4);
}

TEST(AdaptiveConcurrency, LowRttLeavesWindowAfterRttWindowSamples) {
  AdaptiveConcurrencyOptions o = gradient2_options();
  o.rtt_window = 3;
  Harness h(o);
  h.sample(100);
  h.sample(500);
  h.sample(500);
  EXPECT_EQ(h.stats().rtt_noload_ns, 100);
  h.sample(500);
  EXPECT_EQ(h.stats().rtt_noload_ns, 500);
}

TEST(AdaptiveConcurrency, ZeroLatencySampleIsNoQueue) {
  Harness h(gradient2_options(20));
  h.hold(9);
  h.sample(0);
  EXPECT_DOUBLE_EQ(h.stats().estimate,
                   gradient2_next_estimate(20, 1.0, 0.2, true, 1, 1000));
  EXPECT_EQ(h.stats().last_rtt_ns, 0);
}

// ---- AIMD ---------------------------------------------------------------

AdaptiveConcurrencyOptions aimd_options(int64_t initial) {
  AdaptiveConcurrencyOptions o = gradient2_options(initial);
  o.law = ConcurrencyLaw::kAimd;
  o.min_limit = 2;
  return o;
}

TEST(AdaptiveConcurrency, AimdAddsOneOnlyWhenUtilized) {
  Harness h(aimd_options(20));
  h.hold(8);  // inflight 9: 2 * 9 < 20
  h.sample(1000);
  EXPECT_DOUBLE_EQ(h.stats().estimate, 20.0);
  h.hold(1);                // inflight 10: 2 * 10 >= 20
  h.sample(1'000'000'000);  // AIMD ignores latency
  EXPECT_DOUBLE_EQ(h.stats().estimate, 21.0);
  EXPECT_EQ(h.stats().limit, 21);
}

TEST(AdaptiveConcurrency, AimdBacksOffOnDropAndClamps) {
  Harness h(aimd_options(20));
  h.sample(1000, Outcome::kDropped);
  EXPECT_DOUBLE_EQ(h.stats().estimate, 18.0);
  EXPECT_EQ(h.stats().limit, 18);
  h.sample(1000, Outcome::kIgnored);
  EXPECT_DOUBLE_EQ(h.stats().estimate, 18.0);
  for (int i = 0; i < 100; ++i) h.sample(1000, Outcome::kDropped);
  EXPECT_DOUBLE_EQ(h.stats().estimate, 2.0);
  EXPECT_EQ(h.stats().drops, 101);
}

// ---- Recalibration ------------------------------------------------------

AdaptiveConcurrencyOptions recalibrating_options() {
  AdaptiveConcurrencyOptions o = gradient2_options(20);
  o.min_limit = 2;
  o.recalibration_interval_ns = 1'000'000'000;
  o.recalibration_samples = 3;
  return o;
}

TEST(AdaptiveConcurrency, RecalibrationPinsToMinLimitThenResumes) {
  Harness h(recalibrating_options());
  h.hold(9);
  for (int i = 0; i < 5; ++i) h.sample(1000);
  const double pre_pin = h.stats().estimate;
  const int64_t pre_pin_limit = h.stats().limit;
  EXPECT_FALSE(h.stats().recalibrating);

  h.clock.advance_ns(1'000'000'000);
  h.sample(1000);  // settles after the due time: the pin begins
  Limiter::Stats s = h.stats();
  EXPECT_TRUE(s.recalibrating);
  EXPECT_EQ(s.recalibrations, 1);
  EXPECT_EQ(s.effective_limit, 2);
  EXPECT_EQ(s.limit, pre_pin_limit);  // L_local is not dragged down
  EXPECT_EQ(s.rtt_noload_ns, 0);      // window reset; the trigger discarded
  EXPECT_DOUBLE_EQ(s.estimate, pre_pin);

  // Nine holders exceed the pinned limit: nothing is admitted until they
  // drain, and their samples (acquired before the pin) are discarded.
  EXPECT_FALSE(h.limiter->acquire());
  for (int i = 0; i < 8; ++i) {
    h.clock.advance_ns(5000);
    h.held.back().release(Outcome::kSuccess);
    h.held.pop_back();
  }
  EXPECT_EQ(h.stats().rtt_noload_ns, 0);
  EXPECT_TRUE(h.stats().recalibrating);

  h.sample(3000);
  h.sample(2500);
  EXPECT_TRUE(h.stats().recalibrating);
  EXPECT_DOUBLE_EQ(h.stats().estimate, pre_pin);  // the law is frozen
  h.sample(2800);                                 // the third: the pin ends
  s = h.stats();
  EXPECT_FALSE(s.recalibrating);
  EXPECT_EQ(s.rtt_noload_ns, 2500);       // re-measured from the pin's samples
  EXPECT_DOUBLE_EQ(s.estimate, pre_pin);  // resumes from the pre-pin limit
  EXPECT_EQ(s.effective_limit, pre_pin_limit);
}

TEST(AdaptiveConcurrency, RecalibrationRecursAfterIntervalFromPinEnd) {
  Harness h(recalibrating_options());
  h.clock.advance_ns(1'000'000'000);
  // The trigger has zero latency, so it was acquired at the pin's start and
  // counts; two more end the pin, the fourth is an ordinary sample.
  for (int i = 0; i < 4; ++i) h.sample(0);
  ASSERT_FALSE(h.stats().recalibrating);
  ASSERT_EQ(h.stats().recalibrations, 1);
  h.clock.advance_ns(999'999'999);
  h.sample(0);
  EXPECT_FALSE(h.stats().recalibrating);
  h.sample(1);
  EXPECT_TRUE(h.stats().recalibrating);
  EXPECT_EQ(h.stats().recalibrations, 2);
}

// ---- Rounds and the frozen baseline -------------------------------------

TEST(AdaptiveConcurrency, RoundIsOneSampleOfItsMeanLatency) {
  AdaptiveConcurrencyOptions o = gradient2_options(20);
  o.round_samples = 4;
  Harness h(o);
  h.hold(9);  // 10 of 20 in flight with each sample: utilized
  h.sample(1000);
  h.sample(3000);
  h.sample(1000);
  // Three successes: no step yet, nothing in the window.
  EXPECT_DOUBLE_EQ(h.stats().estimate, 20.0);
  EXPECT_EQ(h.stats().rtt_noload_ns, 0);
  EXPECT_EQ(h.stats().last_rtt_ns, 1000);
  h.sample(3000);
  // One step with rtt = mean 2000 against the window's only entry, 2000:
  // gradient 1.0 (tolerance 1.5), so the law grows by its sqrt headroom.
  EXPECT_EQ(h.stats().rtt_noload_ns, 2000);
  EXPECT_DOUBLE_EQ(h.stats().estimate,
                   gradient2_next_estimate(20.0, 1.0, 0.2, true, 1, 1000));
  // A second round at mean 6000 against a minimum of 2000: gradient 0.5.
  const double before = h.stats().estimate;
  for (int i = 0; i < 4; ++i) h.sample(6000);
  EXPECT_EQ(h.stats().rtt_noload_ns, 2000);
  EXPECT_DOUBLE_EQ(
      h.stats().estimate,
      gradient2_next_estimate(before, gradient2_gradient(1.5, 2000, 6000), 0.2,
                              true, 1, 1000));
}

TEST(AdaptiveConcurrency, RoundGrowsOnlyIfHalfItsSamplesWereUtilized) {
  AdaptiveConcurrencyOptions o = gradient2_options(20);
  o.round_samples = 4;
  Harness h(o);
  // Three of four samples under half the limit: the round may not grow.
  h.sample(1000);
  h.sample(1000);
  h.sample(1000);
  h.hold(9);
  h.sample(1000);
  EXPECT_DOUBLE_EQ(h.stats().estimate, 20.0);
  // Two of four utilized (at exactly half): it may.
  h.drop_holds();
  h.sample(1000);
  h.sample(1000);
  h.hold(9);
  h.sample(1000);
  h.sample(1000);
  EXPECT_DOUBLE_EQ(h.stats().estimate,
                   gradient2_next_estimate(20.0, 1.0, 0.2, true, 1, 1000));
}

TEST(AdaptiveConcurrency, DropStepsAtOnceWithinARound) {
  AdaptiveConcurrencyOptions o = gradient2_options(20);
  o.round_samples = 8;
  Harness h(o);
  h.sample(1000);
  h.sample(1000, Outcome::kDropped);
  EXPECT_DOUBLE_EQ(h.stats().estimate,
                   gradient2_next_estimate(20.0, 0.5, 0.2, false, 1, 1000));
  EXPECT_EQ(h.stats().drops, 1);
  EXPECT_EQ(h.stats().rtt_noload_ns, 0);  // the round is still open
}

TEST(AdaptiveConcurrency, FrozenBaselineIsThePinsMeasurementUntilTheNextPin) {
  AdaptiveConcurrencyOptions o = recalibrating_options();
  o.round_samples = 2;
  o.recalibration_samples = 4;
  o.freeze_rtt_noload = true;
  Harness h(o);
  // Before the first pin the window rolls.
  h.sample(4000);
  h.sample(4000);
  EXPECT_EQ(h.stats().rtt_noload_ns, 4000);
  h.clock.advance_ns(1'000'000'000);
  h.sample(0);  // begins the pin; acquired at its start, so it counts
  h.sample(2000);
  h.sample(3000);
  EXPECT_TRUE(h.stats().recalibrating);
  h.sample(3000);  // the fourth: rounds {0, 2000} and {3000, 3000}
  ASSERT_FALSE(h.stats().recalibrating);
  EXPECT_EQ(h.stats().rtt_noload_ns, 1000);  // the smaller round mean
  // Between pins no sample enters the window, low or high.
  h.hold(9);
  for (int i = 0; i < 6; ++i) h.sample(200);
  for (int i = 0; i < 6; ++i) h.sample(50'000);
  EXPECT_EQ(h.stats().rtt_noload_ns, 1000);
  // ... yet the law steps against it: 50 us rounds read as a queue.
  EXPECT_LT(h.stats().estimate, 20.0);
  // The next pin re-measures.
  h.drop_holds();
  h.clock.advance_ns(1'000'000'000);
  for (int i = 0; i < 5; ++i) h.sample(7000);
  EXPECT_FALSE(h.stats().recalibrating);
  EXPECT_EQ(h.stats().recalibrations, 2);
  EXPECT_EQ(h.stats().rtt_noload_ns, 7000);
}

TEST(AdaptiveConcurrency, RollingBaselineFollowsSamplesAfterAPin) {
  // The same run without freezing: the later samples move the minimum.
  AdaptiveConcurrencyOptions o = recalibrating_options();
  o.round_samples = 2;
  o.recalibration_samples = 4;
  Harness h(o);
  h.clock.advance_ns(1'000'000'000);
  h.sample(3000);  // begins the pin; acquired before it, so discarded
  for (int i = 0; i < 4; ++i) h.sample(3000);
  ASSERT_FALSE(h.stats().recalibrating);
  ASSERT_EQ(h.stats().rtt_noload_ns, 3000);
  h.sample(200);
  h.sample(200);
  EXPECT_EQ(h.stats().rtt_noload_ns, 200);
}

TEST(AdaptiveConcurrency, RecalibrationJitterIsDeterministicAndBounded) {
  auto first_pin_after = [](uint64_t seed) {
    AdaptiveConcurrencyOptions o = recalibrating_options();
    o.recalibration_interval_ns = 1000;
    o.recalibration_jitter_ns = 500;
    o.recalibration_seed = seed;
    Harness h(o);
    int64_t elapsed = 0;
    while (!h.stats().recalibrating && elapsed < 10'000) {
      h.sample(1);
      ++elapsed;
    }
    return elapsed;
  };
  bool any_differs = false;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const int64_t t = first_pin_after(seed);
    EXPECT_GE(t, 1000);
    EXPECT_LE(t, 1500);
    EXPECT_EQ(t, first_pin_after(seed));
    any_differs |= t != first_pin_after(1);
  }
  EXPECT_TRUE(any_differs);
}

// ---- Ceiling and stats --------------------------------------------------

TEST(AdaptiveConcurrency, CeilingCapsAcquireWithoutMovingLocalLimit) {
  Harness h(gradient2_options(10));
  h.limiter->set_ceiling(3);
  h.hold(3);
  EXPECT_FALSE(h.limiter->acquire());
  Limiter::Stats s = h.stats();
  EXPECT_EQ(s.limit, 10);
  EXPECT_EQ(s.ceiling, 3);
  EXPECT_EQ(s.effective_limit, 3);
  h.limiter->set_ceiling(kNoConcurrencyCeiling);
  EXPECT_EQ(h.stats().effective_limit, 10);
  EXPECT_TRUE(h.limiter->acquire());
  h.limiter->set_ceiling(-5);
  EXPECT_EQ(h.stats().ceiling, 0);
  h.drop_holds();
  EXPECT_FALSE(h.limiter->acquire());
}

TEST(AdaptiveConcurrency, StatsStartFromInitialLimit) {
  Harness h(gradient2_options(7));
  const Limiter::Stats s = h.stats();
  EXPECT_EQ(s.limit, 7);
  EXPECT_EQ(s.effective_limit, 7);
  EXPECT_EQ(s.ceiling, kNoConcurrencyCeiling);
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.rtt_noload_ns, 0);
  EXPECT_EQ(s.last_rtt_ns, 0);
  EXPECT_EQ(s.samples, 0);
  EXPECT_FALSE(s.recalibrating);
  EXPECT_DOUBLE_EQ(s.estimate, 7.0);
}

// ---- Options ------------------------------------------------------------

void expect_rejected(const AdaptiveConcurrencyOptions& o,
                     const std::string& needle) {
  auto created = AdaptiveConcurrency::create(o);
  ASSERT_FALSE(created.ok()) << needle;
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(created.status().message()).find(needle),
            std::string::npos)
      << created.status().message();
}

TEST(AdaptiveConcurrency, BadOptionsAreNamedWithTheirBound) {
  // From the per-sample configuration (no recalibration, so the bounds of
  // the recalibration fields show one at a time).
  auto with = [](auto edit) {
    AdaptiveConcurrencyOptions o =
        AdaptiveConcurrencyOptions::per_sample_gradient2();
    edit(o);
    return o;
  };
  EXPECT_TRUE(AdaptiveConcurrency::create(with([](auto&) {})).ok());
  using O = AdaptiveConcurrencyOptions;
  expect_rejected(with([](O& o) { o.min_limit = 0; }),
                  "adaptive_concurrency.min_limit must be in [1, 1073741824]");
  expect_rejected(with([](O& o) { o.max_limit = 0; }),
                  "adaptive_concurrency.max_limit must be in [1, 1073741824]");
  expect_rejected(with([](O& o) { o.initial_limit = 1001; }),
                  "adaptive_concurrency.initial_limit must be in [1, 1000]");
  expect_rejected(with([](O& o) { o.rtt_window = 0; }),
                  "adaptive_concurrency.rtt_window must be in [1, ");
  expect_rejected(with([](O& o) { o.tolerance = 0.9; }),
                  "adaptive_concurrency.tolerance must be finite and in [1, "
                  "100]");
  expect_rejected(with([](O& o) { o.tolerance = NAN; }),
                  "adaptive_concurrency.tolerance");
  expect_rejected(with([](O& o) { o.smoothing = 0; }),
                  "adaptive_concurrency.smoothing must be finite and in (0, "
                  "1]");
  expect_rejected(with([](O& o) { o.backoff_ratio = 1; }),
                  "adaptive_concurrency.backoff_ratio must be finite and in "
                  "(0, 1)");
  expect_rejected(with([](O& o) { o.recalibration_interval_ns = -1; }),
                  "adaptive_concurrency.recalibration_interval_ns must be in "
                  "[0, 9007199254740991]");
  expect_rejected(with([](O& o) { o.recalibration_jitter_ns = -1; }),
                  "adaptive_concurrency.recalibration_jitter_ns must be in "
                  "[0, ");
  expect_rejected(with([](O& o) {
                    o.recalibration_interval_ns = 1000;
                    o.recalibration_samples = 101;
                  }),
                  "adaptive_concurrency.recalibration_samples must be in "
                  "[1, 100]");
  // With rounds the bound is rtt_window * round_samples.
  expect_rejected(with([](O& o) {
                    o.recalibration_interval_ns = 1000;
                    o.round_samples = 4;
                    o.recalibration_samples = 401;
                  }),
                  "adaptive_concurrency.recalibration_samples must be in "
                  "[1, 400]");
  expect_rejected(with([](O& o) { o.round_samples = 0; }),
                  "adaptive_concurrency.round_samples must be in [1, 65536]");
  expect_rejected(with([](O& o) { o.round_samples = (int64_t{1} << 16) + 1; }),
                  "adaptive_concurrency.round_samples must be in [1, 65536]");
  expect_rejected(with([](O& o) { o.freeze_rtt_noload = true; }),
                  "adaptive_concurrency.freeze_rtt_noload needs "
                  "recalibration_interval_ns > 0");
  expect_rejected(with([](O& o) { o.law = static_cast<ConcurrencyLaw>(7); }),
                  "adaptive_concurrency.law");
  // recalibration_samples is unchecked while recalibration is off.
  EXPECT_TRUE(AdaptiveConcurrency::create(with([](O& o) {
                o.recalibration_samples = 0;
              })).ok());
}

// ---- Defaults -----------------------------------------------------------

// The earlier default law, kept by name, field by field.
TEST(AdaptiveConcurrency, PerSampleGradient2IsTheEarlierDefaultLaw) {
  constexpr AdaptiveConcurrencyOptions o =
      AdaptiveConcurrencyOptions::per_sample_gradient2();
  static_assert(o.round_samples == 1 && o.recalibration_interval_ns == 0);
  EXPECT_EQ(o.law, ConcurrencyLaw::kGradient2);
  EXPECT_EQ(o.initial_limit, 20);
  EXPECT_EQ(o.min_limit, 1);
  EXPECT_EQ(o.max_limit, 1000);
  EXPECT_EQ(o.rtt_window, 100);
  EXPECT_EQ(o.round_samples, 1);
  EXPECT_EQ(o.tolerance, 1.5);
  // gradient2.h's name for it: the per-sample law's, not the default's.
  static_assert(o.tolerance == kGradient2PerSampleTolerance);
  static_assert(AdaptiveConcurrencyOptions{}.tolerance !=
                kGradient2PerSampleTolerance);
  EXPECT_EQ(o.smoothing, 0.2);
  EXPECT_EQ(o.backoff_ratio, 0.9);
  EXPECT_EQ(o.recalibration_interval_ns, 0);
  EXPECT_EQ(o.recalibration_jitter_ns, 0);
  EXPECT_EQ(o.recalibration_seed, 0u);
  EXPECT_EQ(o.recalibration_samples, 20);
  EXPECT_FALSE(o.recalibrate_at_create);
  EXPECT_FALSE(o.freeze_rtt_noload);
  EXPECT_TRUE(AdaptiveConcurrency::create(o).ok());
}

// The defaults: Envoy's shape with the interval and pin length the
// simulator chose (docs/adaptive_concurrency.md).
TEST(AdaptiveConcurrency, DefaultsAreRoundsAFrozenBaselineAndPinsEveryMinute) {
  constexpr AdaptiveConcurrencyOptions o{};
  EXPECT_EQ(o.law, ConcurrencyLaw::kGradient2);
  EXPECT_EQ(o.initial_limit, 20);
  EXPECT_EQ(o.min_limit, 3);
  EXPECT_EQ(o.max_limit, 1000);
  EXPECT_EQ(o.rtt_window, 512);
  EXPECT_EQ(o.round_samples, 32);
  EXPECT_EQ(o.tolerance, 1.0);
  EXPECT_EQ(o.smoothing, 0.2);
  EXPECT_EQ(o.backoff_ratio, 0.9);
  EXPECT_EQ(o.recalibration_interval_ns, 60'000'000'000);
  EXPECT_EQ(o.recalibration_jitter_ns, 9'000'000'000);
  EXPECT_EQ(o.recalibration_seed, 0u);
  EXPECT_EQ(o.recalibration_samples, 128);
  EXPECT_FALSE(o.recalibrate_at_create);  // the simulator did not confirm it
  EXPECT_TRUE(o.freeze_rtt_noload);
  // The pin's rounds fit in the window, with room to spare.
  static_assert(o.recalibration_samples <= o.rtt_window * o.round_samples);
  EXPECT_TRUE(AdaptiveConcurrency::create(o).ok());
}

TEST(AdaptiveConcurrency, DefaultsValidateTheirCoupledFields) {
  auto with = [](auto edit) {
    AdaptiveConcurrencyOptions o;
    edit(o);
    return o;
  };
  using O = AdaptiveConcurrencyOptions;
  // The pin's bound is rtt_window * round_samples = 512 * 32.
  EXPECT_TRUE(AdaptiveConcurrency::create(with([](O& o) {
                o.recalibration_samples = 16384;
              })).ok());
  expect_rejected(with([](O& o) { o.recalibration_samples = 16385; }),
                  "adaptive_concurrency.recalibration_samples must be in "
                  "[1, 16384]");
  // Turning recalibration off needs the frozen baseline off too.
  expect_rejected(with([](O& o) { o.recalibration_interval_ns = 0; }),
                  "adaptive_concurrency.freeze_rtt_noload needs "
                  "recalibration_interval_ns > 0");
  EXPECT_TRUE(AdaptiveConcurrency::create(with([](O& o) {
                o.recalibration_interval_ns = 0;
                o.freeze_rtt_noload = false;
              })).ok());
  // min_limit 3 is the floor: a smaller max_limit must lower it too.
  expect_rejected(with([](O& o) { o.max_limit = 2; }),
                  "adaptive_concurrency.max_limit must be in [3, ");
  EXPECT_TRUE(AdaptiveConcurrency::create(with([](O& o) {
                o.initial_limit = o.min_limit = o.max_limit = 2;
              })).ok());
}

// The defaults plus `recalibrate_at_create`, on a manual clock: the first
// pin begins at `create`, as Envoy's controller starts in a minRTT window:
// 3 slots (min_limit) with L_local at initial_limit 20 and the law frozen;
// 128 successes (4 rounds of 32) measure rtt_noload as the minimum of their
// round means; then the limit is 20 again and follows gradient2 against
// that frozen baseline, and the next pin is due 60-69 s after this one
// ended.
TEST(AdaptiveConcurrency, PinAtCreateMeasuresNoLoadThenFollowsGradient2) {
  AdaptiveConcurrencyOptions o;
  o.recalibrate_at_create = true;
  Harness h(o);
  Limiter::Stats s = h.stats();
  EXPECT_TRUE(s.recalibrating);
  EXPECT_EQ(s.recalibrations, 1);
  EXPECT_EQ(s.effective_limit, 3);
  EXPECT_EQ(s.limit, 20);  // L_local is not dragged down
  EXPECT_EQ(s.rtt_noload_ns, 0);
  {
    Limiter::Permit a = h.limiter->acquire();
    Limiter::Permit b = h.limiter->acquire();
    Limiter::Permit c = h.limiter->acquire();
    EXPECT_TRUE(a && b && c);
    EXPECT_FALSE(h.limiter->acquire());  // pinned at min_limit
    EXPECT_EQ(c.limit_at_acquire(), 3);
  }  // kIgnored: frees the slots, feeds no sample
  // Four rounds of 32 whose means are 1.2, 1.0, 1.1 and 1.3 ms.
  constexpr int64_t kMeansNs[] = {1'200'000, 1'000'000, 1'100'000, 1'300'000};
  for (int64_t mean_ns : kMeansNs) {
    for (int i = 0; i < 32; ++i) {
      EXPECT_TRUE(h.stats().recalibrating);
      h.sample(mean_ns + (i % 2 == 0 ? 100'000 : -100'000));
    }
    EXPECT_DOUBLE_EQ(h.stats().estimate, 20.0);  // the law is frozen
  }
  s = h.stats();
  EXPECT_FALSE(s.recalibrating);
  EXPECT_EQ(s.samples, 128);
  EXPECT_EQ(s.rtt_noload_ns, 1'000'000);  // the least round mean
  EXPECT_EQ(s.effective_limit, 20);
  EXPECT_DOUBLE_EQ(s.estimate, 20.0);
  const int64_t pin_end_ns = h.clock.now_ns();

  // After the pin, gradient2 round by round against the measured baseline:
  // a round of 2 ms reads as a queue (gradient 0.5), one of 1 ms as none.
  h.hold(9);  // 10 of 20 in flight with each sample: utilized
  double expected = 20.0;
  for (int64_t rtt_ns : {2'000'000, 1'000'000}) {
    for (int i = 0; i < 32; ++i) h.sample(rtt_ns);
    expected = gradient2_next_estimate(
        expected, gradient2_gradient(1.0, 1'000'000, rtt_ns), 0.2, true, 3,
        1000);
    EXPECT_DOUBLE_EQ(h.stats().estimate, expected) << rtt_ns;
    EXPECT_EQ(h.stats().limit, static_cast<int64_t>(std::floor(expected)));
  }
  EXPECT_EQ(h.stats().rtt_noload_ns, 1'000'000);  // frozen
  h.drop_holds();

  // The next pin: not within 60 s of the first one's end, by 69 s.
  h.clock.advance_ns(pin_end_ns + 60'000'000'000 - h.clock.now_ns() - 1);
  h.sample(0);
  EXPECT_FALSE(h.stats().recalibrating);
  h.clock.advance_ns(9'000'000'001);
  h.sample(0);
  EXPECT_TRUE(h.stats().recalibrating);
  EXPECT_EQ(h.stats().recalibrations, 2);
}

// With pins off, `recalibrate_at_create` is ignored: nothing pins.
TEST(AdaptiveConcurrency, NoPinAtCreateWithRecalibrationOff) {
  AdaptiveConcurrencyOptions o;
  o.recalibration_interval_ns = 0;
  o.freeze_rtt_noload = false;
  o.recalibrate_at_create = true;
  Harness h(o);
  EXPECT_FALSE(h.stats().recalibrating);
  EXPECT_EQ(h.stats().recalibrations, 0);
  EXPECT_EQ(h.stats().effective_limit, 20);
}

// With the defaults on a manual clock: no pin before 60 s, one by 69 s
// (interval + the most jitter), at min_limit 3 with L_local untouched; it
// ends after 128 fresh successes, the baseline it measured then holds, and
// the next pin is due at least 60 s after this one ended.
TEST(AdaptiveConcurrency, DefaultsPinAfterIntervalPlusJitter) {
  Harness h(AdaptiveConcurrencyOptions{});
  EXPECT_FALSE(h.stats().recalibrating);    // no pin at create
  constexpr int64_t kStepNs = 100'000'000;  // a sample every 0.1 s
  constexpr int64_t kRttNs = 1'000'000;
  int64_t elapsed = 0;
  while (!h.stats().recalibrating && elapsed < 80'000'000'000) {
    h.clock.advance_ns(kStepNs);
    h.sample(kRttNs);
    elapsed += kStepNs + kRttNs;
  }
  ASSERT_TRUE(h.stats().recalibrating);
  EXPECT_GE(elapsed, 60'000'000'000);
  EXPECT_LE(elapsed, 69'000'000'000 + kStepNs + kRttNs);
  Limiter::Stats s = h.stats();
  EXPECT_EQ(s.recalibrations, 1);
  EXPECT_EQ(s.effective_limit, 3);
  EXPECT_EQ(s.limit, 20);  // L_local is not dragged down
  // The trigger was acquired before the pin: 128 more successes end it.
  for (int i = 0; i < 127; ++i) h.sample(kRttNs);
  EXPECT_TRUE(h.stats().recalibrating);
  h.sample(kRttNs);
  s = h.stats();
  EXPECT_FALSE(s.recalibrating);
  EXPECT_EQ(s.rtt_noload_ns, kRttNs);
  EXPECT_EQ(s.effective_limit, 20);
  // Frozen: slower rounds step the law but do not move the baseline.
  for (int i = 0; i < 64; ++i) h.sample(5 * kRttNs);
  EXPECT_EQ(h.stats().rtt_noload_ns, kRttNs);
  EXPECT_LT(h.stats().estimate, 20.0);
  // No second pin within the interval after the first ended.
  h.clock.advance_ns(59'000'000'000);
  h.sample(kRttNs);
  EXPECT_FALSE(h.stats().recalibrating);
  EXPECT_EQ(h.stats().recalibrations, 1);
}

// The defaults' window ring is allocated at `create`: rounds, a pin and the
// frozen baseline allocate nothing afterwards.
TEST(AdaptiveConcurrency, DefaultsAllocateNothingAfterCreate) {
  Harness h(AdaptiveConcurrencyOptions{});
  const long before = ::throttlekit::testing::allocations();
  for (int i = 0; i < 2000; ++i) {
    if (i == 1000) h.clock.advance_ns(70'000'000'000);  // past the first pin
    h.sample(1000 + i % 7, i % 9 == 0 ? Outcome::kDropped : Outcome::kSuccess);
  }
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
  EXPECT_EQ(h.stats().recalibrations, 1);
}

}  // namespace
}  // namespace adaptive_concurrency_test
}  // namespace throttlekit
