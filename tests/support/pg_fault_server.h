// tests/support/pg_fault_server.h
//
// The private PostgreSQL server of the fault tests (tests/postgres/
// CMakeLists.txt sets its script, directory and port in the environment):
// `pg_fault_server("start" | "stop" | "down" | "up" | "freeze" | "thaw")`
// runs tests/servers/postgres_server.sh on it and asserts success.

#ifndef THROTTLEKIT_TESTS_SUPPORT_PG_FAULT_SERVER_H_
#define THROTTLEKIT_TESTS_SUPPORT_PG_FAULT_SERVER_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace throttlekit::testing {

// An environment variable the fixture must set (a failure if it did not).
inline std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  EXPECT_NE(v, nullptr) << name << " is not set";
  return v != nullptr ? v : "";
}

inline int pg_fault_port() {
  return std::atoi(required_env("THROTTLEKIT_TEST_PG_FAULT_PORT").c_str());
}

inline void pg_fault_server(const std::string& action) {
  const std::string cmd =
      "bash '" + required_env("THROTTLEKIT_TEST_PG_SCRIPT") + "' " + action +
      " '" + required_env("THROTTLEKIT_TEST_PG_FAULT_DIR") + "' " +
      std::to_string(pg_fault_port());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_PG_FAULT_SERVER_H_
