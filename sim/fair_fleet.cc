// sim/fair_fleet.cc: the federated weighted-fair escrow fleet (see the
// header and docs/simulation.md).

#include "sim/fair_fleet.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/random.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/windowed_fleet.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/water_filling.h"
#include "throttlekit/federation/federated_fair_escrow.h"
#include "throttlekit/federation/region_pool.h"

namespace throttlekit::sim {
namespace {

using Escrow = BasicFederatedFairEscrow<ClockRef<NodeClock>>;
using Pool = BasicMemoryRegionPool<TrueClock>;

// What the run learns from the pool's side: each region's first grant of
// each window (loop us), by window start (epoch ms).
struct PoolLog {
  std::map<int64_t, std::map<int, int64_t>> first_grant_us;
};

// Region `node`'s view of the pool: each call atomic at the pool at the
// instant of the call, failing at once when the message is lost or the
// region cut off. `greedy` doubles the weight the region reports.
class SimRegionPool final : public RegionPool {
 public:
  SimRegionPool(Fabric& fabric, Pool& pool, PoolLog& log, int node, bool greedy)
      : fabric_(fabric), pool_(pool), log_(log), node_(node), greedy_(greedy) {}

  std::string_view backend() const noexcept override { return "sim"; }

 protected:
  absl::StatusOr<RegionPoolGrant> do_grant(const LeaseBudget& budget,
                                           std::string_view key,
                                           std::string_view region,
                                           int64_t weight, int64_t want,
                                           int64_t now_ms) override {
    ++fabric_.sent;
    if (!fabric_.network.delay(node_, fabric_.loop.now_us(), fabric_.rng)) {
      ++fabric_.lost;
      return absl::UnavailableError("sim: the pool did not get the request");
    }
    absl::StatusOr<RegionPoolGrant> g = pool_.grant(
        budget, key, region, greedy_ ? 2 * weight : weight, want, now_ms);
    if (g.ok()) {
      log_.first_grant_us[g->window_start_ms].try_emplace(
          node_, fabric_.loop.now_us());
    }
    return g;
  }
  absl::StatusOr<RegionPoolState> do_state(std::string_view key) override {
    return pool_.state(key);
  }

 private:
  Fabric& fabric_;
  Pool& pool_;
  PoolLog& log_;
  const int node_;
  const bool greedy_;
};

class Run final : public WindowedFleetRun<Escrow> {
 public:
  Run(uint64_t seed, const FairFleetConfig& c, bool keep_trace)
      : WindowedFleetRun(seed, windowed_shape(c.fleet), c.fleet.network,
                         c.fleet.timeout_ms * 1000, keep_trace),
        config_(c),
        pool_(TrueClock(loop_)) {
    std::vector<WaterClaim> claims;
    for (int r = 0; r < c.fleet.nodes; ++r) {
      pools_.push_back(std::make_shared<SimRegionPool>(
          fabric_, pool_, log_, r, c.greedy_region && r == 0));
      for (int k = 0; k < c.fleet.keys; ++k) {
        claims.push_back(
            {.weight = static_cast<double>(fair_tenant_weight(c, r, k)),
             .demand = c.fleet.limit});
      }
    }
    absl::StatusOr<std::vector<int64_t>> shares =
        water_fill(c.fleet.limit, claims);
    if (!shares.ok()) fail_setup(shares.status());
    shares_ = *std::move(shares);
  }

  // The fairness band over the windows the header says are judged.
  void judge_band(SimResult& r) const {
    const FairFleetConfig& c = config_;
    if (c.fleet.network.loss > 0 || c.fleet.clock_skew) return;
    const int64_t w = c.fleet.window_ms;
    const int64_t healed_ms = kSimEpochMs + (faults_healed_us_ + 999) / 1000;
    const int64_t end_ms = kSimEpochMs + c.fleet.duration_ms;
    const int64_t tenants = static_cast<int64_t>(shares_.size());
    const int64_t min_share = *std::min_element(shares_.begin(), shares_.end());
    const int64_t regions = c.fleet.nodes;
    for (const auto& [ws, firsts] : log_.first_grant_us) {
      if (ws - w < healed_ms || ws + w > end_ms) continue;
      if (static_cast<int64_t>(firsts.size()) < regions) continue;
      bool active = true;
      for (int64_t i = 0; i < tenants && active; ++i) {
        active = count(calls_, i, ws) > 0 && count(calls_, i, ws - w) > 0;
      }
      if (!active) continue;  // A2
      // A5: what the fleet admitted before the last region's first request.
      int64_t last_first = 0;
      for (const auto& [region, at] : firsts) {
        last_first = std::max(last_first, at);
      }
      int64_t u = 0;
      if (auto it = admitted_at_.find(ws); it != admitted_at_.end()) {
        for (const int64_t at : it->second) u += at < last_first;
      }
      if (u + c.quantum + 3 > min_share) continue;
      for (int64_t i = 0; i < tenants; ++i) {
        const int64_t d = count(calls_, i, ws);
        const int64_t a = count(admitted_, i, ws);
        const int64_t s = shares_[static_cast<size_t>(i)];
        const int64_t low = std::min(d, s) - 2;
        const int64_t high = std::min(d, s + regions + 1);
        ++r.fairness_checks;
        r.fairness_most_below =
            std::max(r.fairness_most_below, std::min(d, s) - a);
        r.fairness_most_above =
            std::max(r.fairness_most_above, a - std::min(d, s));
        if (a < low || a > high) {
          record_violation(
              r,
              absl::StrCat("tenant r", i / c.fleet.keys, "t", i % c.fleet.keys,
                           " admitted ", a, " of ", d, " calls, outside [", low,
                           ", ", high, "] (share ", s, ", ", regions,
                           " regions) in the pool window starting at ",
                           ws - kSimEpochMs, " ms"));
        }
      }
    }
  }

 private:
  std::unique_ptr<Escrow> make_engine(int n) override {
    FederatedFairEscrowOptions o;
    o.limit = config_.fleet.limit;
    o.window_ms = config_.fleet.window_ms;
    for (int k = 0; k < config_.fleet.keys; ++k) {
      o.tenants.push_back(
          {.name = absl::StrCat("t", k),
           .weight = static_cast<double>(fair_tenant_weight(config_, n, k))});
    }
    o.pool = pools_[static_cast<size_t>(n)];
    o.key = "fair";
    o.region = absl::StrCat("r", n);
    o.quantum = config_.quantum;
    auto escrow =
        Escrow::create(std::move(o), ClockRef<NodeClock>(*clocks_[n]));
    if (!escrow.ok()) fail_setup(escrow.status());
    return *std::move(escrow);
  }

  // Tenant `key` of region `n` calls now; the pool answers at once.
  void ask(int n, int key, const std::string& /*name*/, uint64_t /*generation*/,
           int64_t /*asked_ms*/) override {
    const int64_t t = loop_.now_us();
    const absl::StatusOr<Decision> d =
        engines_[n]->admit(absl::StrCat("t", key));
    if (!d.ok()) {
      ++result_.errors;
      trace(absl::StrCat(t, " r", n, " t", key, " error"));
      return;
    }
    trace(absl::StrCat(t, " r", n, " t", key, d->allowed ? " admit" : " deny"));
    const int64_t ws = d->reset_at_ms - config_.fleet.window_ms;
    const int64_t i = static_cast<int64_t>(n) * config_.fleet.keys + key;
    ++calls_[{i, ws}];
    if (!d->allowed) return;
    ++admitted_[{i, ws}];
    admitted_at_[ws].push_back(t);
    ++result_.admitted;
    const int64_t total = ++total_[ws];
    result_.worst_window = std::max(result_.worst_window, total);
    if (total > config_.fleet.limit) {
      violation(absl::StrCat(
          "the fleet admitted ", total, " > limit ", config_.fleet.limit,
          " in the pool window starting at ", ws - kSimEpochMs, " ms (at ", t,
          " us, region ", n, ")"));
    }
  }

  static int64_t count(const std::map<std::pair<int64_t, int64_t>, int64_t>& m,
                       int64_t tenant, int64_t ws) {
    const auto it = m.find({tenant, ws});
    return it == m.end() ? 0 : it->second;
  }

  const FairFleetConfig config_;
  Pool pool_;
  PoolLog log_;
  std::vector<std::shared_ptr<SimRegionPool>> pools_;
  std::vector<int64_t> shares_;  // s_i, region-major
  // By (tenant, window start): calls answered and admissions.
  std::map<std::pair<int64_t, int64_t>, int64_t> calls_, admitted_;
  std::map<int64_t, int64_t> total_;                     // by window
  std::map<int64_t, std::vector<int64_t>> admitted_at_;  // window -> us
};

}  // namespace

int64_t fair_tenant_weight(const FairFleetConfig& c, int r, int k) {
  return 1 +
         static_cast<int64_t>((c.weight_seed + 3 * static_cast<uint64_t>(r) +
                               7 * static_cast<uint64_t>(k)) %
                              5);
}

FairFleetConfig swarm_fair_config(uint64_t seed, int nodes) {
  FairFleetConfig c;
  c.fleet = swarm_config(seed, nodes);
  c.fleet.fail_mode = FailPolicy::kPropagate;  // not judged here
  Rng rng(seed ^ 0xFA1E5C0ull);
  c.fleet.keys = 1 + static_cast<int>(rng.next() % 4);
  c.fleet.limit = 200 + static_cast<int64_t>(rng.next() % 1800);
  c.fleet.window_ms = 50 + static_cast<int64_t>(rng.next() % 200);
  c.quantum = 1 + static_cast<int64_t>(rng.next() % 8);
  c.weight_seed = rng.next() % 5;
  // Demand around 0.5x to 4x the limit, so windows run out.
  const double limit_per_sec = c.fleet.limit * 1000.0 / c.fleet.window_ms;
  c.fleet.requests_per_sec_per_node =
      limit_per_sec * (0.5 + rng.uniform() * 3.5) / nodes;
  return c;
}

std::string fair_replay_command(uint64_t seed, const FairFleetConfig& c) {
  return absl::StrCat(replay_command(seed, c.fleet, "fair"), " --quantum ",
                      c.quantum, " --weight-seed ", c.weight_seed,
                      c.greedy_region ? " --greedy-region" : "");
}

SimResult run_fair_fleet(uint64_t seed, const FairFleetConfig& config,
                         bool keep_trace) {
  Run run(seed, config, keep_trace);
  SimResult r = run.run();
  run.judge_band(r);
  return r;
}

}  // namespace throttlekit::sim
