// A real fleet on Redis: five OS processes, each a DistributedConcurrency
// node with four worker threads, on one key of the fixture's redis-server,
// through a join, a leave, a SIGKILL and a SIGSTOP past the lease
// (tests/support/concurrency_fleet.h has the script and the checks): with
// acknowledged handoff no acquisition ever takes the fleet above L;
// without, the overshoot is reported and drains.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/capacity_fleet.h"
#include "support/concurrency_fleet.h"
#include "support/redis_test_server.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace distributed_concurrency_fleet_test {
namespace {

std::shared_ptr<Coordinator> make_redis() {
  absl::StatusOr<std::unique_ptr<RedisCoordinator>> c =
      RedisCoordinator::create({.port = testing::redis_port()});
  if (!c.ok()) return nullptr;
  return std::shared_ptr<Coordinator>(*std::move(c));
}

TEST(RedisConcurrencyFleet, OneCeilingAcrossProcesses) {
  const std::string key = "dc-fleet:" + std::to_string(::getpid()) + ":" +
                          std::to_string(testing::wall_ms());
  const testing::FleetResult handoff =
      testing::run_concurrency_fleet(key + ":h", /*handoff=*/true, make_redis);
  const testing::FleetResult plain =
      testing::run_concurrency_fleet(key + ":p", /*handoff=*/false, make_redis);
  testing::expect_fleet_holds(handoff, plain);
}

TEST(RedisConcurrencyFleet, OneCeilingWhileCapacityChanges) {
  const std::string key = "dc-cap:" + std::to_string(::getpid()) + ":" +
                          std::to_string(testing::wall_ms());
  testing::expect_capacity_fleet_holds(key, make_redis);
}

}  // namespace
}  // namespace distributed_concurrency_fleet_test
}  // namespace throttlekit
