// tests/support/config_error.h
//
// For the tests of the server's YAML configuration (src/server/config.h):
// - `config_error(yaml, file)`: the error of parsing the document `yaml`
//   named `file` (by default server.yaml); the test fails if it parses, or
//   if the error is not kInvalidArgument;
// - `has(text, part)`: whether `text` contains `part`;
// - `expect_config_error(yaml, file, part)`: that error contains `part`
//   (the document, the error and `part` in the failure); returns it.

#ifndef THROTTLEKIT_TESTS_SUPPORT_CONFIG_ERROR_H_
#define THROTTLEKIT_TESTS_SUPPORT_CONFIG_ERROR_H_

#include <gtest/gtest.h>

#include <string>

#include "absl/status/statusor.h"
#include "config.h"

namespace throttlekit::testing {

inline std::string config_error(const std::string& yaml,
                                const std::string& file = "server.yaml") {
  absl::StatusOr<server::ServerConfig> c = server::parse_config(yaml, file);
  EXPECT_FALSE(c.ok()) << yaml;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline std::string expect_config_error(const std::string& yaml,
                                       const std::string& file,
                                       const std::string& part) {
  const std::string e = config_error(yaml, file);
  EXPECT_TRUE(has(e, part))
      << "yaml:\n"
      << yaml << "\nerror: " << e << "\nexpected: " << part;
  return e;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_CONFIG_ERROR_H_
