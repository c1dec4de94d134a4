// tests/support/coordinator_real_clock.h
//
// Provides the real-clock bound checks of the engines that run over a
// `Coordinator` (memory, Redis or Postgres): many threads on one hot key,
// the system clock, short windows, admissions counted per window
// (`real_clock_load.h`, `strategy_bounds.h`):
//
// - `strict_holds_bound<S>`: `StrictRateLimiter<S>` (the store's clock).
// - `cached_deny_holds_bound<S>`: `CachedDenyLimiter<S>` (denials cached on
//   the node's clock).
// - `leased_nodes_hold_limit`: N `LeasedLimiter` nodes (window-coupled)
//   sharing one budget, several threads each: at most `limit` admissions in
//   every window, counted by the window each admission's credits belong to
//   (its decision's reset_at, the store's window end).
// - `escrow_fleet_holds_limit`: `WeightedFairEscrow`s on one budget (one
//   in-process escrow when the coordinator is null): at most `limit`
//   admitted per window in total, and, in-process, never more than a
//   tenant's hard cap in a window; through `admit` or, `async`, through
//   `admit_async` with each completion waited for.
//
// Each prints one line of figures and records failures with EXPECT. Under
// the sanitizers each runs a fifth of `run_ms`, never less than 500 ms
// (`scaled_work`): they look for races and memory errors along the same
// paths, which half a second of eight threads takes thousands of times;
// the long search for a rare interleaving is the optimised pass's
// (docs/testing.md).

#ifndef THROTTLEKIT_TESTS_SUPPORT_COORDINATOR_REAL_CLOCK_H_
#define THROTTLEKIT_TESTS_SUPPORT_COORDINATOR_REAL_CLOCK_H_

#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "support/real_clock_load.h"
#include "support/strategy_bounds.h"
#include "support/test_work.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/twotier/cached_deny_limiter.h"
#include "throttlekit/twotier/leased_limiter.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit::testing {

struct RealClockRun {
  int threads = 8;
  int64_t limit = 200;
  int64_t window_ms = 20;
  int64_t run_ms = 2000;
};

inline void report(const char* engine, std::string_view strategy,
                   const Load& load, const std::string& figures) {
  std::printf("%s %s: %lld calls, %zu admitted, %lld errors; %s\n", engine,
              std::string(strategy).c_str(), static_cast<long long>(load.calls),
              load.admitted.size(), static_cast<long long>(load.errors),
              figures.c_str());
}

// How long `run` hammers in this build (the sanitizers' share, above).
inline int64_t run_for(const RealClockRun& run) {
  return scaled_work(run.run_ms, 500);
}

// The hot-key run of `call(thread)` (a decision on key "hot") and the
// bound check shared by every engine of strategy `S`.
template <class S, class Call>
void calls_hold_bound(const char* engine, const RealClockRun& run, Call call) {
  const Load load = hammer(run.threads, run_for(run), call);
  EXPECT_EQ(load.errors, 0);
  EXPECT_GT(load.calls, static_cast<int64_t>(load.admitted.size()));
  report(engine, S::kName, load,
         StrategyBounds<S>::check(load, run.limit, run.window_ms));
}

// `calls_hold_bound` for `limiter`'s own `check` (any `RateEngine`).
template <class S, RateEngine E>
void engine_holds_bound(const char* engine, E& limiter,
                        const RealClockRun& run) {
  calls_hold_bound<S>(engine, run, [&](int) { return limiter.check("hot"); });
}

// `StrictRateLimiter<S>` over `coordinator`, its keys under `prefix`. With
// `own_now`, each call passes its own `now` read just before it (`check_at`
// on the system clock, the store's clock on one machine): stale whenever a
// thread is preempted between its read and the store's step, the common
// case with more threads than cores. The store's default `ttl_slack_ms`
// keeps every stale `now` from reviving an ended window
// (core/ttl_slack.h).
template <class S>
void strict_holds_bound(std::shared_ptr<Coordinator> coordinator,
                        const RealClockRun& run, std::string prefix,
                        bool own_now = false) {
  auto limiter = StrictRateLimiter<S>::create(
      StrategyBounds<S>::options(run.limit, run.window_ms),
      std::move(coordinator), {.prefix = std::move(prefix)});
  ASSERT_TRUE(limiter.ok()) << limiter.status();
  if (!own_now) {
    engine_holds_bound<S>("strict", **limiter, run);
    return;
  }
  const SystemClock clock;
  calls_hold_bound<S>("strict check_at", run, [&](int) {
    return (*limiter)->check_at("hot", clock.now_ms());
  });
}

// `strict_holds_bound` with each call's own `now`, for the windowed
// strategies.
template <class S>
void strict_check_at_holds_bound(std::shared_ptr<Coordinator> coordinator,
                                 const RealClockRun& run, std::string prefix) {
  strict_holds_bound<S>(std::move(coordinator), run, std::move(prefix),
                        /*own_now=*/true);
}

template <class S>
void cached_deny_holds_bound(std::shared_ptr<Coordinator> coordinator,
                             const RealClockRun& run, std::string prefix) {
  CachedDenyOptions o;
  o.prefix = std::move(prefix);
  auto limiter = CachedDenyLimiter<S>::create(
      StrategyBounds<S>::options(run.limit, run.window_ms),
      std::move(coordinator), o);
  ASSERT_TRUE(limiter.ok()) << limiter.status();
  engine_holds_bound<S>("cached_deny", **limiter, run);
}

// `nodes` limiters x `run.threads / nodes` threads each (thread t uses node
// t % nodes).
inline void leased_nodes_hold_limit(std::shared_ptr<Coordinator> coordinator,
                                    const RealClockRun& run, int nodes,
                                    int64_t batch, std::string prefix) {
  std::vector<std::unique_ptr<LeasedLimiter>> fleet;
  for (int i = 0; i < nodes; ++i) {
    LeasedLimiterOptions o;
    o.prefix = prefix;
    o.limit = run.limit;
    o.window_ms = run.window_ms;
    o.batch = batch;
    auto node = LeasedLimiter::create(o, coordinator);
    ASSERT_TRUE(node.ok()) << node.status();
    fleet.push_back(*std::move(node));
  }
  const Load load = hammer(run.threads, run_for(run), [&](int t) {
    return fleet[static_cast<size_t>(t % nodes)]->check("hot");
  });
  EXPECT_EQ(load.errors, 0);
  EXPECT_GT(load.calls, static_cast<int64_t>(load.admitted.size()));
  const std::string figures = check_per_window(load, run.limit);
  std::printf("leased %d node(s), batch %lld: %lld calls, %zu admitted; %s\n",
              nodes, static_cast<long long>(batch),
              static_cast<long long>(load.calls), load.admitted.size(),
              figures.c_str());
}

// Three tenants (weights 3, 2, 1; the last capped at limit / 4); thread t
// admits tenant t % 3 through escrow t % escrows.
inline void escrow_fleet_holds_limit(std::shared_ptr<Coordinator> coordinator,
                                     const RealClockRun& run, int escrows,
                                     std::string key, bool async = false) {
  const int64_t cap = run.limit / 4;
  std::vector<std::unique_ptr<WeightedFairEscrow>> fleet;
  std::vector<WeightedFairEscrow::TenantId> ids;
  for (int i = 0; i < escrows; ++i) {
    WeightedFairEscrowOptions o;
    o.limit = run.limit;
    o.window_ms = run.window_ms;
    o.tenants = {{.name = "gold", .weight = 3},
                 {.name = "silver", .weight = 2},
                 {.name = "free", .weight = 1, .hard_cap = cap}};
    o.coordinator = coordinator;
    o.key = key;
    o.quantum = 8;
    auto escrow = WeightedFairEscrow::create(o);
    ASSERT_TRUE(escrow.ok()) << escrow.status();
    fleet.push_back(*std::move(escrow));
  }
  for (const char* name : {"gold", "silver", "free"}) {
    auto id = fleet[0]->tenant(name);
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  static constexpr const char* kNames[] = {"gold", "silver", "free"};
  const Load load = hammer(run.threads, run_for(run), [&](int t) {
    WeightedFairEscrow& escrow = *fleet[static_cast<size_t>(t % escrows)];
    if (!async) return escrow.admit(ids[static_cast<size_t>(t % 3)]);
    // `admit_async`, its completion waited for (inline, or from the thread
    // that reads the lease, or from the call ahead of it in the queue).
    std::promise<absl::StatusOr<Decision>> done;
    std::future<absl::StatusOr<Decision>> answer = done.get_future();
    escrow.admit_async(kNames[t % 3], 1, [&done](absl::StatusOr<Decision> d) {
      done.set_value(std::move(d));
    });
    return answer.get();
  });
  EXPECT_EQ(load.errors, 0);
  EXPECT_GT(load.calls, static_cast<int64_t>(load.admitted.size()));
  const std::string figures = check_per_window(load, run.limit);
  int64_t worst_free = 0;
  if (coordinator == nullptr) {
    std::map<int64_t, int64_t> free_per_window;
    for (const Admission& a : load.admitted) {
      if (a.thread % 3 == 2) ++free_per_window[a.reset_at_ms];
    }
    for (const auto& [end, n] : free_per_window) {
      worst_free = std::max(worst_free, n);
    }
    EXPECT_LE(worst_free, cap);
  }
  std::printf(
      "escrow x%d: %lld calls, %zu admitted; %s; worst capped "
      "tenant window %lld (cap %lld)\n",
      escrows, static_cast<long long>(load.calls), load.admitted.size(),
      figures.c_str(), static_cast<long long>(worst_free),
      static_cast<long long>(cap));
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_COORDINATOR_REAL_CLOCK_H_
