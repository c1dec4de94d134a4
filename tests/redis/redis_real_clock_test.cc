// The engines over a real Redis on the system clock: 8 threads (more than
// the machine's cores) on one hot key, 20 ms windows crossed ~75 times,
// admissions counted per window (tests/support/coordinator_real_clock.h).
// `StrictRateLimiter` and `CachedDenyLimiter` for every strategy (the Redis
// clock decides, inside one script); 1, 2, 4 and 8 window-coupled
// `LeasedLimiter` nodes sharing the 8 threads on one budget, at batch 1, 10
// and 30 (the whole limit); three weighted-fair escrows leasing from one
// budget.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/coordinator_real_clock.h"
#include "support/redis_test_server.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit {
namespace redis_real_clock_test {
namespace {

// The fixture server with deadlines long enough for a loaded CI machine
// (these tests are about bounds, not latency: an outage would be an error).
std::shared_ptr<Coordinator> redis() {
  return testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
}

std::string run_prefix(const std::string& what) {
  return absl::StrCat("rc:", what, ":", absl::ToUnixNanos(absl::Now()));
}

constexpr testing::RealClockRun kRun = {
    .threads = 8, .limit = 50, .window_ms = 20, .run_ms = 1500};

template <class S>
class RedisRealClock : public ::testing::Test {};

TYPED_TEST_SUITE(RedisRealClock, testing::AllRateStrategies);

TYPED_TEST(RedisRealClock, StrictHoldsTheBoundInEveryWindow) {
  testing::strict_holds_bound<TypeParam>(
      redis(), kRun, run_prefix("strict:" + std::string(TypeParam::kName)));
}

TYPED_TEST(RedisRealClock, CachedDenyHoldsTheBoundInEveryWindow) {
  testing::cached_deny_holds_bound<TypeParam>(
      redis(), kRun, run_prefix("cached:" + std::string(TypeParam::kName)));
}

// (nodes, batch): 8 threads over the nodes (thread t on node t % nodes).
class RedisLeasedRealClock
    : public ::testing::TestWithParam<std::pair<int, int64_t>> {};

// L = 30 per 20 ms (1,500/s): saturated even at batch 1 under
// ThreadSanitizer, where a round trip per admission gives ~3,300 calls/s.
TEST_P(RedisLeasedRealClock, NodesNeverExceedTheLimitInAnyWindow) {
  const auto [nodes, batch] = GetParam();
  testing::leased_nodes_hold_limit(
      redis(), {.threads = 8, .limit = 30, .window_ms = 20, .run_ms = 1500},
      nodes, batch, run_prefix(absl::StrCat("leased:", nodes, ":", batch)));
}

INSTANTIATE_TEST_SUITE_P(NodesAndBatches, RedisLeasedRealClock,
                         ::testing::Values(std::pair{1, 10}, std::pair{2, 10},
                                           std::pair{4, 1}, std::pair{4, 10},
                                           std::pair{4, 30}, std::pair{8, 10}));

TEST(RedisEscrowRealClock, ThreeEscrowsOnOneBudgetHoldTheLimit) {
  testing::escrow_fleet_holds_limit(
      redis(), {.threads = 8, .limit = 200, .window_ms = 20, .run_ms = 1500}, 3,
      run_prefix("escrow"));
}

}  // namespace
}  // namespace redis_real_clock_test
}  // namespace throttlekit
