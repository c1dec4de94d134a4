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

using testing::gen_forward_step;
using testing::gen_gcra;
using testing::kEpoch;
using testing::step_ms;

struct Admit {
  int64_t at;
  double cost;
};

RC_GTEST_PROP(GcraProperty, AdmitsAtMostBurstPlusElapsedOverT, ()) {
  const Gcra g = gen_gcra();
  const double burst = static_cast<double>(g.burst());
  const double t = g.emission_interval_ms();
  Gcra::State s;
  std::vector<Admit> admitted;
  int64_t now = kEpoch;
  const auto steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    now += gen_forward_step(step_ms(g));
    const double cost = *rc::gen::element(1.0, 1.0, 2.0, 0.5, 3.0);
    if (g.check(s, now, cost).allowed) admitted.push_back({now, cost});
  }
  // Every window [a, b] starting at an admission. The bound is exact in
  // real arithmetic; in doubles each admission rounds tat once (tat + inc)
  // and the test rounds it once more (new_tat - tau), each by at most half
  // an ulp of the epoch-sized times (ulp(1.7e12 ms) = 2^-12 ms), and the
  // first admission may start from a tat already that far off: the bound
  // is allowed (admissions in the window + 1) ulps, in units of T.
  const double ulp = std::nextafter(static_cast<double>(now), INFINITY) -
                     static_cast<double>(now);
  for (size_t i = 0; i < admitted.size(); ++i) {
    double units = 0;
    for (size_t j = i; j < admitted.size(); ++j) {
      units += admitted[j].cost;
      const double elapsed =
          static_cast<double>(admitted[j].at - admitted[i].at);
      const double rounding = static_cast<double>(j - i + 2) * ulp / t + 1e-9;
      RC_ASSERT(units <= burst + elapsed / t + rounding);
    }
  }
}

}  // namespace
}  // namespace gcra_property_test
}  // namespace throttlekit
