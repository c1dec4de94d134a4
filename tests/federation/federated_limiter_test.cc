// FederatedLimiter (federation/federated_limiter.h) on memory coordinators
// and a manual clock: one global budget per window across regions, one
// global round trip per batch, a spent window asked once, window-coupled
// credits, the regional escrow, both outage modes with lazy re-probes,
// close(), and every bad configuration refused with its reason.

#include "throttlekit/federation/federated_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/created.h"
#include "support/forwarding_coordinator.h"
#include "support/manual_store.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace federated_limiter_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;
using Limiter = BasicFederatedLimiter<testing::ManualClockRef>;
static_assert(RateEngine<Limiter>);
static_assert(RateEngine<FederatedLimiter>);

AnyStrategy fixed(int64_t limit, int64_t window_ms = 1000) {
  return *make_strategy(
      FixedWindow::Options{.limit = limit, .window_ms = window_ms});
}

// A Coordinator that forwards to a real one unless switched off, when every
// call fails as a store outage does (kUnavailable), and counts the calls
// that reached it. Fault injection over the real memory coordinator.
class Switchable final : public testing::ForwardingCoordinator {
 public:
  explicit Switchable(std::shared_ptr<Coordinator> inner)
      : ForwardingCoordinator(std::move(inner)) {}
  std::atomic<bool> down{false};
  std::atomic<int> calls{0};
  std::string_view backend() const noexcept override { return "switchable"; }

 protected:
  absl::Status admit(std::string_view) override {
    calls.fetch_add(1);
    return down.load() ? absl::UnavailableError("switchable: down")
                       : absl::OkStatus();
  }
};

struct Fleet : testing::ManualStore {
  std::shared_ptr<Coordinator> global = store;
  std::unique_ptr<Limiter> region(std::string name, FederationOptions o = {},
                                  int64_t limit = 10) {
    o.region = std::move(name);
    o.background_worker = false;
    return testing::made(Limiter::create(fixed(limit), global, std::move(o),
                                         testing::ManualClockRef(clock)));
  }
};

TEST(FederatedLimiter,
     OneRegionLeasesABatchPerRoundTripAndAsksASpentWindowOncePerRecheck) {
  Fleet f;
  auto eu = f.region("eu", {.batch = 4}, 10);
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Decision> d = eu->check("api");
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->allowed) << i;
    EXPECT_EQ(d->reset_at_ms, kEpoch + 1000);
  }
  // 4 + 4 + 2: the third grant emptied the window.
  EXPECT_EQ(eu->stats().global_leases, 3);
  f.clock.advance_ms(250);
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<Decision> d = eu->check("api");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, (Decision{false, 10, 0, kEpoch + 1000, 750}));
  }
  // The first of them asked again (the recheck, window / 8 = 125 ms after
  // the window was marked spent); the rest were denied without asking.
  EXPECT_EQ(eu->stats().global_leases, 4);
  EXPECT_EQ(eu->stats().denials, 20);
  // The next window starts full.
  f.clock.advance_ms(750);
  EXPECT_TRUE(eu->check("api")->allowed);
  EXPECT_EQ(eu->stats().global_leases, 5);
  // With the recheck off a spent window is asked once.
  auto ap = f.region("ap", {.batch = 10, .spent_recheck_ms = 0}, 10);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(ap->check("q")->allowed);
  EXPECT_FALSE(ap->check("q")->allowed);
  f.clock.advance_ms(500);
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(ap->check("q")->allowed);
  EXPECT_EQ(ap->stats().global_leases, 1);  // its grant emptied the window
}

TEST(FederatedLimiter, RegionsShareOneBudgetPerWindowUnderRandomTraffic) {
  Fleet f;
  constexpr int64_t kLimit = 30;
  std::vector<std::unique_ptr<Limiter>> regions;
  for (const char* r : {"us", "eu", "ap"}) {
    regions.push_back(f.region(r, {.batch = 4}, kLimit));
  }
  std::mt19937 rng(7);
  std::map<int64_t, int64_t> per_window;
  int64_t calls = 0;
  for (int window = 0; window < 200; ++window) {
    const int64_t start = kEpoch + 1000 * window;
    // Skewed demand: a random region takes most of each window's traffic.
    const size_t hot = rng() % 3;
    for (int i = 0; i < 60; ++i) {
      f.clock.set_ms(start + (i * 1000) / 60);
      const size_t r = rng() % 4 == 0 ? rng() % 3 : hot;
      const double cost = rng() % 8 == 0 ? 3 : 1;
      absl::StatusOr<Decision> d = regions[r]->check("api", cost);
      ASSERT_TRUE(d.ok()) << d.status();
      ++calls;
      if (d->allowed) per_window[d->reset_at_ms] += static_cast<int64_t>(cost);
    }
  }
  int64_t total = 0;
  for (const auto& [end, n] : per_window) {
    EXPECT_LE(n, kLimit) << "window ending " << end;
    total += n;
  }
  // Demand (75 per window on average) exceeds the budget: every window is
  // nearly used up (a region strands less than a cost of 3 plus a batch).
  EXPECT_GE(total, 200 * (kLimit - 3 * 3)) << calls << " calls";
}

TEST(FederatedLimiter, CreditsDieWithTheCoordinatorsWindow) {
  Fleet f;
  auto eu = f.region("eu", {.batch = 8}, 10);
  f.clock.set_ms(kEpoch + 990);
  ASSERT_TRUE(eu->check("k")->allowed);
  EXPECT_EQ(eu->credits("k"), 7);
  f.clock.set_ms(kEpoch + 1000);
  EXPECT_EQ(eu->credits("k"), 0);  // window-coupled: dead at the end
  absl::StatusOr<Decision> d = eu->check("k");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->reset_at_ms, kEpoch + 2000);
  EXPECT_EQ(eu->stats().global_leases, 2);
}

TEST(FederatedLimiter, ALateLeaseAsksOnlyForWhatThePaceWillSpend) {
  Fleet f;
  auto eu = f.region("eu", {.batch = 10}, 1000);
  // 10 spent over the first 900 ms of the window ...
  for (int i = 0; i < 10; ++i) {
    f.clock.set_ms(kEpoch + 90 * i);
    ASSERT_TRUE(eu->check("k")->allowed);
  }
  EXPECT_EQ(eu->stats().global_credits, 10);
  // ... so with 100 ms left the pace spends ceil(10 * 100 / 900) = 2.
  f.clock.set_ms(kEpoch + 900);
  ASSERT_TRUE(eu->check("k")->allowed);
  EXPECT_EQ(eu->stats().global_credits, 12);
  EXPECT_EQ(eu->credits("k"), 1);
  // A new window has no pace yet: a whole batch.
  f.clock.set_ms(kEpoch + 1000);
  ASSERT_TRUE(eu->check("k")->allowed);
  EXPECT_EQ(eu->stats().global_credits, 22);
}

TEST(FederatedLimiter, ACostAboveTheBatchLeasesWhatItNeeds) {
  Fleet f;
  auto eu = f.region("eu", {.batch = 2}, 10);
  absl::StatusOr<Decision> d = eu->check("k", 7);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 0);
  d = eu->check("k", 4);  // 3 left in the window: partial grant, denied
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->remaining, 3);
  EXPECT_TRUE(eu->check("k", 3)->allowed);
}

TEST(FederatedLimiter, ARegionalEscrowPoolsCreditsAcrossTheRegionsProcesses) {
  Fleet f;
  std::shared_ptr<Coordinator> l2 = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<testing::ManualClockRef>>(
              testing::ManualClockRef(f.clock)));
  std::vector<std::unique_ptr<Limiter>> eu;
  for (int p = 0; p < 3; ++p) {
    eu.push_back(f.region(
        "eu", {.batch = 2, .regional_escrow = l2, .escrow_batch = 12}, 100));
  }
  int admitted = 0;
  for (int i = 0; i < 60; ++i) {
    f.clock.set_ms(kEpoch + 1 + i);
    admitted += eu[i % 3]->check("k")->allowed;
  }
  EXPECT_EQ(admitted, 60);
  int64_t global = 0, escrow_credits = 0;
  for (const auto& p : eu) {
    global += p->stats().global_leases;
    escrow_credits += p->stats().escrow_credits;
  }
  // Each process's first lease of the window is its own (no pace yet, so
  // nothing is parked: 3 x 2); then the region crosses once per 12
  // credits, keeping 2 and parking 10 for its peers (5 x 12).
  EXPECT_EQ(global, 3 + 5);
  EXPECT_EQ(escrow_credits, 4 * 10 + 4);
  // 6 are left in the escrow: returned to the window once.
  EXPECT_EQ(*eu[0]->release_escrow("k"), 6);
  EXPECT_EQ(*eu[1]->release_escrow("k"), 0);
  // Another region sees what the region did not spend: 100 - 60.
  auto us = f.region("us", {.batch = 100}, 100);
  absl::StatusOr<Decision> d = us->check("k", 40);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_FALSE(us->check("k")->allowed);
}

TEST(FederatedLimiter, CloseReconcilesLeftoverToItsWindowForOtherRegions) {
  Fleet f;
  auto eu = f.region("eu", {.batch = 8}, 10);
  auto us = f.region("us", {.batch = 8}, 10);
  ASSERT_TRUE(eu->check("k")->allowed);  // eu holds 7
  ASSERT_TRUE(us->check("k")->allowed);  // us holds 1 of the last 2
  ASSERT_TRUE(us->check("k")->allowed);
  EXPECT_FALSE(us->check("k")->allowed);
  ASSERT_TRUE(eu->close().ok());
  EXPECT_EQ(eu->stats().reconciled_credits, 7);
  int more = 0;
  for (int i = 0; i < 10; ++i) more += us->check("k")->allowed;
  // us marked the window spent and does not ask again within the recheck
  // interval (window / 8, never over-admission); once it is up, us asks
  // again and gets the 7.
  EXPECT_EQ(more, 0);
  f.clock.advance_ms(124);
  for (int i = 0; i < 10; ++i) more += us->check("k")->allowed;
  EXPECT_EQ(more, 0);
  f.clock.advance_ms(1);
  for (int i = 0; i < 10; ++i) more += us->check("k")->allowed;
  EXPECT_EQ(more, 7);
}

TEST(FederatedLimiter, FailClosedServesHeldCreditsThenDeniesAndReprobesLazily) {
  Fleet f;
  auto sw = std::make_shared<Switchable>(f.store);
  f.global = sw;
  auto eu = f.region("eu", {.batch = 3, .health_check_ms = 200}, 100);
  ASSERT_TRUE(eu->check("k")->allowed);  // holds 2
  sw->down = true;
  EXPECT_TRUE(eu->check("k")->allowed);
  EXPECT_TRUE(eu->check("k")->allowed);
  const int calls = sw->calls.load();
  absl::StatusOr<Decision> d = eu->check("k");  // the outage: one try
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, (Decision{false, 100, 0, kEpoch + 200, 200}));
  EXPECT_FALSE(eu->healthy());
  EXPECT_EQ(sw->calls.load(), calls + 1);
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(eu->check("k")->allowed);
  EXPECT_EQ(sw->calls.load(), calls + 1);  // no miss waits on a dead store
  EXPECT_EQ(eu->stats().fast_failures, 50);
  f.clock.advance_ms(200);
  sw->down = false;
  EXPECT_TRUE(eu->check("k")->allowed);  // the probe, and it is back
  EXPECT_TRUE(eu->healthy());
  EXPECT_EQ(eu->stats().global_outages, 1);
}

TEST(FederatedLimiter, RegionalOnlyServesTheEscrowWhileTheCoordinatorIsOut) {
  Fleet f;
  auto sw = std::make_shared<Switchable>(f.store);
  f.global = sw;
  std::shared_ptr<Coordinator> l2 = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<testing::ManualClockRef>>(
              testing::ManualClockRef(f.clock)));
  FederationOptions o{.batch = 2,
                      .regional_escrow = l2,
                      .escrow_batch = 10,
                      .on_outage = FederationOutage::kRegionalOnly,
                      .health_check_ms = 1000};
  auto a = f.region("eu", o, 100);
  auto b = f.region("eu", o, 100);
  // a's first lease is its own; once it has a pace, a crossing parks.
  for (int i = 1; i <= 3; ++i) {
    f.clock.set_ms(kEpoch + i);
    ASSERT_TRUE(a->check("k")->allowed);
  }
  EXPECT_EQ(a->credits("k"), 1);  // and the escrow holds 8
  sw->down = true;
  int served = 0;
  for (int i = 0; i < 20; ++i) served += b->check("k")->allowed;
  EXPECT_EQ(served, 8);  // the region's escrow, then denials
  EXPECT_EQ(b->stats().global_outages, 1);
  // A process failing closed that has seen the outage serves none of the
  // region's escrow, which a regional-only process still serves.
  FederationOptions closed = o;
  closed.on_outage = FederationOutage::kFailClosed;
  auto c = f.region("eu", closed, 100);
  EXPECT_FALSE(c->check("k")->allowed);  // escrow empty, coordinator out
  EXPECT_FALSE(c->healthy());
  ASSERT_TRUE(l2->escrow_refill("tk:l2:eu:k", 5, kEpoch, kEpoch + 1000).ok());
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(c->check("k")->allowed);
  EXPECT_EQ(c->stats().escrow_credits, 0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(b->check("k")->allowed);
}

TEST(FederatedLimiter, RefusesWhatDoesNotFederate) {
  testing::ManualStore m;
  std::shared_ptr<Coordinator> c = m.store;
  const auto code = [&](const AnyStrategy& s, FederationOptions o) {
    return federate(s, c, std::move(o)).status();
  };
  const FederationOptions ok{.region = "eu"};
  EXPECT_TRUE(code(fixed(100), ok).ok());
  EXPECT_TRUE(code(*make_strategy(SlidingWindow::Options{
                       .limit = 100, .window_ms = 1000, .buckets = 10}),
                   ok)
                  .ok());
  EXPECT_TRUE(code(*make_strategy(Quota::Options{.limit = 100,
                                                 .period = QuotaPeriod::kFixed,
                                                 .anchor_ms = 3000,
                                                 .period_ms = 1000}),
                   ok)
                  .ok());
  for (const AnyStrategy& s :
       {*make_strategy(Gcra::Options{.limit = 1, .period_ms = 1000}),
        *make_strategy(
            TokenBucket::Options{.capacity = 5, .refill_per_sec = 1}),
        *make_strategy(
            Quota::Options{.limit = 100, .period = QuotaPeriod::kDay}),
        *make_strategy(Quota::Options{.limit = 100,
        .period = QuotaPeriod::kFixed,
        .anchor_ms = 300,
        .period_ms = 1000})}) {
    const absl::Status s2 = code(s, ok);
    EXPECT_EQ(s2.code(), absl::StatusCode::kInvalidArgument) << s2;
    EXPECT_NE(std::string(s2.message()).find("federate"), std::string::npos)
        << s2;
  }
  const auto bad = [&](FederationOptions o, std::string_view names) {
    const absl::Status s = code(fixed(100), std::move(o));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << names;
    EXPECT_NE(std::string(s.message()).find(names), std::string::npos) << s;
  };
  bad({}, "region");
  bad({.region = std::string(65, 'r')}, "region");
  bad({.region = "eu", .batch = 0}, "batch");
  bad({.region = "eu", .batch = 101}, "batch");
  bad({.region = "eu", .batch = 4, .escrow_batch = 3}, "escrow_batch");
  bad({.region = "eu", .on_outage = FederationOutage::kRegionalOnly},
      "regional_escrow");
  bad({.region = "eu", .health_check_ms = 0}, "health_check_ms");
  EXPECT_EQ(federate(fixed(100), nullptr, ok).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto l = federate(fixed(100), c, ok);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ((*l)->check("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*l)->check("k", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*l)->check("k", std::nan("")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*l)->peek("k").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ((*l)->forecast("k").status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace federated_limiter_test
}  // namespace throttlekit
