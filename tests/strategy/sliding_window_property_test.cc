// SlidingWindow properties (docs/semantics.md, "Sliding window"). The bound
// of the sub-bucketed estimate, for a clock that does not move backwards:
//
// - any S consecutive whole ticks admit at most `limit`;
// - a span [a, a + window_ms) that starts a fraction f into tick k admits at
//   most `limit + f * X_k`, X_k being what tick k admitted (so < 2 x limit).
//
// Why: at the last admission in the span, at elapsed e into tick k + S, the
// check saw ticks k+1 .. k+S in full and tick k at weight 1 - e/w, and e/w
// < f; if the last admission is in an earlier tick, tick k was counted in
// full. The contract every strategy shares (a denial never changes state and
// a denial on a cold key allocates nothing; peek; the forecast's next instant
// admits and the ms before it does not, and at full_at the whole limit fits;
// an expired state decides like a cold one) is typed in
// strategy_contract_property_test.cc.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/strategy/sliding_window.h"

namespace throttlekit {
namespace sliding_window_property_test {
namespace {

using testing::Admit;
using testing::gen_cost;
using testing::gen_sliding_window;
using testing::kEpoch;

// The tick of `t`, computed as the strategy does.
int64_t tick_of(const SlidingWindow& sw, int64_t t) {
  return static_cast<int64_t>(
      std::floor(static_cast<double>(t) / sw.tick_ms()));
}

std::vector<Admit> run(const SlidingWindow& sw, SlidingWindow::State& s,
                       int steps) {
  return testing::forward_admissions(
      sw, s, kEpoch + *rc::gen::inRange<int64_t>(0, 2000), steps, gen_cost);
}

RC_GTEST_PROP(SlidingWindowProperty, AnySConsecutiveTicksAdmitAtMostLimit, ()) {
  const SlidingWindow sw = gen_sliding_window();
  const int64_t buckets = sw.options().buckets;
  const double limit = static_cast<double>(sw.options().limit);
  SlidingWindow::State s;
  std::map<int64_t, double> per_tick;
  for (const Admit& a : run(sw, s, *rc::gen::inRange(1, 300))) {
    per_tick[tick_of(sw, a.at)] += a.cost;
  }
  for (const auto& [last, unused] : per_tick) {
    double units = 0;
    for (auto it = per_tick.lower_bound(last - buckets + 1);
         it != per_tick.end() && it->first <= last; ++it) {
      units += it->second;
    }
    RC_ASSERT(units <= limit + 1e-9);
  }
}

RC_GTEST_PROP(SlidingWindowProperty,
              WindowSpanAdmitsAtMostLimitPlusFractionOfFirstTick, ()) {
  const SlidingWindow sw = gen_sliding_window();
  const int64_t window = sw.options().window_ms;
  const double limit = static_cast<double>(sw.options().limit);
  const double w = sw.tick_ms();
  SlidingWindow::State s;
  const std::vector<Admit> admitted = run(sw, s, *rc::gen::inRange(1, 300));
  std::map<int64_t, double> per_tick;
  for (const Admit& a : admitted) per_tick[tick_of(sw, a.at)] += a.cost;
  // Spans [a, a + window) starting at each admission and at the ms after it.
  for (const Admit& start : admitted) {
    for (int64_t a : {start.at, start.at + 1}) {
      double units = 0;
      for (const Admit& x : admitted) {
        if (x.at >= a && x.at < a + window) units += x.cost;
      }
      const int64_t k = tick_of(sw, a);
      // Clamped as the strategy clamps its weight: k * w can round above a
      // by an ulp at epoch scale, which would make f a tiny negative.
      const double f = std::clamp(
          (static_cast<double>(a) - static_cast<double>(k) * w) / w, 0.0, 1.0);
      const double x_k = per_tick.count(k) ? per_tick[k] : 0.0;
      RC_ASSERT(units <= limit + f * x_k + 1e-9);
      RC_ASSERT(units < 2 * limit + 1e-9);
    }
  }
}

}  // namespace
}  // namespace sliding_window_property_test
}  // namespace throttlekit
