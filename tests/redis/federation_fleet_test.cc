// The federation evaluation on real servers (docs/federation.md, "Real
// fleets"): K regions of two OS processes each, every process a
// `FederatedLimiter` on one key against one global redis-server, each
// region pooling through its own regional redis-server (the escrow), over
// a sweep of demand skew from uniform to all demand in one region. Beside
// each process runs the static partition (the region's floor(L/K) share,
// split between its processes) on the same requests, so both are measured
// on identical traffic. Then an outage: the global server is SIGSTOPped
// from a quarter into window 3 until window 6, once failing closed and once
// regional-only.
//
// Demand: 2 L per window (over-subscribed), region 0 taking
// 1/K + skew (1 - 1/K) of it and the others sharing the rest; each process
// issues its part evenly through every window. Accounting as the leased
// fleet test: an admission belongs to the later of the instant its check
// began and the start of the window that granted its credits.
//
// Asserted: overshoot 0 in every window of every run; utilisation (admitted
// / min(L, issued)) >= 0.95 at every skew; global round trips per window at
// most ceil(L / escrow_batch) plus two per process (its unpooled first
// lease of the window and the ask that learns the window is spent); during the
// outage nothing is over-admitted, and the fleet uses its whole budget before
// and after it. Every figure is printed as a RESULT line, which
// scripts/eval_federation.sh collects (THROTTLEKIT_FEDERATION_SWEEP=full runs
// the long sweep) into docs/federation.md's tables and plot.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/forked_fleet.h"
#include "support/redis_test_server.h"
#include "throttlekit/federation/federated_limiter.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/store/rate_limiter.h"

namespace throttlekit {
namespace federation_fleet_test {
namespace {

constexpr int64_t kLimit = 600;
constexpr int64_t kWindowMs = 500;
constexpr int64_t kBatch = 16;
constexpr int64_t kEscrowBatch = 32;
constexpr int kProcsPerRegion = 2;
constexpr int kMaxWindows = 24;
constexpr int kGlobalPortOffset = 39;  // regions' escrows: 40 .. 44

using testing::wall_ms;

bool full_sweep() {
  const char* v = std::getenv("THROTTLEKIT_FEDERATION_SWEEP");
  return v != nullptr && std::string(v) == "full";
}

struct Config {
  int regions = 3;
  double skew = 0;
  int windows = 6;
  bool escrow = true;
  FederationOutage mode = FederationOutage::kFailClosed;
  // The global server is stopped from a quarter into window `stop_from`
  // until window `stop_to` begins.
  int stop_from = -1;
  int stop_to = -1;
};

// The share of all demand region `r` issues.
double region_fraction(const Config& c, int r) {
  const double uniform = 1.0 / c.regions;
  return r == 0 ? uniform + c.skew * (1 - uniform) : uniform * (1 - c.skew);
}

struct Report {
  int64_t federated[kMaxWindows] = {};
  int64_t partition[kMaxWindows] = {};
  int64_t issued[kMaxWindows] = {};
  int64_t global_leases = 0;
  int64_t escrow_credits = 0;
  int64_t outage_denials = 0;
  int64_t errors = 0;
  int64_t outside = 0;
};

Report run_process(const Config& c, int region, int proc,
                   const testing::FleetSchedule& run, const std::string& key) {
  Report rep;
  const auto connect = [](int port) -> std::shared_ptr<Coordinator> {
    RedisCoordinatorOptions o;
    o.port = port;
    o.command_timeout = absl::Milliseconds(50);
    auto r = RedisCoordinator::create(o);
    if (!r.ok()) return nullptr;
    return std::shared_ptr<Coordinator>(*std::move(r));
  };
  std::shared_ptr<Coordinator> global =
      connect(testing::redis_port() + kGlobalPortOffset);
  std::shared_ptr<Coordinator> escrow =
      c.escrow ? connect(testing::redis_port() + kGlobalPortOffset + 1 + region)
               : nullptr;
  if (global == nullptr || (c.escrow && escrow == nullptr)) {
    rep.errors = 1;
    return rep;
  }
  auto fed = federate(*make_strategy(FixedWindow::Options{
                          .limit = kLimit, .window_ms = kWindowMs}),
                      global,
                      {.region = "r" + std::to_string(region),
                       .batch = kBatch,
                       .regional_escrow = escrow,
                       .escrow_batch = c.escrow ? kEscrowBatch : 0,
                       .on_outage = c.mode,
                       .health_check_ms = 100});
  // The static partition: the region's share, split between its processes.
  const int64_t share = static_partition_share(
      static_partition_share(kLimit, c.regions, region), kProcsPerRegion, proc);
  auto part = RateLimiter<FixedWindow>::create(
      {.limit = std::max<int64_t>(1, share), .window_ms = kWindowMs});
  if (!fed.ok() || !part.ok()) {
    rep.errors = 1;
    return rep;
  }
  const auto demand = static_cast<int64_t>(std::llround(
      2.0 * kLimit * region_fraction(c, region) / kProcsPerRegion));
  for (int w = 0; w < c.windows && demand > 0; ++w) {
    const int64_t start = run.start_ms + w * kWindowMs;
    for (int64_t k = 0; k < demand; ++k) {
      const int64_t at = start + (2 * k + 1) * kWindowMs / (2 * demand);
      const int64_t now = wall_ms();
      if (at > now) {
        std::this_thread::sleep_for(std::chrono::milliseconds(at - now));
      }
      const int64_t before = wall_ms();
      if (before >= run.end_ms) break;
      absl::StatusOr<Decision> d = (*fed)->check(key);
      absl::StatusOr<Decision> p = part->check(key);
      const int64_t issued_in = before / kWindowMs - run.first_window;
      if (issued_in >= 0 && issued_in < kMaxWindows) ++rep.issued[issued_in];
      if (!d.ok() || !p.ok()) {
        ++rep.errors;
        continue;
      }
      if (p->allowed && issued_in >= 0 && issued_in < kMaxWindows) {
        ++rep.partition[issued_in];
      }
      if (!d->allowed) continue;
      const int64_t w_of = run.window_of(before, d->reset_at_ms);
      if (w_of < 0 || w_of >= kMaxWindows) {
        ++rep.outside;
        continue;
      }
      ++rep.federated[w_of];
    }
  }
  const auto s = (*fed)->stats();
  rep.global_leases = s.global_leases;
  rep.escrow_credits = s.escrow_credits;
  rep.outage_denials = s.outage_denials;
  return rep;
}

struct Totals {
  std::vector<int64_t> federated = std::vector<int64_t>(kMaxWindows, 0);
  std::vector<int64_t> partition = std::vector<int64_t>(kMaxWindows, 0);
  std::vector<int64_t> issued = std::vector<int64_t>(kMaxWindows, 0);
  int64_t global_leases = 0, escrow_credits = 0, outage_denials = 0, errors = 0,
          outside = 0;
  size_t reports = 0;
};

// The servers every run uses: the global one (index 0) and one per region
// (the escrows), started once for the whole suite (FederationFleetRedis).
std::vector<std::unique_ptr<testing::PrivateRedis>>& fleet_servers() {
  static auto* s = new std::vector<std::unique_ptr<testing::PrivateRedis>>;
  return *s;
}

class FederationFleetRedis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (int i = 0; i <= 5; ++i) {
      fleet_servers().push_back(std::make_unique<testing::PrivateRedis>(
          testing::redis_port() + kGlobalPortOffset + i));
      ASSERT_TRUE(fleet_servers().back()->start()) << "server " << i;
    }
  }
  static void TearDownTestSuite() { fleet_servers().clear(); }
};

// Runs one configuration (on keys of its own) and sums the processes'
// reports.
Totals run_fleet(const Config& c, const std::string& tag) {
  static int runs = 0;
  std::vector<std::unique_ptr<testing::PrivateRedis>>& servers =
      fleet_servers();
  const std::string key =
      tag + ":" + std::to_string(getpid()) + ":" + std::to_string(runs++);
  const auto run = testing::FleetSchedule::starting_soon(kWindowMs, c.windows);
  std::thread stopper;
  if (c.stop_from >= 0) {
    stopper = std::thread([&] {
      const auto until = [](int64_t t) {
        const int64_t now = wall_ms();
        if (t > now)
          std::this_thread::sleep_for(std::chrono::milliseconds(t - now));
      };
      // A quarter into the window: the regions hold that window's credits.
      until(run.start_ms + c.stop_from * kWindowMs + kWindowMs / 4);
      servers[0]->freeze();
      until(run.start_ms + c.stop_to * kWindowMs);
      servers[0]->thaw();
    });
  }
  const std::vector<Report> reports = testing::run_forked<Report>(
      c.regions * kProcsPerRegion, run.start_ms, [&](int i) {
        return run_process(c, i / kProcsPerRegion, i % kProcsPerRegion, run,
                           key);
      });
  if (stopper.joinable()) stopper.join();
  Totals t;
  t.reports = reports.size();
  for (const Report& r : reports) {
    for (int w = 0; w < kMaxWindows; ++w) {
      t.federated[w] += r.federated[w];
      t.partition[w] += r.partition[w];
      t.issued[w] += r.issued[w];
    }
    t.global_leases += r.global_leases;
    t.escrow_credits += r.escrow_credits;
    t.outage_denials += r.outage_denials;
    t.errors += r.errors;
    t.outside += r.outside;
  }
  return t;
}

struct Summary {
  int64_t worst = 0;       // the most admitted in one window
  double utilisation = 0;  // admitted / min(L, issued), all windows
  double partition_utilisation = 0;
  double trips_per_window = 0;
};

Summary summarise(const Config& c, const Totals& t) {
  Summary s;
  int64_t admitted = 0, partition = 0, capacity = 0;
  for (int w = 0; w < c.windows; ++w) {
    s.worst = std::max(s.worst, t.federated[w]);
    admitted += t.federated[w];
    partition += t.partition[w];
    capacity += std::min(kLimit, t.issued[w]);
  }
  s.utilisation = capacity > 0 ? static_cast<double>(admitted) / capacity : 0;
  s.partition_utilisation =
      capacity > 0 ? static_cast<double>(partition) / capacity : 0;
  s.trips_per_window = static_cast<double>(t.global_leases) / c.windows;
  return s;
}

void print_result(const char* kind, const Config& c, const Totals& t,
                  const Summary& s) {
  std::printf(
      "RESULT %s regions=%d skew=%.2f escrow=%d windows=%d worst=%lld "
      "limit=%lld utilisation=%.3f partition=%.3f trips_per_window=%.1f "
      "escrow_credits=%lld errors=%lld\n",
      kind, c.regions, c.skew, c.escrow ? 1 : 0, c.windows,
      static_cast<long long>(s.worst), static_cast<long long>(kLimit),
      s.utilisation, s.partition_utilisation, s.trips_per_window,
      static_cast<long long>(t.escrow_credits),
      static_cast<long long>(t.errors));
}

TEST_F(FederationFleetRedis, NoOvershootAndFullUtilisationAcrossSkew) {
  // The test command's sweep covers every region count and both extremes of
  // skew (uniform, all demand in one region) plus the middle; the full grid
  // (THROTTLEKIT_FEDERATION_SWEEP=full) crosses them all.
  struct Cell {
    int regions;
    double skew;
  };
  std::vector<Cell> cells;
  if (full_sweep()) {
    for (const int regions : {2, 3, 5}) {
      for (const double skew : {0.0, 0.25, 0.5, 0.75, 0.9, 1.0}) {
        cells.push_back({regions, skew});
      }
    }
  } else {
    cells = {{2, 0}, {2, 1}, {3, 0.5}, {5, 0}, {5, 1}};
  }
  const int windows = full_sweep() ? 12 : 6;
  for (const auto [regions, skew] : cells) {
    const Config c{.regions = regions, .skew = skew, .windows = windows};
    const Totals t = run_fleet(c, "fed-sweep");
    ASSERT_EQ(t.reports, static_cast<size_t>(regions * kProcsPerRegion));
    EXPECT_EQ(t.errors, 0);
    EXPECT_EQ(t.outside, 0);
    const Summary s = summarise(c, t);
    print_result("sweep", c, t, s);
    for (int w = 0; w < c.windows; ++w) {
      EXPECT_LE(t.federated[w], kLimit)
          << "K=" << regions << " skew " << skew << " window " << w;
    }
    EXPECT_GE(s.utilisation, 0.95) << "K=" << regions << " skew " << skew;
    // A region crosses to the global coordinator once per escrow batch;
    // each process also leases once unpooled at the window's start (no
    // pace yet), asks once more to learn the window is spent, and then
    // rechecks it at most once per `spent_recheck_ms` (the window / 8:
    // at most 7 more).
    const double most = std::ceil(static_cast<double>(kLimit) / kEscrowBatch) +
                        (2 + 7) * regions * kProcsPerRegion;
    EXPECT_LE(s.trips_per_window, most) << "K=" << regions;
  }
}

TEST_F(FederationFleetRedis, AnOutageAdmitsNothingOverTheLimitInEitherMode) {
  int64_t served[2] = {};
  for (const FederationOutage mode :
       {FederationOutage::kFailClosed, FederationOutage::kRegionalOnly}) {
    const Config c{.regions = 3,
                   .skew = 0,
                   .windows = 9,
                   .mode = mode,
                   .stop_from = 3,
                   .stop_to = 6};
    const Totals t = run_fleet(c, "fed-outage");
    ASSERT_EQ(t.reports, static_cast<size_t>(3 * kProcsPerRegion));
    EXPECT_EQ(t.outside, 0);
    const Summary s = summarise(c, t);
    const bool regional = mode == FederationOutage::kRegionalOnly;
    std::printf("RESULT outage mode=%s per_window=",
                regional ? "regional_only" : "fail_closed");
    for (int w = 0; w < c.windows; ++w) {
      std::printf("%s%lld", w ? "," : "",
                  static_cast<long long>(t.federated[w]));
      EXPECT_LE(t.federated[w], kLimit) << "window " << w;
      if (w >= c.stop_from && w < c.stop_to) served[regional] += t.federated[w];
    }
    std::printf(" outage_denials=%lld\n",
                static_cast<long long>(t.outage_denials));
    // Before the outage and after it the fleet uses its budget.
    EXPECT_GE(t.federated[1], kLimit * 9 / 10);
    EXPECT_GE(t.federated[c.windows - 1], kLimit * 9 / 10);
    EXPECT_GT(t.outage_denials, 0);
    EXPECT_LE(s.worst, kLimit);
  }
  // Not asserted between the modes: a process that has not yet seen the
  // outage takes from its region's escrow in both (the modes differ once
  // it has: federated_limiter_test.cc pins that), so on a fleet the two
  // totals differ by scheduling noise.
  std::printf(
      "RESULT outage served_fail_closed=%lld served_regional_only=%lld\n",
      static_cast<long long>(served[0]), static_cast<long long>(served[1]));
}

}  // namespace
}  // namespace federation_fleet_test
}  // namespace throttlekit
