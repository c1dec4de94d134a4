#include "throttlekit/coordinator/memory_coordinator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace throttlekit {
namespace memory_coordinator_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

struct Fixture {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(kEpoch);
  std::unique_ptr<MemoryCoordinator> coordinator;

  explicit Fixture(MemoryCoordinatorOptions options = {}) {
    auto c = MemoryCoordinator::create(
        options, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
                     ClockRef<ManualClock>(*clock)));
    EXPECT_TRUE(c.ok()) << c.status();
    coordinator = *std::move(c);
  }
};

AnyStrategy strategy(const StrategyOptions& o) {
  absl::StatusOr<AnyStrategy> s = make_strategy(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// Every strategy, run through the coordinator, decides exactly as its own
// transition on a local state.
TEST(MemoryCoordinator, StepsEqualTheStrategyTransitions) {
  const std::vector<StrategyOptions> all = {
      Gcra::Options{.limit = 5, .period_ms = 1000},
      TokenBucket::Options{.capacity = 5, .refill_per_sec = 3.5},
      FixedWindow::Options{.limit = 5, .window_ms = 1000},
      SlidingWindow::Options{.limit = 5, .window_ms = 1000, .buckets = 4},
      SlidingLog::Options{.limit = 5, .window_ms = 1000},
      Quota::Options{.limit = 5, .period = QuotaPeriod::kDay},
      TokenBudget::Options{.budget = 5, .window_ms = 1000},
  };
  for (const StrategyOptions& o : all) {
    Fixture f;
    const AnyStrategy any = strategy(o);
    std::visit(
        [&](const auto& s) {
          typename std::decay_t<decltype(s)>::State local{};
          int64_t now = kEpoch;
          for (int i = 0; i < 60; ++i) {
            now += (i % 7 == 3) ? -150 : 97;  // sometimes backwards
            const double cost = 1 + (i % 3);
            const Decision want = s.check(local, now, cost);
            absl::StatusOr<Decision> got =
                f.coordinator->check(any, "k", now, cost);
            ASSERT_TRUE(got.ok()) << got.status();
            EXPECT_EQ(*got, want) << strategy_name(any) << " step " << i;
            absl::StatusOr<Decision> p = f.coordinator->peek(any, "k", now);
            ASSERT_TRUE(p.ok());
            EXPECT_EQ(*p, s.peek(local, now)) << strategy_name(any);
            absl::StatusOr<Forecast> fc =
                f.coordinator->forecast(any, "k", now, cost + 1);
            ASSERT_TRUE(fc.ok());
            EXPECT_EQ(*fc, s.forecast(local, now, cost + 1))
                << strategy_name(any);
          }
        },
        any);
  }
}

TEST(MemoryCoordinator, NowZeroReadsTheStoreClock) {
  Fixture f;
  const AnyStrategy s = strategy(FixedWindow::Options{2, 1000});
  f.clock->set_ms(kEpoch + 250);
  absl::StatusOr<Decision> d = f.coordinator->check(s, "k", 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->reset_at_ms, kEpoch + 1000);
  EXPECT_EQ(*f.coordinator->now_ms(), kEpoch + 250);
}

TEST(MemoryCoordinator, BadArgumentsNameTheProblem) {
  Fixture f;
  const AnyStrategy s = strategy(Gcra::Options{2, 1000});
  EXPECT_EQ(f.coordinator->check(s, "", kEpoch).status().message(),
            "key must not be empty");
  for (double cost : {0.0, -1.0, std::nan(""), 1e300}) {
    EXPECT_TRUE(absl::IsInvalidArgument(
        f.coordinator->check(s, "k", kEpoch, cost).status()));
  }
  EXPECT_TRUE(
      absl::IsInvalidArgument(f.coordinator->check(s, "k", -5).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      f.coordinator->peek(s, "k", kMaxSafeInteger + 1).status()));
  const LeaseBudget b = *LeaseBudget::create({10, 1000});
  EXPECT_TRUE(
      absl::IsInvalidArgument(f.coordinator->lease(b, "k", 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      f.coordinator->give_back(b, "k", kEpoch, -1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      f.coordinator->give_back(b, "k", kEpoch, 1, std::string(300, 't'))
          .status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      MemoryCoordinator::create({.max_keys = 1}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      MemoryCoordinator::create({.ttl_slack_ms = -1}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(LeaseBudget::create({0, 10}).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(make_strategy(Gcra::Options{0, 1000}).status()));
}

TEST(MemoryCoordinator, KeyOfAnotherStrategyIsAPreconditionError) {
  Fixture f;
  const AnyStrategy gcra = strategy(Gcra::Options{2, 1000});
  const AnyStrategy fixed = strategy(FixedWindow::Options{2, 1000});
  ASSERT_TRUE(f.coordinator->check(gcra, "k", kEpoch)->allowed);
  absl::Status s = f.coordinator->check(fixed, "k", kEpoch).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(s.message(), "key holds gcra state; asked for fixed_window");
  ASSERT_TRUE(f.coordinator->reset(fixed, "k").ok());
  EXPECT_TRUE(f.coordinator->check(fixed, "k", kEpoch)->allowed);
}

TEST(MemoryCoordinator, ResetForgetsTheKey) {
  Fixture f;
  const AnyStrategy s = strategy(FixedWindow::Options{1, 1000});
  EXPECT_TRUE(f.coordinator->check(s, "k", kEpoch)->allowed);
  EXPECT_FALSE(f.coordinator->check(s, "k", kEpoch)->allowed);
  ASSERT_TRUE(f.coordinator->reset(s, "k").ok());
  EXPECT_TRUE(f.coordinator->check(s, "k", kEpoch)->allowed);
}

TEST(MemoryCoordinator, DeniedCheckOnAColdKeyStoresNothing) {
  Fixture f;
  const AnyStrategy s = strategy(Gcra::Options{2, 1000});
  EXPECT_FALSE(f.coordinator->check(s, "k", kEpoch, 3)->allowed);
  EXPECT_EQ(f.coordinator->size(), 0);
}

TEST(MemoryCoordinator, LeasesComeFromTheCurrentWindowOfTheStoreClock) {
  Fixture f;
  const LeaseBudget b = *LeaseBudget::create({10, 1000});
  f.clock->set_ms(kEpoch + 100);
  absl::StatusOr<LeaseGrant> g = f.coordinator->lease(b, "k", 4);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, (LeaseGrant{4, 6, kEpoch, kEpoch + 1000, kEpoch + 100}));
  g = f.coordinator->lease(b, "k", 10);
  EXPECT_EQ(g->granted, 6);  // only what is left
  EXPECT_EQ(g->window_remaining, 0);
  g = f.coordinator->lease(b, "k", 1);
  EXPECT_EQ(g->granted, 0);
  // Give back 3 to the same window, then lease them again.
  EXPECT_EQ(*f.coordinator->give_back(b, "k", kEpoch, 3), 3);
  EXPECT_EQ(f.coordinator->lease(b, "k", 5)->granted, 3);
  // The window rolls at its end on the store clock: a fresh budget.
  f.clock->set_ms(kEpoch + 1000);
  g = f.coordinator->lease(b, "k", 20);
  EXPECT_EQ(*g,
            (LeaseGrant{10, 0, kEpoch + 1000, kEpoch + 2000, kEpoch + 1000}));
  // Leftover of the rolled window is forfeited.
  EXPECT_EQ(*f.coordinator->give_back(b, "k", kEpoch, 5), 0);
  EXPECT_EQ(f.coordinator->lease(b, "k", 1)->granted, 0);
}

TEST(MemoryCoordinator, GiveBackIsIdempotentPerTokenAndBounded) {
  Fixture f;
  const LeaseBudget b = *LeaseBudget::create({10, 1000});
  ASSERT_EQ(f.coordinator->lease(b, "k", 6)->granted, 6);
  EXPECT_EQ(*f.coordinator->give_back(b, "k", kEpoch, 2, "node1:1"), 2);
  EXPECT_EQ(*f.coordinator->give_back(b, "k", kEpoch, 2, "node1:1"), 0);
  EXPECT_EQ(*f.coordinator->give_back(b, "k", kEpoch, 2, "node2:1"), 2);
  // Never more than the window handed out (6 - 4 = 2 left out).
  EXPECT_EQ(*f.coordinator->give_back(b, "k", kEpoch, 50), 2);
  EXPECT_EQ(f.coordinator->lease(b, "k", 50)->granted, 10);
  // A give-back to a key never leased restores nothing.
  EXPECT_EQ(*f.coordinator->give_back(b, "other", kEpoch, 3), 0);
}

TEST(MemoryCoordinator, HoldsAtMostMaxKeys) {
  Fixture f({.max_keys = 64});
  const AnyStrategy s = strategy(Gcra::Options{2, 1000});
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(
        f.coordinator->check(s, "key" + std::to_string(i), kEpoch)->allowed);
  }
  EXPECT_LE(f.coordinator->size(), 64);
}

TEST(MemoryCoordinator, ExpiredStateIsDroppedAfterTheSlack) {
  Fixture f({.ttl_slack_ms = 500});
  const AnyStrategy s = strategy(FixedWindow::Options{1, 1000});
  EXPECT_TRUE(f.coordinator->check(s, "k", kEpoch + 10)->allowed);
  // Past the window and the slack, then back in time: cold again.
  EXPECT_FALSE(f.coordinator->check(s, "k", kEpoch + 1499, 2)->allowed);
  EXPECT_FALSE(f.coordinator->check(s, "k", kEpoch + 20)->allowed);
  EXPECT_FALSE(f.coordinator->check(s, "k", kEpoch + 1500, 2)->allowed);
  EXPECT_TRUE(f.coordinator->check(s, "k", kEpoch + 20)->allowed);
}

// As a store whose keys expire on its own clock: a state dropped when it
// has expired, whatever `now` a later check names; a live one kept.
TEST(MemoryCoordinator, DropIfExpiredDropsOnlyWhatHasExpired) {
  Fixture f({.ttl_slack_ms = 100});
  const AnyStrategy s = strategy(FixedWindow::Options{1, 1000});
  EXPECT_FALSE(f.coordinator->drop_if_expired("k", kEpoch + 5000));  // absent
  EXPECT_TRUE(f.coordinator->check(s, "k", kEpoch + 10)->allowed);
  // The window ends at kEpoch + 1000; with the slack, expired at + 1100.
  EXPECT_FALSE(f.coordinator->drop_if_expired("k", kEpoch + 1099));
  EXPECT_FALSE(f.coordinator->check(s, "k", kEpoch + 20)->allowed);
  EXPECT_EQ(f.coordinator->size(), 1);
  EXPECT_TRUE(f.coordinator->drop_if_expired("k", kEpoch + 1100));
  EXPECT_EQ(f.coordinator->size(), 0);
  // Gone: a check naming the ended window counts it afresh (what a stale
  // `now` does at a store that expired the key).
  EXPECT_TRUE(f.coordinator->check(s, "k", kEpoch + 20)->allowed);
}

}  // namespace
}  // namespace memory_coordinator_test
}  // namespace throttlekit
