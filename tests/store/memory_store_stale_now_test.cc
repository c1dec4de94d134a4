// MemoryStore (through RateLimiter::check_at) against stale `now`s across
// the state's expiry (tests/support/stale_now_timeline.h,
// docs/conformance.md): generated timelines of the windowed strategies on
// default options, and the negative control, on a manual clock (the store
// drops an expired key only on a fresher call: a denial or an eviction).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/stale_now_timeline.h"
#include "support/strategy_bounds.h"
#include "support/test_time.h"
#include "throttlekit/store/rate_limiter.h"

namespace throttlekit {
namespace memory_store_stale_now_test {
namespace {

using testing::Counted;
using testing::StaleCall;
using testing::StaleClock;
using testing::StaleVerb;

constexpr int64_t kWindowMs = 10;

// `RateLimiter<S>::check_at` as a StaleCall; the limiter lives in the call.
template <class S>
StaleCall limiter_call(int64_t limit, int64_t window_ms,
                       RateLimiterOptions options = {}) {
  auto limiter = std::make_shared<RateLimiter<S>>(*RateLimiter<S>::create(
      testing::StrategyBounds<S>::options(limit, window_ms), options));
  return [limiter](const std::string& key, int64_t now_ms,
                   int64_t cost) -> absl::StatusOr<Counted> {
    absl::StatusOr<Decision> d =
        limiter->check_at(key, now_ms, static_cast<double>(cost));
    if (!d.ok()) return d.status();
    return Counted{d->allowed ? cost : 0, d->reset_at_ms};
  };
}

StaleCall verb_call(StaleVerb verb, int64_t limit, int64_t window_ms,
                    const std::string&) {
  switch (verb) {
    case StaleVerb::kQuota:
      return limiter_call<Quota>(limit, window_ms);
    case StaleVerb::kTokenBudget:
      return limiter_call<TokenBudget>(limit, window_ms);
    default:
      return limiter_call<FixedWindow>(limit, window_ms);
  }
}

class MemoryStoreStaleNow : public ::testing::TestWithParam<StaleVerb> {};

TEST_P(MemoryStoreStaleNow, NoWindowCountsMoreThanItsLimit) {
  ManualClock clock(testing::kEpoch);
  testing::expect_stale_timelines_hold(verb_call, StaleClock::manual(clock),
                                       GetParam(), kWindowMs, 300, 20261128);
}

INSTANTIATE_TEST_SUITE_P(Strategies, MemoryStoreStaleNow,
                         ::testing::Values(StaleVerb::kFixedWindow,
                                           StaleVerb::kQuota,
                                           StaleVerb::kTokenBudget),
                         testing::stale_verb_test_name);

// The negative control: a fresher denial reclaims the expired key; with a
// slack of 0 a `now` inside its window then counts that window again.
TEST(MemoryStoreStaleNow, OnlyASlackOfZeroRevivesAnEndedWindow) {
  for (const int64_t slack : {int64_t{0}, kDefaultTtlSlackMs}) {
    SCOPED_TRACE(::testing::Message() << "slack " << slack);
    ManualClock clock(testing::kEpoch);
    RateLimiterOptions options;
    options.store.ttl_slack_ms = slack;
    testing::expect_memory_revival(
        limiter_call<FixedWindow>(3, kWindowMs, options),
        StaleClock::manual(clock), 3, kWindowMs, slack == 0);
  }
}

}  // namespace
}  // namespace memory_store_stale_now_test
}  // namespace throttlekit
