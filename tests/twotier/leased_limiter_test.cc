#include "throttlekit/twotier/leased_limiter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/created.h"
#include "support/manual_store.h"
#include "support/run_threads.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace leased_limiter_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;
using Limiter = BasicLeasedLimiter<ClockRef<ManualClock>>;

struct Fleet : testing::ManualStore {
  std::vector<std::unique_ptr<Limiter>> nodes;

  Fleet(int n, LeasedLimiterOptions o) {
    for (int i = 0; i < n; ++i) {
      nodes.push_back(testing::made(
          Limiter::create(o, store, ClockRef<ManualClock>(clock))));
    }
  }
};

TEST(LeasedLimiter, OneRoundTripPerBatch) {
  Fleet f(1, {.limit = 100, .window_ms = 1000, .batch = 4});
  Limiter& node = *f.nodes[0];
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Decision> d = node.check("k");
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->allowed);
    EXPECT_EQ(d->reset_at_ms, kEpoch + 1000);
    EXPECT_EQ(d->limit, 100);
  }
  EXPECT_EQ(node.stats().leases, 3);  // 4 + 4 + 2 of the third batch

  EXPECT_EQ(node.stats().leased_credits, 12);
}

TEST(LeasedLimiter, TheFleetAdmitsExactlyTheWindowThenTheStoreDenies) {
  Fleet f(3, {.limit = 10, .window_ms = 1000, .batch = 3});
  int admitted = 0;
  absl::StatusOr<Decision> last;
  for (int i = 0; i < 30; ++i) {
    last = f.nodes[i % 3]->check("k");
    ASSERT_TRUE(last.ok());
    if (last->allowed) ++admitted;
  }
  EXPECT_EQ(admitted, 10);
  EXPECT_FALSE(last->allowed);
  EXPECT_EQ(last->reset_at_ms, kEpoch + 1000);
  EXPECT_EQ(last->retry_after_ms, 1000);
  // The next window brings a fresh budget.
  f.clock.advance_ms(1000);
  EXPECT_TRUE(f.nodes[0]->check("k")->allowed);
}

TEST(LeasedLimiter, CostAboveTheBatchLeasesTheCost) {
  Fleet f(1, {.limit = 100, .window_ms = 1000, .batch = 4});
  absl::StatusOr<Decision> d = f.nodes[0]->check("k", 9.5);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 0);  // leased ceil(9.5) = 10, 0.5 left
  EXPECT_EQ(f.nodes[0]->stats().leased_credits, 10);
  // More than the window holds can never pass: the store's denial.
  d = f.nodes[0]->check("k", 200);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
}

TEST(LeasedLimiter, CloseGivesCreditsBackToTheirWindow) {
  Fleet f(2, {.limit = 10, .window_ms = 1000, .batch = 8});
  ASSERT_TRUE(f.nodes[0]->check("k")->allowed);  // leases 8, 7 left
  ASSERT_TRUE(f.nodes[0]->close().ok());
  ASSERT_TRUE(f.nodes[0]->close().ok());  // nothing left: nothing given
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += f.nodes[1]->check("k")->allowed;
  EXPECT_EQ(admitted, 9);  // 10 - the 1 node 0 spent
}

// The give-back tokens (the leased limiter's and federation's parks):
// `why:nonce:n` with n from 0, and no two alike within or across instances.
TEST(GiveBackTokens, AreWhyNonceSequenceAndNeverRepeat) {
  detail::GiveBackTokens a;
  detail::GiveBackTokens b;
  const std::string a0 = a.next("close");
  const std::string a1 = a.next("idle");
  ASSERT_TRUE(a0.starts_with("close:") && a0.ends_with(":0")) << a0;
  ASSERT_TRUE(a1.starts_with("idle:") && a1.ends_with(":1")) << a1;
  // One nonce per instance, between the reason and the sequence number.
  const std::string nonce = a0.substr(6, a0.size() - 8);
  EXPECT_EQ(a1, "idle:" + nonce + ":1");
  // Another instance draws its own nonce (64 random bits).
  EXPECT_NE(b.next("close"), a0);
}

TEST(LeasedLimiter, BadInputIsAStatus) {
  Fleet f(1, {.limit = 10, .window_ms = 1000, .batch = 3});
  EXPECT_TRUE(absl::IsInvalidArgument(f.nodes[0]->check("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(f.nodes[0]->check("k", 0).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(f.nodes[0]->check("k", std::nan("")).status()));
  auto store = std::shared_ptr<MemoryCoordinator>(*MemoryCoordinator::create());
  EXPECT_TRUE(absl::IsInvalidArgument(
      LeasedLimiter::create({.limit = 10, .window_ms = 1000, .batch = 11},
                            store)
          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      LeasedLimiter::create({.limit = 0, .window_ms = 1000}, store).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      LeasedLimiter::create({.limit = 10, .window_ms = 1000, .batch = 2},
                            nullptr)
          .status()));
}

TEST(LeasedLimiter, LowWaterRefillsBeforeTheShortfall) {
  Fleet f(1, {.limit = 100,
              .window_ms = 1000,
              .batch = 10,
              .low_water = 3,
              .background_worker = false});
  Limiter& node = *f.nodes[0];
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(node.check("k")->allowed);
  EXPECT_EQ(node.stats().leases, 1);  // 3 left: a refill is queued
  node.run_maintenance();
  EXPECT_EQ(node.stats().leases, 2);
  EXPECT_EQ(node.stats().background_refills, 1);
  // 13 credits: every one is spent without a lease on the request path.
  for (int i = 0; i < 13; ++i) ASSERT_TRUE(node.check("k")->allowed);
  EXPECT_EQ(node.stats().leases, 2);
  // A refill already queued is not queued twice; running it twice leases
  // once.
  node.run_maintenance();
  node.run_maintenance();
  EXPECT_EQ(node.stats().leases, 3);
}

TEST(LeasedLimiter, TheBackgroundWorkerRefills) {
  Fleet f(1, {.limit = 100, .window_ms = 1000, .batch = 10, .low_water = 5});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(f.nodes[0]->check("k")->allowed);
  // Waits for what it checks: the worker counts the lease, then the
  // background refill (two relaxed counters; a run under ThreadSanitizer
  // read them between the two, DI in docs/testing.md).
  for (int spin = 0; spin < 5000 && f.nodes[0]->stats().background_refills < 1;
       ++spin) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(f.nodes[0]->stats().background_refills, 1);
  EXPECT_EQ(f.nodes[0]->stats().leases, 2);
  ASSERT_TRUE(f.nodes[0]->close().ok());
  EXPECT_EQ(f.nodes[0]->stats().returned_credits, 15);
}

TEST(LeasedLimiter, IdleCreditsGoBackForOtherNodes) {
  Fleet f(2, {.limit = 10,
              .window_ms = 1000,
              .batch = 8,
              .return_idle_after_ms = 100,
              .background_worker = false});
  ASSERT_TRUE(f.nodes[0]->check("idle")->allowed);  // 7 left
  ASSERT_TRUE(f.nodes[0]->check("busy")->allowed);
  f.clock.advance_ms(99);
  ASSERT_TRUE(f.nodes[0]->check("busy")->allowed);
  f.nodes[0]->run_maintenance();
  EXPECT_EQ(f.nodes[0]->stats().idle_returns, 0);
  f.clock.advance_ms(1);
  f.nodes[0]->run_maintenance();
  EXPECT_EQ(f.nodes[0]->stats().idle_returns, 1);  // "busy" was used at 99
  EXPECT_EQ(f.nodes[0]->stats().returned_credits, 7);
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += f.nodes[1]->check("idle")->allowed;
  EXPECT_EQ(admitted, 9);
}

TEST(LeasedLimiter, TheEoqSizerLearnsEachKeysBatch) {
  // order_cost 1, strand_penalty 0.01: steady demand of D per window has
  // its optimum at sqrt(2 * D / 0.01): 1414 for D = 10'000, 141 for 100.
  Fleet f(1, {.limit = 1'000'000,
              .window_ms = 1000,
              .batch = 16,
              .sizing = LeaseSizing::kEoq});
  Limiter& node = *f.nodes[0];
  for (int w = 0; w < 300; ++w) {
    for (int i = 0; i < 10'000; ++i) ASSERT_TRUE(node.check("hot")->allowed);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(node.check("cold")->allowed);
    f.clock.advance_ms(1000);
  }
  EXPECT_NEAR(static_cast<double>(node.batch_for("hot")), 1414, 0.1 * 1414);
  EXPECT_NEAR(static_cast<double>(node.batch_for("cold")), 141, 0.1 * 141);
  EXPECT_EQ(node.batch_for("never-seen"), 16);
}

TEST(LeasedLimiter, ThePredictiveSizerFollowsAGoodForecast) {
  Fleet f(1, {.limit = 1'000'000,
              .window_ms = 1000,
              .batch = 16,
              .sizing = LeaseSizing::kPredictive,
              .demand_forecast = [](std::string_view, int64_t) {
                return 10'000.0;
              }});
  Limiter& node = *f.nodes[0];
  for (int w = 0; w < 30; ++w) {
    for (int i = 0; i < 10'000; ++i) ASSERT_TRUE(node.check("k")->allowed);
    f.clock.advance_ms(1000);
  }
  // The forecast is right, so the mixture leans on it: near the EOQ long
  // before the robust learner alone would be.
  EXPECT_NEAR(static_cast<double>(node.batch_for("k")), 1414, 0.15 * 1414);
}

TEST(LeasedLimiter, BadOptInsAreAStatus) {
  auto store = std::shared_ptr<MemoryCoordinator>(*MemoryCoordinator::create());
  auto low = LeasedLimiter::create(
      {.limit = 10, .window_ms = 1000, .batch = 4, .low_water = 4}, store);
  EXPECT_NE(low.status().message().find("low_water"), std::string::npos);
  auto idle = LeasedLimiter::create(
      {.limit = 10, .window_ms = 1000, .batch = 4, .return_idle_after_ms = -1},
      store);
  EXPECT_NE(idle.status().message().find("return_idle_after_ms"),
            std::string::npos);
  auto predictive = LeasedLimiter::create({.limit = 10,
                                           .window_ms = 1000,
                                           .batch = 4,
                                           .sizing = LeaseSizing::kPredictive},
                                          store);
  EXPECT_NE(predictive.status().message().find("demand_forecast"),
            std::string::npos);
  auto sizer = LeasedLimiter::create({.limit = 10,
                                      .window_ms = 1000,
                                      .batch = 4,
                                      .sizing = LeaseSizing::kEoq,
                                      .sizer = {.strand_penalty = 0}},
                                     store);
  EXPECT_NE(sizer.status().message().find("strand_penalty"), std::string::npos);
}

// Random traffic from N nodes across many windows: admissions per window
// (by the instant of admission) never exceed `limit` with window coupling,
// and never exceed `limit + N * (batch - 1)` with carried credits.
// With `low_water`, low-water refills run at random moments.
std::map<int64_t, int> per_window(bool coupled, int n, int64_t limit,
                                  int64_t batch, uint32_t seed,
                                  int64_t low_water = 0) {
  Fleet f(n, {.limit = limit,
              .window_ms = 100,
              .batch = batch,
              .window_coupled = coupled,
              .low_water = low_water,
              .background_worker = false});
  std::mt19937 rng(seed);
  std::map<int64_t, int> admitted;
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 8 == 0) f.clock.advance_ms(1 + rng() % 7);
    if (low_water > 0 && rng() % 4 == 0) {
      f.nodes[rng() % n]->run_maintenance();
    }
    const int node = static_cast<int>(rng() % n);
    absl::StatusOr<Decision> d = f.nodes[node]->check("k");
    EXPECT_TRUE(d.ok());
    if (d.ok() && d->allowed) ++admitted[f.clock.now_ms() / 100];
  }
  return admitted;
}

TEST(LeasedLimiter, WindowCouplingHoldsTheLimitForAnyFleetSize) {
  for (int n : {1, 2, 4, 8}) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      for (const auto& [window, count] : per_window(true, n, 20, 6, seed)) {
        EXPECT_LE(count, 20) << "n=" << n << " window " << window;
      }
    }
  }
}

TEST(LeasedLimiter, LowWaterKeepsTheCoupledLimitAndLoosensTheCarriedBound) {
  // Coupled: still `limit`. Carried: a node may carry a fresh batch on top
  // of its low-water reserve, so `limit + N * (batch + low_water)`.
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    for (const auto& [window, count] : per_window(true, 4, 20, 6, seed, 2)) {
      EXPECT_LE(count, 20) << "window " << window;
    }
    for (const auto& [window, count] : per_window(false, 4, 20, 6, seed, 2)) {
      EXPECT_LE(count, 20 + 4 * (6 + 2)) << "window " << window;
    }
  }
}

TEST(LeasedLimiter, LowWaterCarriedBoundIsReached) {
  // One node, limit 20, batch 6, low water 2: it ends window 0 holding a
  // fresh batch on top of its reserve (8 credits) and spends them in
  // window 1 besides the whole new budget: 20 + 1 * (6 + 2).
  Fleet f(1, {.limit = 20,
              .window_ms = 1000,
              .batch = 6,
              .window_coupled = false,
              .low_water = 2,
              .background_worker = false});
  Limiter& node = *f.nodes[0];
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(node.check("k")->allowed);
  node.run_maintenance();  // 2 left -> 8
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(node.check("k")->allowed);
  node.run_maintenance();  // 2 left -> 8; 10 admitted, 8 held
  f.clock.advance_ms(1000);
  int admitted = 0;
  for (int i = 0; i < 50; ++i) admitted += node.check("k")->allowed;
  EXPECT_EQ(admitted, 20 + 6 + 2);
}

TEST(LeasedLimiter, CarriedCreditsStayWithinTheBound) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    for (const auto& [window, count] : per_window(false, 4, 20, 6, seed)) {
      EXPECT_LE(count, 20 + 4 * (6 - 1)) << "window " << window;
    }
  }
}

// The carried bound is tight, and window coupling removes the overshoot:
// every node leases a batch just before the boundary and spends one unit;
// after the boundary the nodes spend their leftovers and the fleet leases
// the fresh window in full.
int admitted_after_boundary(bool coupled) {
  constexpr int kNodes = 4;
  constexpr int64_t kLimit = 24, kBatch = 6;
  Fleet f(kNodes, {.limit = kLimit,
                   .window_ms = 100,
                   .batch = kBatch,
                   .window_coupled = coupled});
  f.clock.set_ms(kEpoch + 99);
  for (auto& node : f.nodes) EXPECT_TRUE(node->check("k")->allowed);
  f.clock.set_ms(kEpoch + 100);
  int admitted = 0;
  for (int round = 0; round < 100; ++round) {
    for (auto& node : f.nodes) admitted += node->check("k")->allowed;
  }
  return admitted;
}

TEST(LeasedLimiter, CarriedOvershootIsTightAndCouplingRemovesIt) {
  EXPECT_EQ(admitted_after_boundary(false), 24 + 4 * (6 - 1));
  EXPECT_EQ(admitted_after_boundary(true), 24);
}

// Threads missing on one key share one lease: exactly one lease per batch
// (run under ThreadSanitizer).
TEST(LeasedLimiterConcurrency, MissesOnOneKeyShareOneLease) {
  Fleet f(1, {.limit = 1'000'000, .window_ms = 3'600'000, .batch = 50});
  Limiter& node = *f.nodes[0];
  const long admitted = testing::run_threads(4, [&](int) {
    long n = 0;
    for (int i = 0; i < 1000; ++i) n += node.check("hot")->allowed;
    return n;
  });
  EXPECT_EQ(admitted, 4000);
  EXPECT_EQ(node.stats().leases, 4000 / 50);
  EXPECT_EQ(node.stats().leased_credits, 4000);
}

// A lease is spent by the check that waited for it: a concurrent hit
// cannot take the grant between its deposit and that check's spend and
// leave the check denied while the window still has credits. With a
// batch of 1 every grant is exactly one check's credit, so a steal would
// show as a denial (the window is far from spent).
TEST(LeasedLimiterConcurrency, TheLeaserSpendsItsOwnGrant) {
  Fleet f(1, {.limit = 1'000'000, .window_ms = 3'600'000, .batch = 1});
  Limiter& node = *f.nodes[0];
  constexpr int kThreads = 4, kChecks = 5000;
  const long admitted = testing::run_threads(kThreads, [&](int) {
    long n = 0;
    for (int i = 0; i < kChecks; ++i) n += node.check("hot")->allowed;
    return n;
  });
  EXPECT_EQ(admitted, kThreads * kChecks);
  EXPECT_EQ(node.stats().denials, 0);
  EXPECT_EQ(node.stats().leased_credits, kThreads * kChecks);
}

TEST(LeasedLimiterConcurrency, BackgroundRefillsAndIdleReturnsRaceChecks) {
  // Two nodes, four threads each over four keys, with low-water refills
  // and idle returns running on each node's worker while the threads
  // check and move the clock. Per key the fleet admits at most the limit,
  // and every credit leased is admitted, given back or still held.
  constexpr int64_t kLimit = 3000;
  Fleet f(2, {.limit = kLimit,
              .window_ms = 3'600'000,
              .batch = 20,
              .low_water = 5,
              .return_idle_after_ms = 2});
  std::array<std::atomic<long>, 4> admitted{};
  testing::run_threads(8, [&](int t) {
    Limiter& node = *f.nodes[t % 2];
    for (int i = 0; i < 1500; ++i) {
      const int key = (i * 7 + t) % 4;
      absl::StatusOr<Decision> d = node.check("k" + std::to_string(key));
      EXPECT_TRUE(d.ok());
      if (d.ok() && d->allowed) admitted[key].fetch_add(1);
      if (i % 100 == 0) f.clock.advance_ms(1);
    }
    return 0L;
  });
  long total = 0;
  for (auto& a : admitted) {
    EXPECT_LE(a.load(), kLimit);
    total += a.load();
  }
  int64_t leased = 0, returned = 0;
  for (auto& node : f.nodes) {
    ASSERT_TRUE(node->close().ok());
    leased += node->stats().leased_credits;
    returned += node->stats().returned_credits;
  }
  EXPECT_EQ(total + returned, leased);
}

}  // namespace
}  // namespace leased_limiter_test
}  // namespace throttlekit
