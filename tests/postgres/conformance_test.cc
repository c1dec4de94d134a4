// Conformance: PostgresCoordinator decides exactly as MemoryCoordinator (the
// reference, run with an unbounded ttl_slack_ms, since the Postgres backend
// keeps rows for decisions until they are swept). RapidCheck generates
// timelines over several keys for every strategy with random valid options:
// `now` in the 1.7e12 range, mostly increasing and sometimes jumping back,
// integer and fractional costs, checks and peeks. Hand-picked timelines pin
// the edges (equality boundaries, costs above the ceiling, sliding-window
// bucket counts 1 and large, every quota period with offsets and week
// starts, large epochs).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/pg_test_env.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace conformance_test {
namespace {

using testing::kEpoch;

// One step of a timeline: a check of `cost` (or a peek) on key `key` at
// `now_ms`.
struct Op {
  int key = 0;
  int64_t now_ms = 0;
  double cost = 1;
  bool peek = false;
};

// Both coordinators, shared by every case; each case uses fresh keys.
struct Backends {
  std::unique_ptr<MemoryCoordinator> memory;
  std::unique_ptr<PostgresCoordinator> postgres;
  int64_t next_case = 0;

  static Backends& get() {
    static Backends* b = [] {
      auto* b = new Backends;
      b->memory = *MemoryCoordinator::create(
          {.max_keys = int64_t{1} << 30, .ttl_slack_ms = kMaxSafeInteger});
      b->postgres = testing::make_pg(
          testing::pg_options(testing::unique_table("tk_conformance")));
      return b;
    }();
    return *b;
  }
};

// Asserts that both backends answered and that Postgres's answer `got`
// equals the memory reference's `want`: with RapidCheck in a property,
// with gtest otherwise. `what` names the step.
template <class T>
void expect_equal(const absl::StatusOr<T>& want, const absl::StatusOr<T>& got,
                  bool property, const std::string& what) {
  if (property) {
    RC_ASSERT(want.ok());
    RC_ASSERT(got.ok());
    if (!(*got == *want)) {
      RC_FAIL(what + ": memory " + ::testing::PrintToString(*want) +
              " postgres " + ::testing::PrintToString(*got));
    }
  } else {
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(*got, *want) << what;
  }
}

// Runs `ops` through both backends and asserts equal streams of decisions
// and of forecasts, stopping at the first difference.
void expect_same(const AnyStrategy& strategy, const std::vector<Op>& ops,
                 bool property) {
  Backends& b = Backends::get();
  const std::string prefix = "case" + std::to_string(b.next_case++) + ":";
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const std::string key = prefix + std::to_string(op.key);
    const std::string step = std::string(strategy_name(strategy)) + " step " +
                             std::to_string(i) + " ";
    const std::string at = " now=" + std::to_string(op.now_ms) +
                           " cost=" + std::to_string(op.cost);
    absl::StatusOr<Decision> want =
        op.peek ? b.memory->peek(strategy, key, op.now_ms)
                : b.memory->check(strategy, key, op.now_ms, op.cost);
    absl::StatusOr<Decision> got =
        op.peek ? b.postgres->peek(strategy, key, op.now_ms)
                : b.postgres->check(strategy, key, op.now_ms, op.cost);
    ASSERT_NO_FATAL_FAILURE(expect_equal(
        want, got, property, step + (op.peek ? "peek" : "check") + at));
    // The forecast of the state the step left, for the step's cost.
    ASSERT_NO_FATAL_FAILURE(
        expect_equal(b.memory->forecast(strategy, key, op.now_ms, op.cost),
                     b.postgres->forecast(strategy, key, op.now_ms, op.cost),
                     property, step + "forecast" + at));
  }
}

// A generated valid strategy of any kind.
rc::Gen<StrategyOptions> any_options() {
  using rc::gen::inRange;
  return rc::gen::oneOf(
      rc::gen::exec([] {
        return StrategyOptions(
            Gcra::Options{.limit = *inRange<int64_t>(1, 30),
                          .period_ms = *inRange<int64_t>(1, 120'000),
                          .burst = *inRange<int64_t>(0, 40)});
      }),
      rc::gen::exec([] {
        const double refill =
            *rc::gen::oneOf(rc::gen::map(inRange<int64_t>(1, 2000),
                                         [](int64_t v) { return 1.0 * v; }),
                            rc::gen::map(inRange<int64_t>(1, 100000),
                                         [](int64_t v) { return v / 937.0; }));
        return StrategyOptions(TokenBucket::Options{
            .capacity = *inRange<int64_t>(1, 60), .refill_per_sec = refill});
      }),
      rc::gen::exec([] {
        return StrategyOptions(
            FixedWindow::Options{.limit = *inRange<int64_t>(1, 60),
                                 .window_ms = *inRange<int64_t>(1, 120'000)});
      }),
      rc::gen::exec([] {
        const int64_t window = *inRange<int64_t>(1, 120'000);
        const int64_t buckets = *rc::gen::oneOf(
            rc::gen::just(int64_t{1}),
            inRange<int64_t>(1, std::min<int64_t>(window, 30) + 1),
            inRange<int64_t>(1, std::min<int64_t>(window, 100'000) + 1));
        return StrategyOptions(
            SlidingWindow::Options{.limit = *inRange<int64_t>(1, 60),
                                   .window_ms = window,
                                   .buckets = buckets});
      }),
      rc::gen::exec([] {
        return StrategyOptions(
            SlidingLog::Options{.limit = *inRange<int64_t>(1, 60),
                                .window_ms = *inRange<int64_t>(1, 120'000)});
      }),
      rc::gen::exec([] {
        return StrategyOptions(Quota::Options{
            .limit = *inRange<int64_t>(1, 60),
            .period = static_cast<QuotaPeriod>(*inRange(0, 4)),
            .week_starts_on = *inRange<int64_t>(0, 7),
            .offset_minutes = *inRange<int64_t>(-840, 841),
            .anchor_ms =
                *inRange<int64_t>(-10'000'000'000'000, 10'000'000'000'000),
            .period_ms = *inRange<int64_t>(1, 200'000'000)});
      }),
      rc::gen::exec([] {
        return StrategyOptions(
            TokenBudget::Options{.budget = *inRange<int64_t>(1, 100),
                                 .window_ms = *inRange<int64_t>(1, 120'000)});
      }));
}

// The scale of time the strategy cares about, for the steps of `now`.
int64_t time_scale(const StrategyOptions& o) {
  return std::visit(
      [](const auto& x) -> int64_t {
        using O = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<O, Gcra::Options>) {
          return x.period_ms;
        } else if constexpr (std::is_same_v<O, TokenBucket::Options>) {
          return std::max<int64_t>(
              1, static_cast<int64_t>(x.capacity * 1000 / x.refill_per_sec));
        } else if constexpr (std::is_same_v<O, Quota::Options>) {
          return x.period == QuotaPeriod::kFixed ? x.period_ms : 86'400'000;
        } else {
          return x.window_ms;
        }
      },
      o);
}

RC_GTEST_PROP(PostgresConformance, DecisionStreamsEqualMemory, ()) {
  const StrategyOptions options = *any_options();
  const absl::StatusOr<AnyStrategy> strategy = make_strategy(options);
  RC_ASSERT(strategy.ok());
  const int64_t scale =
      std::min<int64_t>(time_scale(options), int64_t{1} << 40);
  const int keys = *rc::gen::inRange(1, 4);
  int64_t now = kEpoch + *rc::gen::inRange<int64_t>(0, 100'000'000'000);
  std::vector<Op> ops;
  const int steps = *rc::gen::inRange(1, 40);
  for (int i = 0; i < steps; ++i) {
    const int kind = *rc::gen::inRange(0, 20);
    if (kind == 0) {
      now -= *rc::gen::inRange<int64_t>(1, 2 * scale + 2);  // backwards
    } else if (kind < 4) {
      now += *rc::gen::inRange<int64_t>(0, 3 * scale + 2);
    } else if (kind < 12) {
      now += *rc::gen::inRange<int64_t>(0, scale / 8 + 2);
    }  // else: the same instant
    const double cost = *rc::gen::oneOf(
        rc::gen::just(1.0),
        rc::gen::map(rc::gen::inRange(1, 12), [](int v) { return 1.0 * v; }),
        rc::gen::map(rc::gen::inRange(1, 2000),
                     [](int v) { return v / 100.0; }),
        rc::gen::map(rc::gen::inRange(1, 100), [](int v) { return v / 3.0; }));
    ops.push_back(Op{*rc::gen::inRange(0, keys), now, cost,
                     *rc::gen::inRange(0, 5) == 0});
  }
  expect_same(*strategy, ops, true);
}

// Leases and give-backs equal MemoryCoordinator's (both on the same host's
// clock; windows of 10^12 ms, so both read the same window for years).
RC_GTEST_PROP(PostgresConformance, LeaseStreamsEqualMemory, ()) {
  Backends& b = Backends::get();
  const std::string key = "lease" + std::to_string(b.next_case++);
  const LeaseBudget budget =
      *LeaseBudget::create({.limit = *rc::gen::inRange<int64_t>(1, 40),
                            .window_ms = 1'000'000'000'000});
  const int steps = *rc::gen::inRange(1, 20);
  int64_t start = 0;
  for (int i = 0; i < steps; ++i) {
    if (*rc::gen::inRange(0, 2) == 0) {
      const int64_t want = *rc::gen::inRange<int64_t>(1, 30);
      absl::StatusOr<LeaseGrant> m = b.memory->lease(budget, key, want);
      absl::StatusOr<LeaseGrant> p = b.postgres->lease(budget, key, want);
      RC_ASSERT(m.ok());
      RC_ASSERT(p.ok());
      RC_ASSERT(p->granted == m->granted);
      RC_ASSERT(p->window_remaining == m->window_remaining);
      RC_ASSERT(p->window_start_ms == m->window_start_ms);
      RC_ASSERT(p->expires_at_ms == m->expires_at_ms);
      start = p->window_start_ms;
    } else {
      const int64_t credits = *rc::gen::inRange<int64_t>(0, 30);
      const std::string token =
          *rc::gen::element<std::string>("", "", "a", "b", "c");
      // Mostly the current window, sometimes another one.
      const int64_t from =
          *rc::gen::inRange(0, 5) == 0 ? start - 1'000'000'000'000 : start;
      absl::StatusOr<int64_t> m =
          b.memory->give_back(budget, key, from, credits, token);
      absl::StatusOr<int64_t> p =
          b.postgres->give_back(budget, key, from, credits, token);
      RC_ASSERT(m.ok());
      RC_ASSERT(p.ok());
      RC_ASSERT(*p == *m);
    }
  }
}

// A hand-picked timeline: `costs` at `times` on one key, a peek after each.
void run_edge(const StrategyOptions& options, const std::vector<int64_t>& times,
              const std::vector<double>& costs) {
  absl::StatusOr<AnyStrategy> s = make_strategy(options);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<Op> ops;
  for (size_t i = 0; i < times.size(); ++i) {
    ops.push_back(Op{0, times[i], costs[i % costs.size()], false});
    ops.push_back(Op{0, times[i], 1, true});
  }
  expect_same(*s, ops, false);
}

TEST(PostgresConformanceEdges, GcraEqualityAndOversizedCost) {
  // T = 100 ms; the 11th unit at exactly the boundary admits.
  const Gcra::Options o{.limit = 10, .period_ms = 1000};
  std::vector<int64_t> t(12, kEpoch);
  t[11] = kEpoch + 100;
  run_edge(o, t, {1});
  run_edge(o, {kEpoch, kEpoch, kEpoch + 1}, {11, 10.5, 0.25});
  run_edge(Gcra::Options{.limit = 3, .period_ms = 7, .burst = 1},
           {kEpoch, kEpoch + 2, kEpoch + 3, kEpoch - 5, kEpoch + 100},
           {1, 0.5, 1.5});
}

TEST(PostgresConformanceEdges, TokenBucketFractions) {
  run_edge(TokenBucket::Options{.capacity = 5, .refill_per_sec = 3.5},
           {kEpoch, kEpoch, kEpoch, kEpoch + 285, kEpoch + 286, kEpoch - 1000,
            kEpoch + 10'000},
           {2.5, 1.0 / 3, 6, 0.1});
  run_edge(TokenBucket::Options{.capacity = 1, .refill_per_sec = 0.001},
           {kEpoch, kEpoch + 1, kEpoch + 999'999, kEpoch + 1'000'000}, {1});
}

// The token bucket's reset_at is the first ms the bucket is full, searched
// from the closed form t + ceil((capacity - tokens) / rate), which rounding
// puts a ms early or late (docs/semantics.md, "Token bucket"). Capacity 1 at
// 1/7 token/s: after a check of 1 at kEpoch, the denial at +16 had the
// closed form +7000, where the stored {0, kEpoch} refills to
// 0.9999999999999999 (full only at +7001); after a check of 0.5, the denial
// 1 ms later had +3501 though the bucket is full at +3500. PL/pgSQL must
// search as the C++ does (forecasts after each step compare full_at_ms).
TEST(PostgresConformanceEdges, TokenBucketResetAtIsTheFirstFullMs) {
  const TokenBucket::Options o{.capacity = 1, .refill_per_sec = 1.0 / 7};
  run_edge(o, {kEpoch, kEpoch + 16, kEpoch + 7000, kEpoch + 7001}, {1});
  run_edge(o, {kEpoch, kEpoch + 1, kEpoch + 3499, kEpoch + 3500},
           {0.5, 1, 1, 1});
}

TEST(PostgresConformanceEdges, FixedWindowBoundaries) {
  run_edge(FixedWindow::Options{.limit = 3, .window_ms = 1000},
           {kEpoch - 1, kEpoch - 1, kEpoch, kEpoch + 999, kEpoch + 1000,
            kEpoch - 2000},
           {1.5, 1.5, 3, 0.5, 4});
}

TEST(PostgresConformanceEdges, SlidingWindowBucketCounts) {
  const std::vector<int64_t> t = {
      kEpoch,        kEpoch + 1,    kEpoch + 333, kEpoch + 999,  kEpoch + 1000,
      kEpoch + 1001, kEpoch + 1500, kEpoch + 200, kEpoch + 2999, kEpoch + 5000};
  for (int64_t buckets : {1, 3, 7, 1000, 100000}) {
    run_edge(
        SlidingWindow::Options{
            .limit = 4, .window_ms = 100000, .buckets = buckets},
        t, {1, 2.5, 0.5, 5});
    run_edge(
        SlidingWindow::Options{.limit = 4,
                               .window_ms = 1000,
                               .buckets = std::min<int64_t>(buckets, 1000)},
        t, {1, 2.5, 0.5, 5});
  }
}

TEST(PostgresConformanceEdges, SlidingLogRetryAndBackwardClock) {
  run_edge(SlidingLog::Options{.limit = 3, .window_ms = 1000},
           {kEpoch, kEpoch + 10, kEpoch + 10, kEpoch + 1000, kEpoch + 1010,
            kEpoch + 5, kEpoch + 2010, kEpoch - 3000},
           {1, 1.5, 4, 2});
}

TEST(PostgresConformanceEdges, QuotaCalendarPeriods) {
  // 2024-02-29 23:59:59.999 UTC, a leap day at a month end.
  const int64_t leap = 1'709'251'199'999;
  const std::vector<int64_t> t = {leap - 86'400'000, leap,
                                  leap + 1,          leap + 3'600'000,
                                  leap - 1,          leap + 40 * 86'400'000LL};
  for (int period = 0; period < 3; ++period) {
    for (int64_t offset : {-840, -330, 0, 60, 840}) {
      for (int64_t wso : {0, 1, 6}) {
        run_edge(Quota::Options{.limit = 3,
                                .period = static_cast<QuotaPeriod>(period),
                                .week_starts_on = wso,
                                .offset_minutes = offset},
                 t, {1, 2, 0.5});
      }
    }
  }
  run_edge(Quota::Options{.limit = 2,
                          .period = QuotaPeriod::kFixed,
                          .anchor_ms = leap + 12345,
                          .period_ms = 7'000},
           {leap, leap + 12345, leap + 19344, leap + 19345, leap - 100'000},
           {1, 1.5});
  // Far epochs: year ~287000 and before 1970.
  run_edge(Quota::Options{.limit = 2, .period = QuotaPeriod::kMonth},
           {kMaxSafeInteger - 1, kMaxSafeInteger, 1, 86'400'000LL * 400}, {1});
}

TEST(PostgresConformanceEdges, TokenBudgetCrossingDebit) {
  run_edge(TokenBudget::Options{.budget = 10, .window_ms = 1000},
           {kEpoch, kEpoch + 1, kEpoch + 2, kEpoch + 999, kEpoch + 1000,
            kEpoch - 5000},
           {7, 7.5, 1, 3});
}

TEST(PostgresConformanceEdges, LargeEpochs) {
  const int64_t big = kMaxSafeInteger - 10'000;
  for (const StrategyOptions& o : std::vector<StrategyOptions>{
           Gcra::Options{.limit = 3, .period_ms = 1000},
           TokenBucket::Options{.capacity = 3, .refill_per_sec = 2},
           FixedWindow::Options{.limit = 3, .window_ms = 1000},
           SlidingWindow::Options{.limit = 3, .window_ms = 1000, .buckets = 10},
           SlidingLog::Options{.limit = 3, .window_ms = 1000},
           TokenBudget::Options{.budget = 3, .window_ms = 1000}}) {
    run_edge(o, {big, big, big + 1, big + 500, big + 1000, big + 5000},
             {1, 1.5});
  }
}

}  // namespace
}  // namespace conformance_test
}  // namespace throttlekit
