// The federated weighted-fair escrow on real processes (docs/federation.md,
// "Federated weighted-fair escrow"): 3 OS processes, one region each, every
// process a `FederatedFairEscrow` over 6 tenants (tests/support/
// fair_fleet_tenants.h: weights 29 in all, skewed demand from 1.1 to 8 times
// each tenant's share), all on one `RedisRegionPool` key of the fixture's
// redis-server, on the machine clock, L = 6000 per 1000 ms window, quantum
// 16, for 10 windows. Each process issues every tenant's demand for a
// window as unit calls, shuffled and spaced evenly through the window.
//
// Accounting as the other fleet tests: a call (allowed or not) belongs to
// the window that its decision names (`reset_at_ms`, the pool window).
// Each process also records, per window, when its first call came and how
// many it admitted in each of the window's first 64 ms, so the parent can
// compute `u` (what the fleet admitted before the last region's first
// call), the quantity of assumption A5.
//
// Asserted: the fleet admits at most L in every window; from the second
// window on (assumption A2) every tenant's admitted count is within [-2,
// K + 1] of min(demand, share) in each window where A5 held (`u + q + 3`
// within the smallest share), and such windows are most of the run. The
// per-tenant table is printed.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/fair_fleet_tenants.h"
#include "support/forked_fleet.h"
#include "support/redis_test_server.h"
#include "throttlekit/core/water_filling.h"
#include "throttlekit/federation/federated_fair_escrow.h"
#include "throttlekit/federation/redis_region_pool.h"

namespace throttlekit {
namespace federated_fair_escrow_fleet_test {
namespace {

constexpr testing::FleetRun kRun{
    .limit = 6000, .window_ms = 1000, .windows = 10};
constexpr int64_t kQuantum = 16;
constexpr int kTenants = testing::kFleetTenantsPerRegion;
constexpr int kRegions = testing::kFleetRegions;
constexpr int kEarlyMs = 64;

using testing::wall_ms;

struct Report {
  int64_t issued[kRun.windows][kTenants] = {};
  int64_t admitted[kRun.windows][kTenants] = {};
  // Offset in the window of the region's first call (-1: none).
  int64_t first_call_ms[kRun.windows] = {};
  // Admissions per ms of the window's first kEarlyMs ms.
  int64_t early[kRun.windows][kEarlyMs] = {};
  int64_t pool_requests = 0;
  int64_t errors = 0;
  int64_t outside = 0;
};

std::vector<int64_t> fleet_shares(
    const std::vector<testing::FleetTenant>& tenants) {
  std::vector<WaterClaim> claims;
  for (const auto& t : tenants) {
    claims.push_back({static_cast<double>(t.weight), kRun.limit});
  }
  return *water_fill(kRun.limit, claims);
}

Report run_region(int region, const testing::FleetSchedule& run,
                  const std::string& key) {
  Report rep;
  std::fill(std::begin(rep.first_call_ms), std::end(rep.first_call_ms), -1);
  const std::vector<testing::FleetTenant> all =
      testing::fair_fleet_tenants(false);
  const std::vector<int64_t> shares = fleet_shares(all);
  std::vector<WeightedFairEscrowOptions::Tenant> mine;
  std::vector<size_t> index;  // into `all`
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].region == region) {
      mine.push_back(
          {.name = all[i].name, .weight = static_cast<double>(all[i].weight)});
      index.push_back(i);
    }
  }
  RedisRegionPoolOptions po;
  po.port = testing::redis_port();
  po.command_timeout = absl::Milliseconds(100);
  auto pool = RedisRegionPool::create(po);
  if (!pool.ok()) {
    rep.errors = 1;
    return rep;
  }
  auto escrow = FederatedFairEscrow::create(
      {.limit = kRun.limit,
       .window_ms = kRun.window_ms,
       .tenants = mine,
       .pool = std::shared_ptr<RegionPool>(*std::move(pool)),
       .key = key,
       .region = "region-" + std::to_string(region),
       .quantum = kQuantum});
  if (!escrow.ok()) {
    rep.errors = 1;
    return rep;
  }
  std::mt19937_64 rng(static_cast<uint64_t>(region) * 7919 + 1);
  for (int w = 0; w < kRun.windows; ++w) {
    const int64_t start = run.start_ms + w * kRun.window_ms;
    std::vector<int> calls;
    for (int t = 0; t < kTenants; ++t) {
      const double jitter =
          0.9 + 0.2 * static_cast<double>(rng() % 1001) / 1000.0;
      const auto demand =
          static_cast<int>(std::llround(static_cast<double>(shares[index[t]]) *
                                        all[index[t]].demand_factor * jitter));
      calls.insert(calls.end(), static_cast<size_t>(demand), t);
    }
    std::shuffle(calls.begin(), calls.end(), rng);
    const auto n = static_cast<int64_t>(calls.size());
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = start + (2 * k + 1) * kRun.window_ms / (2 * n);
      const int64_t now = wall_ms();
      if (at > now) {
        std::this_thread::sleep_for(std::chrono::milliseconds(at - now));
      }
      const int64_t before = wall_ms();
      if (before >= run.end_ms) break;
      const int t = calls[static_cast<size_t>(k)];
      absl::StatusOr<Decision> d = (*escrow)->admit(mine[t].name);
      if (!d.ok()) {
        ++rep.errors;
        continue;
      }
      const int64_t wi = run.window_of(before, d->reset_at_ms);
      if (wi < 0 || wi >= kRun.windows) {
        ++rep.outside;
        continue;
      }
      const int64_t offset = before - (run.first_window + wi) * kRun.window_ms;
      if (rep.first_call_ms[wi] < 0) rep.first_call_ms[wi] = offset;
      ++rep.issued[wi][t];
      if (d->allowed) {
        ++rep.admitted[wi][t];
        if (offset >= 0 && offset < kEarlyMs) ++rep.early[wi][offset];
      }
    }
  }
  rep.pool_requests = (*escrow)->stats().pool_requests;
  return rep;
}

TEST(FederatedFairEscrowFleetRedis, ThreeRegionProcessesShareLByWeight) {
  const std::string key =
      "ffe-fleet:" + std::to_string(getpid()) + ":" + std::to_string(wall_ms());
  const testing::FleetSchedule run = kRun.starting_soon();
  const std::vector<Report> reports = testing::run_forked<Report>(
      kRegions, run.start_ms,
      [&](int region) { return run_region(region, run, key); });
  ASSERT_EQ(reports.size(), static_cast<size_t>(kRegions));
  // Reports come back in fork order: region r is reports[r].
  const std::vector<testing::FleetTenant> all =
      testing::fair_fleet_tenants(false);
  const std::vector<int64_t> shares = fleet_shares(all);
  const int64_t smallest = *std::min_element(shares.begin(), shares.end());
  int64_t errors = 0, outside = 0, pool_requests = 0;
  for (const Report& r : reports) {
    errors += r.errors;
    outside += r.outside;
    pool_requests += r.pool_requests;
  }
  EXPECT_EQ(errors, 0);
  struct Row {
    double demand = 0, admitted = 0;
    int64_t worst_low = 0, worst_high = 0;
  };
  std::vector<Row> rows(all.size());
  int a5_windows = 0;
  double admitted_sum = 0, possible_sum = 0;
  std::printf("\nwindow | fleet admitted | issued | u | A5\n");
  for (int w = 0; w < kRun.windows; ++w) {
    int64_t total = 0, issued = 0;
    int64_t last_first = -1;
    bool registered = true;
    for (const Report& r : reports) {
      for (int t = 0; t < kTenants; ++t) {
        total += r.admitted[w][t];
        issued += r.issued[w][t];
      }
      if (r.first_call_ms[w] < 0) registered = false;
      last_first = std::max(last_first, r.first_call_ms[w]);
    }
    EXPECT_LE(total, kRun.limit) << "window " << w;
    // u: admitted before (or in the ms of) the last region's first call.
    int64_t u = -1;
    if (registered && last_first < kEarlyMs) {
      u = 0;
      for (const Report& r : reports) {
        for (int64_t ms = 0; ms <= last_first; ++ms) u += r.early[w][ms];
      }
    }
    const bool a5 = w > 0 && u >= 0 && u + kQuantum + 3 <= smallest;
    std::printf("%d | %lld | %lld | %lld | %s\n", w,
                static_cast<long long>(total), static_cast<long long>(issued),
                static_cast<long long>(u), a5 ? "yes" : "no");
    if (w == 0) continue;  // A2 holds from the second window on
    admitted_sum += static_cast<double>(total);
    possible_sum += static_cast<double>(std::min(kRun.limit, issued));
    if (!a5) continue;
    ++a5_windows;
    for (size_t i = 0; i < all.size(); ++i) {
      const Report& r = reports[static_cast<size_t>(all[i].region)];
      const int t = static_cast<int>(i % kTenants);
      const int64_t d = r.issued[w][t];
      const int64_t a = r.admitted[w][t];
      const int64_t reference = std::min(d, shares[i]);
      rows[i].demand += static_cast<double>(d);
      rows[i].admitted += static_cast<double>(a);
      rows[i].worst_low = std::max(rows[i].worst_low, reference - a);
      rows[i].worst_high = std::max(rows[i].worst_high, a - reference);
    }
  }
  std::printf(
      "\nL = %lld per %lld ms, 3 region processes x 6 tenants on one Redis "
      "pool, quantum %lld; means over the %d windows where A2 and A5 held\n"
      "| tenant | region | weight | share s_i | demand | admitted | worst "
      "below min(d,s) | worst above |\n|---|---|---|---|---|---|---|---|\n",
      static_cast<long long>(kRun.limit),
      static_cast<long long>(kRun.window_ms), static_cast<long long>(kQuantum),
      a5_windows);
  for (size_t i = 0; i < all.size(); ++i) {
    const double n = std::max(1, a5_windows);
    std::printf("| %s | %d | %lld | %lld | %.1f | %.1f | %lld | %lld |\n",
                all[i].name.c_str(), all[i].region,
                static_cast<long long>(all[i].weight),
                static_cast<long long>(shares[i]), rows[i].demand / n,
                rows[i].admitted / n, static_cast<long long>(rows[i].worst_low),
                static_cast<long long>(rows[i].worst_high));
    EXPECT_LE(rows[i].worst_low, 2) << all[i].name;
    EXPECT_LE(rows[i].worst_high, kRegions + 1) << all[i].name;
  }
  std::printf(
      "utilisation %.4f (admitted / min(L, issued), windows 1..%d); pool round "
      "trips per window %.1f; calls outside the run %lld; errors %lld\n",
      admitted_sum / possible_sum, kRun.windows - 1,
      static_cast<double>(pool_requests) / kRun.windows,
      static_cast<long long>(outside), static_cast<long long>(errors));
  EXPECT_GE(a5_windows, (kRun.windows - 1) * 2 / 3);
}

}  // namespace
}  // namespace federated_fair_escrow_fleet_test
}  // namespace throttlekit
