// sim/leased_fleet.cc: the leased-fleet scenario (see the header and
// docs/simulation.md).

#include "sim/leased_fleet.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/event_loop.h"
#include "sim/random.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit::sim {
namespace {

using Limiter = BasicLeasedLimiter<ClockRef<NodeClock>>;

class Run : private World {
 public:
  Run(uint64_t seed, const LeasedFleetConfig& c, bool keep_trace)
      : World(seed, c.network, c.nodes, c.timeout_ms * 1000, keep_trace),
        config_(c),
        down_(static_cast<size_t>(c.nodes), 0),
        generation_(static_cast<size_t>(c.nodes), 0) {
    for (int n = 0; n < c.nodes; ++n) {
      const int64_t offset_us =
          c.clock_skew ? static_cast<int64_t>(rng_.uniform() * 50'000) : 0;
      const int64_t drift_ppm =
          c.clock_skew ? static_cast<int64_t>(rng_.uniform() * 200) : 0;
      clocks_.push_back(
          std::make_unique<NodeClock>(loop_, offset_us, drift_ppm));
      coordinators_.push_back(std::make_shared<SimCoordinator>(fabric_, n));
      limiters_.push_back(make_limiter(n));
    }
  }

  SimResult run() {
    const int64_t end_us = config_.duration_ms * 1000;
    for (int n = 0; n < config_.nodes; ++n) next_arrival(n);
    schedule_faults(config_.nodes, end_us, config_.partitions, 300'000,
                    config_.crashes, 200'000,
                    [this](int n, int64_t down) { crash(n, down); });
    loop_.run_until(end_us);
    // No arrival after the end; answers still travelling are delivered (or
    // time out), and admissions they bring are still checked. Every lease
    // in flight is settled before the limiters go.
    SimResult r = finish();
    r.windows_checked = static_cast<int64_t>(admitted_.size());
    return r;
  }

 private:
  std::unique_ptr<Limiter> make_limiter(int n) {
    LeasedLimiterOptions o;
    o.limit = config_.limit;
    o.window_ms = config_.window_ms;
    o.batch = config_.batch;
    o.window_coupled = config_.window_coupled;
    o.background_worker = false;
    auto limiter = Limiter::create(std::move(o), coordinators_[n],
                                   ClockRef<NodeClock>(*clocks_[n]));
    if (!limiter.ok()) {
      std::fprintf(stderr, "tk_sim: %s\n",
                   std::string(limiter.status().message()).c_str());
      std::abort();
    }
    return *std::move(limiter);
  }

  // Poisson arrivals per node; half of them on the hot key 0.
  void next_arrival(int n) {
    const int64_t at =
        loop_.now_us() + arrival_gap_us(config_.requests_per_sec_per_node);
    if (at >= config_.duration_ms * 1000) return;
    loop_.at(at, [this, n] {
      arrive(n);
      next_arrival(n);
    });
  }

  void arrive(int n) {
    if (down_[n]) return;
    ++result_.requests;
    const int key = rng_.uniform() < 0.5
                        ? 0
                        : static_cast<int>(rng_.next() %
                                           static_cast<uint64_t>(config_.keys));
    const std::string name = absl::StrCat("k", key);
    const uint64_t generation = generation_[n];
    limiters_[n]->check_at_async(
        name, clocks_[n]->now_ms(), 1,
        [this, n, key, generation](absl::StatusOr<Decision> d) {
          decided(n, key, generation, d);
        });
  }

  void decided(int n, int key, uint64_t generation,
               const absl::StatusOr<Decision>& d) {
    const int64_t t = loop_.now_us();
    if (!d.ok()) {
      ++result_.errors;
      trace(absl::StrCat(t, " n", n, " k", key, " error"));
      return;
    }
    trace(absl::StrCat(t, " n", n, " k", key, d->allowed ? " admit" : " deny"));
    // An answer to a node that crashed since belonged to its lost memory:
    // the request died with it.
    if (!d->allowed || generation != generation_[n]) return;
    ++result_.admitted;
    // The decision's instant on the store's clock: a miss served from a
    // grant was decided when the coordinator granted (as a strict check is
    // decided when the store runs it), a local hit now, on this node.
    const int64_t answered_ms = TrueClock(loop_).now_ms();
    const int64_t decided_ms = fabric_.delivering_grant_ms >= 0
                                   ? fabric_.delivering_grant_ms
                                   : answered_ms;
    const int64_t by_answer =
        ++answered_[{key, answered_ms / config_.window_ms}];
    result_.worst_answered_window =
        std::max(result_.worst_answered_window, by_answer);
    const int64_t window = decided_ms / config_.window_ms;
    const int64_t count = ++admitted_[{key, window}];
    result_.worst_window = std::max(result_.worst_window, count);
    if (count > config_.limit) {
      ++result_.violations;
      if (result_.first_violation.empty()) {
        result_.first_violation =
            absl::StrCat("key k", key, " admitted ", count, " > limit ",
                         config_.limit, " in the store's window starting at ",
                         window * config_.window_ms - kSimEpochMs, " ms (at ",
                         t, " us, node ", n, ")");
      }
    }
  }

  // The node loses its memory: its limiter is set aside (answers still in
  // flight to it land there and are dropped) and a new, empty one starts
  // after `down_us`.
  void crash(int n, int64_t down_us) {
    if (down_[n]) return;
    down_[n] = true;
    ++generation_[n];
    ++result_.crashes;
    trace(absl::StrCat(loop_.now_us(), " n", n, " crash"));
    graveyard_.push_back(std::move(limiters_[n]));
    loop_.after(down_us, [this, n] {
      limiters_[n] = make_limiter(n);
      down_[n] = false;
      trace(absl::StrCat(loop_.now_us(), " n", n, " restart"));
    });
  }

  const LeasedFleetConfig config_;
  std::vector<std::unique_ptr<NodeClock>> clocks_;
  std::vector<std::shared_ptr<SimCoordinator>> coordinators_;
  std::vector<std::unique_ptr<Limiter>> limiters_;
  std::vector<std::unique_ptr<Limiter>> graveyard_;
  // Per node, indexed by its number (sized in the constructor).
  std::vector<char> down_;
  std::vector<uint64_t> generation_;
  std::map<std::pair<int, int64_t>, int64_t> admitted_;  // by decision
  std::map<std::pair<int, int64_t>, int64_t> answered_;  // by answer
};

}  // namespace

LeasedFleetConfig swarm_config(uint64_t seed, int nodes) {
  Rng rng(seed ^ 0x5EEDF1EE7ull);
  LeasedFleetConfig c;
  c.nodes = nodes;
  c.keys = 1 + static_cast<int>(rng.next() % 6);
  c.batch = int64_t{1} << (rng.next() % 6);  // 1 .. 32
  c.limit = 50 + static_cast<int64_t>(rng.next() % 300);
  c.window_ms = 20 + static_cast<int64_t>(rng.next() % 200);
  c.network.median_delay_us = 100 + rng.uniform() * 2'000;
  c.network.delay_sigma = rng.uniform() < 0.3 ? 1.5 : 0.4;  // 1.5: reorders
  c.network.loss = rng.uniform() < 0.3 ? rng.uniform() * 0.1 : 0;
  c.partitions = rng.uniform() < 0.3;
  c.crashes = rng.uniform() < 0.3;
  c.clock_skew = rng.uniform() < 0.5;
  // Demand around 0.5x to 4x the limit, so windows run out.
  const double limit_per_sec = c.limit * 1000.0 / c.window_ms;
  c.requests_per_sec_per_node =
      limit_per_sec * (0.5 + rng.uniform() * 3.5) / nodes;
  return c;
}

std::string replay_command(uint64_t seed, const LeasedFleetConfig& c) {
  // Doubles in full (`exact`), so the command replays exactly.
  return absl::StrCat(
      "tk_sim leased --seed ", seed, " --nodes ", c.nodes, " --keys ", c.keys,
      " --limit ", c.limit, " --window-ms ", c.window_ms, " --batch ", c.batch,
      " --rate ", exact(c.requests_per_sec_per_node), " --duration-ms ",
      c.duration_ms, " --delay-us ", exact(c.network.median_delay_us),
      " --sigma ", exact(c.network.delay_sigma), " --loss ",
      exact(c.network.loss), " --partitions ", c.partitions ? 1 : 0,
      " --crashes ", c.crashes ? 1 : 0, " --clock-skew ", c.clock_skew ? 1 : 0,
      " --timeout-ms ", c.timeout_ms, c.window_coupled ? "" : " --uncoupled");
}

SimResult run_leased_fleet(uint64_t seed, const LeasedFleetConfig& config,
                           bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

LeasedFleetConfig shrink(uint64_t seed, LeasedFleetConfig failing, int rounds) {
  using Step = void (*)(LeasedFleetConfig&);
  const Step steps[] = {
      [](LeasedFleetConfig& c) { c.partitions = false; },
      [](LeasedFleetConfig& c) { c.crashes = false; },
      [](LeasedFleetConfig& c) { c.clock_skew = false; },
      [](LeasedFleetConfig& c) { c.network.loss = 0; },
      [](LeasedFleetConfig& c) { c.network.delay_sigma = 0.4; },
      [](LeasedFleetConfig& c) { c.nodes = std::max(1, c.nodes / 2); },
      [](LeasedFleetConfig& c) { c.keys = std::max(1, c.keys / 2); },
      [](LeasedFleetConfig& c) {
        c.duration_ms = std::max(c.window_ms, c.duration_ms / 2);
      },
  };
  for (int round = 0; round < rounds; ++round) {
    bool changed = false;
    for (Step step : steps) {
      LeasedFleetConfig smaller = failing;
      step(smaller);
      if (replay_command(seed, smaller) == replay_command(seed, failing)) {
        continue;  // no change
      }
      // Halving the fleet keeps the whole fleet's demand.
      smaller.requests_per_sec_per_node *=
          static_cast<double>(failing.nodes) / smaller.nodes;
      if (run_leased_fleet(seed, smaller).violations > 0) {
        failing = smaller;
        changed = true;
      }
    }
    if (!changed) break;
  }
  return failing;
}

}  // namespace throttlekit::sim
