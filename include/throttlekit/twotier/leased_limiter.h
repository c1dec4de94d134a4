// throttlekit/twotier/leased_limiter.h
//
// Provides `LeasedLimiter` (`BasicLeasedLimiter<C>` for another clock), a
// `RateEngine` (core/rate_engine.h): the leased mode of the two-tier engine
// (docs/twotier.md, "Leased mode"). Each node leases a batch of credits for
// a key from a shared fixed-window budget through a `Coordinator`
// (`Coordinator::lease`, the window read on the store's clock) and spends
// them locally with a `LeaseSpender`: about one store round trip per `batch`
// admissions.
//
//     auto limiter = LeasedLimiter::create(
//         {.limit = 1000, .window_ms = 1000, .batch = 50}, redis);
//     absl::StatusOr<Decision> d = limiter->check("tenant:7");
//
// Per check: spend locally (one probe of a sharded table and one spend
// under the shard's spin lock, as an in-memory GCRA check: no round trip,
// no allocation); on a shortfall (the miss path) take the key's lease lock
// for a moment and spend again (a refill may have landed), else join the
// key's waiters: at most one lease is in flight per key on this node, and
// its grant is deposited and spent by its waiters in arrival order in one
// step under the table's lock, so no concurrent hit takes what a waiter
// waited for. The first waiter leases `max(batch, ceil(cost))`; waiters the
// grant could not serve while the window still has credits lease again,
// for `max(batch, their demand)` (capped at `limit`). When the window has
// nothing left the store's answer is returned as a denial
// (`retry_after_ms` until the window's end); the node never invents one.
//
// Without waiting (docs/async.md): `check_async` / `check_at_async` answer
// a local hit, a spent-window denial and bad input inline (no allocation);
// a miss is answered from the grant, on the thread that delivered it (the
// coordinator's I/O thread), outside every lock. The blocking `check` is the
// same path, waiting on a `CompletionLatch` (core/completion_latch.h) only
// when a lease is really in flight. A waiter is answered within the lease
// deadline of the coordinator, twice that if the grant in flight when it
// arrived did not cover it.
// A grant that leaves the window empty marks the key spent until the
// window's end (`detail::SpentMark`, twotier/internal/spent_mark.h): later
// shortfalls are denied without a round trip or the lease lock, except that
// one of them per `spent_recheck_ms` leases again, so credits given back to
// the window later (another node's idle return or close, a reconcile) are
// seen within that interval.
//
// Bounds (docs/semantics.md, "Leasing and the fleet"): window-coupled
// (default) credits die at the end of the window that granted them, so a
// fleet of any size admits at most `limit` per window; with carried credits
// (`window_coupled = false`) at most `limit + N * (batch - 1)` for N nodes.
// Window boundaries come from the store's clock and checks use this node's
// clock: a node whose clock runs behind the store's spends a rolled
// window's credits for the length of the skew.
//
// Opt-ins:
// - `low_water > 0`: once a spend leaves a key at or below `low_water`
//   credits, a background refill leases the next batch, so requests rarely
//   wait on the network. Still one lease in flight per key. The bound
//   loosens for carried credits to `limit + N * (batch + low_water)` (a
//   node can carry a fresh batch on top of its low-water reserve);
//   window-coupled credits still hold `limit`.
// - `return_idle_after_ms > 0`: a key whose credits have not been spent for
//   that long is dropped and its live credits given back to their window
//   for other nodes.
// - `sizing`: kEoq learns each key's batch online (`LeaseSizer`, fed each
//   window's served demand); kPredictive mixes a caller-supplied demand
//   forecast with it (`PredictiveLeaseSizer`). `batch` is then the first
//   batch. Safety never depends on the sizer.
// Both opt-ins run on one worker thread the limiter owns (started only
// when one is on, unless `background_worker = false`, in which case the
// caller drives them with `run_maintenance()`); `close()` stops it.
//
// Keys: at most `max_keys` per node; a full shard drops a key holding no
// live credits if it finds one, else one holding the fewest (its unspent
// credits are stranded for the rest of their window: under-use, never
// over-admission). `close()` gives every live credit back to its window.
//
// Locking (outermost first; a thread never takes an earlier lock while
// holding a later one, except by try_lock); no lock is held across a round
// trip or a completion:
// 1. `Entry::lease_mu`, one per key (a `Mutex`, core/mutex.h): guards the
//    key's in-flight flag and waiters (one lease in flight per key on this
//    node), its sizer and window accounting (every field of `Entry` is
//    ABSL_GUARDED_BY it, so clang checks each access).
// 2. A shard's `mu` in `entries_` (a `detail::ShardedMap`,
//    store/internal/sharded_map.h), the entry map's spin lock: held for one
//    probe, insert or eviction of an `Entry`, never across a call out.
// 3. The credit table's shard spin lock (inside `credits_`, a
//    `MemoryStore`): held for one spend, deposit or read of a key's
//    credits. The hit path takes only this one.
// `worker_mu_` (a `Mutex`, core/mutex.h) guards the refill queue and the
// stop flag only; it is released before any refill runs. `drain_mu_`
// guards the count of leases in flight, which `close()` and the destructor
// wait to reach 0 (each within the coordinator's deadline): do not destroy
// a limiter from one of its own completions.
// try_lock is used twice: `evict_one` holds a map shard (2) and try-locks a
// victim's lease lock (1), the one place the order is inverted, safe
// because it never waits (a key with a lease in flight is skipped);
// `return_idle` try-locks a key's lease lock so that idle returns never
// wait; both skip a key with a lease in flight.
//
// Thread-safety: every method is safe to call concurrently. The
// coordinator must outlive the limiter.
//
// Why one header of over 800 lines: the class's hit path, miss path, grant
// handling and maintenance share the one lock discipline above (each
// key's lease lock around its waiters, the credit table's shard locks
// inside it), which a reader checks in one place. What stands alone lives
// apart: the options and their validation (leased_limiter_options.h), a
// key's lease state (internal/lease_entry.h), the credit table
// (internal/local_credits.h), the spent-window gate (internal/spent_mark.h)
// and where credits come from (internal/credit_source.h).

#ifndef THROTTLEKIT_TWOTIER_LEASED_LIMITER_H_
#define THROTTLEKIT_TWOTIER_LEASED_LIMITER_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/completion_latch.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/core/spin_lock.h"
#include "throttlekit/store/internal/sharded_map.h"
#include "throttlekit/store/memory_store.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/twotier/internal/credit_source.h"
#include "throttlekit/twotier/internal/give_back_tokens.h"
#include "throttlekit/twotier/internal/lease_entry.h"
#include "throttlekit/twotier/internal/local_credits.h"
#include "throttlekit/twotier/internal/spent_mark.h"
#include "throttlekit/twotier/lease_sizer.h"
#include "throttlekit/twotier/lease_spender.h"
#include "throttlekit/twotier/leased_limiter_options.h"
#include "throttlekit/twotier/predictive_lease_sizer.h"

namespace throttlekit {

template <EpochClock C>
class BasicFederatedLimiter;

template <EpochClock C = SystemClock>
class BasicLeasedLimiter {
 public:
  struct Stats {
    int64_t leases = 0;              // lease round trips
    int64_t leased_credits = 0;      // credits granted to this node
    int64_t denials = 0;             // the store's denials passed on
    int64_t outages = 0;             // outages decided by the fail policy
    int64_t background_refills = 0;  // low-water leases
    int64_t idle_returns = 0;        // keys dropped for idleness
    int64_t returned_credits = 0;    // credits given back (idle, close)
    // Denials of a window the store said was spent, without a round trip.
    int64_t spent_denials = 0;
    // Leases of a window marked spent (at most one per `spent_recheck_ms`
    // per key), counted in `leases` too.
    int64_t spent_rechecks = 0;
  };

  // Validates `options`; errors name the field and its bound.
  static absl::StatusOr<std::unique_ptr<BasicLeasedLimiter>> create(
      LeasedLimiterOptions options, std::shared_ptr<Coordinator> coordinator,
      C clock = C{}) {
    if (coordinator == nullptr) {
      return absl::InvalidArgumentError("leased_limiter: coordinator is null");
    }
    absl::StatusOr<LeaseBudget> budget =
        LeaseBudget::create({options.limit, options.window_ms});
    if (!budget.ok()) return budget.status();
    auto source = std::make_shared<detail::CoordinatorCreditSource>(
        std::move(coordinator), *budget, options.prefix);
    return create_on(std::move(options), std::move(source), std::move(clock));
  }

  // Waits for the leases in flight (their waiters are answered first).
  ~BasicLeasedLimiter() {
    stop_worker();
    drain();
  }

  // Admits or denies `cost` units for `key` now (this node's clock).
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return check_at(key, clock_.now_ms(), cost);
  }

 private:
  template <EpochClock>
  friend class BasicFederatedLimiter;

  // `create` over any credit source (federation's, federated_limiter.h).
  static absl::StatusOr<std::unique_ptr<BasicLeasedLimiter>> create_on(
      LeasedLimiterOptions options,
      std::shared_ptr<detail::CreditSource> source, C clock) {
    absl::StatusOr<LeaseBudget> budget = resolve(options);
    if (!budget.ok()) return budget.status();
    return std::unique_ptr<BasicLeasedLimiter>(new BasicLeasedLimiter(
        std::move(options), *budget, std::move(source), std::move(clock)));
  }

 public:
  // As `check`, at a caller-supplied epoch-ms `now_ms`.
  THROTTLEKIT_ALWAYS_INLINE absl::StatusOr<Decision> check_at(
      std::string_view key, int64_t now_ms, double cost = 1) {
    if (!is_valid_key(key) || !is_valid_cost(cost)) [[unlikely]] {
      if (absl::Status s = validate_key(key); !s.ok()) return s;
      return validate_cost(cost);
    }
    // The hit path: one probe and one spend under a table shard's spin lock.
    // The decision is built in the returned StatusOr, not copied into it.
    absl::StatusOr<Decision> d = credits_->check(key, now_ms, cost);
    if (d->allowed) [[likely]] {
      if (d->remaining > refill_at_) [[likely]]
        return d;
      queue_refill(key, now_ms);
      return d;
    }
    return lease_and_spend(key, now_ms, cost);
  }

  // As `check`, without waiting for the store: `on_done` runs exactly once
  // with what `check` would return (core/completion.h); inline, with no
  // allocation, for a local hit, a spent-window denial and bad input.
  template <DecisionCallback F>
  void check_async(std::string_view key, double cost, F&& on_done) {
    check_at_async(key, clock_.now_ms(), cost, std::forward<F>(on_done));
  }
  template <DecisionCallback F>
  void check_async(std::string_view key, F&& on_done) {
    check_at_async(key, clock_.now_ms(), 1, std::forward<F>(on_done));
  }
  // As `check_at`, without waiting for the store.
  template <DecisionCallback F>
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      F&& on_done) {
    if (!is_valid_key(key) || !is_valid_cost(cost)) [[unlikely]] {
      absl::Status s = validate_key(key);
      if (s.ok()) s = validate_cost(cost);
      std::forward<F>(on_done)(absl::StatusOr<Decision>(std::move(s)));
      return;
    }
    absl::StatusOr<Decision> d = credits_->check(key, now_ms, cost);
    if (d->allowed) [[likely]] {
      if (d->remaining <= refill_at_) [[unlikely]]
        queue_refill(key, now_ms);
      std::forward<F>(on_done)(std::move(d));
      return;
    }
    miss(key, now_ms, cost, DecisionCompletion(std::forward<F>(on_done)));
  }
  // `co_await limiter->async_check(key)` (core/check_awaitable.h).
  CheckAwaitable<BasicLeasedLimiter> async_check(std::string_view key,
                                                 double cost = 1) {
    return CheckAwaitable<BasicLeasedLimiter>(*this, key, cost);
  }

  // Checks every key at one `now` of this node's clock, each independently
  // (a denial of one does not undo the others); `out.size()` must equal
  // `keys.size()`. On an invalid key or cost nothing is checked.
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    const int64_t now = clock_.now_ms();
    return check_each(keys, out, cost, [&](std::string_view key) {
      return check_at(key, now, cost);
    });
  }
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    return check_many_vector(*this, keys, cost);
  }
  // `check_many` without waiting: every key checked at one `now` of this
  // node's clock with `check_at_async` (hits inline, misses joining their
  // keys' leases), and `on_done` run once, from the last answer, with the
  // decisions in key order, or with the first error in key order. Unlike
  // `check_many`, which stops at an error, the other keys were all
  // checked and may have spent. An invalid key or cost completes inline,
  // with nothing checked. Thread-safe; the keys need not outlive the call.
  void check_many_async(std::span<const std::string_view> keys, double cost,
                        Completion<std::vector<Decision>> on_done) {
    if (batch_settled_inline(keys, cost, on_done)) return;
    const int64_t now = clock_.now_ms();
    gather_each_async(
        keys.size(), std::move(on_done), [&](size_t i, auto on_answer) {
          check_at_async(keys[i], now, cost, std::move(on_answer));
        });
  }

  // kUnimplemented: a leased admission depends on credits the store has
  // not granted this node yet, and finding out would lease them. What this
  // node holds is `credits(key)`.
  absl::StatusOr<Decision> peek(std::string_view key) const {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return unimplemented_verb(
        "leased_limiter", "peek",
        "a leased decision depends on credits the store has not granted "
        "yet; credits(key) is what this node holds");
  }

  // kUnimplemented, for the reason `peek` gives.
  absl::StatusOr<Forecast> forecast(std::string_view key,
                                    double cost = 1) const {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (absl::Status s = validate_cost(cost); !s.ok()) return s;
    return unimplemented_verb(
        "leased_limiter", "forecast",
        "when credits free up depends on every node's spending, which no "
        "one node sees");
  }

  // Forgets `key`: drops the credits this node holds for it and resets the
  // store's budget key (its window count starts again from 0). Credits
  // other nodes already hold stay theirs until their window ends.
  absl::Status reset(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    credits_->update(key, clock_.now_ms(), [](CreditState& s) {
      s.credits = 0;
      return 0;
    });
    if (std::shared_ptr<Entry> e = find_entry(key); e != nullptr) {
      MutexLock lock(e->lease_mu);
      e->spent.clear();
    }
    return source_->reset(key);
  }

  // Runs what the background worker would: pending low-water refills, then
  // (with `return_idle_after_ms`) gives back the credits of keys idle at
  // the limiter's clock. For `background_worker = false`; safe to call
  // concurrently with everything (and with the worker).
  void run_maintenance() {
    std::deque<std::string> work;
    {
      MutexLock lock(worker_mu_);
      work.swap(refills_);
    }
    for (const std::string& key : work) refill_in_background(key);
    if (idle_ms_ > 0) return_idle(clock_.now_ms());
  }

  // Stops the worker and gives every live credit back to the window it
  // came from (idempotent per key and window). Returns the first error;
  // keeps going after one. The limiter still answers afterwards, leasing
  // on demand, with no background work.
  absl::Status close() {
    stop_worker();
    drain();
    absl::Status first = absl::OkStatus();
    for (auto& [key, e] : all_entries()) {
      MutexLock lease_lock(e->lease_mu);
      if (absl::Status s = give_back(key, "close"); !s.ok() && first.ok()) {
        first = s;
      }
    }
    return first;
  }

  Stats stats() const {
    return Stats{leases_.load(std::memory_order_relaxed),
                 leased_credits_.load(std::memory_order_relaxed),
                 denials_.load(std::memory_order_relaxed),
                 outages_.load(std::memory_order_relaxed),
                 background_refills_.load(std::memory_order_relaxed),
                 idle_returns_.load(std::memory_order_relaxed),
                 returned_credits_.load(std::memory_order_relaxed),
                 spent_denials_.load(std::memory_order_relaxed),
                 spent_rechecks_.load(std::memory_order_relaxed)};
  }
  const LeasedLimiterOptions& options() const noexcept { return options_; }
  // The spent-window recheck interval in force (`spent_recheck_ms` or its
  // default; 0: never).
  int64_t spent_recheck_ms() const noexcept { return spent_recheck_ms_; }

  // The credits `key` holds on this node now (window-coupled credits of a
  // rolled window count 0).
  double credits(std::string_view key) const {
    const int64_t now = clock_.now_ms();
    return credits_->read(key, [&](const detail::LocalCredits::State& s) {
      return credits_->strategy().live_credits(s, now);
    });
  }

  // The batch the next lease of `key` will ask for (the fixed batch, or
  // the key's learner's current choice). For observability and tests.
  int64_t batch_for(std::string_view key) {
    std::shared_ptr<Entry> e = find_entry(key);
    if (e == nullptr) return options_.batch;
    MutexLock lock(e->lease_mu);
    return e->next_batch(options_.batch);
  }

 private:
  using Credits = MemoryStore<detail::LocalCredits>;
  using CreditState = detail::LocalCredits::State;

  using Waiter = detail::LeaseWaiter;
  using Entry = detail::LeaseEntry;
  // A SpinLock (atomics, so ThreadSanitizer sees it; Debian's abseil is not
  // built for it): held for one probe, an insert or an eviction.
  using EntryMap = detail::ShardedMap<std::shared_ptr<Entry>, SpinLock>;
  using Shard = typename EntryMap::Shard;
  using EntryTable = typename EntryMap::Map;

  BasicLeasedLimiter(LeasedLimiterOptions options, LeaseBudget budget,
                     std::shared_ptr<detail::CreditSource> source, C clock)
      : options_(std::move(options)),
        budget_(budget),
        source_(std::move(source)),
        clock_(std::move(clock)),
        credits_(*Credits::create(
            *detail::LocalCredits::create(
                {options_.limit, options_.window_coupled, options_.window_ms}),
            {.max_keys = static_cast<size_t>(options_.max_keys)})),
        refill_at_(options_.low_water > 0 ? options_.low_water : -1),
        idle_ms_(options_.return_idle_after_ms),
        spent_recheck_ms_(options_.spent_recheck_ms.value_or(
            std::max<int64_t>(1, options_.window_ms / 8))) {
    if (options_.background_worker && (refill_at_ > 0 || idle_ms_ > 0)) {
      worker_ = std::thread([this] { work(); });
    }
  }

  Shard& shard_for(absl::string_view key) { return entries_.shard(key); }

  std::shared_ptr<Entry> find_entry(std::string_view key) {
    const absl::string_view k(key.data(), key.size());
    Shard& shard = shard_for(k);
    SpinLockHolder lock(shard.mu);
    auto it = shard.map.find(k);
    return it == shard.map.end() ? nullptr : it->second;
  }

  // The key's entry, created (making room in a full shard) if absent.
  std::shared_ptr<Entry> entry_for(std::string_view key) {
    const absl::string_view k(key.data(), key.size());
    Shard& shard = shard_for(k);
    SpinLockHolder lock(shard.mu);
    auto it = shard.map.find(k);
    if (it != shard.map.end()) return it->second;
    auto e = std::make_shared<Entry>(options_);
    entries_.insert_new(shard, k, e, [](EntryTable& m) { evict_one(m); });
    return e;
  }

  // Drops an entry without a lease in flight (its credits stay in the
  // table; only its sizer's memory is lost). Only when every entry of the
  // shard has a lease in flight (a shard bound below the number of keys in
  // flight) is a busy one dropped: its grant still serves its waiters, and
  // its key may then see a second lease in flight.
  // Called with the shard's lock held (by `insert_new`).
  static void evict_one(EntryTable& map) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      Entry& e = *it->second;
      if (e.lease_mu.try_lock()) {
        const bool busy = e.in_flight;
        if (!busy) e.retired = true;
        e.lease_mu.unlock();
        if (busy) continue;
        map.erase(it);
        return;
      }
    }
    map.erase(map.begin());
  }

  std::vector<std::pair<std::string, std::shared_ptr<Entry>>> all_entries() {
    std::vector<std::pair<std::string, std::shared_ptr<Entry>>> out;
    entries_.for_each_shard([&out](const EntryTable& m) {
      out.insert(out.end(), m.begin(), m.end());
    });
    return out;
  }

  // The blocking miss path (out of line: the hit path stays small): the
  // asynchronous one, waited for. A blocking caller that starts its key's
  // lease makes the round trip itself (`Transport::kCaller`: no hop to
  // the coordinator's I/O thread and back) and hands the grant to the same
  // `on_grant`, which answers every waiter, its own first.
  THROTTLEKIT_NOINLINE absl::StatusOr<Decision> lease_and_spend(
      std::string_view key, int64_t now_ms, double cost) {
    CompletionLatch<Decision> latch;
    miss(key, now_ms, cost, latch.completion(), Transport::kCaller);
    return latch.wait();
  }

  // How a lease travels: issued without waiting (`take_async`), or made by
  // the calling thread, which waits for it anyway (`take`).
  enum class Transport { kAsync, kCaller };

  // The miss path: spends under the key's lease lock if a refill landed;
  // denies a window marked spent; else joins the key's waiters, starting
  // its lease if none is in flight. `done` runs outside every lock.
  void miss(std::string_view key, int64_t now_ms, double cost,
            DecisionCompletion done, Transport transport = Transport::kAsync) {
    std::shared_ptr<Entry> entry = entry_for(key);
    // The window's last grant left the store with nothing: deny until the
    // window ends without a round trip (nor the lease lock), except for the
    // one call per `spent_recheck_ms` that asks again.
    detail::SpentMark::Verdict gate = entry->spent.gate(now_ms);
    if (gate.gate == detail::SpentMark::Gate::kDeny) {
      std::move(done)(spent_denial(key, now_ms, gate.until_ms));
      return;
    }
    std::optional<Decision> answer;
    int64_t want = 0;
    bool paced = false;
    {
      entry->lease_mu.lock();
      // A retired entry was dropped from the map while this call waited:
      // start over on the key's current one.
      while (entry->retired) {
        entry->lease_mu.unlock();
        entry = entry_for(key);
        entry->lease_mu.lock();
      }
      MutexLock lock(entry->lease_mu, std::adopt_lock);
      // A grant (or a background refill) may have landed meanwhile.
      if (Decision d = credits_->check(key, now_ms, cost); d.allowed) {
        answer = d;
      } else if (entry->in_flight) {
        // The grant in flight serves this call, or leases again for it.
        entry->waiters.push_back(Waiter{now_ms, cost, std::move(done)});
        return;
      } else {
        // Or learnt the window is spent: gate again, unless this call holds
        // the interval's recheck.
        if (gate.gate != detail::SpentMark::Gate::kRecheck) {
          gate = entry->spent.gate(now_ms);
        }
        if (gate.gate == detail::SpentMark::Gate::kDeny) {
          answer = spent_denial(key, now_ms, gate.until_ms);
        } else {
          if (gate.gate == detail::SpentMark::Gate::kRecheck) {
            spent_rechecks_.fetch_add(1, std::memory_order_relaxed);
          }
          want = std::max<int64_t>(entry->next_batch(options_.batch),
                                   static_cast<int64_t>(std::ceil(cost)));
          if (options_.size_to_window_end) {
            want = sized_to_window_end(*entry, key, now_ms, want, cost, &paced);
          }
          entry->in_flight = true;
          entry->waiters.push_back(Waiter{now_ms, cost, std::move(done)});
        }
      }
    }
    if (answer.has_value()) {
      std::move(done)(*answer);
      return;
    }
    start_lease(std::move(entry), key, want, paced, /*background=*/false,
                transport);
  }

  // The denial of a shortfall in a window marked spent (ending at
  // `until_ms`): the store's last answer, repeated without a round trip.
  Decision spent_denial(std::string_view key, int64_t now_ms,
                        int64_t until_ms) {
    spent_denials_.fetch_add(1, std::memory_order_relaxed);
    denials_.fetch_add(1, std::memory_order_relaxed);
    const double held = credits_->read(key, [&](const CreditState& s) {
      return credits_->strategy().live_credits(s, now_ms);
    });
    return Decision{false, options_.limit,
                    static_cast<int64_t>(std::floor(held)), until_ms,
                    std::max<int64_t>(1, until_ms - now_ms)};
  }

  // Issues the key's lease (its `in_flight` already set); the grant is
  // handled by `on_grant` on the thread that delivers it.
  void start_lease(std::shared_ptr<Entry> entry, std::string_view key,
                   int64_t want, bool paced, bool background,
                   Transport transport = Transport::kAsync) {
    {
      MutexLock lock(drain_mu_);
      ++leases_in_flight_;
    }
    if (transport == Transport::kCaller) {
      on_grant(std::move(entry), key, source_->take(key, want, paced),
               background);
      lease_done();
      return;
    }
    source_->take_async(key, want, paced,
                        [this, entry = std::move(entry), k = std::string(key),
                         background](absl::StatusOr<LeaseGrant> grant) mutable {
                          on_grant(std::move(entry), k, std::move(grant),
                                   background);
                          lease_done();
                        });
  }

  // A lease started by `start_lease` has been handled.
  void lease_done() {
    MutexLock lock(drain_mu_);
    if (--leases_in_flight_ == 0) drain_cv_.notify_all();
  }

  // A queued refill that will not run (or failed): the next low-water
  // spend may queue one again.
  void clear_refill_queued(std::string_view key) {
    credits_->update(key, clock_.now_ms(), [](CreditState& s) {
      s.refill_queued = false;
      return 0;
    });
  }

  // Waits until no lease is in flight.
  void drain() {
    MutexLock lock(drain_mu_);
    NativeWait native(drain_mu_);
    drain_cv_.wait(native.lock(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return leases_in_flight_ == 0;
    });
  }

  // A lease's answer: deposits the grant and spends each waiter's cost
  // from it, in order, in one step under the table's lock; answers the
  // served, denies the rest when the window is spent, else leases again
  // for them. An outage is each waiter's fail policy. Completions run after
  // the lease lock is released.
  void on_grant(std::shared_ptr<Entry> entry, std::string_view key,
                absl::StatusOr<LeaseGrant> grant, bool background) {
    std::vector<Waiter> waiters;
    std::vector<absl::StatusOr<Decision>> answers;
    std::vector<bool> kept;  // waiting for the next lease
    int64_t again = 0;       // the next lease's want (0: none)
    // The next lease follows a grant the key spent in this window: a pace
    // (a source that pools may lease ahead for its peers), not a window's
    // first lease.
    bool paced_again = false;
    {
      MutexLock lock(entry->lease_mu);
      waiters.swap(entry->waiters);
      answers.resize(waiters.size(), absl::UnknownError("not served"));
      if (!grant.ok()) {
        entry->in_flight = false;
        clear_refill_queued(key);
        for (size_t i = 0; i < waiters.size(); ++i) {
          answers[i] = fail(grant.status(), waiters[i].now_ms);
        }
      } else {
        std::vector<bool> served(waiters.size(), false);
        deposit(*entry, key, *grant, waiters, answers, served);
        if (background) {
          background_refills_.fetch_add(1, std::memory_order_relaxed);
        }
        // The waiters the grant fell short for, in order: denied if the
        // window is spent (the store's answer), else kept for one more
        // lease of their demand.
        double demand = 0;
        std::vector<Waiter> rest;
        kept.resize(waiters.size(), false);
        for (size_t i = 0; i < waiters.size(); ++i) {
          if (served[i]) continue;
          if (grant->window_remaining == 0) {
            denials_.fetch_add(1, std::memory_order_relaxed);
            answers[i] = Decision{
                false, options_.limit,
                static_cast<int64_t>(std::floor(
                    credits_->read(key,
                                   [&](const CreditState& s) {
                                     return credits_->strategy().live_credits(
                                         s, waiters[i].now_ms);
                                   }))),
                grant->expires_at_ms,
                std::max<int64_t>(1, grant->expires_at_ms - grant->now_ms)};
          } else {
            demand += waiters[i].cost;
            rest.push_back(std::move(waiters[i]));
            kept[i] = true;
          }
        }
        if (!rest.empty()) {
          paced_again = grant->granted > 0;
          again = std::max<int64_t>(
              entry->next_batch(options_.batch),
              static_cast<int64_t>(std::ceil(rest.front().cost)));
          again = std::max<int64_t>(
              again,
              static_cast<int64_t>(std::min(
                  std::ceil(demand), static_cast<double>(options_.limit))));
          entry->waiters = std::move(rest);
        } else {
          entry->in_flight = false;
        }
      }
    }
    for (size_t i = 0; i < waiters.size(); ++i) {
      if (i < kept.size() && kept[i]) continue;
      std::move(waiters[i].done)(std::move(answers[i]));
    }
    if (again > 0) {
      start_lease(std::move(entry), key, again, paced_again,
                  /*background=*/false);
    }
  }

  // Deposits `grant` into the key's credits and spends each waiter's cost
  // from them in order in the same step (`answers[i]`, `served[i]` for
  // those it covers), feeding the sizer when the grant opens a new window.
  void deposit(Entry& e, std::string_view key, const LeaseGrant& grant,
               std::vector<Waiter>& waiters,
               std::vector<absl::StatusOr<Decision>>& answers,
               std::vector<bool>& served)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(e.lease_mu) {
    leases_.fetch_add(1, std::memory_order_relaxed);
    leased_credits_.fetch_add(grant.granted, std::memory_order_relaxed);
    const int64_t at =
        waiters.empty() ? clock_.now_ms() : waiters.front().now_ms;
    const double before = credits_->update(key, at, [&](CreditState& s) {
      const double held = s.credits;
      s.credits = LeaseSpender::refill_rule(s.credits, s.expires_at_ms,
                                            options_.window_coupled, grant);
      s.expires_at_ms = grant.expires_at_ms;
      s.last_used_ms = at;
      s.refill_queued = false;
      for (size_t i = 0; i < waiters.size(); ++i) {
        Decision d =
            credits_->strategy().check(s, waiters[i].now_ms, waiters[i].cost);
        if (d.allowed) {
          answers[i] = d;
          served[i] = true;
        }
      }
      return held;
    });
    // Marked after the deposit, so a gate denying on it finds the grant;
    // its recheck interval counts from when the answer came (the store's
    // clock, or the latest waiter's if later), not from a waiter that may
    // have waited since an earlier window.
    if (grant.window_remaining == 0) {
      int64_t learnt = grant.now_ms;
      for (const Waiter& w : waiters) learnt = std::max(learnt, w.now_ms);
      e.spent.mark(grant.expires_at_ms, learnt, spent_recheck_ms_);
    } else {
      e.spent.clear();
    }
    e.account_grant(grant, before, options_, key);
  }

  // `want` capped at what the key's pace in this window will spend before
  // the window ends: the credits it spent since the window began (granted
  // less still held) over the time elapsed, times the time left; at a
  // window's first lease, at what it spent in the window just before;
  // never below `cost` (nor 1). `*paced` says whether the key has a pace in
  // this window.
  int64_t sized_to_window_end(const Entry& e, std::string_view key,
                              int64_t now_ms, int64_t want, double cost,
                              bool* paced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(e.lease_mu) {
    *paced = false;
    if (now_ms >= e.window_end_ms) {
      // A new window has no pace yet: the first lease asks for what the
      // key spent in the window just before (granted less left over), if
      // that was less than the batch.
      if (e.window_end_ms == std::numeric_limits<int64_t>::min() ||
          e.window_granted <= 0 ||
          now_ms >= e.window_end_ms + options_.window_ms) {
        return want;
      }
      const double left_over =
          credits_->read(key, [](const CreditState& s) { return s.credits; });
      const double served = static_cast<double>(e.window_granted) - left_over;
      const auto floor = static_cast<int64_t>(std::ceil(cost));
      return std::clamp<int64_t>(
          static_cast<int64_t>(std::min(std::ceil(std::max(served, 1.0)),
                                        static_cast<double>(want))),
          floor, std::max(floor, want));
    }
    const int64_t start = e.window_end_ms - options_.window_ms;
    const double held = credits(key);
    const double spent = static_cast<double>(e.window_granted) - held;
    const int64_t elapsed = now_ms - start;
    if (spent <= 0 || elapsed <= 0) return want;
    *paced = true;
    const double expect = std::ceil(
        spent * static_cast<double>(e.window_end_ms - now_ms) / elapsed);
    const auto floor = static_cast<int64_t>(std::ceil(cost));
    return std::clamp<int64_t>(
        static_cast<int64_t>(std::min(expect, static_cast<double>(want))),
        floor, std::max(floor, want));
  }

  // A spend left `key` at or below `low_water`: queue one refill unless
  // one is queued already.
  void queue_refill(std::string_view key, int64_t now_ms) {
    const bool first = credits_->update(key, now_ms, [](CreditState& s) {
      return !std::exchange(s.refill_queued, true);
    });
    if (!first) return;
    {
      MutexLock lock(worker_mu_);
      refills_.emplace_back(key);
    }
    worker_cv_.notify_one();
  }

  // A queued low-water refill: one lease of the batch, issued without
  // waiting, unless the key has one in flight or was refilled meanwhile.
  void refill_in_background(std::string_view key) {
    std::shared_ptr<Entry> entry = entry_for(key);
    int64_t want = 0;
    {
      MutexLock lock(entry->lease_mu);
      if (!entry->retired && !entry->in_flight &&
          credits(key) <= static_cast<double>(refill_at_)) {
        entry->in_flight = true;
        want = entry->next_batch(options_.batch);
      }
    }
    if (want == 0) {
      clear_refill_queued(key);
      return;
    }
    start_lease(std::move(entry), key, want, /*paced=*/false,
                /*background=*/true);
  }

  // Drops every key unspent since `now - return_idle_after_ms` whose lease
  // lock is free, giving its live credits back.
  void return_idle(int64_t now) {
    for (auto& [key, e] : all_entries()) {
      const int64_t last = credits_->read(
          key, [](const CreditState& s) { return s.last_used_ms; });
      if (now - last < idle_ms_ || !e->lease_mu.try_lock()) continue;
      MutexLock lock(e->lease_mu, std::adopt_lock);
      if (e->retired || e->in_flight) continue;
      {
        const absl::string_view k(key.data(), key.size());
        Shard& shard = shard_for(k);
        SpinLockHolder shard_lock(shard.mu);
        auto it = shard.map.find(k);
        if (it != shard.map.end() && it->second == e) shard.map.erase(it);
      }
      e->retired = true;
      idle_returns_.fetch_add(1, std::memory_order_relaxed);
      give_back(key, "idle").IgnoreError();
    }
  }

  // Takes `key`'s live credits and gives them back to their window.
  // Requires the key's lease lock.
  absl::Status give_back(std::string_view key, std::string_view why) {
    const int64_t now = clock_.now_ms();
    const auto [live, expires] =
        credits_->update(key, now, [&](CreditState& s) {
          const double l = credits_->strategy().live_credits(s, now);
          s.credits = 0;
          return std::pair{l, s.expires_at_ms};
        });
    const auto whole = static_cast<int64_t>(std::floor(live));
    if (whole <= 0) return absl::OkStatus();
    absl::StatusOr<int64_t> back = source_->give_back(
        key, expires - budget_.window_ms(), whole, tokens_.next(why));
    if (!back.ok()) return back.status();
    returned_credits_.fetch_add(*back, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // The worker: refills as they are queued; idle returns every quarter of
  // `return_idle_after_ms` (at least every ms).
  void work() {
    const auto period = std::chrono::milliseconds(
        idle_ms_ > 0 ? std::max<int64_t>(1, idle_ms_ / 4) : 1000);
    MutexLock lock(worker_mu_);
    while (!stop_) {
      worker_cv_.wait_for(lock, period,
                          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(worker_mu_) {
                            return stop_ || !refills_.empty();
                          });
      if (stop_) break;
      lock.unlock();
      run_maintenance();
      lock.lock();
    }
  }

  void stop_worker() {
    {
      MutexLock lock(worker_mu_);
      stop_ = true;
    }
    worker_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  absl::StatusOr<Decision> fail(const absl::Status& s, int64_t now_ms) {
    absl::StatusOr<Decision> decided =
        options_.fail_policy.on_error(s, options_.limit, now_ms);
    if (decided.ok()) outages_.fetch_add(1, std::memory_order_relaxed);
    return decided;
  }

  const LeasedLimiterOptions options_;
  const LeaseBudget budget_;
  // Where credits come from: the coordinator's lease (leased mode) or
  // federation's escrow and global lease.
  const std::shared_ptr<detail::CreditSource> source_;
  const C clock_;
  // Every key's credits: the hit path touches nothing else.
  const std::unique_ptr<Credits> credits_;
  // A spend leaving `remaining <= refill_at_` queues a refill (-1: off).
  const int64_t refill_at_;
  const int64_t idle_ms_;
  // `spent_recheck_ms` resolved (0: never).
  const int64_t spent_recheck_ms_;
  // Unique per give-back (idle, close).
  detail::GiveBackTokens tokens_;
  EntryMap entries_{static_cast<size_t>(options_.max_keys)};
  std::atomic<int64_t> leases_{0}, leased_credits_{0}, denials_{0}, outages_{0},
      background_refills_{0}, idle_returns_{0}, returned_credits_{0},
      spent_denials_{0}, spent_rechecks_{0};
  Mutex worker_mu_;
  std::condition_variable_any worker_cv_;
  std::deque<std::string> refills_ ABSL_GUARDED_BY(worker_mu_);
  bool stop_ ABSL_GUARDED_BY(worker_mu_) = false;
  Mutex drain_mu_;
  std::condition_variable drain_cv_;
  int64_t leases_in_flight_ ABSL_GUARDED_BY(drain_mu_) = 0;
  std::thread worker_;
};

// The LeasedLimiter on the system clock, the common case
// (`BasicLeasedLimiter<C>` takes another clock, e.g. a `ClockRef<ManualClock>`
// in tests).
using LeasedLimiter = BasicLeasedLimiter<SystemClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_LEASED_LIMITER_H_
