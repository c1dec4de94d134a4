// The README's first example under threads, as a request handler runs it:
// `RateLimiter<S>::create(...)`, then `check(key)` with the system clock
// inside, from 8 threads (more than the machine's cores) on one hot key for
// 1 s of 10 ms windows (100 boundaries; under the sanitizers 500 ms,
// `scaled_work`). Admissions are counted per window
// (tests/support/strategy_bounds.h) and each strategy's bound must hold in
// every window and over the run (labels `unit` and `tsan`).
//
// Before the stale-now rule (docs/semantics.md, "A stale now") this failed:
// the token bucket admitted 1.4-1.7x its bound over the run and the fixed
// window up to 1,475 in one window of limit 200 (issue 14's figures; the
// commit adding this test records what it measured).
#include <gtest/gtest.h>

#include "support/coordinator_real_clock.h"
#include "support/real_clock_load.h"
#include "support/strategy_bounds.h"
#include "support/test_work.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit {
namespace rate_limiter_real_clock_test {
namespace {

// 8 threads on a limit of 200 (the defaults), windows of 10 ms, 1 s.
constexpr testing::RealClockRun kRun = {.window_ms = 10, .run_ms = 1000};

template <class S>
class RateLimiterRealClock : public ::testing::Test {};

TYPED_TEST_SUITE(RateLimiterRealClock, testing::AllRateStrategies);

TYPED_TEST(RateLimiterRealClock, HotKeyHoldsItsBoundInEveryWindow) {
  using Bounds = testing::StrategyBounds<TypeParam>;
  auto limiter = RateLimiter<TypeParam>::create(
      Bounds::options(kRun.limit, kRun.window_ms));
  ASSERT_TRUE(limiter.ok()) << limiter.status();
  // Call intervals on the limiter's own clock (`DefaultClock`).
  const testing::Load load = testing::hammer<DefaultClock>(
      kRun.threads, testing::scaled_work(kRun.run_ms, 500),
      [&](int) { return limiter->check("user:42"); });
  EXPECT_EQ(load.errors, 0);
  // Saturated: the limiter had to deny.
  EXPECT_GT(load.calls, static_cast<int64_t>(load.admitted.size()));
  const std::string figures = Bounds::check(load, kRun.limit, kRun.window_ms);
  std::printf("%s: %lld calls, %zu admitted; %s\n",
              std::string(TypeParam::kName).c_str(),
              static_cast<long long>(load.calls), load.admitted.size(),
              figures.c_str());
}

}  // namespace
}  // namespace rate_limiter_real_clock_test
}  // namespace throttlekit
