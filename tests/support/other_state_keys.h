// tests/support/other_state_keys.h
//
// Provides the keys of other state that a backend's refuses-bad-input
// checks (`expect_federation_refuses_bad_input`,
// `expect_heartbeat_refuses_bad_input`) name: `seed_other_state_keys(c)`
// writes, through `c`, the GCRA key "gcra" (`other_state_gcra()`: 1 per
// 1000 ms, one check at time 0) and the lease key "lease" (a budget of 5
// per 1000 ms, one credit leased). It asserts that both writes succeed, so
// call it inside ASSERT_NO_FATAL_FAILURE.

#ifndef THROTTLEKIT_TESTS_SUPPORT_OTHER_STATE_KEYS_H_
#define THROTTLEKIT_TESTS_SUPPORT_OTHER_STATE_KEYS_H_

#include <gtest/gtest.h>

#include "throttlekit/coordinator/coordinator.h"

namespace throttlekit::testing {

// The strategy of the "gcra" key.
inline AnyStrategy other_state_gcra() {
  return *make_strategy(Gcra::Options{.limit = 1, .period_ms = 1000});
}

inline void seed_other_state_keys(Coordinator& c) {
  ASSERT_TRUE(c.check(other_state_gcra(), "gcra", 0).ok());
  ASSERT_TRUE(
      c.lease(*LeaseBudget::create({.limit = 5, .window_ms = 1000}), "lease", 1)
          .ok());
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_OTHER_STATE_KEYS_H_
