#include "throttlekit/twotier/weighted_fair_escrow.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/created.h"
#include "support/escrow_calls.h"
#include "support/held_coordinator.h"
#include "support/manual_store.h"
#include "support/run_threads.h"

namespace throttlekit {
namespace weighted_fair_escrow_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;
using Escrow = BasicWeightedFairEscrow<ClockRef<ManualClock>>;

struct World : testing::ManualStore {
  std::unique_ptr<Escrow> make(WeightedFairEscrowOptions o) {
    return testing::made(
        Escrow::create(std::move(o), ClockRef<ManualClock>(clock)));
  }
};

// gold (weight 3), silver (1), free (1, capped at 100) over 1000 per
// second: water-filling gives free its cap, then 900 split 3 : 1.
WeightedFairEscrowOptions three_tenants() {
  return {.limit = 1000,
          .window_ms = 1000,
          .tenants = {{.name = "gold", .weight = 3},
                      {.name = "silver", .weight = 1},
                      {.name = "free", .weight = 1, .hard_cap = 100}}};
}

using testing::admit_n;

TEST(WeightedFairEscrow, SharesAreTheWeightedWaterFilling) {
  World w;
  auto e = w.make(three_tenants());
  EXPECT_EQ(*e->guaranteed_share("gold"), 675);
  EXPECT_EQ(*e->guaranteed_share("silver"), 225);
  EXPECT_EQ(*e->guaranteed_share("free"), 100);
}

TEST(WeightedFairEscrow, TheHardCapComesFirst) {
  World w;
  auto e = w.make(three_tenants());
  EXPECT_EQ(admit_n(*e, "free", 150), 100);  // budget left, cap reached
  w.clock.advance_ms(250);
  absl::StatusOr<Decision> d = e->admit("free");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->limit, 100);
  EXPECT_EQ(d->remaining, 0);
  EXPECT_EQ(d->reset_at_ms, kEpoch + 1000);
  EXPECT_EQ(d->retry_after_ms, 750);
  EXPECT_EQ(e->stats().denied_hard_cap, 51);
  // A cost that does not fit the cap is denied whole.
  w.clock.advance_ms(750);
  EXPECT_TRUE(e->admit("free", 99)->allowed);
  EXPECT_FALSE(e->admit("free", 2)->allowed);
  EXPECT_TRUE(e->admit("free", 1)->allowed);
}

TEST(WeightedFairEscrow, ALoneTenantMayUseTheWholeBudget) {
  World w;
  auto e = w.make(three_tenants());
  EXPECT_EQ(admit_n(*e, "silver", 1200), 1000);  // work-conserving
  const Escrow::Stats s = e->stats();
  EXPECT_EQ(s.admitted_in_share, 225);
  EXPECT_EQ(s.admitted_borrowed, 775);
  EXPECT_EQ(s.denied_budget, 200);
}

TEST(WeightedFairEscrow, AHogCannotTakeAnActiveTenantsShare) {
  World w;
  auto e = w.make(three_tenants());
  // Window 0: gold and silver call (both active from here on).
  ASSERT_EQ(admit_n(*e, "gold", 1), 1);
  ASSERT_EQ(admit_n(*e, "silver", 1), 1);
  w.clock.advance_ms(1000);
  // Window 1: gold floods first. It gets its share and free's (free is
  // inactive, so its share is lent), never silver's.
  EXPECT_EQ(admit_n(*e, "gold", 2000), 1000 - 225);
  // Silver still gets its whole share when it asks.
  EXPECT_EQ(admit_n(*e, "silver", 300), 225);
  EXPECT_DOUBLE_EQ(*e->used("gold") + *e->used("silver"), 1000);
}

TEST(WeightedFairEscrow, BorrowingTakesOnlyUnreservedCredits) {
  World w;
  auto e = w.make(three_tenants());
  for (const char* t : {"gold", "silver", "free"})
    ASSERT_EQ(admit_n(*e, t, 1), 1);
  w.clock.advance_ms(1000);
  // Everyone active: silver may borrow nothing beyond its share while gold
  // and free have unused shares.
  EXPECT_EQ(admit_n(*e, "silver", 400), 225);
  // Once gold has used its share, what is left is free's reservation.
  EXPECT_EQ(admit_n(*e, "gold", 700), 675);
  EXPECT_EQ(admit_n(*e, "free", 100), 100);
  EXPECT_EQ(admit_n(*e, "gold", 1), 0);
}

TEST(WeightedFairEscrow, AShareLentWhileInactiveIsProtectedFromTheNextWindow) {
  World w;
  auto e = w.make(three_tenants());
  EXPECT_EQ(admit_n(*e, "gold", 1000), 1000);  // alone: takes everything
  // Silver arrives late in the window: its share was lent out.
  EXPECT_EQ(admit_n(*e, "silver", 10), 0);
  w.clock.advance_ms(1000);
  // From the next window on silver is active: gold cannot take its share.
  EXPECT_EQ(admit_n(*e, "gold", 1000), 1000 - 225);
  EXPECT_EQ(admit_n(*e, "silver", 1000), 225);
  // Two idle windows later silver's reservation lapses.
  w.clock.advance_ms(2000);
  EXPECT_EQ(admit_n(*e, "gold", 1000), 1000);
}

TEST(WeightedFairEscrow, WindowsRollAndABackwardClockUnspendsNothing) {
  World w;
  auto e = w.make({.limit = 10, .window_ms = 1000, .tenants = {{.name = "a"}}});
  EXPECT_EQ(admit_n(*e, "a", 12), 10);
  w.clock.advance_ms(1000);
  EXPECT_EQ(admit_n(*e, "a", 4), 4);
  w.clock.advance_ms(-1500);           // back into window 0
  EXPECT_EQ(admit_n(*e, "a", 10), 6);  // still window 1's accounting
  EXPECT_DOUBLE_EQ(*e->used("a"), 10);
  // Explicit times work the same way.
  EXPECT_TRUE(e->admit_at("a", kEpoch + 2000, 10)->allowed);
  EXPECT_FALSE(e->admit_at("a", kEpoch + 2999, 1)->allowed);
}

TEST(WeightedFairEscrow, AResolvedTenantIdDecidesAsItsName) {
  World w;
  auto by_name = w.make(three_tenants());
  auto by_id = w.make(three_tenants());
  const auto silver = *by_id->tenant("silver");
  for (int i = 0; i < 1100; ++i) {
    EXPECT_EQ(*by_name->admit("silver", 1 + i % 3),
              *by_id->admit(silver, 1 + i % 3));
    if (i % 100 == 99) w.clock.advance_ms(300);
  }
  EXPECT_EQ(by_id->tenant("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(by_id->admit(silver, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WeightedFairEscrow, FractionalCostsAreAccountedExactly) {
  World w;
  auto e = w.make({.limit = 2, .window_ms = 1000, .tenants = {{.name = "a"}}});
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(e->admit("a", 0.25)->allowed);
  EXPECT_FALSE(e->admit("a", 0.25)->allowed);
}

TEST(WeightedFairEscrow, BadInputIsAStatus) {
  World w;
  auto e = w.make(three_tenants());
  for (double cost : {0.0, -1.0, std::nan(""), 1e300}) {
    absl::StatusOr<Decision> d = e->admit("gold", cost);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << cost;
    EXPECT_NE(d.status().message().find("cost"), std::string::npos);
  }
  EXPECT_EQ(e->admit("platinum").status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(e->admit("platinum").status().message().find("platinum"),
            std::string::npos);
  EXPECT_EQ(e->admit("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->guaranteed_share("nope").status().code(),
            absl::StatusCode::kNotFound);

  // `Escrow::create` refuses `o`, its message naming `what`.
  const auto expect_refused = [&](const std::string& what,
                                  WeightedFairEscrowOptions o) {
    auto r = Escrow::create(std::move(o), ClockRef<ManualClock>(w.clock));
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(std::string(r.status().message()).find(what), std::string::npos)
        << r.status();
  };
  expect_refused("limit",
                 {.limit = 0, .window_ms = 1000, .tenants = {{.name = "a"}}});
  expect_refused("window_ms",
                 {.limit = 10, .window_ms = 0, .tenants = {{.name = "a"}}});
  expect_refused("tenants", {.limit = 10, .window_ms = 1000});
  expect_refused("duplicate", {.limit = 10,
                               .window_ms = 1000,
                               .tenants = {{.name = "a"}, {.name = "a"}}});
  // 10 per second for `tenant` alone.
  const auto alone = [](WeightedFairEscrowOptions::Tenant tenant) {
    return WeightedFairEscrowOptions{
        .limit = 10, .window_ms = 1000, .tenants = {std::move(tenant)}};
  };
  expect_refused("tenants[0].name", alone({.name = ""}));
  expect_refused("tenants[0].weight", alone({.name = "a", .weight = 0}));
  expect_refused("weight", alone({.name = "a", .weight = std::nan("")}));
  expect_refused("tenants[0].hard_cap", alone({.name = "a", .hard_cap = 11}));
  expect_refused("quantum", {.limit = 10,
                             .window_ms = 1000,
                             .tenants = {{.name = "a"}},
                             .coordinator = w.store,
                             .key = "k",
                             .quantum = 11});
  expect_refused("key", {.limit = 10,
                         .window_ms = 1000,
                         .tenants = {{.name = "a"}},
                         .coordinator = w.store});
}

// Multi-process: escrows sharing one budget through a coordinator.
WeightedFairEscrowOptions shared(std::shared_ptr<Coordinator> store) {
  return {.limit = 100,
          .window_ms = 1000,
          .tenants = {{.name = "a"}, {.name = "b"}},
          .coordinator = std::move(store),
          .key = "fleet",
          .quantum = 8};
}

TEST(WeightedFairEscrowFleet, QuantaWithinAShareExactCostWhenBorrowing) {
  World w;
  auto one = w.make(shared(w.store));
  auto two = w.make(shared(w.store));
  // "a" alone on escrow one: 50 in share (7 quanta of 8 = 56 leased), then
  // borrowing: the 6 spare credits first, then exactly one per call.
  EXPECT_EQ(admit_n(*one, "a", 60), 60);
  EXPECT_EQ(one->stats().admitted_in_share, 50);
  EXPECT_EQ(one->stats().admitted_borrowed, 10);
  EXPECT_EQ(one->stats().leases, 7 + 4);
  // Nothing was stranded on escrow one: escrow two gets exactly the rest.
  EXPECT_EQ(admit_n(*two, "a", 100), 40);
  absl::StatusOr<Decision> d = two->admit("b");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);  // the store's window is spent
  EXPECT_EQ(d->reset_at_ms, kEpoch + 1000);
  // The next window brings a fresh budget.
  w.clock.advance_ms(1000);
  EXPECT_TRUE(two->admit("b")->allowed);
}

TEST(WeightedFairEscrowFleet, CloseGivesHeldCreditsBack) {
  World w;
  auto one = w.make(shared(w.store));
  auto two = w.make(shared(w.store));
  ASSERT_EQ(admit_n(*one, "a", 1), 1);  // leased 8, holds 7
  ASSERT_TRUE(one->close().ok());
  EXPECT_EQ(admit_n(*two, "a", 200), 99);
}

TEST(WeightedFairEscrowFleet, TheFleetNeverAdmitsMoreThanTheLimitPerWindow) {
  World w;
  std::vector<std::unique_ptr<Escrow>> fleet;
  for (int i = 0; i < 4; ++i) fleet.push_back(w.make(shared(w.store)));
  std::mt19937 rng(7);
  std::map<int64_t, int> per_window;
  for (int step = 0; step < 20000; ++step) {
    if (rng() % 64 == 0) w.clock.advance_ms(1 + rng() % 300);
    Escrow& e = *fleet[rng() % fleet.size()];
    const double cost = 1 + rng() % 3;
    absl::StatusOr<Decision> d = e.admit(rng() % 2 ? "a" : "b", cost);
    ASSERT_TRUE(d.ok()) << d.status();
    if (d->allowed) {
      per_window[(w.clock.now_ms() - kEpoch) / 1000] += static_cast<int>(cost);
    }
  }
  ASSERT_GT(per_window.size(), 10u);
  int busy = 0;
  for (const auto& [window, admitted] : per_window) {
    EXPECT_LE(admitted, 100) << "window " << window;
    busy += admitted >= 80;
  }
  EXPECT_GT(busy, 5);  // the bound is exercised, not avoided
}

// The asynchronous path (docs/async.md) decides as the blocking one: one
// random fleet timeline (four escrows on one store, tenants, costs, the
// clock moving) run through `admit_at` on one store and through
// `admit_at_async` on another at the same instants. A memory store's lease
// completes inline, so each async call completes before it returns; the
// decisions and the stats are equal step for step.
TEST(WeightedFairEscrowAsync, DecidesAsTheBlockingPathStepForStep) {
  World w;
  std::shared_ptr<Coordinator> async_store = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<testing::ManualClockRef>>(
              testing::ManualClockRef(w.clock)));
  std::vector<std::unique_ptr<Escrow>> blocking, async;
  for (int i = 0; i < 4; ++i) {
    blocking.push_back(w.make(shared(w.store)));
    async.push_back(w.make(shared(async_store)));
  }
  std::mt19937 rng(11);
  int denied = 0;
  for (int step = 0; step < 5000; ++step) {
    if (rng() % 64 == 0) w.clock.advance_ms(1 + rng() % 300);
    const size_t e = rng() % blocking.size();
    const char* tenant = rng() % 2 ? "a" : "b";
    const double cost = 1 + rng() % 3;
    const int64_t now = w.clock.now_ms();
    absl::StatusOr<Decision> want = blocking[e]->admit_at(tenant, now, cost);
    std::optional<absl::StatusOr<Decision>> got;
    async[e]->admit_at_async(tenant, now, cost,
                             [&got](absl::StatusOr<Decision> d) { got = d; });
    ASSERT_TRUE(got.has_value()) << "completed inline, step " << step;
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got->ok()) << got->status();
    ASSERT_EQ(**got, *want) << "step " << step;
    denied += !want->allowed;
  }
  EXPECT_GT(denied, 100);
  for (size_t e = 0; e < blocking.size(); ++e) {
    const auto a = blocking[e]->stats();
    const auto b = async[e]->stats();
    EXPECT_EQ(a.admitted_in_share, b.admitted_in_share);
    EXPECT_EQ(a.admitted_borrowed, b.admitted_borrowed);
    EXPECT_EQ(a.denied_budget, b.denied_budget);
    EXPECT_EQ(a.leases, b.leases);
  }
}

// While a lease is in flight (held by the test), the calls arriving queue:
// none completes and no thread waits, a blocking `admit` among them waits
// its turn. Delivering the lease decides them in arrival order, each
// exactly once and as the blocking path decides the same calls one after
// another; a queued call that needs a lease of its own sends it and the
// rest wait behind it. A failed lease is its call's answer, and every
// queued call that needs a lease fails with it at once; the next call
// leases again.
TEST(WeightedFairEscrowAsync, CallsQueueBehindALeaseInFlightAndLandInOrder) {
  World w;
  auto held = std::make_shared<testing::HeldCoordinator>(w.store);
  auto escrow = w.make(shared(held));
  // The same calls, blocking, on a store of their own: the reference.
  World ref;
  auto reference = ref.make(shared(ref.store));
  testing::expect_queued_calls_land_in_order(
      *escrow, *reference, *held,
      [&] { held->fail_next(1, absl::UnavailableError("store down")); },
      [&] { return escrow->stats().leases; });
}

// Threads mixing blocking and asynchronous calls while another thread
// delivers the leases: every call completes exactly once, and the fleet
// of two escrows never admits more than the limit per window.
TEST(WeightedFairEscrowAsync,
     ThreadsMixingBothPathsCompleteOnceWithinTheLimit) {
  World w;
  auto held = std::make_shared<testing::HeldCoordinator>(w.store);
  auto one = w.make(shared(held));
  auto two = w.make(shared(held));
  constexpr int kCalls = 2000;
  std::vector<std::atomic<int>> completions(4 * kCalls);
  std::atomic<int64_t> admitted{0};
  std::atomic<bool> stop{false};
  std::thread courier([&] {
    while (!stop.load()) {
      if (!held->deliver_one()) std::this_thread::yield();
    }
    held->deliver_all();
  });
  testing::run_threads(4, [&](int t) {
    Escrow& e = t % 2 ? *one : *two;
    for (int k = 0; k < kCalls; ++k) {
      const int slot = t * kCalls + k;
      const char* tenant = k % 2 ? "a" : "b";
      if (k % 4 == 0) {
        absl::StatusOr<Decision> d = e.admit(tenant, 1);
        completions[slot].fetch_add(1);
        EXPECT_TRUE(d.ok()) << d.status();
        if (d.ok() && d->allowed) admitted.fetch_add(1);
      } else {
        e.admit_async(tenant, 1, [&, slot](absl::StatusOr<Decision> d) {
          completions[slot].fetch_add(1);
          EXPECT_TRUE(d.ok()) << d.status();
          if (d.ok() && d->allowed) admitted.fetch_add(1);
        });
      }
    }
  });
  // The last asynchronous calls may still be queued behind a lease.
  for (int i = 0; i < 1000; ++i) {
    bool all = true;
    for (auto& c : completions) all &= c.load() == 1;
    if (all) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  stop = true;
  courier.join();
  for (size_t slot = 0; slot < completions.size(); ++slot) {
    ASSERT_EQ(completions[slot].load(), 1) << "call " << slot;
  }
  // The clock never moved: one window, at most its limit.
  EXPECT_EQ(admitted.load(), 100);
}

// Threads on two tenants of equal weight: per window the total stays at
// the limit, and the tenant that asks for less than the hog still gets its
// whole share (both are active from the warm-up window).
TEST(WeightedFairEscrowConcurrency, ThreadsGetTheirSharesAndNoMore) {
  World w;
  auto e = w.make({.limit = 1000,
                   .window_ms = 1000,
                   .tenants = {{.name = "hog"}, {.name = "calm"}}});
  ASSERT_EQ(admit_n(*e, "hog", 1), 1);
  ASSERT_EQ(admit_n(*e, "calm", 1), 1);
  w.clock.advance_ms(1000);
  std::atomic<int> hog{0}, calm{0};
  testing::run_threads(4, [&](int t) {
    const bool is_hog = t < 2;
    for (int i = 0; i < (is_hog ? 3000 : 600); ++i) {
      absl::StatusOr<Decision> d = e->admit(is_hog ? "hog" : "calm");
      if (d.ok() && d->allowed) ++(is_hog ? hog : calm);
    }
    return 0L;
  });
  EXPECT_EQ(calm.load(), 500);  // its share: 1200 asked
  EXPECT_EQ(hog.load(), 500);   // the rest, no more
  EXPECT_EQ(e->stats().admitted_in_share, 2 + 1000);
}

}  // namespace
}  // namespace weighted_fair_escrow_test
}  // namespace throttlekit
