// A window marked spent (twotier/internal/spent_mark.h) is denied without a
// round trip, but rechecked at most once per `spent_recheck_ms`, so credits
// given back to it later are seen in the same window: the mark's gate on
// its own; two leased limiters sharing one budget on a manual clock (idle
// return and close, recheck 0 as before, the round trips while spent
// counted); many threads on the real clock hitting a spent key (one
// recheck per interval).

#include "throttlekit/twotier/internal/spent_mark.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "support/manual_store.h"
#include "support/run_threads.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace spent_mark_test {
namespace {

using detail::SpentMark;
using Gate = SpentMark::Gate;
constexpr int64_t kEpoch = testing::kManualEpoch;
using Limiter = BasicLeasedLimiter<ClockRef<ManualClock>>;

TEST(SpentMark, DeniesUntilTheWindowEndsButRechecksOncePerInterval) {
  SpentMark m;
  EXPECT_EQ(m.gate(100).gate, Gate::kAsk);  // nothing marked
  m.mark(/*until_ms=*/1000, /*now_ms=*/100, /*recheck_ms=*/50);
  EXPECT_EQ(m.until_ms(), 1000);
  EXPECT_EQ(m.gate(100).gate, Gate::kDeny);
  EXPECT_EQ(m.gate(149).gate, Gate::kDeny);
  const SpentMark::Verdict v = m.gate(150);
  EXPECT_EQ(v.gate, Gate::kRecheck);
  EXPECT_EQ(v.until_ms, 1000);
  // The recheck is taken: the next one is an interval later.
  EXPECT_EQ(m.gate(150).gate, Gate::kDeny);
  EXPECT_EQ(m.gate(199).gate, Gate::kDeny);
  EXPECT_EQ(m.gate(200).gate, Gate::kRecheck);
  // A late caller takes the due recheck; the interval restarts at it.
  EXPECT_EQ(m.gate(290).gate, Gate::kRecheck);
  EXPECT_EQ(m.gate(339).gate, Gate::kDeny);
  // The window's end lifts the mark.
  EXPECT_EQ(m.gate(1000).gate, Gate::kAsk);
}

TEST(SpentMark, RecheckZeroDeniesUntilTheEnd) {
  SpentMark m;
  m.mark(1000, 0, 0);
  for (int64_t t : {0, 1, 500, 999}) EXPECT_EQ(m.gate(t).gate, Gate::kDeny);
  EXPECT_EQ(m.gate(1000).gate, Gate::kAsk);
}

TEST(SpentMark, ClearAndRemarkingTheSameWindowKeepsItsInterval) {
  SpentMark m;
  m.mark(1000, 0, 100);
  m.clear();
  EXPECT_EQ(m.gate(10).gate, Gate::kAsk);
  m.mark(2000, 1000, 100);
  // Marked again in the same window with another interval: the first
  // mark's interval holds, restarted at the new mark.
  m.mark(2000, 1010, 500);
  EXPECT_EQ(m.gate(1109).gate, Gate::kDeny);
  EXPECT_EQ(m.gate(1110).gate, Gate::kRecheck);
  // A new window takes the new interval.
  m.mark(3000, 2000, 500);
  EXPECT_EQ(m.gate(2499).gate, Gate::kDeny);
  EXPECT_EQ(m.gate(2500).gate, Gate::kRecheck);
}

// Two leased limiters on one MemoryCoordinator and one manual clock.
struct Pair : testing::ManualStore {
  std::unique_ptr<Limiter> a, b;

  explicit Pair(std::optional<int64_t> recheck_ms,
                int64_t return_idle_after_ms = 0) {
    LeasedLimiterOptions o{.limit = 10,
                           .window_ms = 1000,
                           .batch = 10,
                           .return_idle_after_ms = return_idle_after_ms,
                           .background_worker = false,
                           .spent_recheck_ms = recheck_ms};
    a = *Limiter::create(o, store, ClockRef<ManualClock>(clock));
    o.return_idle_after_ms = 0;
    b = *Limiter::create(o, store, ClockRef<ManualClock>(clock));
  }

  // A takes the whole window (holding 9); B learns it is spent.
  void spend_the_window_on_a() {
    ASSERT_TRUE(a->check("k")->allowed);
    absl::StatusOr<Decision> d = b->check("k");
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->allowed);
    EXPECT_EQ(b->stats().leases, 1);
  }

  int admitted_by_b(int checks) {
    int n = 0;
    for (int i = 0; i < checks; ++i) n += b->check("k")->allowed;
    return n;
  }
};

TEST(SpentMarkLeased, TheDefaultIsAnEighthOfTheWindow) {
  Pair p(std::nullopt);
  EXPECT_EQ(p.b->spent_recheck_ms(), 125);
  Pair never(0);
  EXPECT_EQ(never.b->spent_recheck_ms(), 0);
  auto tiny = Limiter::create({.limit = 10, .window_ms = 5, .batch = 1},
                              p.store, ClockRef<ManualClock>(p.clock));
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ((*tiny)->spent_recheck_ms(), 1);
  auto bad = Limiter::create(
      {.limit = 10, .window_ms = 1000, .batch = 1, .spent_recheck_ms = -1},
      p.store, ClockRef<ManualClock>(p.clock));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spent_recheck_ms"), std::string::npos)
      << bad.status();
}

TEST(SpentMarkLeased, ASpentNodeSeesCreditsClosedBackWithinTheInterval) {
  Pair p(std::nullopt);  // rechecks every 125 ms
  p.spend_the_window_on_a();
  ASSERT_TRUE(p.a->close().ok());
  EXPECT_EQ(p.a->stats().returned_credits, 9);
  // Within the interval B still denies without asking.
  EXPECT_EQ(p.admitted_by_b(20), 0);
  p.clock.advance_ms(124);
  absl::StatusOr<Decision> d = p.b->check("k");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (Decision{false, 10, 0, kEpoch + 1000, 876}));
  EXPECT_EQ(p.b->stats().leases, 1);
  EXPECT_EQ(p.b->stats().spent_denials, 21);
  // The interval is up: one recheck, and B spends what A gave back.
  p.clock.advance_ms(1);
  EXPECT_EQ(p.admitted_by_b(20), 9);
  EXPECT_EQ(p.b->stats().spent_rechecks, 1);
  EXPECT_EQ(p.b->stats().leases, 2);  // the 9 came in one lease
}

TEST(SpentMarkLeased, ASpentNodeSeesAnIdleReturnWithinTheInterval) {
  Pair p(std::nullopt, /*return_idle_after_ms=*/50);
  p.spend_the_window_on_a();
  p.clock.advance_ms(50);
  p.a->run_maintenance();
  EXPECT_EQ(p.a->stats().idle_returns, 1);
  EXPECT_EQ(p.a->stats().returned_credits, 9);
  EXPECT_EQ(p.admitted_by_b(5), 0);  // at 50: the next recheck is at 125
  p.clock.advance_ms(75);
  EXPECT_EQ(p.admitted_by_b(20), 9);
  EXPECT_EQ(p.b->stats().spent_rechecks, 1);
}

TEST(SpentMarkLeased, RecheckZeroDeniesUntilTheWindowEndsAsBefore) {
  Pair p(0);
  p.spend_the_window_on_a();
  ASSERT_TRUE(p.a->close().ok());
  for (int64_t step = 0; step < 999; step += 111) {
    EXPECT_EQ(p.admitted_by_b(3), 0) << step;
    p.clock.advance_ms(111);
  }
  EXPECT_EQ(p.b->stats().leases, 1);
  EXPECT_EQ(p.b->stats().spent_rechecks, 0);
  // The next window starts full.
  p.clock.set_ms(kEpoch + 1000);
  EXPECT_EQ(p.admitted_by_b(20), 10);
}

TEST(SpentMarkLeased, RoundTripsWhileSpentAreOnePerInterval) {
  Pair p(std::nullopt);
  p.spend_the_window_on_a();
  // Every ms of the window, three checks: nothing comes back, so every
  // recheck is refused, and they are 125 ms apart (at 125, ..., 875).
  for (int64_t t = 0; t < 1000; ++t) {
    EXPECT_EQ(p.admitted_by_b(3), 0) << t;
    p.clock.advance_ms(1);
  }
  EXPECT_EQ(p.b->stats().spent_rechecks, 7);
  EXPECT_EQ(p.b->stats().leases, 1 + 7);
  EXPECT_EQ(p.b->stats().spent_denials, 3000 - 7);
}

TEST(SpentMarkLeased, ResetClearsTheMark) {
  Pair p(0);
  p.spend_the_window_on_a();
  ASSERT_TRUE(p.b->reset("k").ok());  // the store's budget starts again
  EXPECT_EQ(p.admitted_by_b(20), 10);
}

// Many threads (more than the machine's cores) on the real clock hit a key
// whose window is spent: at most one recheck per interval between them;
// once a node gives its credits back the spent node admits them.
TEST(SpentMarkConcurrency, ThreadsOnASpentKeyRecheckOncePerInterval) {
  constexpr int64_t kRecheckMs = 20;
  // A day-long window: it does not roll during the test.
  const LeasedLimiterOptions o{.limit = 100,
                               .window_ms = 86'400'000,
                               .batch = 10,
                               .background_worker = false,
                               .spent_recheck_ms = kRecheckMs};
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create({});
  LeasedLimiterOptions hog_options = o;
  hog_options.batch = 100;
  auto hog = *LeasedLimiter::create(hog_options, store);
  auto node = *LeasedLimiter::create(o, store);
  ASSERT_TRUE(hog->check("k")->allowed);  // holds the other 99
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now() - start)
        .count();
  };
  std::atomic<bool> given_back{false};
  std::atomic<int64_t> before_give_back{0};
  const long admitted = testing::run_threads(8, [&](int t) {
    long n = 0;
    while (elapsed_ms() < 300) {
      if (t == 0 && !given_back.load() && elapsed_ms() >= 100) {
        before_give_back.store(node->stats().spent_rechecks);
        EXPECT_TRUE(hog->close().ok());
        given_back.store(true);
      }
      absl::StatusOr<Decision> d = node->check("k");
      EXPECT_TRUE(d.ok());
      n += d.ok() && d->allowed;
    }
    return n;
  });
  const int64_t elapsed = elapsed_ms();
  const LeasedLimiter::Stats s = node->stats();
  // Rechecks are at least an interval apart on the node's clock.
  EXPECT_LE(s.spent_rechecks, elapsed / kRecheckMs + 1);
  EXPECT_GE(before_give_back.load(), 1);
  // The first lease learnt the window was spent; then the rechecks, and the
  // leases that spent what the hog gave back (10 of 10, the last of 9).
  EXPECT_EQ(admitted, 99);
  EXPECT_EQ(hog->stats().returned_credits, 99);
  EXPECT_EQ(s.leases, 1 + s.spent_rechecks + 9);
  EXPECT_GT(s.spent_denials, 0);
}

}  // namespace
}  // namespace spent_mark_test
}  // namespace throttlekit
