// MemoryCoordinator against stale `now`s across the state's expiry
// (tests/support/stale_now_timeline.h, docs/conformance.md): generated
// timelines of every windowed verb on default options, and the negative
// control, on a manual clock (a memory coordinator expires state only by
// the callers' `now`s: a fresher call drops what has expired).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/stale_now_timeline.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace memory_coordinator_stale_now_test {
namespace {

using testing::StaleClock;
using testing::StaleVerb;

constexpr int64_t kWindowMs = 10;

class MemoryCoordinatorStaleNow : public ::testing::TestWithParam<StaleVerb> {
 protected:
  ManualClock clock_{testing::kEpoch};
  std::shared_ptr<MemoryCoordinator> store_ = *MemoryCoordinator::create();
};

TEST_P(MemoryCoordinatorStaleNow, NoWindowCountsMoreThanItsLimit) {
  testing::expect_stale_timelines_hold(testing::stale_verbs_of(*store_),
                                       StaleClock::manual(clock_), GetParam(),
                                       kWindowMs, 300, 20261128);
}

INSTANTIATE_TEST_SUITE_P(Verbs, MemoryCoordinatorStaleNow,
                         testing::every_stale_verb(),
                         testing::stale_verb_test_name);

// The negative control: a fresher denial drops the expired window; with a
// slack of 0 a `now` inside that window then counts it again, with the
// default slack the state is still there and the window stays full.
TEST(MemoryCoordinatorStaleNow, OnlyASlackOfZeroRevivesAnEndedWindow) {
  for (const int64_t slack : {int64_t{0}, kDefaultTtlSlackMs}) {
    SCOPED_TRACE(::testing::Message() << "slack " << slack);
    ManualClock clock(testing::kEpoch);
    auto store = *MemoryCoordinator::create({.ttl_slack_ms = slack});
    testing::expect_memory_revival(
        testing::stale_verb(*store, StaleVerb::kFixedWindow, 3, kWindowMs,
                            "neg:"),
        StaleClock::manual(clock), 3, kWindowMs, slack == 0);
  }
}

}  // namespace
}  // namespace memory_coordinator_stale_now_test
}  // namespace throttlekit
