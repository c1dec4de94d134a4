// tests/support/stale_now_timeline.h
//
// The stale-`now` conformance timelines (docs/conformance.md, "Stale `now`
// across expiry"), run on every store: calls whose `now` lags the real
// clock by up to four windows, real sleeps between them so that windows end
// and their state expires on the store's own clock (Redis's physical TTL,
// Postgres's `sweep()`, a fresher caller's `now` in memory), and every
// admission counted in the window its decision (or grant) names. With the
// store's default TTL slack (core/ttl_slack.h), above every lag here, no
// window ever counts more than its limit. Memory stores run the same
// timelines on a manual clock (their state expires only by the callers'
// `now`s); Redis and Postgres on the system clock with real sleeps.
//
// - `gen_stale_steps(window_ms, limit, unit_cost)`: the generated
//   timelines.
// - `stale_verb(...)`: one windowed verb of a `Coordinator` (fixed window,
//   quota, token budget through `check`; the lease budget through
//   `lease_windowed`) as a `StaleCall`; `every_stale_verb()` and
//   `stale_verb_test_name` instantiate a suite over them.
// - `run_stale_timeline`: runs steps through a `StaleCall`; returns "" or
//   the first window over its limit.
// - `revives_an_ended_window`: the hand-picked negative control. It fills
//   one window, waits until the window has ended and its state has expired
//   on the store's clock (optionally dropping it: a sweep, or a fresher
//   denial), then calls with a `now` inside the ended window; returns
//   whether that window then counted more than its limit. With a slack of
//   0 every store does (so the timelines above can fail); with the default
//   none does. `expect_memory_revival` is that control on a memory store,
//   whose expired state a fresher denial drops.

#ifndef THROTTLEKIT_TESTS_SUPPORT_STALE_NOW_TIMELINE_H_
#define THROTTLEKIT_TESTS_SUPPORT_STALE_NOW_TIMELINE_H_

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/strategy_bounds.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::testing {

struct StaleStep {
  int key = 0;
  int64_t sleep_ms = 0;  // real time slept before the call
  int64_t lag_ms = 0;    // how far the call's `now` is behind the clock
  int64_t cost = 1;
  bool drop = false;  // run the store's drop hook (a sweep) before the call
};

// The clock a timeline runs on: the system clock with real sleeps (for a
// store that expires state on its own clock), or a manual clock that a
// sleep advances (for a memory store, where only the callers' `now`s
// expire state).
struct StaleClock {
  std::function<int64_t()> now_ms;
  std::function<void(int64_t)> sleep_ms;

  static StaleClock real() {
    return {[] { return SystemClock{}.now_ms(); },
            [](int64_t ms) {
              std::this_thread::sleep_for(std::chrono::milliseconds(ms));
            }};
  }
  static StaleClock manual(ManualClock& clock) {
    return {[&clock] { return clock.now_ms(); },
            [&clock](int64_t ms) { clock.advance_ms(ms); }};
  }
};

// What one call counted: units admitted (or credits granted), and the end
// of the window they count in.
struct Counted {
  int64_t units = 0;
  int64_t window_end_ms = 0;
};
using StaleCall = std::function<absl::StatusOr<Counted>(
    const std::string& key, int64_t now_ms, int64_t cost)>;

// Steps per generated timeline.
inline constexpr size_t kStaleSteps = 16;

// Sleeps mostly within a window, sometimes across two or three (so windows
// end and expire between calls); lags from none to four windows; costs of
// 1, up to the limit and over it (a denial, which drops an expired state
// in memory) unless `unit_cost`.
inline rc::Gen<std::vector<StaleStep>> gen_stale_steps(int64_t window_ms,
                                                       int64_t limit,
                                                       bool unit_cost) {
  using rc::gen::inRange;
  using rc::gen::just;
  const rc::Gen<int64_t> cost = unit_cost
                                    ? just<int64_t>(1)
                                    : rc::gen::weightedOneOf<int64_t>(
                                          {{6, just<int64_t>(1)},
                                           {2, inRange<int64_t>(1, limit + 1)},
                                           {1, just<int64_t>(limit + 1)}});
  return rc::gen::container<std::vector<StaleStep>>(
      kStaleSteps,
      rc::gen::build<StaleStep>(
          rc::gen::set(&StaleStep::key, inRange(0, 2)),
          rc::gen::set(&StaleStep::sleep_ms,
                       rc::gen::weightedOneOf<int64_t>(
                           {{5, inRange<int64_t>(0, window_ms / 2 + 1)},
                            {2, inRange<int64_t>(window_ms, 3 * window_ms)}})),
          rc::gen::set(&StaleStep::lag_ms,
                       rc::gen::weightedOneOf<int64_t>(
                           {{3, just<int64_t>(0)},
                            {4, inRange<int64_t>(0, window_ms)},
                            {3, inRange<int64_t>(window_ms, 4 * window_ms)}})),
          rc::gen::set(&StaleStep::cost, cost),
          rc::gen::set(&StaleStep::drop,
                       rc::gen::weightedOneOf<bool>(
                           {{3, just(false)}, {1, just(true)}}))));
}

enum class StaleVerb { kFixedWindow, kQuota, kTokenBudget, kLease };

inline const char* stale_verb_name(StaleVerb v) {
  switch (v) {
    case StaleVerb::kFixedWindow:
      return "fixedWindow";
    case StaleVerb::kQuota:
      return "quota";
    case StaleVerb::kTokenBudget:
      return "tokenBudget";
    case StaleVerb::kLease:
      return "lease";
  }
  return "?";
}

// Every windowed verb; a coordinator's suite of them all (its parameters,
// and their test names: `stale_verb_test_name`).
inline constexpr StaleVerb kEveryStaleVerb[] = {
    StaleVerb::kFixedWindow, StaleVerb::kQuota, StaleVerb::kTokenBudget,
    StaleVerb::kLease};
inline auto every_stale_verb() { return ::testing::ValuesIn(kEveryStaleVerb); }
inline std::string stale_verb_test_name(
    const ::testing::TestParamInfo<StaleVerb>& info) {
  return stale_verb_name(info.param);
}

// Whether the verb's generated costs must all be 1 (a token budget lets
// the debit that crosses its limit through in full: only with unit debits
// is its window bound the limit itself).
inline bool stale_verb_unit_cost(StaleVerb v) {
  return v == StaleVerb::kTokenBudget;
}

// `verb` with `limit` per `window_ms` on `store`, keys under `prefix`.
inline StaleCall stale_verb(Coordinator& store, StaleVerb verb, int64_t limit,
                            int64_t window_ms, std::string prefix) {
  if (verb == StaleVerb::kLease) {
    const LeaseBudget budget =
        *LeaseBudget::create({.limit = limit, .window_ms = window_ms});
    return [&store, budget, prefix](const std::string& key, int64_t now_ms,
                                    int64_t cost) -> absl::StatusOr<Counted> {
      absl::StatusOr<LeaseGrant> g =
          store.lease_windowed(budget, prefix + key, cost, now_ms);
      if (!g.ok()) return g.status();
      return Counted{g->granted, g->expires_at_ms};
    };
  }
  const StrategyOptions options =
      verb == StaleVerb::kFixedWindow
          ? StrategyOptions(
                StrategyBounds<FixedWindow>::options(limit, window_ms))
      : verb == StaleVerb::kQuota
          ? StrategyOptions(StrategyBounds<Quota>::options(limit, window_ms))
          : StrategyOptions(
                StrategyBounds<TokenBudget>::options(limit, window_ms));
  const AnyStrategy strategy = *make_strategy(options);
  return [&store, strategy, prefix](const std::string& key, int64_t now_ms,
                                    int64_t cost) -> absl::StatusOr<Counted> {
    absl::StatusOr<Decision> d =
        store.check(strategy, prefix + key, now_ms, static_cast<double>(cost));
    if (!d.ok()) return d.status();
    return Counted{d->allowed ? cost : 0, d->reset_at_ms};
  };
}

// `store`'s verbs as `expect_stale_timelines_hold` makes them
// (`stale_verb`); `store` must outlive the calls.
inline auto stale_verbs_of(Coordinator& store, std::string prefix = "") {
  return [&store, prefix = std::move(prefix)](StaleVerb verb, int64_t limit,
                                              int64_t window_ms,
                                              const std::string& keys) {
    return stale_verb(store, verb, limit, window_ms, prefix + keys);
  };
}

// Runs `steps` through `call` on `clock` (`drop` runs where a step asks
// for it; may be null); "" when no (key, window) counted more than
// `limit`, else that window and the step that crossed it.
inline std::string run_stale_timeline(const StaleCall& call,
                                      const StaleClock& clock, int64_t limit,
                                      const std::vector<StaleStep>& steps,
                                      const std::function<void()>& drop) {
  std::map<std::pair<int, int64_t>, int64_t> per_window;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StaleStep& s = steps[i];
    if (s.sleep_ms > 0) clock.sleep_ms(s.sleep_ms);
    if (s.drop && drop) drop();
    const int64_t now = std::max<int64_t>(1, clock.now_ms() - s.lag_ms);
    absl::StatusOr<Counted> c = call(std::to_string(s.key), now, s.cost);
    if (!c.ok()) {
      return absl::StrCat("step ", i, ": ", c.status().ToString());
    }
    if (c->units == 0) continue;
    int64_t& n = per_window[{s.key, c->window_end_ms}];
    n += c->units;
    if (n > limit) {
      return absl::StrCat("step ", i, " (key ", s.key, ", lag ", s.lag_ms,
                          " ms, cost ", s.cost, "): the window ending at ",
                          c->window_end_ms, " counted ", n, " (limit ", limit,
                          ")");
    }
  }
  return "";
}

// Runs `cases` generated timelines of `verb` (3 per `window_ms`), each
// on keys of its own (`make_call(prefix)`) and drawn from seed `seed + i`,
// so a failure names a timeline that replays; EXPECTs each to hold.
inline void expect_stale_timelines_hold(
    const std::function<StaleCall(StaleVerb, int64_t limit, int64_t window_ms,
                                  const std::string& prefix)>& make_call,
    const StaleClock& clock, StaleVerb verb, int64_t window_ms, int cases,
    uint64_t seed, const std::function<void()>& drop = nullptr) {
  constexpr int64_t kLimit = 3;
  const rc::Gen<std::vector<StaleStep>> gen =
      gen_stale_steps(window_ms, kLimit, stale_verb_unit_cost(verb));
  for (int i = 0; i < cases; ++i) {
    const uint64_t case_seed = seed + static_cast<uint64_t>(i);
    const std::vector<StaleStep> steps = gen(rc::Random(case_seed)).value();
    const StaleCall call =
        make_call(verb, kLimit, window_ms,
                  absl::StrCat("stale:", stale_verb_name(verb), ":",
                               clock.now_ms(), ":", case_seed, ":"));
    const std::string failure =
        run_stale_timeline(call, clock, kLimit, steps, drop);
    if (failure.empty()) continue;
    std::string timeline;
    for (const StaleStep& st : steps) {
      absl::StrAppend(&timeline, "\n  key ", st.key, " sleep ", st.sleep_ms,
                      " lag ", st.lag_ms, " cost ", st.cost,
                      st.drop ? " drop" : "");
    }
    ADD_FAILURE() << stale_verb_name(verb) << ", seed " << case_seed << ": "
                  << failure << timeline;
    return;
  }
}

// The negative control (see the file comment). `drop(now_ms)` runs once
// the window has ended and expired by `settle_ms` on the clock: a sweep, a
// fresher denial, or nothing for a store whose own clock expires it. Fills
// the window with `limit` calls of cost 1 (again, on another key, if the
// fill straddled two windows).
inline absl::StatusOr<bool> revives_an_ended_window(
    const StaleCall& call, const StaleClock& clock, int64_t limit,
    int64_t window_ms, int64_t settle_ms,
    const std::function<void(const std::string& key, int64_t now_ms)>& drop) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const std::string key = absl::StrCat("probe", attempt);
    std::map<int64_t, int64_t> filled;
    for (int64_t i = 0; i < limit; ++i) {
      absl::StatusOr<Counted> c = call(key, clock.now_ms(), 1);
      if (!c.ok()) return c.status();
      filled[c->window_end_ms] += c->units;
    }
    if (filled.size() != 1 || filled.begin()->second != limit) continue;
    const int64_t end = filled.begin()->first;
    while (clock.now_ms() < end + settle_ms) clock.sleep_ms(2);
    if (drop) drop(key, clock.now_ms());
    // A `now` inside the ended window.
    absl::StatusOr<Counted> late = call(key, end - window_ms / 2, 1);
    if (!late.ok()) return late.status();
    return late->units > 0 && late->window_end_ms == end;
  }
  return absl::DeadlineExceededError(
      "revives_an_ended_window: no fill landed in one window in 20 tries");
}

// The negative control on a memory store (`call`, with a manual `clock`):
// once the filled window has ended, a fresher denial (cost `limit` + 1,
// which admits nothing) drops its expired state; expects the ended window
// then revived exactly when the store's TTL slack is 0 (`zero_slack`).
inline void expect_memory_revival(const StaleCall& call,
                                  const StaleClock& clock, int64_t limit,
                                  int64_t window_ms, bool zero_slack) {
  absl::StatusOr<bool> revived = revives_an_ended_window(
      call, clock, limit, window_ms, 5,
      [&](const std::string& key, int64_t now_ms) {
        absl::StatusOr<Counted> denied = call(key, now_ms, limit + 1);
        ASSERT_TRUE(denied.ok()) << denied.status();
        EXPECT_EQ(denied->units, 0);
      });
  ASSERT_TRUE(revived.ok()) << revived.status();
  EXPECT_EQ(*revived, zero_slack);
}

// The whole check on a store whose state expires on its own clock (Redis
// in any topology): `cases` timelines of each windowed verb on `defaults`
// (a coordinator with the default slack), and the negative control of the
// fixed window and the lease on both (`zero`: the same store with a slack
// of 0), keys under `prefix`.
inline void expect_stale_nows_hold_on(Coordinator& defaults, Coordinator& zero,
                                      const std::string& prefix, int cases) {
  for (Coordinator* store : {&defaults, &zero}) {
    const absl::Status ready =
        store->wait_ready(absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(ready.ok()) << ready;
  }
  for (const StaleVerb verb : kEveryStaleVerb) {
    expect_stale_timelines_hold(stale_verbs_of(defaults, prefix),
                                StaleClock::real(), verb, 10, cases, 20261128);
  }
  for (const StaleVerb verb : {StaleVerb::kFixedWindow, StaleVerb::kLease}) {
    for (Coordinator* store : {&zero, &defaults}) {
      const StaleCall call =
          stale_verb(*store, verb, 3, 20,
                     absl::StrCat(prefix, "neg:", stale_verb_name(verb), ":",
                                  store == &zero ? "zero:" : "default:"));
      // The key expires on the server's clock at the window's end (plus
      // the fill's own delay, which 300 ms of settling cover).
      absl::StatusOr<bool> revived = revives_an_ended_window(
          call, StaleClock::real(), 3, 20, 300, nullptr);
      ASSERT_TRUE(revived.ok()) << revived.status();
      EXPECT_EQ(*revived, store == &zero)
          << stale_verb_name(verb) << (store == &zero ? ", slack 0" : "");
    }
  }
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_STALE_NOW_TIMELINE_H_
