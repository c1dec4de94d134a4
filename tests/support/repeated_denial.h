// tests/support/repeated_denial.h
//
// Provides `repeated_denial(strategy, state, now, cost)`, the contract a
// strategy's denial keeps in its unit tests: the same `check` made twice
// on `state` decides the same both times and leaves `state` as it was (a
// denial writes nothing, so a repeat reports the same thing). Returns the
// decision, for the caller to pin (that it is a denial, or all of it).

#ifndef THROTTLEKIT_TESTS_SUPPORT_REPEATED_DENIAL_H_
#define THROTTLEKIT_TESTS_SUPPORT_REPEATED_DENIAL_H_

#include <gtest/gtest.h>

#include <cstdint>

#include "throttlekit/core/decision.h"

namespace throttlekit::testing {

template <class Strategy>
Decision repeated_denial(const Strategy& strategy,
                         typename Strategy::State& state, int64_t now_ms,
                         double cost) {
  const typename Strategy::State before = state;
  const Decision first = strategy.check(state, now_ms, cost);
  const Decision again = strategy.check(state, now_ms, cost);
  EXPECT_EQ(first, again);
  EXPECT_EQ(state, before);
  return first;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_REPEATED_DENIAL_H_
