// tests/support/created.h
//
// Provides `created<T>(options)`: what `T::create(options)` makes, the test
// failing (EXPECT, with the status) where `create` refuses the options.
// For the tests that build a value type (a strategy) from options they
// know to be valid; `made(T::create(...))`, the same for an engine held
// by pointer: the pointer, or nullptr with the test failed. And the
// converse, `expect_refused<T>(options, what)`:
// `T::create` refuses `options` as an invalid argument whose message
// contains `what` (the field it names, perhaps with its range).

#ifndef THROTTLEKIT_TESTS_SUPPORT_CREATED_H_
#define THROTTLEKIT_TESTS_SUPPORT_CREATED_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace throttlekit::testing {

template <class T>
T created(const typename T::Options& options) {
  auto made = T::create(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return *std::move(made);
}

template <class T>
std::unique_ptr<T> made(absl::StatusOr<std::unique_ptr<T>> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : nullptr;
}

template <class T>
void expect_refused(const typename T::Options& options,
                    const std::string& what) {
  auto made = T::create(options);
  ASSERT_FALSE(made.ok()) << what;
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument)
      << made.status();
  EXPECT_NE(std::string(made.status().message()).find(what), std::string::npos)
      << made.status();
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_CREATED_H_
