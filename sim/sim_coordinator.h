// sim/sim_coordinator.h
//
// Provides `SimCoordinator`: one node's view of the coordinator in a
// simulated fleet (docs/simulation.md, "The model"). The coordinator's state
// and steps are the production memory coordinator's (`MemoryCoordinator`,
// which the conformance suites hold equal to the Lua and SQL steps), on the
// store's clock (`TrueClock`). Asynchronous verbs cross the simulated
// network: the request arrives after a sampled delay (or is lost), the step
// runs at the coordinator at that instant, and the answer travels back the
// same way; a caller that has no answer within `timeout_us` gets
// kDeadlineExceeded, exactly once, and a late answer is dropped (as a real
// coordinator's caller drops it). Blocking verbs are modelled as atomic at
// the coordinator at the instant of the call. Keys expire on the store's
// clock, as Redis's do: a check given an older `now` than the store's
// finds an expired key gone (the strict fleet's stale-`now` mutation).
//
// Thread-safety: none (the simulation's one thread).

#ifndef THROTTLEKIT_SIM_SIM_COORDINATOR_H_
#define THROTTLEKIT_SIM_SIM_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/event_loop.h"
#include "sim/network.h"
#include "sim/random.h"
#include "sim/sim_clock.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/coordinator/verb_completion.h"

namespace throttlekit::sim {

// The replica's clock (the store-failover fault): the store's time, or,
// while a write is replayed, the instant the primary applied it.
class ReplicaClock final : public Clock {
 public:
  explicit ReplicaClock(const EventLoop& loop) noexcept : loop_(&loop) {}
  int64_t now_ms() const noexcept override {
    return replay_ms_ >= 0 ? replay_ms_ : TrueClock(*loop_).now_ms();
  }
  // While `ms` >= 0 the clock reads `ms`; -1 ends the replay.
  void replay_at(int64_t ms) noexcept { replay_ms_ = ms; }

 private:
  const EventLoop* loop_;
  int64_t replay_ms_ = -1;
};

// What the nodes of one run share: the loop, the run's random stream, the
// network, the coordinator's state, and counters of what the network did.
struct Fabric {
  EventLoop& loop;
  Rng& rng;
  Network& network;
  MemoryCoordinator* store;  // the primary
  int64_t timeout_us = 50'000;
  int64_t sent = 0;
  int64_t lost = 0;
  int64_t timed_out = 0;
  // While a lease's answer is being delivered (its completion runs): the
  // store's clock when it granted (`LeaseGrant::now_ms`); -1 otherwise. An
  // admission decided inside that completion spent credits the coordinator
  // granted at that instant.
  int64_t delivering_grant_ms = -1;

  // The store-failover fault (asynchronous replication, as Redis's): every
  // write applied at `store` is applied again at `replica` (on
  // `replica_clock`, at the instant the primary applied it)
  // `replication_lag_us` later, until `fail_over()` promotes the replica.
  // The writes not yet replicated then are lost: what each counted (the
  // admissions a check allowed, the credits a lease granted) is added to
  // `lost_by_window`, by the end (epoch ms) of the window it counted in.
  MemoryCoordinator* replica = nullptr;
  ReplicaClock* replica_clock = nullptr;
  int64_t replication_lag_us = 0;
  bool failed_over = false;
  std::map<int64_t, int64_t> lost_by_window;
  struct Pending {
    int64_t window_end_ms;
    int64_t counted;
  };
  std::deque<Pending> replicating;  // in the order they were applied

  // Promotes the replica: the writes still replicating are lost.
  void fail_over() {
    if (replica == nullptr || failed_over) return;
    for (const Pending& p : replicating) {
      lost_by_window[p.window_end_ms] += p.counted;
    }
    replicating.clear();
    store = replica;
    failed_over = true;
  }
  // What the writes lost in the failover counted in the window ending at
  // `window_end_ms`.
  int64_t lost_in_window(int64_t window_end_ms) const {
    const auto it = lost_by_window.find(window_end_ms);
    return it == lost_by_window.end() ? 0 : it->second;
  }
};

class SimCoordinator final : public Coordinator {
 public:
  SimCoordinator(Fabric& fabric, int node) : fabric_(fabric), node_(node) {}
  std::string_view backend() const noexcept override { return "sim"; }

 protected:
  // Each hook answers a caller that waits at the instant of the call (the
  // loop cannot block): atomic at the coordinator, through `write`. A
  // caller that does not wait gets its answer through the network
  // (`exchange`), for the verbs a fleet sends that way (check, lease,
  // federation's lease and reconcile, heartbeat); the others answer at the
  // instant of the call either way.
  //
  // A check meets the store as Redis would: a key whose state expired on
  // the store's clock is gone, whatever `now_ms` the check names.
  void do_check(const AnyStrategy& strategy, std::string_view key,
                int64_t now_ms, double cost,
                VerbCompletion<Decision>&& done) override {
    if (done.caller_waits()) {
      std::move(done)(store_check(strategy, key, now_ms, cost));
      return;
    }
    exchange<Decision>(std::move(done).release(),
                       [this, strategy, key = std::string(key), now_ms, cost] {
                         return store_check(strategy, key, now_ms, cost);
                       });
  }
  void do_peek(const AnyStrategy& strategy, std::string_view key,
               int64_t now_ms, VerbCompletion<Decision>&& done) override {
    std::move(done)(fabric_.store->peek(strategy, key, now_ms));
  }
  void do_forecast(const AnyStrategy& strategy, std::string_view key,
                   int64_t now_ms, double cost,
                   VerbCompletion<Forecast>&& done) override {
    std::move(done)(fabric_.store->forecast(strategy, key, now_ms, cost));
  }
  void do_reset(const AnyStrategy& strategy, std::string_view key,
                VerbCompletion<Acknowledged>&& done) override {
    const absl::Status s = fabric_.store->reset(strategy, key);
    if (!s.ok()) {
      std::move(done)(s);
      return;
    }
    std::move(done)(Acknowledged{});
  }
  void do_lease(const LeaseBudget& budget, std::string_view key, int64_t want,
                VerbCompletion<LeaseGrant>&& done) override {
    write_or_exchange<LeaseGrant>(
        std::move(done),
        [budget, key = std::string(key), want](MemoryCoordinator& s, int64_t) {
          return s.lease(budget, key, want);
        });
  }
  void do_give_back(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token,
                    VerbCompletion<int64_t>&& done) override {
    std::move(done)(write<int64_t>(
        [budget, key = std::string(key), window_start_ms, credits,
         token = std::string(token)](MemoryCoordinator& s, int64_t) {
          return s.give_back(budget, key, window_start_ms, credits, token);
        }));
  }
  void do_now_ms(VerbCompletion<int64_t>&& done) override {
    std::move(done)(fabric_.store->now_ms());
  }
  // The federation path (a region's process leasing from the global
  // coordinator): the windowed lease and the reconcile of a leftover.
  void do_lease_windowed(const LeaseBudget& budget, std::string_view key,
                         int64_t want, int64_t now_ms,
                         VerbCompletion<LeaseGrant>&& done) override {
    write_or_exchange<LeaseGrant>(
        std::move(done), [budget, key = std::string(key), want, now_ms](
                             MemoryCoordinator& s, int64_t) {
          return s.lease_windowed(budget, key, want, now_ms);
        });
  }
  void do_reconcile(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms,
                    VerbCompletion<int64_t>&& done) override {
    write_or_exchange<int64_t>(
        std::move(done),
        [budget, key = std::string(key), window_start_ms, leftover,
         token = std::string(token), now_ms](MemoryCoordinator& s, int64_t) {
          return s.reconcile(budget, key, window_start_ms, leftover, token,
                             now_ms);
        });
  }
  // A waited beat: atomic at the coordinator at the instant of the call,
  // failing at once (kUnavailable) when the node is cut off or the
  // message is lost.
  void do_heartbeat(std::string_view key, const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    VerbCompletion<HeartbeatGrant>&& done) override {
    if (done.caller_waits()) {
      ++fabric_.sent;
      if (!fabric_.network.delay(node_, fabric_.loop.now_us(), fabric_.rng)) {
        ++fabric_.lost;
        std::move(done)(absl::UnavailableError(
            "sim: the beat did not reach the coordinator"));
        return;
      }
      std::move(done)(fabric_.store->heartbeat(key, report, options, now_ms));
      return;
    }
    // The report's node id is a view: copied, as heartbeat_async promises
    // its caller, who may let it go once the call returns.
    exchange<HeartbeatGrant>(
        std::move(done).release(),
        [this, key = std::string(key), report,
         node_id = std::string(report.node_id), options, now_ms] {
          HeartbeatReport r = report;
          r.node_id = node_id;
          return fabric_.store->heartbeat(key, r, options, now_ms);
        });
  }

 private:
  absl::StatusOr<Decision> store_check(const AnyStrategy& strategy,
                                       std::string_view key, int64_t now_ms,
                                       double cost) {
    return write<Decision>([strategy, key = std::string(key), now_ms, cost](
                               MemoryCoordinator& s, int64_t at_ms) {
      s.drop_if_expired(key, at_ms);
      return s.check(strategy, key, now_ms, cost);
    });
  }

  // The write `step` for a caller that waits, at the instant of the call;
  // through the network (`exchange`) for one that does not.
  template <class T, class Step>
  void write_or_exchange(VerbCompletion<T> done, Step step) {
    if (done.caller_waits()) {
      std::move(done)(write<T>(std::move(step)));
      return;
    }
    exchange<T>(std::move(done).release(),
                [this, step = std::move(step)] { return write<T>(step); });
  }

  // Applies the write `step(store, now)` at the primary now and, while a
  // replica follows it, queues it for the replica (see `Fabric`).
  template <class T, class Step>
  absl::StatusOr<T> write(Step step) {
    Fabric& f = fabric_;
    const int64_t at_ms = TrueClock(f.loop).now_ms();
    absl::StatusOr<T> result = step(*f.store, at_ms);
    if (f.replica == nullptr || f.failed_over) return result;
    Fabric::Pending p{0, 0};
    if constexpr (std::is_same_v<T, Decision>) {
      if (result.ok() && result->allowed) p = {result->reset_at_ms, 1};
    } else if constexpr (std::is_same_v<T, LeaseGrant>) {
      if (result.ok()) p = {result->expires_at_ms, result->granted};
    }
    f.replicating.push_back(p);
    f.loop.after(f.replication_lag_us, [&f, at_ms, step = std::move(step)] {
      if (f.failed_over) return;  // lost, and counted, at the failover
      f.replicating.pop_front();
      f.replica_clock->replay_at(at_ms);
      (void)step(*f.replica, at_ms);
      f.replica_clock->replay_at(-1);
    });
    return result;
  }

  // Sends `step` to the coordinator and its answer back to `on_done`,
  // through the network, with the deadline; see the file comment.
  template <class T, class Step>
  void exchange(Completion<T> on_done, Step step) {
    struct Pending {
      Completion<T> done;
      bool finished = false;
    };
    auto pending = std::make_shared<Pending>(Pending{std::move(on_done)});
    Fabric& f = fabric_;
    const int node = node_;
    ++f.sent;
    f.loop.after(f.timeout_us, [&f, pending] {
      if (pending->finished) return;
      pending->finished = true;
      ++f.timed_out;
      std::move(pending->done)(absl::DeadlineExceededError(
          "sim: no answer from the coordinator within the deadline"));
    });
    const std::optional<int64_t> there =
        f.network.delay(node, f.loop.now_us(), f.rng);
    if (!there) {
      ++f.lost;
      return;
    }
    f.loop.after(*there, [&f, node, pending, step = std::move(step)]() mutable {
      if (f.network.cut(node, f.loop.now_us())) {
        ++f.lost;
        return;
      }
      absl::StatusOr<T> answer = step();  // at the coordinator, now
      const std::optional<int64_t> back =
          f.network.delay(node, f.loop.now_us(), f.rng);
      if (!back) {
        ++f.lost;
        return;
      }
      f.loop.after(*back,
                   [&f, node, pending, answer = std::move(answer)]() mutable {
                     if (pending->finished) return;
                     if (f.network.cut(node, f.loop.now_us())) {
                       ++f.lost;
                       return;
                     }
                     pending->finished = true;
                     if constexpr (std::is_same_v<T, LeaseGrant>) {
                       if (answer.ok()) f.delivering_grant_ms = answer->now_ms;
                     }
                     std::move(pending->done)(std::move(answer));
                     f.delivering_grant_ms = -1;
                   });
    });
  }

  Fabric& fabric_;
  const int node_;
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_SIM_COORDINATOR_H_
