// The engines over a real Postgres on the system clock: 8 threads (more than
// the machine's cores) on one hot key, 40 ms windows crossed 25 times per
// strategy, admissions counted per window
// (tests/support/coordinator_real_clock.h). `StrictRateLimiter` and
// `CachedDenyLimiter` for every strategy (the server's clock decides, inside
// one transaction); `check_at` with each thread's own clock for the
// windowed strategies (default options); 4 window-coupled `LeasedLimiter`
// nodes x 2 threads on one
// budget at batch 1, 10 and 50.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "support/coordinator_real_clock.h"
#include "support/pg_test_env.h"
#include "throttlekit/postgres/postgres_coordinator.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit {
namespace postgres_real_clock_test {
namespace {

std::shared_ptr<Coordinator> pg() {
  static const std::shared_ptr<Coordinator> coordinator = [] {
    PostgresCoordinatorOptions o =
        testing::pg_options(testing::unique_table("tk_real_clock"));
    o.connections = 4;
    std::shared_ptr<Coordinator> c = testing::make_pg(o);
    // Create the table and functions before any timed run.
    if (c != nullptr && !c->now_ms().ok()) c = nullptr;
    return c;
  }();
  return coordinator;
}

constexpr testing::RealClockRun kRun = {
    .threads = 8, .limit = 20, .window_ms = 40, .run_ms = 1000};

template <class S>
class PostgresRealClock : public ::testing::Test {};

TYPED_TEST_SUITE(PostgresRealClock, testing::AllRateStrategies);

TYPED_TEST(PostgresRealClock, StrictHoldsTheBoundInEveryWindow) {
  ASSERT_NE(pg(), nullptr);
  testing::strict_holds_bound<TypeParam>(
      pg(), kRun, "strict:" + std::string(TypeParam::kName));
}

// Each thread's own clock, read before its call (`check_at`), on the
// default `ttl_slack_ms`.
template <class S>
class PostgresCheckAtRealClock : public ::testing::Test {};

TYPED_TEST_SUITE(PostgresCheckAtRealClock, testing::WindowedRateStrategies);

TYPED_TEST(PostgresCheckAtRealClock, StaleNowsHoldTheBoundInEveryWindow) {
  ASSERT_NE(pg(), nullptr);
  testing::strict_check_at_holds_bound<TypeParam>(
      pg(), kRun, "check_at:" + std::string(TypeParam::kName));
}

TYPED_TEST(PostgresRealClock, CachedDenyHoldsTheBoundInEveryWindow) {
  ASSERT_NE(pg(), nullptr);
  testing::cached_deny_holds_bound<TypeParam>(
      pg(), kRun, "cached:" + std::string(TypeParam::kName));
}

class PostgresLeasedRealClock : public ::testing::TestWithParam<int64_t> {};

TEST_P(PostgresLeasedRealClock, FourNodesNeverExceedTheLimitInAnyWindow) {
  ASSERT_NE(pg(), nullptr);
  testing::leased_nodes_hold_limit(
      pg(), {.threads = 8, .limit = 50, .window_ms = 40, .run_ms = 1000}, 4,
      GetParam(), absl::StrCat("leased:", GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Batches, PostgresLeasedRealClock,
                         ::testing::Values(1, 10, 50));

}  // namespace
}  // namespace postgres_real_clock_test
}  // namespace throttlekit
