// A real Redis against stale `now`s across physical expiry
// (tests/support/stale_now_timeline.h, docs/conformance.md): generated
// timelines of every windowed verb (fixed window, quota, token budget, the
// lease budget) on a coordinator with default options, real sleeps letting
// windows end and their keys' TTLs run out on the server's clock, calls
// whose `now` lags the clock by up to four windows; and the negative
// control: with `ttl_slack_ms` 0 the key of a filled, ended window expires
// and a `now` inside it counts it again; with the default it never does.
// Redis Cluster and Sentinel run the same (redis_cluster_test.cc,
// redis_sentinel_test.cc).
#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/redis_test_server.h"
#include "support/stale_now_timeline.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_stale_now_test {
namespace {

TEST(RedisStaleNow, NoEndedWindowIsRevivedOnTheDefaultSlack) {
  std::unique_ptr<RedisCoordinator> defaults = testing::redis_coordinator();
  std::unique_ptr<RedisCoordinator> zero =
      testing::redis_coordinator({.ttl_slack_ms = 0});
  testing::expect_stale_nows_hold_on(
      *defaults, *zero,
      absl::StrCat("stale:", absl::ToUnixNanos(absl::Now()), ":"), 12);
}

}  // namespace
}  // namespace redis_stale_now_test
}  // namespace throttlekit
