// sim/admission_fleet.cc: the unified-admission scenario (see the header and
// docs/simulation.md).

#include "sim/admission_fleet.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/random.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/windowed_fleet.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit::sim {
namespace {

using Limiter = BasicLeasedLimiter<ClockRef<NodeClock>>;
using Admit = BasicUnifiedAdmission<Limiter, Limiter, ClockRef<NodeClock>,
                                    NanoClockRef<NodeClock>>;

// One node's memory: its two leased axes, its admission, and its requests
// in service.
struct Node {
  std::shared_ptr<Limiter> rate;
  std::shared_ptr<Limiter> cost;
  std::unique_ptr<Admit> admission;
  int64_t in_service = 0;
};

class Run final : public WindowedFleetRun<Node> {
 public:
  Run(uint64_t seed, const AdmissionFleetConfig& c, bool keep_trace)
      : WindowedFleetRun(seed, windowed_shape(c.fleet), c.fleet.network,
                         c.fleet.timeout_ms * 1000, keep_trace),
        config_(c) {}

  SimResult run() {
    SimResult r = WindowedFleetRun::run();
    r.windows_checked = static_cast<int64_t>(rate_.size());
    // No permit leak: the run has drained, every request in service has
    // been released, so no live node's concurrency axis still counts a
    // slot (an admission the rate or cost axis refused, or one that failed,
    // gave its slot back).
    for (size_t n = 0; n < engines_.size(); ++n) {
      if (engines_[n] == nullptr) continue;  // down at the end
      const int64_t counted =
          engines_[n]->admission->concurrency()->stats().inflight;
      if (counted == 0 && engines_[n]->in_service == 0) continue;
      record_violation(
          r, absl::StrCat(
                 "node ", n, " still counts ", counted, " slots (",
                 engines_[n]->in_service,
                 " requests in service) after the run drained: a permit leak"));
    }
    return r;
  }

 private:
  std::shared_ptr<Limiter> axis(int n, const std::string& prefix, int64_t limit,
                                int64_t batch) {
    LeasedLimiterOptions o;
    o.prefix = prefix;
    o.limit = limit;
    o.window_ms = config_.fleet.window_ms;
    o.batch = std::min(batch, limit);
    o.window_coupled = config_.fleet.window_coupled;
    o.background_worker = false;
    auto l = Limiter::create(std::move(o), coordinators_[n],
                             ClockRef<NodeClock>(*clocks_[n]));
    if (!l.ok()) fail_setup(l.status());
    return std::shared_ptr<Limiter>(*std::move(l));
  }

  std::unique_ptr<Node> make_engine(int n) override {
    auto node = std::make_unique<Node>();
    node->rate = axis(n, "rate", config_.fleet.limit, config_.fleet.batch);
    node->cost = axis(n, "cost", config_.cost_budget,
                      config_.fleet.batch * config_.max_cost);
    auto a = Admit::create({.max_inflight = config_.max_inflight,
                            .rate = node->rate,
                            .cost = node->cost},
                           ClockRef<NodeClock>(*clocks_[n]),
                           NanoClockRef<NodeClock>(*clocks_[n]));
    if (!a.ok()) fail_setup(a.status());
    node->admission = *std::move(a);
    return node;
  }

  void ask(int n, int key, const std::string& name, uint64_t generation,
           int64_t asked_ms) override {
    const int64_t cost =
        1 + static_cast<int64_t>(rng_.next() %
                                 static_cast<uint64_t>(config_.max_cost));
    engines_[n]->admission->admit_async(
        AdmitRequest{.key = name,
                     .cost = static_cast<double>(cost),
                     .now_ms = clocks_[n]->now_ms()},
        [this, n, key, generation, asked_ms,
         cost](absl::StatusOr<Admit::Admission> a) {
          answered(n, key, generation, asked_ms, cost, std::move(a));
        });
  }

  // The window an axis's decision counts in (see the header).
  int64_t window_of(int64_t asked_ms, const Decision& d) const {
    const int64_t w = config_.fleet.window_ms;
    return std::max(asked_ms, d.reset_at_ms - w) / w;
  }

  void answered(int n, int key, uint64_t generation, int64_t asked_ms,
                int64_t cost, absl::StatusOr<Admit::Admission> a) {
    const int64_t t = loop_.now_us();
    if (!a.ok()) {
      ++result_.errors;
      trace(absl::StrCat(t, " n", n, " k", key, " error"));
      return;
    }
    const std::optional<std::string_view> lane = a->deny_lane();
    trace(absl::StrCat(t, " n", n, " k", key, " c", cost,
                       lane ? " deny " : " admit",
                       lane ? std::string(*lane) : std::string()));
    // An answer to a node that crashed since belonged to its lost memory.
    if (generation != generations()[n]) return;
    const int64_t w = config_.fleet.window_ms;
    if (std::optional<Decision> r = a->axis(Axis::kRate); r && r->allowed) {
      const int64_t window = window_of(asked_ms, *r);
      const int64_t count = ++rate_[{key, window}];
      result_.worst_window = std::max(result_.worst_window, count);
      // A store failover's lost writes are granted again (summed over the
      // keys of both axes: a looser bound per axis).
      if (count >
          config_.fleet.limit + fabric_.lost_in_window((window + 1) * w)) {
        violation(absl::StrCat(
            "key k", key, ": the rate axis allowed ", count, " > limit ",
            config_.fleet.limit, " in the window starting at ",
            window * w - kSimEpochMs, " ms (at ", t, " us, node ", n, ")"));
      }
    }
    if (std::optional<Decision> c = a->axis(Axis::kCost); c && c->allowed) {
      const int64_t window = window_of(asked_ms, *c);
      const int64_t units = cost_[{key, window}] += cost;
      worst_cost_ = std::max(worst_cost_, units);
      if (units >
          config_.cost_budget + fabric_.lost_in_window((window + 1) * w)) {
        violation(absl::StrCat(
            "key k", key, ": the cost axis allowed ", units, " units > budget ",
            config_.cost_budget, " in the window starting at ",
            window * w - kSimEpochMs, " ms (at ", t, " us, node ", n, ")"));
      }
    }
    if (!a->allowed()) return;
    ++result_.admitted;
    Node& node = *engines_[n];
    if (++node.in_service > config_.max_inflight) {
      violation(absl::StrCat("node ", n, " serves ", node.in_service,
                             " > max_inflight ", config_.max_inflight, " (at ",
                             t, " us)"));
    }
    // In service for an exponential time (capped at 20 ms), then released;
    // a crash meanwhile loses the request (its slot died with the node).
    const auto service_us = std::min<int64_t>(
        20'000,
        static_cast<int64_t>(rng_.exponential(config_.mean_service_ms * 1000)));
    auto held = std::make_shared<Admit::Admission>(*std::move(a));
    loop_.after(service_us, [this, n, generation, held] {
      held->release(PermitOutcome::kSuccess);
      if (generation == generations()[n]) --engines_[n]->in_service;
    });
  }

  const AdmissionFleetConfig config_;
  std::map<std::pair<int, int64_t>, int64_t> rate_;  // allowed, by window
  std::map<std::pair<int, int64_t>, int64_t> cost_;  // units, by window
  int64_t worst_cost_ = 0;
};

}  // namespace

AdmissionFleetConfig swarm_admission_config(uint64_t seed, int nodes) {
  AdmissionFleetConfig c;
  c.fleet = swarm_config(seed, nodes);
  c.fleet.fail_mode = FailPolicy::kPropagate;  // not judged here
  Rng rng(seed ^ 0xAD3155100ull);
  c.max_cost = 1 + static_cast<int64_t>(rng.next() % 16);
  c.max_inflight = 1 + static_cast<int64_t>(rng.next() % 32);
  c.mean_service_ms = 0.5 + rng.uniform() * 10;
  // A cost budget that binds about as often as the rate limit: the rate
  // limit's requests at their mean cost, times 0.5 to 2.
  c.cost_budget = std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(c.fleet.limit) *
                              static_cast<double>(1 + c.max_cost) / 2 *
                              (0.5 + rng.uniform() * 1.5)));
  return c;
}

std::string admission_replay_command(uint64_t seed,
                                     const AdmissionFleetConfig& c) {
  return absl::StrCat(replay_command(seed, c.fleet, "admission"),
                      " --cost-budget ", c.cost_budget, " --max-cost ",
                      c.max_cost, " --max-inflight ", c.max_inflight,
                      " --service-ms ", exact(c.mean_service_ms));
}

SimResult run_admission_fleet(uint64_t seed, const AdmissionFleetConfig& config,
                              bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

}  // namespace throttlekit::sim
