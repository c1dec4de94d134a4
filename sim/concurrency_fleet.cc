// sim/concurrency_fleet.cc: the distributed-concurrency scenario (see the
// header and docs/simulation.md).

#include "sim/concurrency_fleet.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/event_loop.h"
#include "sim/random.h"
#include "sim/shrink.h"
#include "sim/sim_clock.h"
#include "sim/sim_coordinator.h"
#include "throttlekit/concurrency/beat_scheduler.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::sim {
namespace {

using Node = BasicDistributedConcurrency<NanoClockRef<NodeClock>>;
using Permit = Node::Permit;

// Runs a node's beat ticks on the loop, each after the delay the previous
// one returned; `stop`, or `halted` set by the scenario (the node crashed),
// ends them (the state outlives the scheduler, since the loop may still
// hold a tick).
class SimBeatScheduler final : public BeatScheduler {
 public:
  SimBeatScheduler(EventLoop& loop, std::shared_ptr<bool> halted)
      : state_(std::make_shared<State>(State{&loop, {}, std::move(halted)})) {}
  ~SimBeatScheduler() override { stop(); }
  void start(Tick tick) override {
    state_->tick = std::move(tick);
    schedule(state_, 0);
  }
  void stop() override { state_->stopped = true; }

 private:
  struct State {
    EventLoop* loop;
    Tick tick;
    std::shared_ptr<bool> halted;
    bool stopped = false;
  };
  static void schedule(const std::shared_ptr<State>& s, int64_t delay_us) {
    s->loop->after(delay_us, [s] {
      if (s->stopped || *s->halted) return;
      const int64_t ms = s->tick();
      if (!s->stopped && !*s->halted) {
        schedule(s, std::max<int64_t>(1, ms) * 1000);
      }
    });
  }
  std::shared_ptr<State> state_;
};

class Run : private World {
 public:
  Run(uint64_t seed, const ConcurrencyFleetConfig& c, bool keep_trace)
      : World(seed, c.network, c.nodes, 50'000, keep_trace), config_(c) {
    nodes_.resize(static_cast<size_t>(c.nodes));
    for (int n = 0; n < c.nodes; ++n) {
      NodeState& s = nodes_[static_cast<size_t>(n)];
      const int64_t drift =
          c.drift_ppm == 0
              ? 0
              : static_cast<int64_t>((rng_.uniform() * 2 - 1) *
                                     static_cast<double>(c.drift_ppm));
      s.clock = std::make_unique<NodeClock>(loop_, 0, drift);
      s.coordinator = std::make_shared<SimCoordinator>(fabric_, n);
      start_node(n);
    }
  }

  SimResult run() {
    const int64_t end_us = config_.duration_ms * 1000;
    for (int n = 0; n < config_.nodes; ++n) next_arrival(n);
    const int64_t lease_us = config_.lease_ttl_ms * 1000;
    schedule_faults(config_.nodes, end_us, config_.partitions, 3 * lease_us,
                    config_.crashes, 2 * lease_us,
                    [this](int n, int64_t down) { crash(n, down); });
    loop_.run_until(end_us);
    // Every request admitted before the end finishes within the longest
    // service time; then a live node whose limiter still counts a slot
    // leaked a permit.
    loop_.run_until(end_us +
                    static_cast<int64_t>(config_.max_service_ms * 1000) + 1);
    for (int n = 0; n < config_.nodes; ++n) check_no_leak(n);
    // Stop every node (its ticks end), then let the work in progress end.
    for (int n = 0; n < config_.nodes; ++n) retire(n);
    return finish();
  }

 private:
  struct NodeState {
    std::unique_ptr<NodeClock> clock;
    std::shared_ptr<SimCoordinator> coordinator;
    std::unique_ptr<Node> node;
    // The node's limiter, kept while its permits live (a permit settles
    // into it).
    std::shared_ptr<Node::Limiter> limiter;
    std::map<uint64_t, Permit> permits;
    std::shared_ptr<bool> halted;  // the node's ticks and beats stop
    int64_t in_flight = 0;
    bool down = false;
    int generation = 0;
  };

  void start_node(int n) {
    NodeState& s = nodes_[static_cast<size_t>(n)];
    DistributedConcurrencyOptions o;
    o.node_id = absl::StrCat("n", n, ".", s.generation);
    o.key = "sim:concurrency";
    o.heartbeat_ms = config_.heartbeat_ms;
    o.lease_ttl_ms = config_.lease_ttl_ms;
    o.handoff = config_.handoff;
    o.self_fencing = config_.self_fencing;
    o.fence_safety_margin_ms =
        config_.self_fencing ? config_.fence_margin_ms : 0;
    o.outage = ConcurrencyOutageMode::kFailClosed;
    o.local.initial_limit = config_.local_limit;
    o.local.min_limit = config_.local_limit;
    o.local.max_limit = config_.local_limit;
    s.halted = std::make_shared<bool>(false);
    auto node = Node::create(
        std::move(o), s.coordinator, NanoClockRef<NodeClock>(*s.clock),
        std::make_unique<SimBeatScheduler>(loop_, s.halted));
    if (!node.ok()) {
      std::fprintf(stderr, "tk_sim: %s\n",
                   std::string(node.status().message()).c_str());
      std::abort();
    }
    s.node = *std::move(node);
    s.limiter = s.node->limiter();
    // Regular beats without waiting (`beat_async`): the report leaves now,
    // the grant lands a network delay later (the lag the handoff guards
    // against); the scheduler's ticks fence, and beat when one is due and
    // none is in flight.
    const int64_t phase = static_cast<int64_t>(
        rng_.uniform() * static_cast<double>(config_.heartbeat_ms) * 1000);
    beat_later(n, s.generation, phase);
  }

  void beat_later(int n, int generation, int64_t delay_us) {
    loop_.after(delay_us, [this, n, generation] {
      NodeState& st = nodes_[static_cast<size_t>(n)];
      if (st.generation != generation || st.node == nullptr) return;
      st.node->beat_async([](absl::Status) {});
      beat_later(n, generation, config_.heartbeat_ms * 1000);
    });
  }

  void next_arrival(int n) {
    const int64_t at =
        loop_.now_us() + arrival_gap_us(config_.arrivals_per_sec_per_node);
    if (at >= config_.duration_ms * 1000) return;
    loop_.at(at, [this, n] {
      arrive(n);
      next_arrival(n);
    });
  }

  void check_no_leak(int n) {
    const NodeState& s = nodes_[static_cast<size_t>(n)];
    if (s.down || s.node == nullptr) return;
    const int64_t counted = s.node->stats().local.inflight;
    if (counted == 0 && s.in_flight == 0) return;
    record_violation(
        result_,
        absl::StrCat(
            "node ", n, " still counts ", counted, " slots (", s.in_flight,
            " permits unreleased) after all its work ended: a permit leak"));
  }

  int64_t held() const {
    int64_t sum = 0;
    for (const NodeState& s : nodes_) sum += s.in_flight;
    return sum;
  }

  void arrive(int n) {
    NodeState& s = nodes_[static_cast<size_t>(n)];
    if (s.down) return;
    ++result_.requests;
    Permit permit = s.node->acquire();
    if (!permit) {
      trace(absl::StrCat(loop_.now_us(), " n", n, " reject"));
      return;
    }
    ++result_.admitted;
    ++s.in_flight;
    const int64_t sum = held();
    result_.worst_window = std::max(result_.worst_window, sum);
    trace(absl::StrCat(loop_.now_us(), " n", n, " acquire ", sum));
    if (sum > config_.local_limit) {
      record_violation(result_,
                       absl::StrCat("the fleet holds ", sum, " slots > limit ",
                                    config_.local_limit, " at ", loop_.now_us(),
                                    " us (node ", n, " acquired)"));
    }
    const uint64_t id = next_permit_++;
    s.permits.emplace(id, std::move(permit));
    const double service_us =
        std::min(rng_.exponential(config_.mean_service_ms * 1000),
                 config_.max_service_ms * 1000);
    const int generation = s.generation;
    loop_.after(static_cast<int64_t>(service_us), [this, n, id, generation] {
      NodeState& st = nodes_[static_cast<size_t>(n)];
      if (st.generation != generation) return;  // died with the node
      auto it = st.permits.find(id);
      if (it == st.permits.end()) return;
      if (config_.drop_a_release && id == 0) return;  // the mutation
      it->second.release(PermitOutcome::kSuccess);
      st.permits.erase(it);
      --st.in_flight;
    });
  }

  // Stops the node: no more beats, its slots gone (the work died with the
  // process; its permits settle into a limiter nobody else uses). The node
  // object is parked, not destroyed: a beat of it may still be in flight,
  // and its destructor waits for that beat's answer, which only the loop
  // delivers; parked nodes go once the loop is empty.
  void retire(int n) {
    NodeState& s = nodes_[static_cast<size_t>(n)];
    if (s.node == nullptr) return;
    *s.halted = true;
    parked_.push_back(std::move(s.node));
    graveyard_.emplace_back(std::move(s.limiter), std::move(s.permits));
    s.permits.clear();
    s.in_flight = 0;
    ++s.generation;
  }

  void crash(int n, int64_t down_us) {
    NodeState& s = nodes_[static_cast<size_t>(n)];
    if (s.down || s.node == nullptr) return;
    s.down = true;
    ++result_.crashes;
    trace(absl::StrCat(loop_.now_us(), " n", n, " crash"));
    retire(n);
    loop_.after(down_us, [this, n] {
      NodeState& st = nodes_[static_cast<size_t>(n)];
      if (loop_.now_us() >= config_.duration_ms * 1000) return;
      start_node(n);
      st.down = false;
      trace(absl::StrCat(loop_.now_us(), " n", n, " restart"));
    });
  }

  const ConcurrencyFleetConfig config_;
  std::vector<NodeState> nodes_;
  std::vector<std::unique_ptr<Node>> parked_;  // retired nodes
  // Retired nodes' limiters and the permits that settle into them; the
  // permits go first (declared after, destroyed first within each pair).
  std::vector<
      std::pair<std::shared_ptr<Node::Limiter>, std::map<uint64_t, Permit>>>
      graveyard_;
  uint64_t next_permit_ = 0;
};

}  // namespace

ConcurrencyFleetConfig swarm_concurrency_config(uint64_t seed, int nodes) {
  Rng rng(seed ^ 0xC0FC0FC0Full);
  ConcurrencyFleetConfig c;
  c.nodes = nodes;
  c.local_limit = 4 + static_cast<int64_t>(rng.next() % 30);
  c.network.median_delay_us = 100 + rng.uniform() * 2'000;
  c.network.delay_sigma = 0.5;
  c.network.loss = rng.uniform() < 0.3 ? rng.uniform() * 0.2 : 0;
  c.partitions = rng.uniform() < 0.4;
  c.crashes = rng.uniform() < 0.4;
  c.drift_ppm = rng.uniform() < 0.5 ? 500 : 0;
  c.mean_service_ms = 1 + rng.uniform() * 6;
  // Demand from about half the limit to four times it.
  c.arrivals_per_sec_per_node = static_cast<double>(c.local_limit) /
                                (c.mean_service_ms / 1000) *
                                (0.5 + rng.uniform() * 3.5) / nodes;
  c.duration_ms = 2000;
  return c;
}

std::string concurrency_replay_command(uint64_t seed,
                                       const ConcurrencyFleetConfig& c) {
  return absl::StrCat(
      "tk_sim concurrency --seed ", seed, " --nodes ", c.nodes, " --limit ",
      c.local_limit, " --rate ", exact(c.arrivals_per_sec_per_node),
      " --service-ms ", exact(c.mean_service_ms), " --duration-ms ",
      c.duration_ms, " --delay-us ", exact(c.network.median_delay_us),
      " --loss ", exact(c.network.loss), " --partitions ", c.partitions ? 1 : 0,
      " --crashes ", c.crashes ? 1 : 0, " --drift-ppm ", c.drift_ppm,
      c.handoff ? "" : " --no-handoff", c.self_fencing ? "" : " --no-fencing");
}

SimResult run_concurrency_fleet(uint64_t seed,
                                const ConcurrencyFleetConfig& config,
                                bool keep_trace) {
  return Run(seed, config, keep_trace).run();
}

ConcurrencyFleetConfig shrink_concurrency(uint64_t seed,
                                          ConcurrencyFleetConfig failing,
                                          int rounds) {
  using C = ConcurrencyFleetConfig;
  const std::vector<std::function<void(C&)>> steps = {
      [](C& c) { c.partitions = false; },
      [](C& c) { c.crashes = false; },
      [](C& c) { c.network.loss = 0; },
      [](C& c) { c.drift_ppm = 0; },
      [](C& c) {
        // Halving the fleet keeps the whole fleet's demand.
        const int nodes = std::max(2, c.nodes / 2);
        c.arrivals_per_sec_per_node *= static_cast<double>(c.nodes) / nodes;
        c.nodes = nodes;
      },
      [](C& c) {
        c.duration_ms = std::max(4 * c.lease_ttl_ms, c.duration_ms / 2);
      },
  };
  return shrink_seed(seed, std::move(failing), steps, run_concurrency_fleet,
                     concurrency_replay_command, rounds);
}

}  // namespace throttlekit::sim
