// GCRA's bound as a property: over any window of length W, at most
// burst + W / T units are admitted (docs/semantics.md, "GCRA"). The contract
// every strategy shares (a denial never changes state, peek, forecast,
// expiry) is typed in strategy_contract_property_test.cc.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace gcra_property_test {
namespace {

using testing::Admit;
using testing::gen_gcra;
using testing::kEpoch;

RC_GTEST_PROP(GcraProperty, AdmitsAtMostBurstPlusElapsedOverT, ()) {
  const Gcra g = gen_gcra();
  const double burst = static_cast<double>(g.burst());
  const double t = g.emission_interval_ms();
  Gcra::State s;
  int64_t now = kEpoch;
  const std::vector<Admit> admitted = testing::forward_admissions(
      g, s, kEpoch, *rc::gen::inRange(1, 300),
      [] { return *rc::gen::element(1.0, 1.0, 2.0, 0.5, 3.0); }, &now);
  // Every window [a, b] starting at an admission. The bound is exact in
  // real arithmetic; in doubles each admission rounds tat once (tat + inc)
  // and the test rounds it once more (new_tat - tau), each by at most half
  // an ulp of the epoch-sized times (ulp(1.7e12 ms) = 2^-12 ms), and the
  // first admission may start from a tat already that far off: the bound
  // is allowed (admissions in the window + 1) ulps, in units of T.
  const double ulp = std::nextafter(static_cast<double>(now), INFINITY) -
                     static_cast<double>(now);
  testing::assert_every_run_within(admitted, [&](size_t later, double elapsed) {
    const double rounding = static_cast<double>(later + 2) * ulp / t + 1e-9;
    return burst + elapsed / t + rounding;
  });
}

}  // namespace
}  // namespace gcra_property_test
}  // namespace throttlekit
