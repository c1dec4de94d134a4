// A real fleet on Postgres: five OS processes, each a DistributedConcurrency
// node with four worker threads, on one key of the fixture's server (each
// beat: the C++ step under the key's row lock), through a join, a leave, a
// SIGKILL and a SIGSTOP past the lease (tests/support/concurrency_fleet.h
// has the script and the checks): with acknowledged handoff no acquisition
// ever takes the fleet above L; without, the overshoot is reported and
// drains.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/capacity_fleet.h"
#include "support/concurrency_fleet.h"
#include "support/pg_test_env.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace distributed_concurrency_fleet_test {
namespace {

std::string table() {
  static const std::string t = testing::unique_table("tk_dc_fleet");
  return t;
}

std::shared_ptr<Coordinator> make_pg() {
  PostgresCoordinatorOptions o = testing::pg_options(table());
  o.connections = 2;
  o.command_timeout = absl::Milliseconds(2000);
  absl::StatusOr<std::unique_ptr<PostgresCoordinator>> c =
      PostgresCoordinator::create(o);
  if (!c.ok()) return nullptr;
  return std::shared_ptr<Coordinator>(*std::move(c));
}

TEST(PostgresConcurrencyFleet, OneCeilingAcrossProcesses) {
  // The schema exists before the processes start.
  ASSERT_NE(make_pg(), nullptr);
  const testing::FleetResult handoff =
      testing::run_concurrency_fleet("dc-fleet:h", /*handoff=*/true, make_pg);
  const testing::FleetResult plain =
      testing::run_concurrency_fleet("dc-fleet:p", /*handoff=*/false, make_pg);
  testing::expect_fleet_holds(handoff, plain);
}

TEST(PostgresConcurrencyFleet, OneCeilingWhileCapacityChanges) {
  ASSERT_NE(make_pg(), nullptr);
  testing::expect_capacity_fleet_holds("dc-cap", make_pg);
}

}  // namespace
}  // namespace distributed_concurrency_fleet_test
}  // namespace throttlekit
