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
// full. Also: a denial never changes state (under any clock) and a denial on
// a cold key allocates nothing; the forecast's next instant admits and the ms
// before it does not; an expired state decides like a cold one.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "throttlekit/strategy/sliding_window.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

struct Admit {
  int64_t at;
  double cost;
};

SlidingWindow gen_window() {
  const int64_t window = *rc::gen::inRange<int64_t>(1, 2000);
  const int64_t buckets =
      *rc::gen::inRange<int64_t>(1, std::min<int64_t>(window, 20) + 1);
  return *SlidingWindow::create(
      {*rc::gen::inRange<int64_t>(1, 30), window, buckets});
}

double gen_cost() { return *rc::gen::element(1.0, 1.0, 0.5, 2.0, 3.0, 0.25); }

int64_t gen_step(const SlidingWindow& sw) {
  return *rc::gen::inRange<int64_t>(0,
                                    static_cast<int64_t>(2 * sw.tick_ms()) + 2);
}

// The tick of `t`, computed as the strategy does.
int64_t tick_of(const SlidingWindow& sw, int64_t t) {
  return static_cast<int64_t>(
      std::floor(static_cast<double>(t) / sw.tick_ms()));
}

std::vector<Admit> run(const SlidingWindow& sw, SlidingWindow::State& s,
                       int steps) {
  std::vector<Admit> admitted;
  int64_t now = kEpoch + *rc::gen::inRange<int64_t>(0, 2000);
  for (int i = 0; i < steps; ++i) {
    now += gen_step(sw);
    const double cost = gen_cost();
    if (sw.check(s, now, cost).allowed) admitted.push_back({now, cost});
  }
  return admitted;
}

RC_GTEST_PROP(SlidingWindowProperty, AnySConsecutiveTicksAdmitAtMostLimit, ()) {
  const SlidingWindow sw = gen_window();
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
  const SlidingWindow sw = gen_window();
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

RC_GTEST_PROP(SlidingWindowProperty, DenialNeverChangesState, ()) {
  const SlidingWindow sw = gen_window();
  SlidingWindow::State cold;
  const Decision first = sw.check(cold, kEpoch, sw.options().limit + 0.5);
  RC_ASSERT(!first.allowed);
  RC_ASSERT(cold.slots.capacity() == 0u);  // a cold denial allocates nothing
  SlidingWindow::State s;
  int64_t now = kEpoch;
  for (int i = 0; i < 200; ++i) {
    now += gen_step(sw) - *rc::gen::inRange<int64_t>(0, 40);  // may go back
    const SlidingWindow::State before = s;
    const Decision d = sw.check(s, now, *rc::gen::element(1.0, 2.5, 40.0));
    RC_ASSERT(d.remaining >= 0);
    RC_ASSERT(d.reset_at_ms > now);
    if (d.allowed) {
      RC_ASSERT(d.retry_after_ms == 0);
    } else {
      RC_ASSERT(s == before);
      RC_ASSERT(d.retry_after_ms >= 1);
    }
  }
}

RC_GTEST_PROP(SlidingWindowProperty, ForecastNextAdmitsAndTheMsBeforeDoesNot,
              ()) {
  const SlidingWindow sw = gen_window();
  SlidingWindow::State s;
  (void)run(sw, s, *rc::gen::inRange(0, 100));
  // A `now` after the history (the clock does not move back).
  int64_t now = kEpoch + 2000;
  for (const SlidingWindow::Slot& slot : s.slots) {
    if (slot.tick != SlidingWindow::kNoTick) {
      now = std::max(now,
                     static_cast<int64_t>(std::ceil(
                         static_cast<double>(slot.tick + 1) * sw.tick_ms())));
    }
  }
  now += *rc::gen::inRange<int64_t>(0, 50);
  const double cost = std::min(static_cast<double>(sw.options().limit),
                               *rc::gen::element(1.0, 0.3, 2.0, 7.5, 30.0));
  const SlidingWindow::State before = s;
  const Forecast f = sw.forecast(s, now, cost);
  RC_ASSERT(s == before);
  RC_ASSERT(f.next_replenish_at_ms >= now);
  RC_ASSERT(f.full_at_ms >= now);
  SlidingWindow::State at = s;
  RC_ASSERT(sw.check(at, f.next_replenish_at_ms, cost).allowed);
  if (f.next_replenish_at_ms > now) {
    SlidingWindow::State earlier = s;
    RC_ASSERT(!sw.check(earlier, f.next_replenish_at_ms - 1, cost).allowed);
  }
  // Fully replenished means the whole limit fits.
  SlidingWindow::State full = s;
  RC_ASSERT(sw.check(full, f.full_at_ms, sw.options().limit).allowed);
}

RC_GTEST_PROP(SlidingWindowProperty, ExpiredStateDecidesLikeCold, ()) {
  const SlidingWindow sw = gen_window();
  SlidingWindow::State warm;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 60);
  for (int i = 0; i < steps; ++i) {
    now += gen_step(sw) - *rc::gen::inRange<int64_t>(0, 10);
    (void)sw.check(warm, now, gen_cost());
  }
  RC_PRE(warm != SlidingWindow::State{});
  SlidingWindow::State cold;
  now = sw.expires_at_ms(warm) + *rc::gen::inRange<int64_t>(0, 3);
  for (int i = 0; i < 30; ++i) {
    const double cost = *rc::gen::element(1.0, 0.5, 3.0, 40.0);
    RC_ASSERT(sw.peek(warm, now) == sw.peek(cold, now));
    RC_ASSERT(sw.forecast(warm, now, cost) == sw.forecast(cold, now, cost));
    RC_ASSERT(sw.check(warm, now, cost) == sw.check(cold, now, cost));
    now += gen_step(sw);
  }
}

}  // namespace
}  // namespace throttlekit
