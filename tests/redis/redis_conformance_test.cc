// Conformance: generated timelines through every strategy on the in-memory
// reference and on a real Redis give identical decision streams, field for
// field (docs/semantics.md: one oracle). The timelines are the ones Redis
// Cluster runs too (support/strategy_timeline.h).

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "support/redis_test_server.h"
#include "support/strategy_timeline.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_conformance_test {
namespace {

// One coordinator for the whole run (RapidCheck builds a fixture per case).
RedisCoordinator& shared_redis() {
  static RedisCoordinator* redis =
      testing::redis_coordinator({.ttl_slack_ms = testing::kTimelineSlack})
          .release();
  return *redis;
}

RC_GTEST_PROP(RedisConformance, EveryStrategyDecidesIdentically, ()) {
  testing::check_generated_timeline(shared_redis(), "conf");
}

TEST(RedisConformance, EdgeCases) {
  testing::expect_edge_timelines(shared_redis(), "conf");
}

TEST(RedisConformance, TokenBucketResetAtIsTheFirstFullMs) {
  testing::expect_token_bucket_reset_timelines(shared_redis(), "conf");
}

}  // namespace
}  // namespace redis_conformance_test
}  // namespace throttlekit
