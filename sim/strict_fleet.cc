// sim/strict_fleet.cc: the strict-fleet scenario and its cached-deny mode
// (see the header and docs/simulation.md).

#include "sim/strict_fleet.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "sim/windowed_fleet.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/twotier/cached_deny_limiter.h"

namespace throttlekit::sim {
namespace {

using Strict = StrictRateLimiter<FixedWindow, ClockRef<NodeClock>>;
using CachedDeny = CachedDenyLimiter<FixedWindow, ClockRef<NodeClock>>;

WindowedFleetShape strict_shape(const StrictFleetConfig& c) {
  WindowedFleetShape shape = windowed_shape(c.fleet);
  if (c.slow_clocks) shape.node_clock_drift_ppm = -500'000;
  shape.store_ttl_slack_ms = c.store_ttl_slack_ms;
  return shape;
}

template <class Limiter>
class Run final : public WindowedFleetRun<Limiter> {
  using Base = WindowedFleetRun<Limiter>;
  static constexpr bool kCached = std::is_same_v<Limiter, CachedDeny>;

 public:
  Run(uint64_t seed, const StrictFleetConfig& c, bool keep_trace)
      : Base(seed, strict_shape(c), c.fleet.network, c.fleet.timeout_ms * 1000,
             keep_trace),
        config_(c) {}

 private:
  std::unique_ptr<Limiter> make_engine(int n) override {
    const FixedWindow::Options window{.limit = config_.fleet.limit,
                                      .window_ms = config_.fleet.window_ms};
    auto limiter =
        Limiter::create(window, this->coordinators_[static_cast<size_t>(n)],
                        {.prefix = "strict",
                         .fail_policy = config_.fleet.policy_dropped
                                            ? FailPolicy::kPropagate
                                            : this->shape_.fail_policy},
                        ClockRef<NodeClock>(*this->clocks_[n]));
    // A new engine's cache is empty: what the old one was refused on is
    // forgotten with it.
    std::erase_if(refused_until_ms_,
                  [n](const auto& e) { return e.first.first == n; });
    if (!limiter.ok()) fail_setup(limiter.status());
    return *std::move(limiter);
  }

  // On the store's clock (`now` 0), or, mutated, on the node's. A cached
  // denial completes inline, before `check_at_async` returns: nothing
  // else does (every store step crosses the network).
  void ask(int n, int key, const std::string& name, uint64_t generation,
           int64_t asked_ms) override {
    const int64_t now_ms =
        config_.stale_now ? this->clocks_[n]->now_ms() : int64_t{0};
    asking_ = true;
    auto done = [this, n, key, generation, asked_ms,
                 asked_us = this->loop_.now_us()](absl::StatusOr<Decision> d) {
      const bool inline_answer = asking_;
      const bool outage = this->decided(n, key, generation, asked_ms, d,
                                        asked_us, inline_answer);
      if constexpr (kCached) {
        if (d.ok() && !d->allowed && generation == this->generations()[n]) {
          cached_rule(n, key, inline_answer, outage, *d);
        }
      }
    };
    if constexpr (kCached) {
      if (now_ms == 0) {
        this->engines_[n]->check_async(name, 1, std::move(done));
      } else {
        this->engines_[n]->check_at_async(name, now_ms, 1, std::move(done));
      }
    } else {
      this->engines_[n]->check_at_async(name, now_ms, 1, std::move(done));
    }
    asking_ = false;
  }

  // A store refusal (not an outage's) on `key` to node `n` lets the node
  // deny from memory until its window ends; a cached denial outside every
  // such window is a violation.
  void cached_rule(int n, int key, bool cached, bool outage,
                   const Decision& d) {
    if (outage) return;  // a fail-closed denial is not remembered
    int64_t& until = refused_until_ms_[{n, key}];
    if (!cached) {
      until = std::max(until, d.reset_at_ms);
      return;
    }
    ++this->result_.cached_denials;
    const int64_t now_ms = TrueClock(this->loop_).now_ms();
    if (now_ms > until) {
      this->violation(absl::StrCat(
          "node ", n, " denied k", key, " from its cache at ",
          now_ms - kSimEpochMs, " ms (store's clock), after the window it was ",
          until == 0 ? "never refused in"
                     : absl::StrCat("refused in ended at ", until - kSimEpochMs,
                                    " ms")));
    }
  }

  bool judges_fail_policy() const override { return true; }
  int64_t outages_decided(int n) const override {
    return this->engines_[n]->stats().outages;
  }
  // One exchange with the store: the answer, or the deadline's error (or
  // the fail policy's decision) when the deadline passes.
  int64_t answer_deadline_us() const override {
    return config_.fleet.timeout_ms * 1000;
  }

  // Every check is decided at the store and nothing is stranded: once no
  // message is lost or late (an answer past the deadline was counted by the
  // store and fails its caller), a window asked for twice its limit admits
  // all of it. A cached denial comes only once the store refused in that
  // window, so the floor is the same.
  int64_t liveness_floor() const override {
    if (config_.stale_now || config_.fleet.network.loss > 0 ||
        config_.fleet.network.delay_sigma >= 1) {
      return -1;
    }
    return config_.fleet.limit;
  }

  const StrictFleetConfig config_;
  bool asking_ = false;  // inside `ask`'s call to the engine
  // Cached-deny mode: per (node, key), the end of the latest window the
  // store refused the node in (store epoch ms).
  std::map<std::pair<int, int>, int64_t> refused_until_ms_;
};

}  // namespace

StrictFleetConfig swarm_strict_config(uint64_t seed, int nodes) {
  return StrictFleetConfig{.fleet = swarm_config(seed, nodes)};
}

std::string strict_replay_command(uint64_t seed, const StrictFleetConfig& c) {
  return absl::StrCat(replay_command(seed, c.fleet, "strict"),
                      c.stale_now ? " --stale-now" : "",
                      c.cached_deny ? " --cached-deny" : "",
                      c.slow_clocks ? " --slow-clocks" : "");
}

SimResult run_strict_fleet(uint64_t seed, const StrictFleetConfig& config,
                           bool keep_trace) {
  if (config.cached_deny) {
    return Run<CachedDeny>(seed, config, keep_trace).run();
  }
  return Run<Strict>(seed, config, keep_trace).run();
}

}  // namespace throttlekit::sim
