// throttlekit/concurrency/distributed_concurrency.h
//
// Provides `DistributedConcurrency`: one in-flight ceiling across a fleet
// (docs/distributed_concurrency.md). Each process runs its own adaptive
// limiter (`AdaptiveConcurrency`, its local limit L_local) and beats to a
// `Coordinator` with an atomic snapshot of itself; the coordinator's step
// (coordinator/heartbeat_core.h) grants it a share such that the shares of
// the live nodes never sum above one global limit, and the node admits at
// most min(share, L_local).
//
//     auto dc = DistributedConcurrency::create(
//         {.node_id = host_and_pid, .key = "backend:db", .heartbeat_ms = 500},
//         coordinator);
//     auto permit = (*dc)->acquire();
//     if (!permit) return overloaded();
//     ... do the work ...
//     permit.release(PermitOutcome::kSuccess);
//
// The hot path is the local limiter's: `acquire` is one compare-and-swap
// plus one clock read, and a grant is installed as the limiter's ceiling
// (one atomic word), so nothing on the request path waits for the
// coordinator. Beats run on a `BeatScheduler` (a thread by default).

#ifndef THROTTLEKIT_CONCURRENCY_DISTRIBUTED_CONCURRENCY_H_
#define THROTTLEKIT_CONCURRENCY_DISTRIBUTED_CONCURRENCY_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/concurrency/beat_scheduler.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/heartbeat_core.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {

// What a node admits while it holds no valid lease (the coordinator is
// unreachable, or has not answered yet).
// - `kFailClosed`: nothing (share 0). The fleet bound holds through any
//   outage.
// - `kLocalOnly`: up to its own adaptive limit, as if alone. The node stays
//   available; the fleet bound does not hold until the coordinator is back.
enum class ConcurrencyOutageMode { kFailClosed, kLocalOnly };

// Options of `BasicDistributedConcurrency`. Every field is checked by
// `create()`; errors name "distributed_concurrency.<field>".
struct DistributedConcurrencyOptions {
  // This process's id in the fleet, 1 .. 256 bytes. Required, and unique
  // among the live processes on one key: two processes with one id would
  // share one row and corrupt the aggregate (e.g. host name + pid).
  std::string node_id;
  // The coordinator key the fleet shares: one global ceiling per key.
  std::string key = "throttlekit:concurrency";
  // Beat period, in [1, 3'600'000] ms.
  int64_t heartbeat_ms = 1000;
  // How long a beat keeps this node alive at the coordinator, in
  // (heartbeat_ms, 2^53 - 1]; 0 (the default) means 2 * heartbeat_ms, so one
  // late beat does not evict a healthy node. A crashed node's budget
  // returns to the fleet this long after its last beat.
  int64_t lease_ttl_ms = 0;
  // How the coordinator aggregates the local limits: their minimum or
  // lower median (never a sum).
  HeartbeatAggregate aggregate = HeartbeatAggregate::kMin;
  // Acknowledged handoff (heartbeat_core.h, step 5): sum(in-flight) <= the
  // global limit at every instant, under grant and report lag, at the cost
  // of slower ramps. Every node on a key must agree.
  bool handoff = false;
  // Idle budget to hungry nodes: targets from reported demand (each node
  // floored at 1 slot). Every node on a key must agree.
  bool demand_proportional = false;
  // Off-cycle beats (at most one per `eager_debounce_ms`, at most
  // `kMaxEagerBeatsPerPeriod` between two regular beats) when a grant came
  // back capped below the fair share, when in-flight has drained to a
  // lowered share, and after a grant of a new generation (to acknowledge
  // it). They only move a report earlier, so no bound changes.
  bool eager_heartbeats = false;
  // 0 (the default) means max(1, heartbeat_ms / 10); else [1, heartbeat_ms].
  int64_t eager_debounce_ms = 0;
  // Self-fencing: from `fence_safety_margin_ms` before the lease lapses on
  // this node's clock (measured from when the beat was sent), `acquire`
  // refuses everything, and `on_fenced` runs once, until a beat renews the
  // lease. A node cut off from the coordinator (a partition, a stopped
  // process) stops admitting before the coordinator hands its budget to
  // others. Needs `outage` kFailClosed.
  bool self_fencing = false;
  // In [0, lease_ttl_ms - heartbeat_ms): must exceed the clock drift
  // between this node and the coordinator over one lease (and, for work
  // that cannot be cancelled, its longest duration). Checked only with
  // `self_fencing`.
  int64_t fence_safety_margin_ms = 0;
  // Called once per fence (from the scheduler's thread, or from
  // `beat_now`'s caller), e.g. to abort work that cannot be cancelled. Must
  // not call `beat_now`.
  std::function<void()> on_fenced;
  ConcurrencyOutageMode outage = ConcurrencyOutageMode::kFailClosed;
  // The node's own adaptive limiter. A `recalibration_seed` of 0 (the
  // default) is replaced by a hash of `node_id`, so the nodes of a fleet do
  // not pin in lockstep.
  AdaptiveConcurrencyOptions local;
};

// Eager beats between two regular beats, at most.
inline constexpr int64_t kMaxEagerBeatsPerPeriod = 4;

// A snapshot of a node (see `BasicDistributedConcurrency::stats`).
struct DistributedConcurrencyStats {
  // The local limiter; its `ceiling` is what the fleet lets this node admit
  // now (the share, 0 or none in an outage) and its `limit` is L_local.
  AdaptiveConcurrencyStats local;
  int64_t share = 0;         // the last share applied (0 before any)
  int64_t generation = 0;    // that grant's generation
  int64_t global_limit = 0;  // L_global at the last answered beat
  int64_t live_nodes = 0;    // live nodes at the last answered beat
  bool fenced = false;       // self-fenced now
  bool outage = false;       // no valid lease: `outage` decides the ceiling
  int64_t beats = 0;         // beats answered with a grant
  int64_t failed_beats = 0;  // beats that failed or came back stale
  int64_t eager_beats = 0;   // off-cycle beats sent
  int64_t fences = 0;        // times `on_fenced` ran
};

// The node.
//
// A beat (on the scheduler's thread, or `beat_now`) reads the generation of
// the last grant applied and then the limiter's in-flight count; grants are
// applied only by beats and beats are serialized, so the two belong to one
// instant (a torn report would break the handoff bound). The report's
// local limit is the law's limit (`stats().limit`, not lowered by the
// ceiling or a recalibration pin), and its demand, used only with
// `demand_proportional`, is L_local when the node is at its ceiling and
// in-flight + 1 otherwise. A grant is applied only if its generation is
// newer than the last applied (grants are monotone per node), and is
// installed as the limiter's ceiling.
//
// A beat that fails (an error, or a stale answer) changes nothing: the node
// keeps its share while its lease is valid. When the lease lapses (lease_ttl
// after the last answered beat was sent, on this node's clock) the outage
// mode decides; the next answered beat restores the share.
//
// Locking: `beat_mu_` serializes beats and holds the beat state across the
// coordinator call of a waited beat (never on the request path); a
// `beat_async` holds it only to take its report and to apply its answer,
// with a flag that keeps other beats out in between. `state_mu_` guards
// the published snapshot `stats()` reads, taken inside `beat_mu_` only.
//
// Thread-safety: every public method may be called concurrently. Neither
// copyable nor movable (the scheduler calls back into it); `create` returns
// a unique_ptr. The destructor stops the scheduler first. A node's row
// stays at the coordinator until its lease lapses.
template <NanoClock C = MonotonicClock>
class BasicDistributedConcurrency {
 public:
  using Limiter = BasicAdaptiveConcurrency<C>;
  using Permit = typename Limiter::Permit;
  using Options = DistributedConcurrencyOptions;
  using Stats = DistributedConcurrencyStats;

  // Validates `options` and starts the beats on `scheduler` (a
  // `ThreadBeatScheduler` when null). Until the first beat is answered the
  // node is in an outage (see `ConcurrencyOutageMode`); call `beat_now` to
  // begin with a share.
  static absl::StatusOr<std::unique_ptr<BasicDistributedConcurrency>> create(
      Options options, std::shared_ptr<Coordinator> coordinator, C clock = C{},
      std::unique_ptr<BeatScheduler> scheduler = nullptr) {
    if (coordinator == nullptr) {
      return absl::InvalidArgumentError(
          "distributed_concurrency: coordinator is null");
    }
    if (absl::Status s = validate(options); !s.ok()) return s;
    if (options.local.recalibration_seed == 0) {
      options.local.recalibration_seed =
          std::hash<std::string>{}(options.node_id) | 1;
    }
    absl::StatusOr<std::unique_ptr<Limiter>> limiter =
        Limiter::create(options.local, clock);
    if (!limiter.ok()) return limiter.status();
    if (options.lease_ttl_ms == 0)
      options.lease_ttl_ms = 2 * options.heartbeat_ms;
    if (options.eager_debounce_ms == 0) {
      options.eager_debounce_ms =
          std::max<int64_t>(1, options.heartbeat_ms / 10);
    }
    if (scheduler == nullptr) {
      scheduler = std::make_unique<ThreadBeatScheduler>();
    }
    std::unique_ptr<BasicDistributedConcurrency> node(
        new BasicDistributedConcurrency(
            std::move(options), std::move(coordinator),
            std::shared_ptr<Limiter>(*std::move(limiter)), std::move(clock),
            std::move(scheduler)));
    node->scheduler_->start([n = node.get()] { return n->tick(); });
    return node;
  }

  BasicDistributedConcurrency(const BasicDistributedConcurrency&) = delete;
  BasicDistributedConcurrency& operator=(const BasicDistributedConcurrency&) =
      delete;
  // Stops the scheduler, then waits for a `beat_async` in flight to
  // complete (within the coordinator's deadline).
  ~BasicDistributedConcurrency() {
    scheduler_->stop();
    MutexLock lock(beat_mu_);
    NativeWait native(beat_mu_);
    beat_cv_.wait(native.lock(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return async_beats_ == 0;
    });
  }

  // A slot under min(share, L_local), or a rejection (false): the local
  // limiter's `acquire` (see `BasicAdaptiveConcurrency::Permit`).
  Permit acquire() noexcept { return limiter_->acquire(); }

  // The local limiter, shared: the concurrency axis of `UnifiedAdmission`
  // takes it as is (its ceiling is this node's fleet share).
  const std::shared_ptr<Limiter>& limiter() const noexcept { return limiter_; }

  // Beats now, on the caller's thread (serialized with the scheduler's
  // beats); returns the beat's error, or OK when a grant was applied. For a
  // process that wants its share before it serves.
  absl::Status beat_now() {
    absl::Status status;
    bool fire = false;
    {
      MutexLock lock(beat_mu_);
      wait_for_beat_in_flight_locked();
      // A fence instant that passed while this thread waited (or the
      // process was stopped) fires even if this beat renews the lease.
      fire = check_deadlines_locked();
      status = beat_locked(/*eager=*/false);
      fire = check_deadlines_locked() || fire;
      publish_locked();
    }
    if (fire) fence_callback();
    return status;
  }

  // As `beat_now`, without waiting (docs/async.md): takes the report now
  // (the applied generation, then the in-flight count, as every beat does),
  // sends it with `Coordinator::heartbeat_async`, and applies the answer
  // from its completion, where `on_done` then runs (no lock held) with the
  // beat's error, or OK when a grant was applied. For a node whose beats an
  // event loop drives. One beat is in flight at a time: while it is, the
  // scheduler's ticks send none and `beat_now` waits for it, and another
  // `beat_async` completes at once with kFailedPrecondition. The spec's
  // report and grant may be apart in time (spec/GaleHeartbeatHandoff.tla's
  // Snapshot, Report and Deliver are separate actions), so the bounds hold.
  void beat_async(absl::AnyInvocable<void(absl::Status) &&> on_done) {
    SentBeat beat;
    bool fire = false;
    {
      MutexLock lock(beat_mu_);
      if (beat_in_flight_) {
        lock.unlock();
        std::move(on_done)(absl::FailedPreconditionError(
            "distributed_concurrency: a beat is already in flight"));
        return;
      }
      fire = check_deadlines_locked();
      beat = prepare_beat_locked(/*eager=*/false);
      beat_in_flight_ = true;
      ++async_beats_;
      publish_locked();
    }
    if (fire) fence_callback();
    const HeartbeatReport report = beat.report;
    coordinator_->heartbeat_async(
        options_.key, report, heartbeat_options_, 0,
        [this, beat = std::move(beat), done = std::move(on_done)](
            absl::StatusOr<HeartbeatGrant> grant) mutable {
          absl::Status status;
          bool fire_now = false;
          {
            MutexLock lock(beat_mu_);
            status = apply_beat_locked(beat, std::move(grant));
            fire_now = check_deadlines_locked();
            beat_in_flight_ = false;
            publish_locked();
            beat_cv_.notify_all();
          }
          if (fire_now) fence_callback();
          std::move(done)(status);
          MutexLock lock(beat_mu_);
          --async_beats_;
          beat_cv_.notify_all();  // under the lock: the node may go next
        });
  }

  Stats stats() const {
    Stats s;
    {
      MutexLock lock(state_mu_);
      s = published_;
    }
    s.local = limiter_->stats();
    return s;
  }

  // The last beat error (OK if the last beat was answered).
  absl::Status last_error() const {
    MutexLock lock(state_mu_);
    return last_error_;
  }

  const Options& options() const noexcept { return options_; }

 private:
  BasicDistributedConcurrency(Options options,
                              std::shared_ptr<Coordinator> coordinator,
                              std::shared_ptr<Limiter> limiter, C clock,
                              std::unique_ptr<BeatScheduler> scheduler)
      : options_(std::move(options)),
        heartbeat_options_{.lease_ttl_ms = options_.lease_ttl_ms,
                           .aggregate = options_.aggregate,
                           .handoff = options_.handoff,
                           .demand_proportional = options_.demand_proportional},
        coordinator_(std::move(coordinator)),
        limiter_(std::move(limiter)),
        clock_(std::move(clock)),
        scheduler_(std::move(scheduler)) {
    // A restarted process must not replay seqs its previous incarnation
    // used (its beats would be stale until the old row lapsed): seqs start
    // at the wall clock in ms times 1000, and a process beats far less
    // than 1000 times per ms. Below 2^53 until the year 2255.
    seq_ = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count() *
           1000;
    MutexLock lock(beat_mu_);
    enter_outage_locked();
    publish_locked();
  }

 public:
  // What `create` checks of the fleet options (not `local`, which the local
  // limiter's `create` checks): kInvalidArgument naming
  // "distributed_concurrency.<field>", or OK. For a caller that validates
  // a configuration before it builds the node.
  static absl::Status validate(const Options& o) {
    constexpr const char* kWhat = "distributed_concurrency";
    if (o.node_id.empty() || o.node_id.size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat(
          kWhat,
          ".node_id is required: 1 .. 256 bytes, unique in the fleet; "
          "got ",
          o.node_id.size(), " bytes"));
    }
    if (absl::Status s = validate_key(o.key); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWhat, ".key: ", s.message()));
    }
    if (absl::Status s = detail::check_int_option(kWhat, "heartbeat_ms",
                                                  o.heartbeat_ms, 1, 3'600'000);
        !s.ok()) {
      return s;
    }
    if (o.lease_ttl_ms != 0) {
      if (absl::Status s =
              detail::check_int_option(kWhat, "lease_ttl_ms", o.lease_ttl_ms,
                                       o.heartbeat_ms + 1, kMaxSafeInteger);
          !s.ok()) {
        return s;
      }
    }
    const int64_t ttl =
        o.lease_ttl_ms != 0 ? o.lease_ttl_ms : 2 * o.heartbeat_ms;
    if (o.aggregate != HeartbeatAggregate::kMin &&
        o.aggregate != HeartbeatAggregate::kLowerMedian) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWhat, ".aggregate is not a HeartbeatAggregate"));
    }
    if (o.eager_debounce_ms != 0) {
      if (absl::Status s =
              detail::check_int_option(kWhat, "eager_debounce_ms",
                                       o.eager_debounce_ms, 1, o.heartbeat_ms);
          !s.ok()) {
        return s;
      }
    }
    if (o.outage != ConcurrencyOutageMode::kFailClosed &&
        o.outage != ConcurrencyOutageMode::kLocalOnly) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWhat, ".outage is not a ConcurrencyOutageMode"));
    }
    if (o.self_fencing) {
      if (o.outage != ConcurrencyOutageMode::kFailClosed) {
        return absl::InvalidArgumentError(absl::StrCat(
            kWhat,
            ".self_fencing needs outage kFailClosed (kLocalOnly admits past "
            "the lease, which fencing exists to forbid)"));
      }
      if (absl::Status s = detail::check_int_option(
              kWhat, "fence_safety_margin_ms", o.fence_safety_margin_ms, 0,
              ttl - o.heartbeat_ms - 1);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  // One scheduler tick: a regular beat when due, an eager one when wanted,
  // then the lease and fence deadlines. Returns the ms to the next tick.
  int64_t tick() {
    int64_t delay_ms = 0;
    bool fire = false;
    {
      MutexLock lock(beat_mu_);
      // First the deadlines that passed while the scheduler slept (or the
      // process was stopped): a lapse is a lapse even if this tick's beat
      // renews the lease at once.
      fire = check_deadlines_locked();
      const int64_t now = clock_.now_ns();
      if (beat_in_flight_) {
        // A `beat_async` is in flight: its answer is this period's.
      } else if (now >= next_beat_ns_) {
        (void)beat_locked(/*eager=*/false);
      } else if (eager_wanted_locked(now)) {
        (void)beat_locked(/*eager=*/true);
      }
      fire = check_deadlines_locked() || fire;
      publish_locked();
      delay_ms = next_delay_ms_locked(clock_.now_ns());
    }
    if (fire) fence_callback();
    return delay_ms;
  }

  // A beat's report, taken under `beat_mu_`, and what applying its answer
  // needs.
  struct SentBeat {
    int64_t sent_ns = 0;
    bool eager = false;
    HeartbeatReport report;
  };

  // One beat, waited for: the report, the round trip, the answer.
  absl::Status beat_locked(bool eager) ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    const SentBeat beat = prepare_beat_locked(eager);
    return apply_beat_locked(
        beat,
        coordinator_->heartbeat(options_.key, beat.report, heartbeat_options_));
  }

  // Waits (releasing the lock) until no `beat_async` is in flight.
  void wait_for_beat_in_flight_locked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    NativeWait native(beat_mu_);
    beat_cv_.wait(native.lock(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !beat_in_flight_;
    });
  }

  // Starts a beat: its bookkeeping and its report (the applied generation,
  // then the in-flight count read after it).
  SentBeat prepare_beat_locked(bool eager)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    const int64_t sent_ns = clock_.now_ns();
    if (eager) {
      ++eager_beats_;
      --eager_left_;
    } else {
      eager_left_ = kMaxEagerBeatsPerPeriod;
      next_beat_ns_ = sent_ns + options_.heartbeat_ms * kNsPerMs;
    }
    last_beat_ns_ = sent_ns;
    capped_ = false;
    unacked_ = false;
    draining_ = false;
    // The snapshot: the applied generation (only beats change it, under
    // beat_mu_), then in-flight, read after it.
    const int64_t applied = applied_gen_;
    const AdaptiveConcurrencyStats local = limiter_->stats();
    const int64_t local_limit = std::min(local.limit, kMaxConcurrencyLimit);
    const int64_t inflight = std::min(local.inflight, kMaxConcurrencyLimit);
    const int64_t demand = !options_.demand_proportional ? 0
                           : inflight >= local.effective_limit
                               ? local_limit
                               : std::min(inflight + 1, kMaxConcurrencyLimit);
    return SentBeat{sent_ns, eager,
                    HeartbeatReport{.node_id = options_.node_id,
                                    .seq = ++seq_,
                                    .applied_gen = applied,
                                    .inflight = inflight,
                                    .local_limit = local_limit,
                                    .demand = demand}};
  }

  // A beat's answer: a grant newer than the last applied becomes the
  // share; an error or a stale answer changes nothing.
  absl::Status apply_beat_locked(const SentBeat& beat,
                                 absl::StatusOr<HeartbeatGrant> grant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    const int64_t sent_ns = beat.sent_ns;
    const bool eager = beat.eager;
    absl::Status status;
    if (!grant.ok()) {
      status = grant.status();
    } else if (grant->stale) {
      status = absl::AbortedError(
          "distributed_concurrency: the coordinator answered a stale grant "
          "(a newer beat of this node id is stored: is the node_id shared?)");
    }
    if (!status.ok()) {
      ++failed_beats_;
      set_last_error(status);
      return status;
    }
    ++beats_;
    set_last_error(absl::OkStatus());
    global_limit_ = grant->global_limit;
    live_nodes_ = grant->live_nodes;
    bool lowered = false;
    if (grant->generation > applied_gen_) {
      lowered = grant->share < share_;
      unacked_ = true;  // acknowledged by the next beat
      share_ = grant->share;
      applied_gen_ = grant->generation;
    }
    lease_deadline_ns_ = sent_ns + options_.lease_ttl_ms * kNsPerMs;
    outage_ = false;
    fenced_ = false;
    if (options_.self_fencing) {
      fence_deadline_ns_ =
          lease_deadline_ns_ - options_.fence_safety_margin_ms * kNsPerMs;
      limiter_->set_grant_deadline_ns(fence_deadline_ns_);
    }
    limiter_->set_ceiling(share_);
    if (options_.eager_heartbeats) {
      draining_ = lowered && limiter_->inflight() > share_;
      capped_ = !eager && grant->live_nodes > 0 &&
                share_ < grant->global_limit / grant->live_nodes;
    } else {
      unacked_ = false;
    }
    return absl::OkStatus();
  }

  bool eager_wanted_locked(int64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    if (!options_.eager_heartbeats || eager_left_ <= 0) return false;
    if (now < last_beat_ns_ + options_.eager_debounce_ms * kNsPerMs) {
      return false;
    }
    return capped_ || unacked_ || (draining_ && limiter_->inflight() <= share_);
  }

  // Enters the outage when the lease has lapsed and fences when the fence
  // instant has come; true iff `on_fenced` must run now.
  bool check_deadlines_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    const int64_t now = clock_.now_ns();
    bool fire = false;
    if (options_.self_fencing && !fenced_ && now >= fence_deadline_ns_) {
      fenced_ = true;
      ++fences_;
      fire = true;
    }
    if (!outage_ && now >= lease_deadline_ns_) enter_outage_locked();
    return fire;
  }

  void enter_outage_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    outage_ = true;
    limiter_->set_ceiling(options_.outage == ConcurrencyOutageMode::kFailClosed
                              ? 0
                              : kNoConcurrencyCeiling);
  }

  int64_t next_delay_ms_locked(int64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    int64_t next = next_beat_ns_;
    if (!outage_) next = std::min(next, lease_deadline_ns_);
    if (options_.self_fencing && !fenced_) {
      next = std::min(next, fence_deadline_ns_);
    }
    if (options_.eager_heartbeats && eager_left_ > 0 &&
        (capped_ || unacked_ || draining_)) {
      next =
          std::min(next, last_beat_ns_ + options_.eager_debounce_ms * kNsPerMs);
    }
    const int64_t wait = next - now;
    return wait <= kNsPerMs ? 1 : (wait + kNsPerMs - 1) / kNsPerMs;
  }

  void set_last_error(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    MutexLock lock(state_mu_);
    last_error_ = std::move(s);
  }

  void publish_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(beat_mu_) {
    MutexLock lock(state_mu_);
    published_.share = share_;
    published_.generation = applied_gen_;
    published_.global_limit = global_limit_;
    published_.live_nodes = live_nodes_;
    published_.fenced = fenced_;
    published_.outage = outage_;
    published_.beats = beats_;
    published_.failed_beats = failed_beats_;
    published_.eager_beats = eager_beats_;
    published_.fences = fences_;
  }

  void fence_callback() {
    if (options_.on_fenced) options_.on_fenced();
  }

  static constexpr int64_t kNsPerMs = 1'000'000;

  const Options options_;
  const HeartbeatOptions heartbeat_options_;
  const std::shared_ptr<Coordinator> coordinator_;
  const std::shared_ptr<Limiter> limiter_;
  const C clock_;

  mutable Mutex beat_mu_;
  int64_t seq_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t applied_gen_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t share_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t global_limit_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t live_nodes_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t next_beat_ns_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t last_beat_ns_ ABSL_GUARDED_BY(beat_mu_) = 0;
  // The lease lapses at lease_deadline_ns_ (0: never held one).
  int64_t lease_deadline_ns_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t fence_deadline_ns_ ABSL_GUARDED_BY(beat_mu_) = kNoGrantDeadline;
  bool outage_ ABSL_GUARDED_BY(beat_mu_) = false;
  bool fenced_ ABSL_GUARDED_BY(beat_mu_) = false;
  // Eager-beat triggers of the last answered beat.
  bool capped_ ABSL_GUARDED_BY(beat_mu_) = false;
  bool unacked_ ABSL_GUARDED_BY(beat_mu_) = false;
  bool draining_ ABSL_GUARDED_BY(beat_mu_) = false;
  int64_t eager_left_ ABSL_GUARDED_BY(beat_mu_) = kMaxEagerBeatsPerPeriod;
  int64_t beats_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t failed_beats_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t eager_beats_ ABSL_GUARDED_BY(beat_mu_) = 0;
  int64_t fences_ ABSL_GUARDED_BY(beat_mu_) = 0;
  // A `beat_async` has sent its report and not yet applied its answer.
  bool beat_in_flight_ ABSL_GUARDED_BY(beat_mu_) = false;
  // `beat_async` completions not yet finished (the destructor waits).
  int async_beats_ ABSL_GUARDED_BY(beat_mu_) = 0;
  std::condition_variable beat_cv_;

  mutable Mutex state_mu_ ABSL_ACQUIRED_AFTER(beat_mu_);
  Stats published_ ABSL_GUARDED_BY(state_mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(state_mu_);

  // Last: destroyed first, after the destructor has stopped it.
  const std::unique_ptr<BeatScheduler> scheduler_;
};

using DistributedConcurrency = BasicDistributedConcurrency<MonotonicClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_CONCURRENCY_DISTRIBUTED_CONCURRENCY_H_
