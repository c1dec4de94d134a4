// A real fleet: 8 OS processes, each a LeasedLimiter on one key against the
// real redis-server of the test fixture, driven through 22 windows.
//
// Accounting: an admission happens at the later of the instant its check
// began and the start of the window that granted the credits it spent
// (its decision's `reset_at_ms - window_ms`: a check that began just before
// a boundary may spend credits leased just after it, and then it is an
// admission of the new window). Redis and the nodes read the same machine
// clock. With window coupling every admission must moreover have been
// spent during its credits' window in real time: the check began before
// that window ended and returned after it began.
//
// Demand: in even windows every process checks as fast as it can and, once
// denied, sleeps 1 ms before the next check (a client honouring backoff):
// the window is over-subscribed many times over. In odd windows each
// process stops after kOddDemand admissions (8 * 56 = 448 < L), which
// leaves each holding batch - 1 = 4 unspent credits at the boundary: the
// worst case for carried credits, which the next (busy) window spends on
// top of its full budget, reaching L + N * (B - 1) exactly.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/forked_fleet.h"
#include "support/redis_test_server.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace leased_fleet_redis_test {
namespace {

constexpr testing::FleetRun kRun{.limit = 500, .window_ms = 250, .windows = 22};
constexpr int kNodes = 8;
constexpr int64_t kBatch = 5;
constexpr int64_t kOddDemand = 56;  // 12 leases of 5, 4 left over

using testing::wall_ms;

// What one process reports: admissions per window, and how many broke the
// real-time coupling condition or failed.
struct Report : testing::WindowTally<kRun.windows> {
  int64_t outside_window = 0;
  int64_t leases = 0;
};

// One node: checks from `first_window` until `end_ms`.
Report run_node(const std::string& key, bool coupled,
                const testing::FleetSchedule& run) {
  Report r;
  // No coordinator (no connection) fails the create.
  auto limiter = LeasedLimiter::create({.prefix = "fleet",
                                        .limit = kRun.limit,
                                        .window_ms = kRun.window_ms,
                                        .batch = kBatch,
                                        .window_coupled = coupled},
                                       testing::fleet_redis_coordinator());
  if (!limiter.ok()) {
    r.errors = 1;
    return r;
  }
  int64_t current = -1, mine = 0;  // this node's window and its admissions
  while (true) {
    const int64_t before = wall_ms();
    if (before >= run.end_ms) break;
    if (before / kRun.window_ms != current) {
      current = before / kRun.window_ms;
      mine = 0;
    }
    if ((current - run.first_window) % 2 == 1 && mine >= kOddDemand) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds((current + 1) * kRun.window_ms - before));
      continue;
    }
    absl::StatusOr<Decision> d = (*limiter)->check(key);
    const int64_t after = wall_ms();
    if (!r.admitted(d)) continue;
    const int64_t window_start = d->reset_at_ms - kRun.window_ms;
    const int64_t w = run.window_of(before, d->reset_at_ms);
    if (!r.count(w)) {
      ++r.outside_window;
      continue;
    }
    ++mine;
    if (coupled && !(before < d->reset_at_ms && after >= window_start)) {
      ++r.outside_window;
    }
  }
  r.leases = (*limiter)->stats().leases;
  return r;
}

// Forks kNodes processes that start together at a window boundary and run
// kRun.windows windows; returns their reports.
std::vector<Report> run_fleet(bool coupled) {
  const std::string key =
      "k:" + std::to_string(getpid()) + ":" + (coupled ? "coupled" : "carried");
  const auto run = kRun.starting_soon();
  return testing::run_forked<Report>(
      kNodes, run.start_ms, [&](int) { return run_node(key, coupled, run); });
}

// The fleet's counts: every process's added up.
Report sum(const std::vector<Report>& reports) {
  Report t;
  for (const Report& r : reports) {
    t += r;
    t.outside_window += r.outside_window;
    t.leases += r.leases;
  }
  return t;
}

TEST(LeasedFleetRedis, WindowCoupledFleetAdmitsAtMostTheLimitPerWindow) {
  const std::vector<Report> reports = run_fleet(true);
  ASSERT_EQ(reports.size(), static_cast<size_t>(kNodes));
  const Report t = sum(reports);
  EXPECT_EQ(t.errors, 0);
  EXPECT_EQ(t.outside_window, 0);
  int64_t admitted = 0;
  for (int w = 0; w < kRun.windows; ++w) {
    admitted += t.per_window[w];
    EXPECT_LE(t.per_window[w], kRun.limit) << "window " << w;
    // Even windows are over-subscribed (the last may be cut short by the
    // end of the run); odd ones ask for about kNodes * kOddDemand.
    if (w % 2 == 0 && w < kRun.windows - 1) {
      EXPECT_GE(t.per_window[w], kRun.limit * 9 / 10) << "window " << w;
    }
    std::printf("coupled window %2d: admitted %lld of %lld\n", w,
                static_cast<long long>(t.per_window[w]),
                static_cast<long long>(kRun.limit));
  }
  std::printf("coupled: %lld admitted, %lld lease round trips\n",
              static_cast<long long>(admitted),
              static_cast<long long>(t.leases));
}

TEST(LeasedFleetRedis, CarriedCreditsStayWithinTheOvershootBound) {
  const std::vector<Report> reports = run_fleet(false);
  ASSERT_EQ(reports.size(), static_cast<size_t>(kNodes));
  const Report t = sum(reports);
  EXPECT_EQ(t.errors, 0);
  int64_t worst = 0;
  for (int w = 0; w < kRun.windows; ++w) {
    EXPECT_LE(t.per_window[w], kRun.limit + kNodes * (kBatch - 1))
        << "window " << w;
    worst = std::max(worst, t.per_window[w]);
  }
  // The overshoot is real: some busy window after a quiet one spends every
  // node's leftover on top of the full budget.
  EXPECT_EQ(worst, kRun.limit + kNodes * (kBatch - 1));
  std::printf("carried: worst window %lld (limit %lld, bound %lld)\n",
              static_cast<long long>(worst), static_cast<long long>(kRun.limit),
              static_cast<long long>(kRun.limit + kNodes * (kBatch - 1)));
}

}  // namespace
}  // namespace leased_fleet_redis_test
}  // namespace throttlekit
