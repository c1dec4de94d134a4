// The weighted-fair escrow under threads on the system clock: 8 threads
// (more than the machine's cores) on three tenants, 10 ms windows crossed
// ~100 times. One in-process escrow: at most `limit` per window in total and
// never more than the capped tenant's hard cap. Three escrows leasing from
// one MemoryCoordinator budget: at most `limit` per store window in total
// (counted by the store window that paid for each admission), through
// `admit` and through `admit_async`. Labels `unit`
// and `tsan`; the Redis fleet runs in tests/redis/redis_real_clock_test.cc.
#include <gtest/gtest.h>

#include "support/coordinator_real_clock.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace weighted_fair_escrow_real_clock_test {
namespace {

TEST(WeightedFairEscrowRealClock, OneEscrowHoldsTheLimitAndTheCap) {
  testing::escrow_fleet_holds_limit(
      nullptr, {.limit = 200, .window_ms = 10, .run_ms = 1000}, 1, "");
}

TEST(WeightedFairEscrowRealClock, ThreeEscrowsOnOneBudgetHoldTheLimit) {
  testing::escrow_fleet_holds_limit(
      *MemoryCoordinator::create(),
      {.limit = 200, .window_ms = 10, .run_ms = 1000}, 3, "escrow");
}

// The same through `admit_async` (the queued path of docs/async.md).
TEST(WeightedFairEscrowRealClock, ThreeEscrowsAdmittingAsyncHoldTheLimit) {
  testing::escrow_fleet_holds_limit(
      *MemoryCoordinator::create(),
      {.limit = 200, .window_ms = 10, .run_ms = 1000}, 3, "escrow",
      /*async=*/true);
}

}  // namespace
}  // namespace weighted_fair_escrow_real_clock_test
}  // namespace throttlekit
