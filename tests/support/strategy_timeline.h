// tests/support/strategy_timeline.h
//
// The conformance timelines every remote coordinator passes against the
// in-memory reference (docs/conformance.md): the generators of strategy
// options and of steps (moves of the clock forward, backward and far,
// costs whole and fractional, peeks), `run_timeline`, which runs one
// timeline on a memory coordinator and on the one under test and returns
// the first difference in a decision or a forecast, and the hand-picked
// edge timelines. Single-node Redis and Redis Cluster run the same ones
// (tests/redis/redis_conformance_test.cc, redis_cluster_test.cc).

#ifndef THROTTLEKIT_TESTS_SUPPORT_STRATEGY_TIMELINE_H_
#define THROTTLEKIT_TESTS_SUPPORT_STRATEGY_TIMELINE_H_

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/clock.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit::testing {

// No physical expiry during a timeline (its instants span years).
inline constexpr int64_t kTimelineSlack = int64_t{1} << 40;

struct TimelineStep {
  int key = 0;
  int64_t dt = 0;  // ms since the previous step (may be negative)
  double cost = 1;
  bool peek = false;
};

inline rc::Gen<TimelineStep> gen_timeline_step(int64_t scale) {
  return rc::gen::build<TimelineStep>(
      rc::gen::set(&TimelineStep::key, rc::gen::inRange(0, 3)),
      rc::gen::set(&TimelineStep::dt,
                   rc::gen::weightedOneOf<int64_t>(
                       {{6, rc::gen::inRange<int64_t>(0, scale)},
                        {2, rc::gen::just<int64_t>(0)},
                        {1, rc::gen::inRange<int64_t>(-scale, 0)},
                        {1, rc::gen::inRange<int64_t>(0, 20 * scale)}})),
      rc::gen::set(&TimelineStep::cost,
                   rc::gen::weightedOneOf<double>(
                       {{6, rc::gen::just(1.0)},
                        {2, rc::gen::map(rc::gen::inRange(1, 12),
                                         [](int c) { return double(c); })},
                        {2, rc::gen::map(rc::gen::inRange(1, 40),
                                         [](int c) { return c / 8.0; })}})),
      rc::gen::set(&TimelineStep::peek,
                   rc::gen::weightedOneOf<bool>(
                       {{5, rc::gen::just(false)}, {1, rc::gen::just(true)}})));
}

// Options of every strategy, over the ranges a configuration uses.
inline rc::Gen<StrategyOptions> gen_timeline_options() {
  using rc::gen::inRange;
  return rc::gen::oneOf(
      rc::gen::map(
          rc::gen::tuple(inRange<int64_t>(1, 20), inRange<int64_t>(1, 5000),
                         inRange<int64_t>(0, 25)),
          [](auto t) -> StrategyOptions {
            return Gcra::Options{std::get<0>(t), std::get<1>(t),
                                 std::get<2>(t)};
          }),
      rc::gen::map(
          rc::gen::tuple(inRange<int64_t>(1, 20), inRange(1, 4000)),
          [](auto t) -> StrategyOptions {
            return TokenBucket::Options{std::get<0>(t), std::get<1>(t) / 7.0};
          }),
      rc::gen::map(
          rc::gen::tuple(inRange<int64_t>(1, 20), inRange<int64_t>(1, 5000)),
          [](auto t) -> StrategyOptions {
            return FixedWindow::Options{std::get<0>(t), std::get<1>(t)};
          }),
      rc::gen::map(
          rc::gen::tuple(inRange<int64_t>(1, 20), inRange<int64_t>(1, 5000),
                         inRange<int64_t>(1, 12)),
          [](auto t) -> StrategyOptions {
            const int64_t w = std::get<1>(t);
            return SlidingWindow::Options{std::get<0>(t), w,
                                          std::min(w, std::get<2>(t))};
          }),
      rc::gen::map(
          rc::gen::tuple(inRange<int64_t>(1, 20), inRange<int64_t>(1, 5000)),
          [](auto t) -> StrategyOptions {
            return SlidingLog::Options{std::get<0>(t), std::get<1>(t)};
          }),
      rc::gen::map(
          rc::gen::tuple(inRange<int64_t>(1, 20), inRange(0, 4),
                         inRange<int64_t>(0, 7), inRange<int64_t>(-840, 841),
                         inRange<int64_t>(-100000, 100000),
                         inRange<int64_t>(1, 5000)),
          [](auto t) -> StrategyOptions {
            Quota::Options o;
            o.limit = std::get<0>(t);
            o.period = static_cast<QuotaPeriod>(std::get<1>(t));
            o.week_starts_on = std::get<2>(t);
            o.offset_minutes = std::get<3>(t);
            if (o.period == QuotaPeriod::kFixed) {
              o.anchor_ms = std::get<4>(t);
              o.period_ms = std::get<5>(t);
            }
            return o;
          }),
      rc::gen::map(
          rc::gen::tuple(inRange<int64_t>(1, 20), inRange<int64_t>(1, 5000)),
          [](auto t) -> StrategyOptions {
            return TokenBudget::Options{std::get<0>(t), std::get<1>(t)};
          }));
}

// Runs `steps` on a fresh memory coordinator and on `remote` (whose TTL
// slack must be `kTimelineSlack`), on keys no earlier run used; returns ""
// when every decision and every forecast after a step are equal, else the
// first difference. `tag` starts the keys (e.g. "conf").
inline std::string run_timeline(Coordinator& remote, const char* tag,
                                const AnyStrategy& strategy, int64_t start,
                                const std::vector<TimelineStep>& steps) {
  static std::atomic<int64_t> case_id{0};
  auto memory = *MemoryCoordinator::create({.ttl_slack_ms = kTimelineSlack});
  // Unique across runs against one server: pid, start time and case.
  static const std::string run = std::to_string(getpid()) + "." +
                                 std::to_string(absl::ToUnixNanos(absl::Now()));
  const std::string prefix =
      std::string(tag) + ":" + run + ":" + std::to_string(case_id++) + ":";
  int64_t now = start;
  for (size_t i = 0; i < steps.size(); ++i) {
    const TimelineStep& s = steps[i];
    now = std::max<int64_t>(1, now + s.dt);
    const std::string key = prefix + std::to_string(s.key);
    absl::StatusOr<Decision> want =
        s.peek ? memory->peek(strategy, key, now)
               : memory->check(strategy, key, now, s.cost);
    absl::StatusOr<Decision> got =
        s.peek ? remote.peek(strategy, key, now)
               : remote.check(strategy, key, now, s.cost);
    if (!want.ok()) return "memory: " + want.status().ToString();
    if (!got.ok()) return "remote: " + got.status().ToString();
    if (!(*want == *got)) {
      std::ostringstream os;
      os << strategy_name(strategy) << " step " << i << " now=" << now
         << " cost=" << s.cost << (s.peek ? " peek" : "") << ": memory "
         << *want << " remote " << *got;
      return os.str();
    }
    // The forecast of the state the step left, for the step's cost.
    absl::StatusOr<Forecast> fwant =
        memory->forecast(strategy, key, now, s.cost);
    absl::StatusOr<Forecast> fgot = remote.forecast(strategy, key, now, s.cost);
    if (!fwant.ok()) return "memory: " + fwant.status().ToString();
    if (!fgot.ok()) return "remote: " + fgot.status().ToString();
    if (!(*fwant == *fgot)) {
      std::ostringstream os;
      os << strategy_name(strategy) << " step " << i << " forecast now=" << now
         << " cost=" << s.cost << ": memory " << *fwant << " remote " << *fgot;
      return os.str();
    }
  }
  return "";
}

// One generated timeline (for a RapidCheck property): "" or the first
// difference.
inline std::string run_generated_timeline(Coordinator& remote,
                                          const char* tag) {
  const StrategyOptions options = *gen_timeline_options();
  const AnyStrategy strategy = *make_strategy(options);
  const int64_t scale = *rc::gen::element<int64_t>(10, 100, 1000, 40000);
  const int64_t start =
      *rc::gen::inRange<int64_t>(1'600'000'000'000, 1'900'000'000'000);
  const auto steps = *rc::gen::container<std::vector<TimelineStep>>(
      *rc::gen::inRange<size_t>(1, 40), gen_timeline_step(scale));
  return run_timeline(remote, tag, strategy, start, steps);
}

// The property's body: one generated timeline decides as the reference;
// the first difference is logged and fails the case.
inline void check_generated_timeline(Coordinator& remote, const char* tag) {
  const std::string diff = run_generated_timeline(remote, tag);
  RC_LOG() << diff;
  RC_ASSERT(diff.empty());
}

// Hand-picked edges: equality boundaries, a cost above the ceiling,
// extreme bucket counts, calendar quotas across month and week boundaries.
// Each failure is reported with the strategy and start.
inline void expect_edge_timelines(Coordinator& remote, const char* tag) {
  const int64_t epoch = 1'700'000'000'000;
  const std::vector<StrategyOptions> all = {
      Gcra::Options{3, 1000, 0},
      Gcra::Options{1, 1, 1},
      TokenBucket::Options{3, 0.001},
      TokenBucket::Options{1000000, 1e9},
      FixedWindow::Options{5, 1},
      SlidingWindow::Options{10, 1000, 1},
      SlidingWindow::Options{10, 100000, 1000},
      SlidingLog::Options{3, 100},
      Quota::Options{5, QuotaPeriod::kMonth, 1, 0},
      Quota::Options{5, QuotaPeriod::kWeek, 0, 840},
      Quota::Options{5, QuotaPeriod::kDay, 1, -840},
      Quota::Options{5, QuotaPeriod::kFixed, 1, 0, 12345, 777},
      TokenBudget::Options{5, 1000},
  };
  std::vector<TimelineStep> steps;
  for (int i = 0; i < 30; ++i) steps.push_back({0, 0, 1, false});
  steps.push_back({0, 0, 1e6, false});  // above every ceiling here
  steps.push_back({0, 333, 1, true});
  steps.push_back({0, -5000, 2, false});
  steps.push_back({0, 86'400'000LL * 31, 1, false});
  steps.push_back({0, 1, 4.5, false});
  steps.push_back({0, 999, 0.25, false});
  for (const StrategyOptions& o : all) {
    const AnyStrategy s = *make_strategy(o);
    // At a month boundary, a week boundary and a plain instant.
    for (int64_t start :
         {int64_t{1'706'745'599'000}, int64_t{1'704'671'999'990}, epoch}) {
      EXPECT_EQ(run_timeline(remote, tag, s, start, steps), "")
          << strategy_name(s) << " from " << start;
    }
  }
}

// The token bucket's reset_at is the first ms the bucket is full, searched
// from the closed form t + ceil((capacity - tokens) / rate), which rounding
// puts a ms early or late (docs/semantics.md, "Token bucket"). Capacity 1 at
// 1/7 token/s: after a check of 1, a peek 16 ms later had the closed form
// +7000, where the stored {0, last} refills to 0.9999999999999999 (so the
// full bucket is only there at +7001); after a check of 0.5, a check of 1
// 1 ms later had +3501 though it is full at +3500. A remote store must
// search as the C++ does; the forecast after each step compares
// full_at_ms too.
inline void expect_token_bucket_reset_timelines(Coordinator& remote,
                                                const char* tag) {
  const AnyStrategy s = *make_strategy(
      TokenBucket::Options{.capacity = 1, .refill_per_sec = 1.0 / 7});
  const std::vector<TimelineStep> steps = {
      {0, 0, 1, false},    {0, 16, 1, true}, {0, 0, 1, false},
      {0, 6984, 1, false}, {0, 1, 1, false},  // +7000 denies, +7001 admits
      {1, 0, 0.5, false},  {1, 1, 1, false}, {1, 1, 1, true},
      {1, 3497, 1, false}, {1, 1, 1, false},  // +3499 denies, +3500 admits
  };
  for (int64_t start : {int64_t{1'700'000'000'000}, int64_t{1'706'745'599'000},
                        int64_t{4'000'000'000'017}}) {
    EXPECT_EQ(run_timeline(remote, tag, s, start, steps), "")
        << "from " << start;
  }
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_STRATEGY_TIMELINE_H_
