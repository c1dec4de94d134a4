// FixedWindow properties (docs/semantics.md, "Fixed window"): under a clock
// that does not move backwards, no epoch-aligned window admits more than
// `limit` and no span of `window_ms` admits more than 2 x limit; a denial never
// changes state (under any clock); an expired state decides like a cold one.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "throttlekit/strategy/fixed_window.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

struct Admit {
  int64_t at;
  double cost;
};

FixedWindow gen_window() {
  return *FixedWindow::create(
      {*rc::gen::inRange<int64_t>(1, 30), *rc::gen::inRange<int64_t>(1, 2000)});
}

double gen_cost() { return *rc::gen::element(1.0, 1.0, 0.5, 2.0, 3.0, 0.25); }

int64_t gen_step(const FixedWindow& f) {
  const int64_t w = f.options().window_ms;
  return *rc::gen::inRange<int64_t>(0, w / f.options().limit + 2);
}

RC_GTEST_PROP(FixedWindowProperty, NeverAdmitsMoreThanLimitPerWindow, ()) {
  const FixedWindow f = gen_window();
  const int64_t w = f.options().window_ms;
  const double limit = static_cast<double>(f.options().limit);
  FixedWindow::State s;
  std::map<int64_t, double> per_window;  // integer-oracle start -> units
  std::vector<Admit> admitted;
  int64_t now = kEpoch + *rc::gen::inRange<int64_t>(0, w);
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    now += gen_step(f);
    const double cost = gen_cost();
    if (f.check(s, now, cost).allowed) {
      per_window[now - now % w] += cost;
      admitted.push_back({now, cost});
    }
  }
  for (const auto& [start, units] : per_window) RC_ASSERT(units <= limit);
  // Any span [a, a + w) starting at an admission: at most 2 x limit.
  for (size_t i = 0; i < admitted.size(); ++i) {
    double units = 0;
    for (size_t j = i;
         j < admitted.size() && admitted[j].at < admitted[i].at + w; ++j) {
      units += admitted[j].cost;
    }
    RC_ASSERT(units <= 2 * limit);
  }
}

RC_GTEST_PROP(FixedWindowProperty, DenialNeverChangesState, ()) {
  const FixedWindow f = gen_window();
  FixedWindow::State s;
  int64_t now = kEpoch;
  int64_t latest = now;
  for (int i = 0; i < 200; ++i) {
    now += gen_step(f) - *rc::gen::inRange<int64_t>(0, 40);  // may go back
    latest = std::max(latest, now);
    const FixedWindow::State before = s;
    const Decision d = f.check(s, now, *rc::gen::element(1.0, 2.5, 40.0));
    RC_ASSERT(d.remaining >= 0);
    RC_ASSERT(d.reset_at_ms > now);
    // A stale now is decided in the stored window, never past the latest.
    RC_ASSERT(d.reset_at_ms <= latest + f.options().window_ms);
    if (d.allowed) {
      RC_ASSERT(d.retry_after_ms == 0);
    } else {
      RC_ASSERT(s == before);
      RC_ASSERT(d.retry_after_ms == d.reset_at_ms - now);
    }
  }
}

RC_GTEST_PROP(FixedWindowProperty, ExpiredStateDecidesLikeCold, ()) {
  const FixedWindow f = gen_window();
  FixedWindow::State warm;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 40);
  for (int i = 0; i < steps; ++i) {
    now += gen_step(f) - *rc::gen::inRange<int64_t>(0, 10);
    (void)f.check(warm, now, gen_cost());
  }
  RC_PRE(warm != FixedWindow::State{});
  FixedWindow::State cold;
  now = f.expires_at_ms(warm) + *rc::gen::inRange<int64_t>(0, 3);
  for (int i = 0; i < 30; ++i) {
    const double cost = *rc::gen::element(1.0, 0.5, 3.0, 40.0);
    RC_ASSERT(f.peek(warm, now) == f.peek(cold, now));
    RC_ASSERT(f.forecast(warm, now, cost) == f.forecast(cold, now, cost));
    RC_ASSERT(f.check(warm, now, cost) == f.check(cold, now, cost));
    now += gen_step(f);
  }
}

}  // namespace
}  // namespace throttlekit
