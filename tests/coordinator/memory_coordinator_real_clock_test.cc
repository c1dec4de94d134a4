// The engines over a MemoryCoordinator on the system clock, as a service runs
// them: 8 threads (more than the machine's cores) on one hot key, 10 ms
// windows crossed 150 times (20 ms for the leased nodes), admissions counted
// per window
// (tests/support/coordinator_real_clock.h). `StrictRateLimiter` and
// `CachedDenyLimiter` for every strategy; 4 window-coupled `LeasedLimiter`
// nodes x 2 threads on one budget at batch 1, 10 and 50 (labels `unit` and
// `tsan`).
//
// Before the store clock was read under the key's lock and a lease older
// than the stored window drew from that newer window, the leased nodes
// admitted up to 3x the limit in one window (issue 14: 1,501 of 500).
#include <gtest/gtest.h>

#include "support/coordinator_real_clock.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit {
namespace {

template <class S>
class MemoryCoordinatorRealClock : public ::testing::Test {};

TYPED_TEST_SUITE(MemoryCoordinatorRealClock, testing::AllRateStrategies);

TYPED_TEST(MemoryCoordinatorRealClock, StrictHoldsTheBoundInEveryWindow) {
  testing::strict_holds_bound<TypeParam>(*MemoryCoordinator::create(),
                                         {.window_ms = 10, .run_ms = 1500},
                                         "strict");
}

TYPED_TEST(MemoryCoordinatorRealClock, CachedDenyHoldsTheBoundInEveryWindow) {
  testing::cached_deny_holds_bound<TypeParam>(*MemoryCoordinator::create(),
                                              {.window_ms = 10, .run_ms = 1500},
                                              "cached");
}

class LeasedNodesRealClock : public ::testing::TestWithParam<int64_t> {};

TEST_P(LeasedNodesRealClock, FourNodesNeverExceedTheLimitInAnyWindow) {
  testing::leased_nodes_hold_limit(
      *MemoryCoordinator::create(),
      {.limit = 500, .window_ms = 20, .run_ms = 1500}, 4, GetParam(), "leased");
}

INSTANTIATE_TEST_SUITE_P(Batches, LeasedNodesRealClock,
                         ::testing::Values(1, 10, 50));

}  // namespace
}  // namespace throttlekit
