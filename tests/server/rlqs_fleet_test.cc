// The quota door's fleet (docs/rlqs.md, "The fleet") over a shared store:
// Redis, Postgres, a Redis Cluster or Redis through Sentinel, named by the
// ctest entry (support/shared_store.h), the real servers the ctest fixture
// started. Three throttlekit-servers on
// one store share one budget among 50 clients that behave as Envoy's
// filter does, through the store's heartbeat step: over and under the
// limit, a demand jump, stream breaks, a server killed and restarted, all
// within the stated bound (rlqs_fleet_run.h).

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "config.h"
#include "gtest/gtest.h"
#include "heartbeat_share.h"
#include "rlqs_fleet_run.h"
#include "server.h"
#include "support/pg_test_env.h"
#include "support/redis_test_server.h"
#include "support/shared_store.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit::server {
namespace rlqs_fleet_test {
namespace {

int port_of(const char* variable, const char* fallback) {
  return std::atoi(testing::env_or(variable, fallback).c_str());
}

// A connection of its own for each server, as separate processes have.
std::shared_ptr<Coordinator> store() {
  switch (testing::shared_store()) {
    case testing::SharedStore::kRedis:
      return testing::redis_coordinator();
    case testing::SharedStore::kRedisCluster: {
      // Seeded with one node; the slot map names the rest.
      auto c = RedisCoordinator::create(
          {.command_timeout = absl::Seconds(2),
           .cluster_seeds = {absl::StrCat(
               "127.0.0.1:",
               port_of("THROTTLEKIT_REDIS_CLUSTER_PORT", "17100"))}});
      EXPECT_TRUE(c.ok()) << c.status();
      return c.ok() ? std::shared_ptr<Coordinator>(*std::move(c)) : nullptr;
    }
    case testing::SharedStore::kRedisSentinel: {
      // The fixture's three sentinels (at base + 2 .. base + 4) watch `tk`.
      RedisCoordinatorOptions o;
      const int base = port_of("THROTTLEKIT_REDIS_SENTINEL_PORT", "17120");
      for (int i = 0; i < 3; ++i) {
        o.sentinels.push_back(absl::StrCat("127.0.0.1:", base + 2 + i));
      }
      o.master_name = "tk";
      o.command_timeout = absl::Seconds(1);
      auto c = RedisCoordinator::create(o);
      EXPECT_TRUE(c.ok()) << c.status();
      return c.ok() ? std::shared_ptr<Coordinator>(*std::move(c)) : nullptr;
    }
    case testing::SharedStore::kPostgres:
      break;
  }
  static const std::string table = testing::unique_table("rlqs_fleet");
  return testing::make_pg(testing::pg_options(table));
}

TEST(RlqsFleet, FiftyClientsOnThreeServersShareOneBudgetWithinTheBound) {
  // A domain of this run's own: the store outlives it.
  const std::string domain =
      absl::StrCat("fleet-", getpid(), "-", ServerClock{}.now_ms());
  absl::StatusOr<ServerConfig> config =
      parse_config(testing::rlqs_fleet_yaml(domain), "fleet.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  testing::run_rlqs_fleet(3, domain, [&](int i) -> std::unique_ptr<Server> {
    std::shared_ptr<Coordinator> s = store();
    if (s == nullptr) return nullptr;
    if (!s->wait_ready(absl::Now() + absl::Seconds(10)).ok()) return nullptr;
    return testing::start_rlqs_server(*config, std::move(s),
                                      absl::StrCat("rlqs-", i));
  });
}

}  // namespace
}  // namespace rlqs_fleet_test
}  // namespace throttlekit::server
