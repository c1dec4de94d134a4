// The quota door's fleet (docs/rlqs.md, "The fleet") over a shared store:
// Redis or Postgres, named by the ctest entry (support/shared_store.h),
// the real server the ctest fixture started. Three throttlekit-servers on
// one store share one budget among 50 clients that behave as Envoy's
// filter does, through the store's heartbeat step: over and under the
// limit, a demand jump, stream breaks, a server killed and restarted, all
// within the stated bound (rlqs_fleet_run.h).

#include <unistd.h>

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

namespace throttlekit::server {
namespace rlqs_fleet_test {
namespace {

// A connection of its own for each server, as separate processes have.
std::shared_ptr<Coordinator> store() {
  if (testing::on_redis()) return testing::redis_coordinator();
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
    if (!s->wait_ready(absl::Now() + absl::Seconds(10)).ok()) return nullptr;
    return testing::start_rlqs_server(*config, std::move(s),
                                      absl::StrCat("rlqs-", i));
  });
}

}  // namespace
}  // namespace rlqs_fleet_test
}  // namespace throttlekit::server
