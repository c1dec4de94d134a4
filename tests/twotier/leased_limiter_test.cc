#include "throttlekit/twotier/leased_limiter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/run_threads.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;  // a window start for w | 1000
using Limiter = LeasedLimiter<ClockRef<ManualClock>>;

struct Fleet {
  ManualClock clock{kEpoch};
  std::shared_ptr<MemoryCoordinator> store;
  std::vector<std::unique_ptr<Limiter>> nodes;

  Fleet(int n, LeasedLimiterOptions o) {
    store = *MemoryCoordinator::create(
        {}, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
                ClockRef<ManualClock>(clock)));
    for (int i = 0; i < n; ++i) {
      auto l = Limiter::create(o, store, ClockRef<ManualClock>(clock));
      EXPECT_TRUE(l.ok()) << l.status();
      nodes.push_back(*std::move(l));
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
  EXPECT_EQ(node.stats().local_admits, 7);
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

TEST(LeasedLimiter, BadInputIsAStatus) {
  Fleet f(1, {.limit = 10, .window_ms = 1000, .batch = 3});
  EXPECT_TRUE(absl::IsInvalidArgument(f.nodes[0]->check("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(f.nodes[0]->check("k", 0).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(f.nodes[0]->check("k", std::nan("")).status()));
  auto store = std::shared_ptr<MemoryCoordinator>(*MemoryCoordinator::create());
  EXPECT_TRUE(absl::IsInvalidArgument(
      LeasedLimiter<>::create({.limit = 10, .window_ms = 1000, .batch = 11},
                              store)
          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      LeasedLimiter<>::create({.limit = 0, .window_ms = 1000}, store)
          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      LeasedLimiter<>::create({.limit = 10, .window_ms = 1000, .batch = 2},
                              nullptr)
          .status()));
}

// Random traffic from N nodes across many windows: admissions per window
// (by the instant of admission) never exceed `limit` with window coupling,
// and never exceed `limit + N * (batch - 1)` with carried credits.
std::map<int64_t, int> per_window(bool coupled, int n, int64_t limit,
                                  int64_t batch, uint32_t seed) {
  Fleet f(n, {.limit = limit,
              .window_ms = 100,
              .batch = batch,
              .window_coupled = coupled});
  std::mt19937 rng(seed);
  std::map<int64_t, int> admitted;
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 8 == 0) f.clock.advance_ms(1 + rng() % 7);
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

}  // namespace
}  // namespace throttlekit
