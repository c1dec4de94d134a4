// FixedWindow's bound as a property (docs/semantics.md, "Fixed window"):
// under a clock that does not move backwards, no epoch-aligned window admits
// more than `limit` and no span of `window_ms` admits more than 2 x limit.
// The contract every strategy shares (a denial never changes state, peek,
// forecast, an expired state decides like a cold one) is typed in
// strategy_contract_property_test.cc.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/strategy/fixed_window.h"

namespace throttlekit {
namespace fixed_window_property_test {
namespace {

using testing::Admit;
using testing::gen_cost;
using testing::gen_fixed_window;
using testing::kEpoch;

RC_GTEST_PROP(FixedWindowProperty, NeverAdmitsMoreThanLimitPerWindow, ()) {
  const FixedWindow f = gen_fixed_window();
  const int64_t w = f.options().window_ms;
  const double limit = static_cast<double>(f.options().limit);
  FixedWindow::State s;
  const int64_t start = kEpoch + *rc::gen::inRange<int64_t>(0, w);
  const std::vector<Admit> admitted = testing::forward_admissions(
      f, s, start, *rc::gen::inRange(1, 300), gen_cost);
  std::map<int64_t, double> per_window;  // integer-oracle start -> units
  for (const Admit& a : admitted) per_window[a.at - a.at % w] += a.cost;
  for (const auto& [start, units] : per_window) RC_ASSERT(units <= limit);
  // Any span [a, a + w) starting at an admission: at most 2 x limit (summed
  // across two windows in another order than the strategy's, so fractional
  // costs such as 0.1 may round an ulp above it).
  for (size_t i = 0; i < admitted.size(); ++i) {
    double units = 0;
    for (size_t j = i;
         j < admitted.size() && admitted[j].at < admitted[i].at + w; ++j) {
      units += admitted[j].cost;
    }
    RC_ASSERT(units <= 2 * limit + 1e-9);
  }
}

}  // namespace
}  // namespace fixed_window_property_test
}  // namespace throttlekit
