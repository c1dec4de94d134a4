// throttlekit/coordinator/memory_coordinator.h
//
// Provides `MemoryCoordinator`: the in-process `Coordinator`, the reference
// the Redis and Postgres backends are held equal to (docs/conformance.md) and
// the embedded default of every engine that takes a coordinator. It runs the
// C++ strategy transitions themselves, so its decisions are the oracle.
//
// Design
// - A `detail::ShardedMap` (store/internal/sharded_map.h): 16 shards, each a
//   `Mutex` (core/mutex.h) over an `absl::flat_hash_map` from the key to its
//   state (a variant over every strategy's state and the lease state). One
//   call holds one shard lock for one step.
// - The store clock (a call's `now_ms == 0`, and every lease) is read under
//   the shard lock that orders the updates of the key, so the instants a key
//   sees follow the order its updates commit in, as on Redis (one script)
//   and Postgres (one transaction). A caller-supplied `now` may still be
//   stale; the strategies decide a stale `now` at the latest instant the
//   state has seen (docs/semantics.md, "A stale now"), and leases do the
//   same: a lease whose window is older than the stored one draws from the
//   stored, newer window.
// - Expiry mirrors a store's physical TTL: a state is dropped (reads as
//   cold) once `now >= expires_at + ttl_slack_ms`, where `expires_at` is the
//   strategy's own expiry (`S::expires_at_ms`, the instant from which the
//   state decides exactly as a cold key) and `now` is the call's `now`.
// - Bounded: at most `max_keys` keys. Inserting into a full shard first drops
//   an expired key if one is found among a few probed, else the probed key
//   that expires first (for the dropped key that is the same as a clock jump
//   past its expiry: never stricter, possibly more lenient).
// - Keys with another strategy's state: `check` and `peek` answer
//   kFailedPrecondition naming both strategies; nothing is written.
//
// The hot embedded path is `RateLimiter` over `MemoryStore` (lock-free or a
// spin lock, no allocation); this class is the general reference and pays a
// mutex and a string copy per inserted key.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_COORDINATOR_MEMORY_COORDINATOR_H_
#define THROTTLEKIT_COORDINATOR_MEMORY_COORDINATOR_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/verb_completion.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/ttl_slack.h"
#include "throttlekit/store/internal/sharded_map.h"

namespace throttlekit {

struct MemoryCoordinatorOptions {
  // The most keys held at once; 16 .. 2^40.
  int64_t max_keys = int64_t{1} << 20;
  // Extra ms a state is kept after its expiry (as a physical TTL slack on
  // Redis); 0 .. 2^53-1. A state is dropped by a call whose `now` is that
  // far past its expiry, so a staler `now` arriving after it would find
  // its window gone: the slack is the staleness covered (core/ttl_slack.h).
  // Decisions for a `now` that is not stale do not depend on it; a
  // heartbeat table within the slack keeps numbering its generations on
  // (after it, a beat starts again at generation 1).
  int64_t ttl_slack_ms = kDefaultTtlSlackMs;
};

class MemoryCoordinator final : public Coordinator {
 public:
  // Validates `options`; `clock` is the store clock (`now_ms == 0` and
  // every lease read it). Errors name the field and its bound.
  static absl::StatusOr<std::unique_ptr<MemoryCoordinator>> create(
      MemoryCoordinatorOptions options = {},
      std::shared_ptr<const Clock> clock =
          std::make_shared<ClockAdapter<SystemClock>>()) {
    if (options.max_keys < 16 || options.max_keys > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory_coordinator.max_keys must be in [16, 2^40]; "
                       "got ",
                       options.max_keys));
    }
    if (options.ttl_slack_ms < 0 || options.ttl_slack_ms > kMaxSafeInteger) {
      return absl::InvalidArgumentError(absl::StrCat(
          "memory_coordinator.ttl_slack_ms must be in [0, 2^53-1]; got ",
          options.ttl_slack_ms));
    }
    if (clock == nullptr) {
      return absl::InvalidArgumentError("memory_coordinator: clock is null");
    }
    return std::unique_ptr<MemoryCoordinator>(
        new MemoryCoordinator(options, std::move(clock)));
  }

  std::string_view backend() const noexcept override { return "memory"; }

  // Keys held now (including expired ones not yet dropped). Thread-safe.
  int64_t size() const {
    int64_t n = 0;
    map_.for_each_shard(
        [&n](const Map::Map& m) { n += static_cast<int64_t>(m.size()); });
    return n;
  }

  // Drops `key`'s state if it has expired at the epoch-ms `now_ms` (TTL
  // slack included), as a store whose keys expire on its own clock (Redis)
  // drops it whatever `now` a later step is given; returns whether it did.
  // The fleet simulator calls it with the store's clock before each check,
  // so that a step given an older `now` meets the store as Redis would
  // (docs/simulation.md, the stale-`now` row). Thread-safe.
  bool drop_if_expired(std::string_view key, int64_t now_ms) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    auto it = shard.map.find(av(key));
    if (it == shard.map.end() || !expired(it->second, now_ms)) return false;
    shard.map.erase(it);
    return true;
  }

 protected:
  // Every hook completes inline, on the calling thread: a step here is a
  // lookup and a strategy's arithmetic under one shard's lock, no I/O.
  // The check and the lease are flattened (the step, the strategy's
  // arithmetic and the completion compiled into the hook as one body):
  // the blocking verb then costs what it did when the hook returned its
  // decision (docs/coordinator.md, "Benchmark").
  [[gnu::flatten]] void do_check(const AnyStrategy& strategy,
                                 std::string_view key, int64_t now_ms,
                                 double cost,
                                 VerbCompletion<Decision>&& done) override {
    std::move(done)(step_check(strategy, key, now_ms, cost));
  }
  void do_peek(const AnyStrategy& strategy, std::string_view key,
               int64_t now_ms, VerbCompletion<Decision>&& done) override {
    std::move(done)(step_peek(strategy, key, now_ms));
  }
  void do_forecast(const AnyStrategy& strategy, std::string_view key,
                   int64_t now_ms, double cost,
                   VerbCompletion<Forecast>&& done) override {
    std::move(done)(step_forecast(strategy, key, now_ms, cost));
  }
  void do_reset(const AnyStrategy&, std::string_view key,
                VerbCompletion<Acknowledged>&& done) override {
    step_reset(key);
    std::move(done)(Acknowledged{});
  }
  [[gnu::flatten]] void do_lease(const LeaseBudget& budget,
                                 std::string_view key, int64_t want,
                                 VerbCompletion<LeaseGrant>&& done) override {
    std::move(done)(step_lease(budget, key, want));
  }
  void do_give_back(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token,
                    VerbCompletion<int64_t>&& done) override {
    std::move(done)(
        step_give_back(budget, key, window_start_ms, credits, token));
  }
  void do_now_ms(VerbCompletion<int64_t>&& done) override {
    std::move(done)(clock_->now_ms());
  }
  void do_ping(VerbCompletion<Acknowledged>&& done) override {
    std::move(done)(Acknowledged{});
  }
  void do_lease_windowed(const LeaseBudget& budget, std::string_view key,
                         int64_t want, int64_t now_ms,
                         VerbCompletion<LeaseGrant>&& done) override {
    std::move(done)(step_lease_windowed(budget, key, want, now_ms));
  }
  void do_reconcile(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms,
                    VerbCompletion<int64_t>&& done) override {
    std::move(done)(
        step_reconcile(budget, key, window_start_ms, leftover, token, now_ms));
  }
  void do_escrow_take(std::string_view key, int64_t want, int64_t now_ms,
                      VerbCompletion<LeaseGrant>&& done) override {
    std::move(done)(step_escrow_take(key, want, now_ms));
  }
  void do_escrow_refill(std::string_view key, int64_t granted,
                        int64_t window_start_ms, int64_t expires_at_ms,
                        int64_t now_ms,
                        VerbCompletion<int64_t>&& done) override {
    std::move(done)(step_escrow_refill(key, granted, window_start_ms,
                                       expires_at_ms, now_ms));
  }
  void do_escrow_release(std::string_view key, int64_t window_start_ms,
                         int64_t now_ms,
                         VerbCompletion<int64_t>&& done) override {
    std::move(done)(step_escrow_release(key, window_start_ms, now_ms));
  }
  void do_heartbeat(std::string_view key, const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    VerbCompletion<HeartbeatGrant>&& done) override {
    std::move(done)(step_heartbeat(key, report, options, now_ms));
  }
  void do_heartbeat_nodes(
      std::string_view key,
      VerbCompletion<std::vector<HeartbeatNode>>&& done) override {
    std::move(done)(step_heartbeat_nodes(key));
  }

 private:
  // The steps, one per verb.
  absl::StatusOr<Decision> step_check(const AnyStrategy& strategy,
                                      std::string_view key, int64_t now_ms,
                                      double cost) {
    return std::visit(
        [&](const auto& s) -> absl::StatusOr<Decision> {
          using S = std::decay_t<decltype(s)>;
          using State = typename S::State;
          Shard& shard = shard_for(key);
          MutexLock lock(shard.mu);
          const int64_t now = resolve(now_ms);
          Entry* e = live(shard, key, now);
          if (e == nullptr) {
            State cold{};
            const Decision d = s.check(cold, now, cost);
            if (d.allowed) {
              const int64_t exp = s.expires_at_ms(cold);
              insert(shard, key, Entry{std::move(cold), exp}, now);
            }
            return d;
          }
          State* state = std::get_if<State>(&e->state);
          if (state == nullptr) return wrong_type(S::kName, *e);
          const Decision d = s.check(*state, now, cost);
          if (d.allowed) e->expires_at_ms = s.expires_at_ms(*state);
          return d;
        },
        strategy);
  }

  absl::StatusOr<Decision> step_peek(const AnyStrategy& strategy,
                                     std::string_view key, int64_t now_ms) {
    return read<Decision>(
        strategy, key, now_ms,
        [&](const auto& s, auto& st, int64_t now) { return s.peek(st, now); });
  }

  absl::StatusOr<Forecast> step_forecast(const AnyStrategy& strategy,
                                         std::string_view key, int64_t now_ms,
                                         double cost) {
    return read<Forecast>(strategy, key, now_ms,
                          [&](const auto& s, auto& st, int64_t now) {
                            return s.forecast(st, now, cost);
                          });
  }

  void step_reset(std::string_view key) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    auto it = shard.map.find(av(key));
    if (it != shard.map.end()) shard.map.erase(it);
  }

  absl::StatusOr<LeaseGrant> step_lease(const LeaseBudget& budget,
                                        std::string_view key, int64_t want) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    const int64_t now = clock_->now_ms();
    Entry* e = live(shard, key, now);
    LeaseState* state = nullptr;
    if (e != nullptr) {
      state = std::get_if<LeaseState>(&e->state);
      if (state == nullptr) return wrong_type("lease", *e);
    }
    // A clock behind the stored window draws from that newer window.
    const int64_t start =
        std::max(budget.window_start(now),
                 state != nullptr ? state->start_ms
                                  : std::numeric_limits<int64_t>::min());
    int64_t used = 0;
    if (state != nullptr && state->start_ms == start) used = state->count;
    const int64_t granted = std::clamp<int64_t>(budget.limit() - used, 0, want);
    const int64_t end = start + budget.window_ms();
    if (granted > 0) {
      if (state == nullptr) {
        Entry& e =
            insert(shard, key, Entry{LeaseState{start, 0, {}}, end}, now);
        state = &std::get<LeaseState>(e.state);
      } else {
        e->expires_at_ms = end;
      }
      if (state->start_ms != start) *state = LeaseState{start, 0, {}};
      state->count = used + granted;
    }
    return LeaseGrant{granted,
                      std::max<int64_t>(0, budget.limit() - used - granted),
                      start, end, now};
  }

  absl::StatusOr<int64_t> step_give_back(const LeaseBudget& budget,
                                         std::string_view key,
                                         int64_t window_start_ms,
                                         int64_t credits,
                                         std::string_view token) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    const int64_t now = clock_->now_ms();
    Entry* e = live(shard, key, now);
    if (e == nullptr) return 0;
    LeaseState* state = std::get_if<LeaseState>(&e->state);
    if (state == nullptr) return wrong_type("lease", *e);
    // The current window (the stored one if the clock is behind it); the
    // credits of any other window are forfeited.
    const int64_t start = std::max(budget.window_start(now), state->start_ms);
    if (window_start_ms != start || state->start_ms != start) return 0;
    if (!token.empty()) {
      for (const std::string& t : state->tokens) {
        if (t == token) return 0;
      }
      state->tokens.emplace_back(token);
    }
    const int64_t back = std::min(credits, state->count);
    state->count -= back;
    return back;
  }

  // Federation (federation_core.h): the state expires with its window.
  absl::StatusOr<LeaseGrant> step_lease_windowed(const LeaseBudget& budget,
                                                 std::string_view key,
                                                 int64_t want, int64_t now_ms) {
    return window_step<FederationState, LeaseGrant>(
        key, now_ms, "federation", [&](FederationState& s, int64_t now) {
          return federation_lease(s, budget, want, now);
        });
  }

  // Regional escrow (escrow_core.h): the state expires with its window.
  absl::StatusOr<LeaseGrant> step_escrow_take(std::string_view key,
                                              int64_t want, int64_t now_ms) {
    return window_step<EscrowState, LeaseGrant>(
        key, now_ms, "escrow", [&](EscrowState& s, int64_t now) {
          return ::throttlekit::escrow_take(s, want, now);
        });
  }
  absl::StatusOr<int64_t> step_escrow_refill(std::string_view key,
                                             int64_t granted,
                                             int64_t window_start_ms,
                                             int64_t expires_at_ms,
                                             int64_t now_ms) {
    return window_step<EscrowState, int64_t>(
        key, now_ms, "escrow", [&](EscrowState& s, int64_t now) {
          return ::throttlekit::escrow_refill(s, granted, window_start_ms,
                                              expires_at_ms, now);
        });
  }
  absl::StatusOr<int64_t> step_escrow_release(std::string_view key,
                                              int64_t window_start_ms,
                                              int64_t now_ms) {
    return window_step<EscrowState, int64_t>(
        key, now_ms, "escrow", [&](EscrowState& s, int64_t now) {
          return ::throttlekit::escrow_release(s, window_start_ms, now);
        });
  }

  absl::StatusOr<int64_t> step_reconcile(
      const LeaseBudget& budget, std::string_view key, int64_t window_start_ms,
      int64_t leftover, std::string_view token, int64_t now_ms) {
    return window_step<FederationState, int64_t>(
        key, now_ms, "federation", [&](FederationState& s, int64_t now) {
          return federation_reconcile(s, budget, window_start_ms, leftover,
                                      token, now);
        });
  }

  // The node table lives as the key's state; it expires when the last
  // node's lease does (then a beat starts a fresh table).
  absl::StatusOr<HeartbeatGrant> step_heartbeat(std::string_view key,
                                                const HeartbeatReport& report,
                                                const HeartbeatOptions& options,
                                                int64_t now_ms) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    const int64_t now = now_ms != 0 ? now_ms : clock_->now_ms();
    Entry* e = live(shard, key, now);
    if (e == nullptr) {
      e = &insert(shard, key, Entry{HeartbeatTable{}, now}, now);
    }
    HeartbeatTable* table = std::get_if<HeartbeatTable>(&e->state);
    if (table == nullptr) return wrong_type("heartbeat", *e);
    absl::StatusOr<HeartbeatGrant> grant =
        heartbeat_step(table->nodes, report, now, options);
    int64_t last = now;
    for (const HeartbeatNode& n : table->nodes) {
      last = std::max(last, n.expires_at_ms);
    }
    e->expires_at_ms = last;
    return grant;
  }

  absl::StatusOr<std::vector<HeartbeatNode>> step_heartbeat_nodes(
      std::string_view key) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    Entry* e = live(shard, key, clock_->now_ms());
    if (e == nullptr) return std::vector<HeartbeatNode>{};
    const HeartbeatTable* table = std::get_if<HeartbeatTable>(&e->state);
    if (table == nullptr) return wrong_type("heartbeat", *e);
    return table->nodes;
  }

  struct LeaseState {
    int64_t start_ms = 0;
    int64_t count = 0;
    std::vector<std::string> tokens;  // give-back tokens seen this window
  };
  // One key's distributed-concurrency nodes (heartbeat_core.h).
  struct HeartbeatTable {
    std::vector<HeartbeatNode> nodes;
  };
  using StateVariant =
      std::variant<Gcra::State, TokenBucket::State, FixedWindow::State,
                   SlidingWindow::State, SlidingLog::State, Quota::State,
                   TokenBudget::State, LeaseState, HeartbeatTable,
                   FederationState, EscrowState>;
  struct Entry {
    StateVariant state;
    int64_t expires_at_ms = 0;
  };
  // A `Mutex` (a std::mutex ThreadSanitizer sees, annotated for clang's
  // thread safety analysis) rather than absl::Mutex, which the
  // distribution's abseil does not build for ThreadSanitizer.
  using Map = detail::ShardedMap<Entry, Mutex>;
  using Shard = Map::Shard;

  MemoryCoordinator(const MemoryCoordinatorOptions& options,
                    std::shared_ptr<const Clock> clock)
      : ttl_slack_ms_(options.ttl_slack_ms),
        clock_(std::move(clock)),
        map_(static_cast<size_t>(options.max_keys)) {}

  int64_t resolve(int64_t now_ms) const noexcept {
    return now_ms == 0 ? clock_->now_ms() : now_ms;
  }

  // Debian's abseil has its own string_view type.
  static absl::string_view av(std::string_view key) noexcept {
    return absl::string_view(key.data(), key.size());
  }

  Shard& shard_for(std::string_view key) { return map_.shard(av(key)); }

  // now >= expires_at + slack, without overflow.
  bool expired(const Entry& e, int64_t now) const noexcept {
    return e.expires_at_ms <= now - ttl_slack_ms_;
  }

  // `fn(strategy, state, now)` on the key's live state (cold if absent or
  // expired) under the shard lock, writing nothing, with `now_ms` resolved
  // under that lock; kFailedPrecondition if the key holds another
  // strategy's state.
  template <class R, class Fn>
  absl::StatusOr<R> read(const AnyStrategy& strategy, std::string_view key,
                         int64_t now_ms, Fn fn) {
    return std::visit(
        [&](const auto& s) -> absl::StatusOr<R> {
          using S = std::decay_t<decltype(s)>;
          using State = typename S::State;
          Shard& shard = shard_for(key);
          MutexLock lock(shard.mu);
          const int64_t now = resolve(now_ms);
          const Entry* e = live(shard, key, now, Expired::kKeep);
          if (e == nullptr) {
            const State cold{};
            return fn(s, cold, now);
          }
          const State* state = std::get_if<State>(&e->state);
          if (state == nullptr) return wrong_type(S::kName, *e);
          return fn(s, *state, now);
        },
        strategy);
  }

  // `step(state, now)` on `key`'s state of a windowed kind (federation,
  // escrow: a `State` with `expires_at_ms`, 0 when cold), cold if absent,
  // under the shard lock; `kind` names it in a wrong-type error. The entry
  // is stored while the state is not cold, lives as long as its window
  // (`expires_at_ms`), and is dropped when the step leaves it cold.
  template <class State, class R, class Step>
  absl::StatusOr<R> window_step(std::string_view key, int64_t now_ms,
                                std::string_view kind, Step step) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    const int64_t now = resolve(now_ms);
    Entry* e = live(shard, key, now);
    State cold;
    State* state = &cold;
    if (e != nullptr) {
      state = std::get_if<State>(&e->state);
      if (state == nullptr) return wrong_type(kind, *e);
    }
    R out = step(*state, now);
    if (e == nullptr && cold.expires_at_ms != 0) {
      e = &insert(shard, key, Entry{std::move(cold), 0}, now);
      state = &std::get<State>(e->state);
    }
    if (e != nullptr) {
      if (state->expires_at_ms == 0) {
        shard.map.erase(av(key));
      } else {
        e->expires_at_ms = state->expires_at_ms;
      }
    }
    return out;
  }

  // The entry of `key` unless absent or expired. Writers (`kDrop`) erase an
  // expired entry, as a store's physical TTL would; readers leave it.
  enum class Expired { kKeep, kDrop };
  Entry* live(Shard& shard, std::string_view key, int64_t now,
              Expired expired_entry = Expired::kDrop) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    auto it = shard.map.find(av(key));
    if (it == shard.map.end()) return nullptr;
    if (expired(it->second, now)) {
      if (expired_entry == Expired::kDrop) shard.map.erase(it);
      return nullptr;
    }
    return &it->second;
  }

  // Stores `entry` for `key` (absent or expired), first making room in a
  // full shard.
  Entry& insert(Shard& shard, std::string_view key, Entry entry, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    auto stale = shard.map.find(av(key));
    if (stale != shard.map.end()) {
      stale->second = std::move(entry);
      return stale->second;
    }
    // Expired (dropped by `live`) at expires_at + slack <= now.
    const int64_t dead_at = now - ttl_slack_ms_;
    return *map_.insert_new(shard, av(key), std::move(entry),
                            [dead_at](Map::Map& m) {
                              Map::evict_soonest_expiring(
                                  m, dead_at, [](const Entry& e) {
                                    return e.expires_at_ms;
                                  });
                            })
                .first;
  }

  static absl::Status wrong_type(std::string_view asked, const Entry& e) {
    static constexpr std::array<std::string_view, 11> kNames = {
        Gcra::kName,
        TokenBucket::kName,
        FixedWindow::kName,
        SlidingWindow::kName,
        SlidingLog::kName,
        Quota::kName,
        TokenBudget::kName,
        "lease",
        "heartbeat",
        "federation",
        "escrow"};
    return absl::FailedPreconditionError(
        absl::StrCat("key holds ", av(kNames[e.state.index()]),
                     " state; asked for ", av(asked)));
  }

  const int64_t ttl_slack_ms_;
  const std::shared_ptr<const Clock> clock_;
  Map map_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_MEMORY_COORDINATOR_H_
