// tests/support/sim_seeds.h
//
// What the fleet simulator's tests (tests/sim/) share: `sound(r, replay)`,
// a run that broke no invariant and fell below no liveness floor (else the
// first of each and the command that replays the run), and
// `first_failing_seed(within, run)`, the first seed in 1 .. `within` whose
// run breaks an invariant: how a mutation row is caught.

#ifndef THROTTLEKIT_TESTS_SUPPORT_SIM_SEEDS_H_
#define THROTTLEKIT_TESTS_SUPPORT_SIM_SEEDS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "sim/world.h"

namespace throttlekit::testing {

inline ::testing::AssertionResult sound(const sim::SimResult& r,
                                        const std::string& replay) {
  if (r.violations == 0 && r.liveness_failures == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << r.first_violation << r.first_liveness_failure
         << "\n  replay: " << replay;
}

// The first seed `s` in 1 .. `within` for which `run(s)` (a `SimResult`)
// broke an invariant, with that run's first violation in `*first` when
// given; 0 when every seed held.
template <class Run>
uint64_t first_failing_seed(uint64_t within, Run run,
                            std::string* first = nullptr) {
  for (uint64_t seed = 1; seed <= within; ++seed) {
    const sim::SimResult r = run(seed);
    if (r.violations > 0) {
      if (first != nullptr) *first = r.first_violation;
      return seed;
    }
  }
  return 0;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_SIM_SEEDS_H_
