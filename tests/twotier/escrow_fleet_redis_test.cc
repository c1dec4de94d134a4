// Weighted-fair escrow across OS processes on a real Redis: 4 processes,
// each a WeightedFairEscrow in multi-process mode over one key of the
// fixture's redis-server, every process hammering two tenants through 12
// windows. The fleet's admissions per window (by the store window that
// paid for each, `reset_at_ms`) never exceed the limit, and quanta strand
// little: every full window uses at least 90% of it.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/forked_fleet.h"
#include "support/redis_test_server.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit {
namespace escrow_fleet_redis_test {
namespace {

constexpr testing::FleetRun kRun{.limit = 400, .window_ms = 250, .windows = 12};
constexpr int kProcesses = 4;

using testing::wall_ms;

struct Report : testing::WindowTally<kRun.windows> {
  int64_t in_share = 0;
};

Report run_process(const std::string& key, int index,
                   const testing::FleetSchedule& run) {
  Report r;
  std::shared_ptr<RedisCoordinator> redis = testing::fleet_redis_coordinator();
  if (redis == nullptr) {
    r.errors = 1;
    return r;
  }
  auto escrow = WeightedFairEscrow::create(
      {.limit = kRun.limit,
       .window_ms = kRun.window_ms,
       .tenants = {{.name = "gold", .weight = 3}, {.name = "free"}},
       .coordinator = redis,
       .key = key,
       .quantum = 8});
  if (!escrow.ok()) {
    r.errors = 1;
    return r;
  }
  for (int64_t call = index;; ++call) {
    const int64_t before = wall_ms();
    if (before >= run.end_ms) break;
    absl::StatusOr<Decision> d =
        (*escrow)->admit(call % 3 == 0 ? "free" : "gold");
    if (r.admitted(d)) r.count(run.window_of(before, d->reset_at_ms));
  }
  r.in_share = (*escrow)->stats().admitted_in_share;
  return r;
}

TEST(EscrowFleetRedis, TheFleetStaysAtOrUnderTheLimitEveryWindow) {
  const std::string key = "escrow:" + std::to_string(getpid());
  const auto run = kRun.starting_soon();
  const std::vector<Report> reports = testing::run_forked<Report>(
      kProcesses, run.start_ms,
      [&](int p) { return run_process(key, p, run); });
  Report fleet;
  for (const Report& r : reports) {
    fleet += r;
    fleet.in_share += r.in_share;
  }
  ASSERT_EQ(reports.size(), static_cast<size_t>(kProcesses));
  EXPECT_EQ(fleet.errors, 0);
  for (int w = 0; w < kRun.windows; ++w) {
    EXPECT_LE(fleet.per_window[w], kRun.limit) << "window " << w;
    // Every window is over-subscribed; the last may be cut short.
    if (w < kRun.windows - 1) {
      EXPECT_GE(fleet.per_window[w], kRun.limit * 9 / 10) << "window " << w;
    }
  }
  EXPECT_GT(fleet.in_share, 0);
}

}  // namespace
}  // namespace escrow_fleet_redis_test
}  // namespace throttlekit
