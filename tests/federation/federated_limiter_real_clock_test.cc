// FederatedLimiter under real threads on the real clock (docs/federation.md):
// three regions over one memory coordinator on the system clock, more
// threads than cores, 20 ms windows crossed about a hundred times;
// admissions counted per coordinator window (the decisions' reset_at) never
// exceed the limit. Once with each region leasing alone, once with two
// processes per region pooling through the region's escrow, and once more
// so with half the threads checking without waiting.

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "support/coordinator_real_clock.h"
#include "support/real_clock_load.h"
#include "support/strategy_bounds.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/completion_latch.h"
#include "throttlekit/federation/federated_limiter.h"

namespace throttlekit {
namespace federated_limiter_real_clock_test {
namespace {

constexpr testing::RealClockRun kRun = {
    .threads = 8, .limit = 200, .window_ms = 20, .run_ms = 2000};

// `async`: odd threads check without waiting (`check_async`, waited on a
// latch), so the take's asynchronous chain runs beside blocking checks.
void regions_hold_limit(int processes_per_region, bool escrow,
                        bool async = false) {
  std::shared_ptr<Coordinator> global = *MemoryCoordinator::create();
  const AnyStrategy plan = *make_strategy(
      FixedWindow::Options{.limit = kRun.limit, .window_ms = kRun.window_ms});
  std::vector<std::unique_ptr<FederatedLimiter>> fleet;
  for (int r = 0; r < 3; ++r) {
    std::shared_ptr<Coordinator> l2;
    if (escrow) l2 = *MemoryCoordinator::create();
    for (int p = 0; p < processes_per_region; ++p) {
      auto l = federate(plan, global,
                        {.region = "r" + std::to_string(r),
                         .batch = 8,
                         .regional_escrow = l2,
                         .escrow_batch = escrow ? 24 : 0});
      ASSERT_TRUE(l.ok()) << l.status();
      fleet.push_back(*std::move(l));
    }
  }
  const testing::Load load =
      testing::hammer(kRun.threads, kRun.run_ms, [&](int t) {
        FederatedLimiter& node = *fleet[static_cast<size_t>(t) % fleet.size()];
        if (!async || t % 2 == 0) return node.check("hot");
        CompletionLatch<Decision> latch;
        node.check_async("hot", 1, latch.completion());
        return latch.wait();
      });
  EXPECT_EQ(load.errors, 0);
  EXPECT_GT(load.calls, static_cast<int64_t>(load.admitted.size()));
  const testing::WindowCount w = testing::max_per_window(load);
  EXPECT_GE(w.windows, 50);  // short windows crossed many times
  const std::string figures = testing::check_per_window(load, kRun.limit);
  int64_t global_leases = 0;
  for (const auto& l : fleet) global_leases += l->stats().global_leases;
  std::printf(
      "federation, 3 regions x %d process(es)%s%s: %lld calls, %zu admitted, "
      "%lld global leases; %s\n",
      processes_per_region, escrow ? " with escrows" : "",
      async ? ", half the checks asynchronous" : "",
      static_cast<long long>(load.calls), load.admitted.size(),
      static_cast<long long>(global_leases), figures.c_str());
}

TEST(FederatedLimiterRealClock, RegionsHoldTheLimitPerWindow) {
  regions_hold_limit(1, false);
}

TEST(FederatedLimiterRealClock, RegionalEscrowsHoldTheLimitPerWindow) {
  regions_hold_limit(2, true);
}

TEST(FederatedLimiterRealClock, AsynchronousChecksHoldTheLimitPerWindow) {
  regions_hold_limit(2, true, /*async=*/true);
}

}  // namespace
}  // namespace federated_limiter_real_clock_test
}  // namespace throttlekit
