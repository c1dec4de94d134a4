// tests/sim/concurrency_sim_test.cc
//
// Checks the concurrency simulator (bench/sim, issue 5 "Proof: a simulator")
// on a short overload scenario: a run is deterministic, the backend never
// does more work than its servers can, goodput stays within capacity, a
// static limit is never exceeded, and the library limiter driven on
// simulated time never holds more leases than its effective limit allows;
// with the defaults it pins on simulated time, and the rejections during a
// pin are charged to it.

#include <cstdint>
#include <memory>

#include "adaptive_limiter.h"
#include "gtest/gtest.h"
#include "simulation.h"

namespace throttlekit::sim {
namespace concurrency_sim_test {
namespace {

Scenario short_overload() {
  Scenario s;
  s.name = "test";
  s.servers = 8;
  s.service.kind = ServiceModel::Kind::kLognormal;
  s.service.median_ms = 10;
  s.service.sigma = 0.3;
  s.arrival_rate_per_s = 2 * s.capacity_per_s();
  s.duration_s = 4;
  s.timeout_ms = 100;
  s.seed = 5;
  return s;
}

std::unique_ptr<SimLimiter> gradient2(SimClock clock) {
  return std::make_unique<AdaptiveSimLimiter>(AdaptiveConcurrencyOptions{},
                                              clock);
}

TEST(ConcurrencySim, SameScenarioSameHistory) {
  const Scenario s = short_overload();
  const RunResult a = run_scenario(s, gradient2);
  const RunResult b = run_scenario(s, gradient2);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    ASSERT_EQ(a.requests[i].arrival_ns, b.requests[i].arrival_ns) << i;
    ASSERT_EQ(a.requests[i].settle_ns, b.requests[i].settle_ns) << i;
    ASSERT_EQ(a.requests[i].settle, b.requests[i].settle) << i;
  }
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    ASSERT_EQ(a.samples[i].limit, b.samples[i].limit) << i;
  }
  EXPECT_EQ(a.backend_busy_ns, b.backend_busy_ns);
}

TEST(ConcurrencySim, EveryLimiterFacesTheSameArrivals) {
  const Scenario s = short_overload();
  const RunResult a = run_scenario(s, gradient2);
  const RunResult b = run_scenario(s, [](SimClock) {
    return std::unique_ptr<SimLimiter>(new StaticLimiter(3));
  });
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    ASSERT_EQ(a.requests[i].arrival_ns, b.requests[i].arrival_ns) << i;
  }
}

TEST(ConcurrencySim, StaticLimitIsNeverExceededAndWorkIsConserved) {
  const Scenario s = short_overload();
  for (int64_t limit : {4, 8, 12, 64}) {
    const RunResult r = run_scenario(s, [limit](SimClock) {
      return std::unique_ptr<SimLimiter>(new StaticLimiter(limit));
    });
    EXPECT_LE(r.max_inflight, limit);
    EXPECT_EQ(r.max_inflight, limit) << "2x overload fills any limit";
    // The backend cannot serve more than servers x elapsed.
    EXPECT_LE(r.backend_busy_ns, static_cast<int64_t>(s.servers) *
                                     static_cast<int64_t>(s.duration_s * 1e9));
    const Summary sum = summarize(r, 1, s.duration_s);
    EXPECT_LE(sum.goodput_per_s, 1.05 * s.capacity_per_s()) << limit;
    EXPECT_GT(sum.reject_rate, 0.3) << limit;
  }
}

TEST(ConcurrencySim, OptimalStaticLimitKeepsServersBusyWithoutDrops) {
  const Scenario s = short_overload();
  const RunResult r = run_scenario(s, [](SimClock) {
    return std::unique_ptr<SimLimiter>(new StaticLimiter(10));
  });
  const Summary sum = summarize(r, 1, s.duration_s);
  EXPECT_GT(sum.goodput_per_s, 0.9 * s.capacity_per_s());
  EXPECT_EQ(sum.drop_rate, 0);
  EXPECT_LT(sum.p99_ms, 3 * s.service.median_ms);
}

TEST(ConcurrencySim, AdaptiveLimiterStaysWithinItsLimitsOnSimulatedTime) {
  const Scenario s = short_overload();
  AdaptiveConcurrencyOptions o;
  o.max_limit = 12;
  o.initial_limit = 10;
  const RunResult r = run_scenario(s, [&o](SimClock clock) {
    return std::unique_ptr<SimLimiter>(new AdaptiveSimLimiter(o, clock));
  });
  EXPECT_LE(r.max_inflight, o.max_limit);
  bool saw_rtt = false;
  for (const LimitSample& l : r.samples) {
    EXPECT_GE(l.limit, static_cast<double>(o.min_limit));
    EXPECT_LE(l.limit, static_cast<double>(o.max_limit));
    // The limiter measured latency on simulated time: the rolling minimum
    // is a service time, not wall-clock nanoseconds.
    if (l.rtt_noload_ms > 0) {
      saw_rtt = true;
      EXPECT_GT(l.rtt_noload_ms, 1.0);
      EXPECT_LT(l.rtt_noload_ms, 100.0);
    }
  }
  EXPECT_TRUE(saw_rtt);
}

// The defaults pin 60-69 s after creation (simulated), and only rejections
// while a pin is in force count as the pins' cost.
TEST(ConcurrencySim, DefaultsPinOnSimulatedTimeAndRejectionsAreChargedToIt) {
  Scenario s = short_overload();
  s.arrival_rate_per_s = 0.8 * s.capacity_per_s();
  s.duration_s = 80;
  const RunResult r = run_scenario(s, gradient2);
  int64_t pins = 0;
  bool was_pinned = false;
  for (const LimitSample& l : r.samples) {
    if (l.recalibrating && !was_pinned) {
      ++pins;
      EXPECT_GE(l.t_ns, 60 * kNsPerSec);
      EXPECT_LE(l.t_ns, 70 * kNsPerSec);
      EXPECT_EQ(l.effective_limit, 3);  // min_limit
    }
    was_pinned = l.recalibrating;
  }
  EXPECT_EQ(pins, 1);
  EXPECT_EQ(r.samples.back().recalibrations, 1);
  int64_t charged = 0;
  for (const RequestRecord& q : r.requests) {
    if (!q.during_pin) continue;
    ++charged;
    EXPECT_EQ(q.settle, Settle::kRejected);
    EXPECT_GE(q.arrival_ns, 60 * kNsPerSec);
  }
  EXPECT_GT(charged, 0);
  const Summary sum = summarize(r, 5, s.duration_s);
  EXPECT_GT(sum.pin_reject_rate, 0);
  EXPECT_LE(sum.pin_reject_rate, sum.reject_rate);
  // A limiter without pins is never charged.
  const RunResult st = run_scenario(s, [](SimClock) {
    return std::unique_ptr<SimLimiter>(new StaticLimiter(3));
  });
  EXPECT_EQ(summarize(st, 5, s.duration_s).pin_reject_rate, 0);
  EXPECT_GT(summarize(st, 5, s.duration_s).reject_rate, 0);
}

}  // namespace
}  // namespace concurrency_sim_test
}  // namespace throttlekit::sim
