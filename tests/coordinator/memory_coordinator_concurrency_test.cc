// MemoryCoordinator under many threads (run under ThreadSanitizer in CI):
// T threads x M checks on one key at limit L admit exactly L for every
// strategy, and concurrent leases never hand out more than the window holds.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/run_threads.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace memory_coordinator_concurrency_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

TEST(MemoryCoordinatorConcurrency, ThreadsOnOneKeyAdmitExactlyTheLimit) {
  const std::vector<StrategyOptions> all = {
      Gcra::Options{100, 3'600'000, 0},
      TokenBucket::Options{100, 0.001},
      FixedWindow::Options{100, 3'600'000},
      SlidingWindow::Options{100, 3'600'000, 10},
      SlidingLog::Options{100, 3'600'000},
      Quota::Options{100, QuotaPeriod::kDay},
      TokenBudget::Options{100, 3'600'000},
  };
  for (const StrategyOptions& o : all) {
    auto memory = *MemoryCoordinator::create();
    const AnyStrategy s = *make_strategy(o);
    const long admitted = testing::run_threads(4, [&](int t) {
      long n = 0;
      for (int i = 0; i < 100; ++i) {
        // Other keys too, so shards and inserts contend.
        (void)memory->check(s, "other" + std::to_string(t * 1000 + i), kEpoch);
        absl::StatusOr<Decision> d = memory->check(s, "hot", kEpoch);
        if (d.ok() && d->allowed) ++n;
      }
      return n;
    });
    EXPECT_EQ(admitted, 100) << strategy_name(s);
  }
}

TEST(MemoryCoordinatorConcurrency, LeasesNeverExceedTheWindow) {
  ManualClock clock(kEpoch);
  auto memory = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
              ClockRef<ManualClock>(clock)));
  const LeaseBudget budget = *LeaseBudget::create({1000, 3'600'000});
  const long granted = testing::run_threads(4, [&](int) {
    long n = 0;
    for (int i = 0; i < 200; ++i) {
      absl::StatusOr<LeaseGrant> g = memory->lease(budget, "k", 3);
      if (g.ok()) n += g->granted;
    }
    return n;
  });
  // 4 x 200 x 3 = 2400 asked for; the window holds exactly 1000.
  EXPECT_EQ(granted, 1000);
}

}  // namespace
}  // namespace memory_coordinator_concurrency_test
}  // namespace throttlekit
