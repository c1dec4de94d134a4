// sim/world.h
//
// Provides what every scenario of the fleet simulator shares
// (docs/simulation.md): `SimResult`, what a run measured; and `World`, the
// base of a scenario's run: the loop, the run's one random stream, the
// network, the coordinator's state on the store's clock (the production
// memory coordinator) and the nodes' fabric, the trace (hashed, and kept
// when asked for), Poisson inter-arrival draws, and the drain at the end.
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_WORLD_H_
#define THROTTLEKIT_SIM_WORLD_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "sim/event_loop.h"
#include "sim/network.h"
#include "sim/random.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/ttl_slack.h"

namespace throttlekit::sim {

struct SimResult {
  uint64_t events = 0;  // actions the loop ran
  int64_t requests = 0;
  int64_t admitted = 0;
  int64_t errors = 0;           // calls the engine answered with a status
  int64_t windows_checked = 0;  // (key, window) pairs with an admission
  // The scenario's peak: most admissions of one key in one window (leased
  // fleet), most slots held at once (concurrency fleet).
  int64_t worst_window = 0;
  // Leased fleet: the same counted by the instant each answer reached its
  // caller: a grant delivered just after its window ended still serves the
  // callers waiting for it, so this may exceed `limit` by what was granted
  // in the last round trip of a window (reported, not a violation).
  int64_t worst_answered_window = 0;
  int64_t violations = 0;       // checks of the invariant that failed
  std::string first_violation;  // empty when none
  int64_t messages_lost = 0;
  int64_t timeouts = 0;
  int64_t crashes = 0;
  // What the writes lost in a store failover counted (admissions, credits).
  int64_t failover_lost = 0;
  // The fail policy, where a scenario judges it (sim/windowed_fleet.h):
  // the outages the engines decided by it, the admissions fail-open made
  // (outside the window bound: availability over the limit), and the
  // longest a request waited for its answer, in us.
  int64_t outage_decisions = 0;
  int64_t fail_open_admitted = 0;
  int64_t longest_answer_us = 0;
  // Cached-deny nodes (sim/strict_fleet.h): denials answered from memory.
  int64_t cached_denials = 0;
  // The fair-escrow fleet (sim/fair_fleet.h): (tenant, window) pairs
  // judged against the fairness band, and the farthest a judged tenant
  // fell below min(d_i, s_i) and rose above it.
  int64_t fairness_checks = 0;
  int64_t fairness_most_below = 0;
  int64_t fairness_most_above = 0;
  // Liveness, where a scenario promises it (sim/windowed_fleet.h): the
  // windows judged after the faults healed, how many fell below the
  // promised floor, the first such, and the lowest share of the limit
  // admitted in a judged window (1 when none was judged).
  int64_t liveness_windows = 0;
  int64_t liveness_failures = 0;
  std::string first_liveness_failure;
  double lowest_utilisation = 1;
  // The rlqs fleet (sim/rlqs_fleet.h).
  struct Rlqs {
    int64_t assignments = 0;    // sent by the servers
    int64_t replies_lost = 0;   // responses lost (drawn, or on a broken stream)
    int64_t stream_breaks = 0;  // streams broken (breaks and crashes)
    int64_t beats = 0;          // beats answered (not stale)
    int64_t failed_beats = 0;
    int64_t fenced_assigns = 0;   // assigns at share 0 from the fence
    int64_t abandoned = 0;        // buckets abandoned (reported idle)
    int64_t budgets_dropped = 0;  // idle budgets the servers dropped
    int64_t commitment_checks = 0;
    // The violations of each check: the commitments above R, the buckets
    // held above R, the windows above the admissions bound.
    int64_t over_committed = 0;
    int64_t over_held = 0;
    int64_t over_bound = 0;
    int64_t most_committed = 0;  // the highest sum of commitments / R, %
    // The highest admissions of a window over its bound, over every
    // window length and budget.
    double closest_to_bound = 0;
  } rlqs;
  uint64_t trace_hash = 0;         // FNV-1a of every traced line
  std::vector<std::string> trace;  // the lines, when asked for
};

// Counts a failed check of an invariant in `r`; the first one's `what` is
// kept.
inline void record_violation(SimResult& r, std::string what) {
  ++r.violations;
  if (r.first_violation.empty()) r.first_violation = std::move(what);
}

// The liveness figures of many runs, summed (for tests and reports).
struct LivenessTally {
  int64_t windows = 0;       // windows judged
  int64_t healed_seeds = 0;  // runs judged after partitions or crashes healed
  double lowest = 1;         // the lowest share of the limit admitted
  void add(const SimResult& r, bool had_faults) {
    windows += r.liveness_windows;
    if (r.liveness_windows > 0 && had_faults) ++healed_seeds;
    lowest = std::min(lowest, r.lowest_utilisation);
  }
  std::string summary() const {
    char line[160];
    std::snprintf(line, sizeof line,
                  "liveness: %lld windows judged (%lld seeds with healed "
                  "partitions or crashes), lowest share of the limit "
                  "admitted %.3f",
                  static_cast<long long>(windows),
                  static_cast<long long>(healed_seeds), lowest);
    return line;
  }
};

// A run that cannot be set up (an engine refused its options): a bug in
// the scenario, not a finding; says why and stops.
[[noreturn]] inline void fail_setup(const absl::Status& s) {
  std::fprintf(stderr, "tk_sim: %s\n", std::string(s.message()).c_str());
  std::abort();
}

// `v` in full (%.17g round-trips), for replay command lines.
inline std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return std::string(buf);
}

class World {
 protected:
  // `store_ttl_slack_ms`: how long the store keeps a state past its expiry
  // (core/ttl_slack.h; 0, the library's default before 2026-11-28, drops
  // it at once and exposes a caller's stale `now`).
  World(uint64_t seed, const NetworkOptions& network, int nodes,
        int64_t timeout_us, bool keep_trace,
        int64_t store_ttl_slack_ms = kDefaultTtlSlackMs)
      : keep_trace_(keep_trace),
        rng_(seed),
        network_(network, nodes),
        store_(*MemoryCoordinator::create(
            {.ttl_slack_ms = store_ttl_slack_ms},
            std::make_shared<ClockAdapter<TrueClock>>(TrueClock(loop_)))),
        fabric_{loop_, rng_, network_, store_.get(), timeout_us} {
    result_.trace_hash = 0xCBF29CE484222325ull;
  }

  // Counts a failed check of an invariant; the first one's `what` is kept.
  void violation(std::string what) {
    record_violation(result_, std::move(what));
  }

  // Adds a line to the trace (FNV-1a over its bytes and a newline).
  void trace(std::string line) {
    for (unsigned char c : line) fold(c);
    fold('\n');
    if (keep_trace_) result_.trace.push_back(std::move(line));
  }

  // A Poisson process's next gap at `per_sec`, in us.
  int64_t arrival_gap_us(double per_sec) {
    return static_cast<int64_t>(rng_.exponential(1e6 / per_sec));
  }

  // Draws the faults of a run: when `partitions`, 1 to 3 nodes cut off
  // from the coordinator at drawn instants for up to `max_cut_us`; when
  // `crashes`, 1 to 3 calls `crash(node, down_us)` at drawn instants, down
  // for up to `max_down_us`.
  template <class Crash>
  void schedule_faults(int nodes, int64_t end_us, bool partitions,
                       int64_t max_cut_us, bool crashes, int64_t max_down_us,
                       Crash crash) {
    const auto node = [&] {
      return static_cast<int>(rng_.next() % static_cast<uint64_t>(nodes));
    };
    const auto instant = [&](int64_t up_to) {
      return static_cast<int64_t>(rng_.uniform() * static_cast<double>(up_to));
    };
    if (partitions) {
      const int cuts = 1 + static_cast<int>(rng_.next() % 3);
      for (int i = 0; i < cuts; ++i) {
        const int n = node();
        const int64_t from = instant(end_us);
        const int64_t to = from + instant(max_cut_us);
        network_.partition(n, from, to);
        faults_healed_us_ = std::max(faults_healed_us_, to);
      }
    }
    if (crashes) {
      const int count = 1 + static_cast<int>(rng_.next() % 3);
      for (int i = 0; i < count; ++i) {
        const int n = node();
        const int64_t at = instant(end_us);
        const int64_t down = instant(max_down_us);
        loop_.at(at, [crash, n, down] { crash(n, down); });
        faults_healed_us_ = std::max(faults_healed_us_, at + down);
      }
    }
  }

  // Runs the loop until nothing is left (answers in flight delivered or
  // timed out), at most 60 simulated seconds more; the run then ends.
  SimResult finish() {
    for (int i = 0; i < 600 && !loop_.empty(); ++i) {
      loop_.run_until(loop_.now_us() + 100'000);
    }
    if (!loop_.empty()) {
      std::fprintf(stderr, "tk_sim: events still pending 60 s after the end\n");
      std::abort();
    }
    result_.events = loop_.events();
    result_.messages_lost = fabric_.lost;
    result_.timeouts = fabric_.timed_out;
    return std::move(result_);
  }

  const bool keep_trace_;
  EventLoop loop_;
  Rng rng_;
  Network network_;
  std::unique_ptr<MemoryCoordinator> store_;
  Fabric fabric_;
  SimResult result_;
  // When the last partition healed and the last crashed node restarted
  // (0 without such faults).
  int64_t faults_healed_us_ = 0;

 private:
  void fold(unsigned char c) {
    result_.trace_hash ^= c;
    result_.trace_hash *= 0x100000001B3ull;
  }
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_WORLD_H_
