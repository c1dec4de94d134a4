// A real Postgres against stale `now`s across expiry
// (tests/support/stale_now_timeline.h, docs/conformance.md): generated
// timelines of every windowed verb (fixed window, quota, token budget, the
// lease budget) on a coordinator with the default `ttl_slack_ms`, real
// sleeps letting windows end, `sweep()` (the store's expiry, on its own
// clock) run before a quarter of the calls, calls whose `now` lags the
// clock by up to four windows; and the negative control: with a slack of 0
// a sweep deletes a filled, ended window's row and a `now` inside it counts
// it again; with the default it never does.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "support/pg_test_env.h"
#include "support/stale_now_timeline.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace postgres_stale_now_test {
namespace {

using testing::StaleCall;
using testing::StaleClock;
using testing::StaleVerb;

constexpr int64_t kWindowMs = 10;

class PostgresStaleNow : public ::testing::TestWithParam<StaleVerb> {};

TEST_P(PostgresStaleNow, NoWindowCountsMoreThanItsLimit) {
  std::shared_ptr<PostgresCoordinator> pg = testing::make_pg(
      testing::pg_options(testing::unique_table("tk_stale_now")));
  ASSERT_TRUE(pg->ping().ok());
  testing::expect_stale_timelines_hold(
      testing::stale_verbs_of(*pg), StaleClock::real(), GetParam(), kWindowMs,
      12, 20261128, [&] {
        absl::StatusOr<int64_t> swept = pg->sweep();
        ASSERT_TRUE(swept.ok()) << swept.status();
      });
}

INSTANTIATE_TEST_SUITE_P(Verbs, PostgresStaleNow, testing::every_stale_verb(),
                         testing::stale_verb_test_name);

TEST(PostgresStaleNow, OnlyASlackOfZeroRevivesAnEndedWindow) {
  for (const StaleVerb verb : {StaleVerb::kFixedWindow, StaleVerb::kLease}) {
    for (const int64_t slack : {int64_t{0}, kDefaultTtlSlackMs}) {
      PostgresCoordinatorOptions o =
          testing::pg_options(testing::unique_table("tk_stale_neg"));
      o.ttl_slack_ms = slack;
      std::shared_ptr<PostgresCoordinator> pg = testing::make_pg(o);
      ASSERT_TRUE(pg->ping().ok());
      const StaleCall call = testing::stale_verb(
          *pg, verb, 3, 20,
          absl::StrCat("neg:", testing::stale_verb_name(verb), ":", slack,
                       ":"));
      int64_t swept = 0;
      absl::StatusOr<bool> revived = testing::revives_an_ended_window(
          call, StaleClock::real(), 3, 20, 20,
          [&](const std::string&, int64_t) {
            absl::StatusOr<int64_t> n = pg->sweep();
            ASSERT_TRUE(n.ok()) << n.status();
            swept = *n;
          });
      ASSERT_TRUE(revived.ok()) << revived.status();
      EXPECT_EQ(*revived, slack == 0)
          << testing::stale_verb_name(verb) << ", slack " << slack;
      EXPECT_EQ(swept > 0, slack == 0);
    }
  }
}

}  // namespace
}  // namespace postgres_stale_now_test
}  // namespace throttlekit
