// Quota properties: periods tile the timeline on local calendar boundaries,
// no period is charged more than `limit`, and a denial never changes state
// (docs/semantics.md, "Quota"). The contract every strategy shares (a denial
// never changes state, peek, forecast, expiry) is typed, on richer
// timelines, in strategy_contract_property_test.cc.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>

#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/strategy/civil_time.h"
#include "throttlekit/strategy/quota.h"

namespace throttlekit {
namespace quota_property_test {
namespace {

using testing::gen_quota_options;
using testing::kEpoch;

constexpr int64_t kDay = 86'400'000;

RC_GTEST_PROP(QuotaProperty, PeriodsTileTheTimelineOnCalendarBoundaries, ()) {
  const Quota::Options o = gen_quota_options();
  const Quota q = *Quota::create(o);
  // Anywhere from ~1900 to ~2100, including before 1970.
  const int64_t now =
      *rc::gen::inRange<int64_t>(-2'200'000'000'000, 4'100'000'000'000);
  const QuotaWindow w = q.period_at(now);
  RC_ASSERT(w.start_ms <= now);
  RC_ASSERT(now < w.reset_ms);
  RC_ASSERT(q.period_at(w.start_ms) == w);
  RC_ASSERT(q.period_at(w.reset_ms - 1) == w);
  RC_ASSERT(q.period_at(w.reset_ms).start_ms == w.reset_ms);
  RC_ASSERT(q.period_at(w.start_ms - 1).reset_ms == w.start_ms);
  if (o.period == QuotaPeriod::kFixed) {
    RC_ASSERT(w.reset_ms - w.start_ms == o.period_ms);
    RC_ASSERT(detail::floor_mod(w.start_ms - o.anchor_ms, o.period_ms) == 0);
    return;
  }
  const int64_t offset_ms = o.offset_minutes * 60'000;
  RC_ASSERT(detail::floor_mod(w.start_ms + offset_ms, kDay) == 0);
  const int64_t first = detail::floor_div(w.start_ms + offset_ms, kDay);
  const int64_t days = (w.reset_ms - w.start_ms) / kDay;
  switch (o.period) {
    case QuotaPeriod::kDay:
      RC_ASSERT(days == 1);
      break;
    case QuotaPeriod::kWeek:
      RC_ASSERT(days == 7);
      RC_ASSERT(detail::weekday_from_days(first) == o.week_starts_on);
      break;
    case QuotaPeriod::kMonth: {
      RC_ASSERT(days >= 28 && days <= 31);
      RC_ASSERT(detail::civil_from_days(first).day == 1);
      RC_ASSERT(detail::civil_from_days(first + days).day == 1);
      break;
    }
    case QuotaPeriod::kFixed:
      break;
  }
}

RC_GTEST_PROP(QuotaProperty, NeverMoreThanLimitPerPeriod, ()) {
  const Quota::Options o = gen_quota_options();
  const Quota q = *Quota::create(o);
  const bool backward = *rc::gen::arbitrary<bool>();
  const int64_t step = q.policy_window_ms() / 8 + 1;
  Quota::State s;
  // Units by the period the admission is charged to (state.start_ms after
  // the allow) and, for a monotone clock, by the period of its timestamp.
  std::map<int64_t, double> charged;
  std::map<int64_t, double> by_time;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(backward ? -step : 0, step);
    const double cost = *rc::gen::element(1.0, 1.0, 0.5, 2.0, 3.0, 25.0);
    const Quota::State before = s;
    const Decision d = q.check(s, now, cost);
    RC_ASSERT(d.remaining >= 0);
    if (!d.allowed) {
      RC_ASSERT(s == before);
      RC_ASSERT(d.retry_after_ms >= 1);
      continue;
    }
    RC_ASSERT(d.retry_after_ms == 0);
    charged[s.start_ms] += cost;
    by_time[q.period_at(now).start_ms] += cost;
    // The charged period never lies before the call's own period.
    RC_ASSERT(s.start_ms >= q.period_at(now).start_ms);
  }
  for (const auto& [start, units] : charged) {
    RC_ASSERT(units <= static_cast<double>(o.limit));
  }
  if (!backward) RC_ASSERT(charged == by_time);
}

}  // namespace
}  // namespace quota_property_test
}  // namespace throttlekit
