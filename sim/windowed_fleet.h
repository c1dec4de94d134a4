// sim/windowed_fleet.h
//
// Provides `WindowedFleetRun<Engine>`: the run shared by the scenarios whose
// bound is "admitted per key per window of the store's clock <= limit" (the
// leased fleet, sim/leased_fleet.h; the federated fleet,
// sim/federated_fleet.h). N nodes, each an `Engine` answering
// `check_at_async` on its own clock (`NodeClock`), take Poisson arrivals
// with half of them on the hot key 0; faults are drawn by `World`
// (partitions cut a node off from the coordinator; crashes lose a node's
// memory, and a new, empty engine starts after the node's down time).
//
// The invariant, checked at every admission: each admission counts in the
// window of its decision on the store's clock: a local hit when the node
// spends, a miss served from a lease when the coordinator granted it (as a
// strict check is decided when the store runs it; its answer reaches the
// caller a network delay later, possibly in the next window), and a miss
// served otherwise after a wait (from a regional escrow's grant, when the
// global lease it went on to failed) when it asked: the limiter spends a
// waiter's credit at the instant the waiter asked. Never, though, before
// the window of the credits it spent (the decision's `reset_at` less one
// window): a waiter that asked before a window began and was served from
// that window's credits was decided when they were granted, in it. The
// count by the instant each answer arrived is reported too, not checked.
//
// Liveness, where a scenario promises it (`liveness_floor`): once the
// faults heal, a window refuses a request only after admitting the floor
// (`judge_liveness`).
//
// The fail policy, where a scenario judges it (`judges_fail_policy`): every
// request is answered exactly once; an answer the engine's fail policy
// decided (its `stats().outages` grew for it) is the policy's decision
// (fail-open: admitted, and outside the window bound, which counts what
// the store decided; fail-closed: refused with the policy's retry); an
// outage status reaches the caller only under kPropagate, and the policy
// decides nothing under it. Where a scenario states a deadline
// (`answer_deadline_us`), no answer comes later than it after the ask.
//
// A derived scenario supplies `make_engine(node)`, called at the start
// and at each restart, and may replace `ask` (how a request reaches the
// engine and how its answer is checked).
//
// Thread-safety: none; one run per thread.

#ifndef THROTTLEKIT_SIM_WINDOWED_FLEET_H_
#define THROTTLEKIT_SIM_WINDOWED_FLEET_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/world.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/ttl_slack.h"

namespace throttlekit::sim {

// How requests arrive at each node, at a mean of the shape's rate:
// `kPoisson` at a constant rate; `kBursts`, the whole fleet together, 40 ms
// at 4x the rate every 200 ms and a quarter of it between; `kDiurnal`, a
// day compressed into the run, the rate times 1 + 0.9 sin(2 pi t / run).
enum class Workload { kPoisson, kBursts, kDiurnal };

// The instantaneous rate of `workload` at `t_us` into a run of
// `duration_us`, as a multiple of the mean, and its peak.
inline double workload_factor(Workload workload, int64_t t_us,
                              int64_t duration_us) {
  switch (workload) {
    case Workload::kPoisson:
      return 1;
    case Workload::kBursts:
      return t_us % 200'000 < 40'000 ? 4 : 0.25;
    case Workload::kDiurnal:
      return 1 +
             0.9 * std::sin(2 * 3.141592653589793 * static_cast<double>(t_us) /
                            static_cast<double>(duration_us));
  }
  return 1;
}
inline double workload_peak(Workload workload) {
  return workload == Workload::kBursts    ? 4
         : workload == Workload::kDiurnal ? 1.9
                                          : 1;
}

// The name of a fail policy's mode, as tk_sim's --fail takes it.
inline const char* fail_mode_name(FailPolicy::Mode mode) {
  return mode == FailPolicy::kOpen     ? "open"
         : mode == FailPolicy::kClosed ? "closed"
                                       : "propagate";
}

// What a windowed run is made of, whatever its engine.
struct WindowedFleetShape {
  int nodes = 8;
  int keys = 4;  // key 0 takes half of all requests
  int64_t limit = 200;
  int64_t window_ms = 100;
  double requests_per_sec_per_node = 1000;
  int64_t duration_ms = 1000;
  bool partitions = false;  // a few nodes cut off for up to 300 ms
  bool crashes = false;     // a few nodes lose their memory and restart
  // Node clock offsets are drawn in [min, max] us; drift in [0, 200] ppm
  // (its sign that of the offsets) when either is non-zero.
  int64_t clock_offset_min_us = 0;
  int64_t clock_offset_max_us = 0;
  Workload workload = Workload::kPoisson;
  // The store fails over once, at a drawn instant, to a replica that
  // follows it `replication_lag_ms` behind (sim/sim_coordinator.h): the
  // writes not yet replicated are lost, and each window's bound grows by
  // what they counted (docs/redis.md, "What lost writes cost each mode").
  bool store_failover = false;
  int64_t replication_lag_ms = 5;
  // How long the store (and its replica) keeps a state past its expiry
  // (core/ttl_slack.h; the library's default unless a scenario's mutation
  // takes it away).
  int64_t store_ttl_slack_ms = kDefaultTtlSlackMs;
  // What the engines do when the store cannot answer, where the scenario
  // judges it (`WindowedFleetRun::judges_fail_policy`).
  FailPolicy fail_policy = FailPolicy::kPropagate;
  // When non-zero, every node clock drifts by exactly this many ppm from
  // the start, with no offset (-500'000: clocks at half speed; a mutation).
  int64_t node_clock_drift_ppm = 0;
};

template <class Engine>
class WindowedFleetRun : protected World {
 public:
  SimResult run() {
    for (int n = 0; n < shape_.nodes; ++n) {
      engines_.push_back(make_engine(n));
    }
    const int64_t end_us = shape_.duration_ms * 1000;
    outages_seen_.assign(static_cast<size_t>(shape_.nodes), 0);
    outage_tokens_.assign(static_cast<size_t>(shape_.nodes), 0);
    for (int n = 0; n < shape_.nodes; ++n) next_arrival(n);
    schedule_faults(shape_.nodes, end_us, shape_.partitions, 300'000,
                    shape_.crashes, 200'000,
                    [this](int n, int64_t down) { crash(n, down); });
    if (shape_.store_failover) schedule_failover(end_us);
    loop_.run_until(end_us);
    // No arrival after the end; answers still travelling are delivered (or
    // time out), and admissions they bring are still checked.
    SimResult r = finish();
    r.windows_checked = static_cast<int64_t>(admitted_.size());
    // Every answer has arrived or timed out by now.
    if (judges_fail_policy() && answers_ != r.requests) {
      record_violation(
          r, absl::StrCat(answers_, " answers to ", r.requests,
                          " requests: each is answered exactly once"));
    }
    judge_liveness(r);
    return r;
  }

 protected:
  WindowedFleetRun(uint64_t seed, const WindowedFleetShape& shape,
                   const NetworkOptions& network, int64_t timeout_us,
                   bool keep_trace)
      : World(seed, network, shape.nodes, timeout_us, keep_trace,
              shape.store_ttl_slack_ms),
        shape_(shape),
        down_(static_cast<size_t>(shape.nodes), 0),
        generation_(static_cast<size_t>(shape.nodes), 0) {
    const bool skewed =
        shape.clock_offset_min_us != 0 || shape.clock_offset_max_us != 0;
    for (int n = 0; n < shape.nodes; ++n) {
      int64_t offset_us = 0, drift_ppm = 0;
      if (skewed) {
        const double span = static_cast<double>(shape.clock_offset_max_us -
                                                shape.clock_offset_min_us);
        offset_us = shape.clock_offset_min_us +
                    static_cast<int64_t>(rng_.uniform() * span);
        drift_ppm = static_cast<int64_t>(rng_.uniform() * 200) *
                    (shape.clock_offset_max_us > 0 ? 1 : -1);
      }
      if (shape.node_clock_drift_ppm != 0) {
        offset_us = 0;
        drift_ppm = shape.node_clock_drift_ppm;
      }
      clocks_.push_back(
          std::make_unique<NodeClock>(loop_, offset_us, drift_ppm));
      coordinators_.push_back(std::make_shared<SimCoordinator>(fabric_, n));
    }
  }
  virtual ~WindowedFleetRun() = default;

  // A new, empty engine for `node` on `*clocks_[node]`.
  virtual std::unique_ptr<Engine> make_engine(int node) = 0;

  // Liveness: the fewest admissions the scenario promises in a window of
  // the hot key judged after the faults healed (see `judge_liveness`), or
  // -1 when it promises none for this run (by default; a fault that never
  // heals, such as message loss or skewed clocks, promises none).
  virtual int64_t liveness_floor() const { return -1; }

  // The fail-policy invariant (see the top): whether the scenario's
  // engines apply `shape_.fail_policy` and it is judged (not by default),
  // and then the outages node `n`'s live engine has decided by it so far
  // (its `stats().outages`).
  virtual bool judges_fail_policy() const { return false; }
  virtual int64_t outages_decided(int /*n*/) const { return 0; }

  // The longest a request may wait for its answer, in us, or -1 for no
  // stated deadline (the default).
  virtual int64_t answer_deadline_us() const { return -1; }

  // Sends request `key` (named `name`) to node `n`'s engine, asked at
  // `asked_ms` on the store's clock, while the node is in `generation`:
  // by default one `check_at_async` of cost 1 on the node's clock, its
  // answer counted by the windowed invariant above.
  virtual void ask(int n, int key, const std::string& name, uint64_t generation,
                   int64_t asked_ms) {
    if constexpr (requires(Engine & e, DecisionCompletion done) {
                    e.check_at_async(name, int64_t{0}, 1.0, std::move(done));
                  }) {
      engines_[n]->check_at_async(
          name, clocks_[n]->now_ms(), 1,
          [this, n, key, generation, asked_ms,
           asked_us = loop_.now_us()](absl::StatusOr<Decision> d) {
            decided(n, key, generation, asked_ms, d, asked_us);
          });
    }
  }

  const std::vector<uint64_t>& generations() const noexcept {
    return generation_;
  }

  const WindowedFleetShape shape_;
  std::vector<std::unique_ptr<NodeClock>> clocks_;
  // Node n's view of the coordinator (across the simulated network).
  std::vector<std::shared_ptr<SimCoordinator>> coordinators_;

  // Counts answer `d` to request `key` of node `n` (asked at `asked_ms`
  // on the store's clock, `asked_us` in the loop's time, in `generation`)
  // by the invariants above; `from_memory` when a node's cache of denials
  // answered it (sim/strict_fleet.h). True when the engine's fail policy
  // decided it.
  bool decided(int n, int key, uint64_t generation, int64_t asked_ms,
               const absl::StatusOr<Decision>& d, int64_t asked_us,
               bool from_memory = false) {
    const int64_t t = loop_.now_us();
    const bool judged = judges_fail_policy();
    if (judged) {
      ++answers_;
      result_.longest_answer_us =
          std::max(result_.longest_answer_us, t - asked_us);
      const int64_t deadline = answer_deadline_us();
      if (deadline >= 0 && t - asked_us > deadline) {
        violation(absl::StrCat("node ", n, " answered k", key, " ",
                               t - asked_us, " us after the ask > deadline ",
                               deadline, " us (at ", t, " us)"));
      }
    }
    // An answer to a node that crashed since belonged to its lost memory:
    // the request died with it (and the dead engine's outages are not
    // counted: the node's count restarts with its new engine).
    const bool live = generation == generation_[n];
    const bool outage = judged && live && take_outage(n);
    const FailPolicy::Mode mode = shape_.fail_policy.mode();
    if (!d.ok()) {
      ++result_.errors;
      trace(absl::StrCat(t, " n", n, " k", key, " error"));
      if (judged && (outage || (is_outage(d.status()) &&
                                mode != FailPolicy::kPropagate))) {
        violation(absl::StrCat("node ", n, " returned ", d.status().ToString(),
                               " for k", key, " under fail policy ",
                               fail_mode_name(mode), " (at ", t, " us)"));
      }
      return outage;
    }
    trace(absl::StrCat(t, " n", n, " k", key, d->allowed ? " admit" : " deny",
                       outage ? " outage" : ""));
    if (!live) return false;
    if (outage) {
      ++result_.outage_decisions;
      const bool as_policy =
          mode == FailPolicy::kOpen
              ? d->allowed
              : mode == FailPolicy::kClosed && !d->allowed &&
                    d->retry_after_ms == shape_.fail_policy.closed_retry_ms();
      if (!as_policy) {
        violation(absl::StrCat("node ", n, " decided an outage on k", key,
                               d->allowed ? " admitted" : " refused",
                               " (retry ", d->retry_after_ms,
                               " ms) under fail policy ", fail_mode_name(mode),
                               " (at ", t, " us)"));
      }
      if (d->allowed) {
        ++result_.fail_open_admitted;
        return true;  // availability over the limit: not the store's count
      }
    }
    // Never before the window of the credits spent (`reset_at` is their
    // window's end): a waiter that asked earlier was served from a later
    // grant, decided when that grant was made. A denial likewise names the
    // window it was refused in.
    const int64_t decided_ms =
        std::max(fabric_.delivering_grant_ms >= 0 ? fabric_.delivering_grant_ms
                                                  : asked_ms,
                 d->reset_at_ms - shape_.window_ms);
    if (!d->allowed) {
      // A denial from memory in a window's first millisecond is the last
      // of the window before, held to the clock's resolution (hints are
      // whole milliseconds): not a refusal of this window's.
      const bool held_over = from_memory && decided_ms % shape_.window_ms == 0;
      if (key == 0 && !held_over) ++hot_denied_[decided_ms / shape_.window_ms];
      return outage;
    }
    ++result_.admitted;
    const int64_t answered_ms = TrueClock(loop_).now_ms();
    const int64_t by_answer =
        ++answered_[{key, answered_ms / shape_.window_ms}];
    result_.worst_answered_window =
        std::max(result_.worst_answered_window, by_answer);
    const int64_t window = decided_ms / shape_.window_ms;
    const int64_t count = ++admitted_[{key, window}];
    result_.worst_window = std::max(result_.worst_window, count);
    // A failover's lost writes are admitted again: the window may admit
    // what they counted more (summed over keys: a looser bound per key).
    const int64_t lost =
        fabric_.lost_in_window((window + 1) * shape_.window_ms);
    if (count > shape_.limit + lost) {
      violation(absl::StrCat("key k", key, " admitted ", count, " > limit ",
                             shape_.limit, lost > 0 ? " + lost writes " : "",
                             lost > 0 ? absl::StrCat(lost) : "",
                             " in the store's window starting at ",
                             window * shape_.window_ms - kSimEpochMs,
                             " ms (at ", t, " us, node ", n, ")"));
    }
    return outage;
  }

 private:
  // True when node `n`'s engine decided this answer by its fail policy:
  // its outage count grew since the last answer looked. An engine that
  // decides several waiters' outages at once counts them all before it
  // runs their completions, one after the other: each takes one.
  bool take_outage(int n) {
    const int64_t seen = outages_decided(n);
    outage_tokens_[n] += seen - outages_seen_[n];
    outages_seen_[n] = seen;
    if (outage_tokens_[n] == 0) return false;
    --outage_tokens_[n];
    return true;
  }

  // Poisson arrivals per node; half of them on the hot key 0. A workload
  // that varies is drawn by thinning: candidates at its peak rate, each
  // kept with the probability of the rate at its instant over the peak.
  void next_arrival(int n) {
    const double peak = workload_peak(shape_.workload);
    const int64_t end_us = shape_.duration_ms * 1000;
    const int64_t at = loop_.now_us() +
                       arrival_gap_us(shape_.requests_per_sec_per_node * peak);
    if (at >= end_us) return;
    loop_.at(at, [this, n, peak, end_us] {
      if (shape_.workload == Workload::kPoisson ||
          rng_.uniform() * peak <
              workload_factor(shape_.workload, loop_.now_us(), end_us)) {
        arrive(n);
      }
      next_arrival(n);
    });
  }

  void arrive(int n) {
    if (down_[n]) return;
    ++result_.requests;
    const int key = rng_.uniform() < 0.5
                        ? 0
                        : static_cast<int>(rng_.next() %
                                           static_cast<uint64_t>(shape_.keys));
    const std::string name = absl::StrCat("k", key);
    ask(n, key, name, generation_[n], TrueClock(loop_).now_ms());
  }

  // Liveness (utilisation returns above a stated floor within a stated
  // time once the faults heal): in every window of the hot key that began
  // at least one window and two deadlines after the last partition healed
  // and the last crashed node restarted (the stated time) and ended before
  // the arrivals did, a request is refused only once the window has
  // admitted `liveness_floor()` (the stated floor): each such window with
  // a refusal is judged.
  void judge_liveness(SimResult& r) {
    const int64_t floor = liveness_floor();
    if (floor < 0) return;
    const int64_t settle_us = shape_.window_ms * 1000 + 2 * fabric_.timeout_us;
    const int64_t from_ms =
        kSimEpochMs + (faults_healed_us_ + settle_us + 999) / 1000;
    const int64_t end_ms = kSimEpochMs + shape_.duration_ms;
    for (const auto& [window, denied] : hot_denied_) {
      const int64_t start_ms = window * shape_.window_ms;
      if (start_ms < from_ms || start_ms + shape_.window_ms > end_ms) continue;
      ++r.liveness_windows;
      const auto it = admitted_.find({0, window});
      const int64_t admitted = it == admitted_.end() ? 0 : it->second;
      r.lowest_utilisation =
          std::min(r.lowest_utilisation, static_cast<double>(admitted) /
                                             static_cast<double>(shape_.limit));
      if (admitted < floor) {
        ++r.liveness_failures;
        if (r.first_liveness_failure.empty()) {
          r.first_liveness_failure = absl::StrCat(
              "key k0 admitted ", admitted, " < floor ", floor, " (limit ",
              shape_.limit, ") and refused ", denied,
              " in the store's window starting at ", start_ms - kSimEpochMs,
              " ms, after the faults healed at ", faults_healed_us_ / 1000,
              " ms");
        }
      }
    }
  }

  // The store fails over at a drawn instant in the middle of the run to a
  // replica that followed it `replication_lag_ms` behind.
  void schedule_failover(int64_t end_us) {
    auto replica_clock = std::make_shared<ReplicaClock>(loop_);
    absl::StatusOr<std::unique_ptr<MemoryCoordinator>> replica =
        MemoryCoordinator::create({.ttl_slack_ms = shape_.store_ttl_slack_ms},
                                  replica_clock);
    if (!replica.ok()) fail_setup(replica.status());
    replica_ = *std::move(replica);
    replica_clock_ = replica_clock;
    fabric_.replica = replica_.get();
    fabric_.replica_clock = replica_clock.get();
    fabric_.replication_lag_us = shape_.replication_lag_ms * 1000;
    const auto at = static_cast<int64_t>((0.2 + 0.6 * rng_.uniform()) *
                                         static_cast<double>(end_us));
    faults_healed_us_ = std::max(faults_healed_us_, at);
    loop_.at(at, [this] {
      fabric_.fail_over();
      int64_t lost = 0;
      for (const auto& [end, counted] : fabric_.lost_by_window) lost += counted;
      result_.failover_lost = lost;
      trace(absl::StrCat(loop_.now_us(), " failover, lost ", lost));
    });
  }

  // The node loses its memory: its engine is set aside (answers still in
  // flight to it land there and are dropped) and a new, empty one starts
  // after `down_us`.
  void crash(int n, int64_t down_us) {
    if (down_[n]) return;
    down_[n] = true;
    ++generation_[n];
    ++result_.crashes;
    trace(absl::StrCat(loop_.now_us(), " n", n, " crash"));
    graveyard_.push_back(std::move(engines_[n]));
    loop_.after(down_us, [this, n] {
      engines_[n] = make_engine(n);
      outages_seen_[n] = 0;
      outage_tokens_[n] = 0;
      down_[n] = false;
      trace(absl::StrCat(loop_.now_us(), " n", n, " restart"));
    });
  }

 protected:
  std::vector<std::unique_ptr<Engine>> engines_;

 private:
  std::vector<std::unique_ptr<Engine>> graveyard_;
  std::shared_ptr<ReplicaClock> replica_clock_;
  std::unique_ptr<MemoryCoordinator> replica_;
  // Per node, indexed by its number (sized in the constructor).
  std::vector<char> down_;
  std::vector<uint64_t> generation_;
  // The fail-policy invariant: per node, the live engine's outage count
  // last read and the outage answers it has not yet delivered.
  std::vector<int64_t> outages_seen_;
  std::vector<int64_t> outage_tokens_;
  int64_t answers_ = 0;  // completions run (where the policy is judged)
  std::map<std::pair<int, int64_t>, int64_t> admitted_;  // by decision
  std::map<std::pair<int, int64_t>, int64_t> answered_;  // by answer
  std::map<int64_t, int64_t> hot_denied_;  // window -> the hot key's denials
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_WINDOWED_FLEET_H_
