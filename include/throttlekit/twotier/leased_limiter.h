// throttlekit/twotier/leased_limiter.h
//
// Provides `LeasedLimiter`: the leased mode of the two-tier engine (seed
// 002, GALE). Each node leases a batch of credits for a key from a shared
// fixed-window budget through a `Coordinator` (`Coordinator::lease`, the
// window read on the store's clock) and spends them locally with a
// `LeaseSpender`: about one store round trip per `batch` admissions.
//
//     auto limiter = LeasedLimiter<>::create(
//         {.limit = 1000, .window_ms = 1000, .batch = 50}, redis);
//     absl::StatusOr<Decision> d = limiter->check("tenant:7");
//
// Per check: spend locally (no lock, no round trip); on a shortfall take the
// key's lease lock, spend again (a concurrent miss may have refilled: misses
// on one key share one lease, so a node never has two leases in flight for
// a key), else lease `max(batch, ceil(cost))` and spend from the grant. When
// the window has nothing left the store's answer is returned as a denial
// (`retry_after_ms` until the window's end); the node never invents one.
//
// Bounds (SEMANTICS.md, "Leasing and the fleet"): window-coupled (default)
// credits die at the end of the window that granted them, so a fleet of any
// size admits at most `limit` per window; with carried credits
// (`window_coupled = false`) at most `limit + N * (batch - 1)` for N nodes.
// Window boundaries come from the store's clock and checks use this node's
// clock: a node whose clock runs behind the store's spends a rolled
// window's credits for the length of the skew.
//
// Keys: at most `max_keys` per node; a full shard drops a key holding no
// live credits if it finds one, else one holding the fewest (its unspent
// credits are stranded for the rest of their window: under-use, never
// over-admission). `close()` gives every live credit back to its window.
//
// Thread-safety: every method is safe to call concurrently. The
// coordinator must outlive the limiter.

#ifndef THROTTLEKIT_TWOTIER_LEASED_LIMITER_H_
#define THROTTLEKIT_TWOTIER_LEASED_LIMITER_H_

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/spin_lock.h"
#include "throttlekit/twotier/lease_spender.h"

namespace throttlekit {

struct LeasedLimiterOptions {
  // Names the keyspace: store keys are `prefix:key`.
  std::string prefix;
  // The global budget: `limit` credits per `window_ms` (1 .. 2^53-1 each).
  int64_t limit = 0;
  int64_t window_ms = 0;
  // Credits per lease; 1 .. limit.
  int64_t batch = 100;
  // Credits die at their window's end (the `<= limit` bound).
  bool window_coupled = true;
  // Keys held per node; 16 .. 2^32.
  int64_t max_keys = int64_t{1} << 16;
  // What an outage becomes (see StrictRateLimiter).
  FailPolicy fail_policy = FailPolicy::kPropagate;
  int64_t fail_closed_retry_ms = 1000;
};

template <EpochClock C = SystemClock>
class LeasedLimiter {
 public:
  struct Stats {
    int64_t leases = 0;          // lease round trips
    int64_t leased_credits = 0;  // credits granted to this node
    int64_t local_admits = 0;    // admissions served without a round trip
    int64_t denials = 0;         // the store's denials passed on
    int64_t outages = 0;         // outages decided by the fail policy
  };

  // Validates `options`; errors name the field and its bound.
  static absl::StatusOr<std::unique_ptr<LeasedLimiter>> create(
      LeasedLimiterOptions options, std::shared_ptr<Coordinator> coordinator,
      C clock = C{}) {
    absl::StatusOr<LeaseBudget> budget =
        LeaseBudget::create({options.limit, options.window_ms});
    if (!budget.ok()) return budget.status();
    if (options.batch < 1 || options.batch > options.limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "leased_limiter.batch must be in [1, limit = ", options.limit,
          "]; got ", options.batch));
    }
    if (options.max_keys < 16 || options.max_keys > (int64_t{1} << 32)) {
      return absl::InvalidArgumentError(
          absl::StrCat("leased_limiter.max_keys must be in [16, 2^32]; got ",
                       options.max_keys));
    }
    if (options.fail_closed_retry_ms < 1 ||
        options.fail_closed_retry_ms > kMaxSafeInteger) {
      return absl::InvalidArgumentError(absl::StrCat(
          "leased_limiter.fail_closed_retry_ms must be in [1, 2^53-1]; got ",
          options.fail_closed_retry_ms));
    }
    if (coordinator == nullptr) {
      return absl::InvalidArgumentError("leased_limiter: coordinator is null");
    }
    return std::unique_ptr<LeasedLimiter>(new LeasedLimiter(
        std::move(options), *budget, std::move(coordinator), std::move(clock)));
  }

  // Admits or denies `cost` units for `key` now (this node's clock).
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return check_at(key, clock_.now_ms(), cost);
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms`.
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    if (!is_valid_key(key) || !is_valid_cost(cost)) [[unlikely]] {
      if (absl::Status s = validate_key(key); !s.ok()) return s;
      return validate_cost(cost);
    }
    std::shared_ptr<Entry> e;
    {
      // The local spend happens under the shard's spin lock (tens of
      // nanoseconds), so the hit path copies no shared pointer; only a miss
      // keeps the entry alive past the lock for its lease.
      const absl::string_view k(key.data(), key.size());
      Shard& shard = shard_for(k);
      SpinLockHolder lock(shard.mu);
      auto it = shard.map.find(k);
      if (it != shard.map.end()) {
        if (std::optional<Decision> d =
                it->second->spender.spend(now_ms, cost)) {
          local_admits_.fetch_add(1, std::memory_order_relaxed);
          return *d;
        }
        e = it->second;
      } else {
        e = insert(shard, key);
      }
    }
    return lease_and_spend(*e, key, now_ms, cost);
  }

  // Gives every live credit back to the window it came from (idempotent
  // per key and window). Returns the first error; keeps going after one.
  absl::Status close() {
    absl::Status first = absl::OkStatus();
    const int64_t now = clock_.now_ms();
    for (Shard& shard : shards_) {
      std::vector<std::pair<std::string, std::shared_ptr<Entry>>> entries;
      {
        SpinLockHolder lock(shard.mu);
        entries.assign(shard.map.begin(), shard.map.end());
      }
      for (auto& [key, e] : entries) {
        std::lock_guard lease_lock(e->lease_mu);
        const int64_t expires = e->spender.expires_at_ms();
        const auto credits =
            static_cast<int64_t>(std::floor(e->spender.drain(now)));
        if (credits <= 0) continue;
        absl::StatusOr<int64_t> back = coordinator_->give_back(
            budget_, join_key(options_.prefix, key),
            expires - budget_.window_ms(), credits,
            absl::StrCat("close:", reinterpret_cast<uintptr_t>(this), ":",
                         expires));
        if (!back.ok() && first.ok()) first = back.status();
      }
    }
    return first;
  }

  Stats stats() const {
    return Stats{leases_.load(std::memory_order_relaxed),
                 leased_credits_.load(std::memory_order_relaxed),
                 local_admits_.load(std::memory_order_relaxed),
                 denials_.load(std::memory_order_relaxed),
                 outages_.load(std::memory_order_relaxed)};
  }
  const LeasedLimiterOptions& options() const noexcept { return options_; }

 private:
  struct Entry {
    explicit Entry(int64_t limit, bool coupled) : spender(limit, coupled) {}
    LeaseSpender spender;
    std::mutex lease_mu;  // one lease in flight per key on this node
  };
  // A SpinLock (atomics, so ThreadSanitizer sees it; Debian's abseil is not
  // built for it): held for one probe and at most one local spend.
  struct Shard {
    SpinLock mu;
    absl::flat_hash_map<std::string, std::shared_ptr<Entry>> map;
  };
  static constexpr size_t kShards = 16;

  LeasedLimiter(LeasedLimiterOptions options, LeaseBudget budget,
                std::shared_ptr<Coordinator> coordinator, C clock)
      : options_(std::move(options)),
        budget_(budget),
        coordinator_(std::move(coordinator)),
        clock_(std::move(clock)),
        shard_bound_(static_cast<size_t>(options_.max_keys) / kShards) {}

  Shard& shard_for(absl::string_view key) {
    return shards_[absl::Hash<absl::string_view>{}(key) % kShards];
  }

  // A new entry for `key` (absent), first making room in a full shard.
  std::shared_ptr<Entry> insert(Shard& shard, std::string_view key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    if (shard.map.size() >= shard_bound_) evict_one(shard);
    auto e = std::make_shared<Entry>(options_.limit, options_.window_coupled);
    shard.map.emplace(std::string(key), e);
    return e;
  }

  // Drops the first key without live credits among a few, else the one
  // holding the fewest.
  void evict_one(Shard& shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
    const int64_t now = clock_.now_ms();
    auto victim = shard.map.begin();
    double fewest = victim->second->spender.credits();
    int probes = 0;
    for (auto it = shard.map.begin(); it != shard.map.end() && probes < 8;
         ++it, ++probes) {
      const LeaseSpender& s = it->second->spender;
      const double live =
          s.window_coupled() && now >= s.expires_at_ms() ? 0 : s.credits();
      if (live < fewest) {
        fewest = live;
        victim = it;
      }
      if (live <= 0) break;
    }
    shard.map.erase(victim);
  }

  absl::StatusOr<Decision> lease_and_spend(Entry& e, std::string_view key,
                                           int64_t now_ms, double cost) {
    std::lock_guard lock(e.lease_mu);
    // A concurrent miss may have refilled while this one waited.
    if (std::optional<Decision> d = e.spender.spend(now_ms, cost)) {
      local_admits_.fetch_add(1, std::memory_order_relaxed);
      return *d;
    }
    const int64_t want = std::max<int64_t>(
        options_.batch, static_cast<int64_t>(std::ceil(cost)));
    absl::StatusOr<LeaseGrant> grant =
        coordinator_->lease(budget_, join_key(options_.prefix, key), want);
    if (!grant.ok()) return fail(grant.status(), now_ms);
    leases_.fetch_add(1, std::memory_order_relaxed);
    leased_credits_.fetch_add(grant->granted, std::memory_order_relaxed);
    e.spender.refill(*grant);
    if (std::optional<Decision> d = e.spender.spend(now_ms, cost)) return *d;
    // The window has not enough left for this cost: the store's answer.
    denials_.fetch_add(1, std::memory_order_relaxed);
    return Decision{false, options_.limit,
                    static_cast<int64_t>(std::floor(e.spender.credits())),
                    grant->expires_at_ms,
                    std::max<int64_t>(1, grant->expires_at_ms - grant->now_ms)};
  }

  absl::StatusOr<Decision> fail(const absl::Status& s, int64_t now_ms) {
    if (options_.fail_policy == FailPolicy::kPropagate || !is_outage(s)) {
      return s;
    }
    outages_.fetch_add(1, std::memory_order_relaxed);
    if (options_.fail_policy == FailPolicy::kOpen) {
      return Decision{true, options_.limit, 0, now_ms, 0};
    }
    return Decision{false, options_.limit, 0,
                    now_ms + options_.fail_closed_retry_ms,
                    options_.fail_closed_retry_ms};
  }

  const LeasedLimiterOptions options_;
  const LeaseBudget budget_;
  const std::shared_ptr<Coordinator> coordinator_;
  const C clock_;
  const size_t shard_bound_;
  std::array<Shard, kShards> shards_;
  std::atomic<int64_t> leases_{0}, leased_credits_{0}, local_admits_{0},
      denials_{0}, outages_{0};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_LEASED_LIMITER_H_
