// tests/support/created.h
//
// Provides `created<T>(options)`: what `T::create(options)` makes, the test
// failing (EXPECT, with the status) where `create` refuses the options.
// For the tests that build a value type (a strategy) from options they
// know to be valid.

#ifndef THROTTLEKIT_TESTS_SUPPORT_CREATED_H_
#define THROTTLEKIT_TESTS_SUPPORT_CREATED_H_

#include <gtest/gtest.h>

#include <utility>

namespace throttlekit::testing {

template <class T>
T created(const typename T::Options& options) {
  auto made = T::create(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return *std::move(made);
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_CREATED_H_
