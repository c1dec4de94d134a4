// tests/support/pg_test_env.h
//
// The test server of the Postgres tests (started by the `postgres_server`
// ctest fixture) and a factory for coordinators on it. Each test program
// uses its own table, so programs running in parallel never share state.

#ifndef THROTTLEKIT_TESTS_SUPPORT_PG_TEST_ENV_H_
#define THROTTLEKIT_TESTS_SUPPORT_PG_TEST_ENV_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit::testing {

// THROTTLEKIT_TEST_PG_HOST / _PORT, set by tests/postgres/CMakeLists.txt.
inline PostgresCoordinatorOptions pg_options(const std::string& table) {
  PostgresCoordinatorOptions o;
  const char* host = std::getenv("THROTTLEKIT_TEST_PG_HOST");
  const char* port = std::getenv("THROTTLEKIT_TEST_PG_PORT");
  o.host = host != nullptr ? host : "127.0.0.1";
  o.port = port != nullptr ? std::atoi(port) : 15432;
  o.table = table;
  o.command_timeout = absl::Milliseconds(10'000);
  // Connecting sets up the schema and prepares every statement: on a loaded
  // 2-core machine that once took over the default 5 s. A test about the
  // connect deadline sets its own.
  o.connect_timeout = absl::Milliseconds(10'000);
  return o;
}

// A table name unique to this process.
inline std::string unique_table(const std::string& stem) {
  return stem + "_" + std::to_string(::getpid());
}

// The options of a coordinator on this process's table `stem`
// (`unique_table`) with `connections` connections.
inline PostgresCoordinatorOptions pg_table_options(const std::string& stem,
                                                   int connections) {
  PostgresCoordinatorOptions o = pg_options(unique_table(stem));
  o.connections = connections;
  return o;
}

inline std::unique_ptr<PostgresCoordinator> make_pg(
    const PostgresCoordinatorOptions& o) {
  auto c = PostgresCoordinator::create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_PG_TEST_ENV_H_
