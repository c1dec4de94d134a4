// throttlekit/store/memory_store.h
//
// Provides `MemoryStore<S>`: the embedded, in-process state of one strategy
// for many keys (docs/architecture.md, layer 3). It is what `RateLimiter`
// uses by default. (`MemoryCoordinator` does not build on it: it keeps its
// own mutex-guarded shards, memory_coordinator.h.)
//
// Design
// - Sharded: a key's 64-bit hash picks one of up to 64 shards (top bits);
//   each shard is an open-addressed, linear-probing table guarded by its own
//   `SpinLock`. A check holds one shard lock for one probe and one strategy
//   step (tens of nanoseconds), so threads on different keys rarely meet.
// - Compact: a slot is a 24-byte key cell (keys up to 16 bytes inline) plus
//   the strategy's state; a GCRA slot is 32 bytes. Tables double at 3/4 load,
//   up to the shard's key bound.
// - Bounded: `max_keys` is split evenly over the shards (each holds at most
//   `max_keys / shards` keys, so the store never holds more than
//   `max_keys`). Inserting into a full shard first evicts one key by CLOCK
//   (second chance): a key is inserted unmarked and marked when used again;
//   the hand clears marks as it passes and evicts the first key that is
//   expired or unmarked, so one-off keys go before keys in steady use.
// - Lazy expiry: a state past `S::expires_at_ms` decides exactly as a cold
//   key (the strategy's contract), so hits never test expiry; an expired key
//   is reclaimed, once it has been expired for `ttl_slack_ms`, when a
//   denied check touches it or when the CLOCK hand passes it (such keys go
//   first). There is no background sweeper.
// - A denied check on a cold key writes and allocates nothing; deletion is
//   backward-shift (no tombstones), so probes stay short under churn.
// - Batches overlap their misses: `check_many` hashes keys ahead of the one
//   it decides and prefetches their home slots (through a per-shard hint,
//   a relaxed atomic copy of the table's address and mask that only ever
//   steers a prefetch), so a batch of distinct cold keys pays about one
//   miss latency for several keys instead of one per key; the decisions
//   are taken in order, each under its shard lock, exactly as `check`.
//
// Caveat: dropping an expired key is exact for every `now` not behind the
// expiry by more than `ttl_slack_ms` (core/ttl_slack.h); a `now` staler than
// that, or one reaching a key evicted unexpired from a full shard, sees a
// cold key (more lenient than the dropped state). Keys are hashed with a hash
// seeded per store (internal/key_hash.h), so hostile key sets cannot be
// precomputed.
//
// Thread-safety: every public method is safe to call concurrently.

#ifndef THROTTLEKIT_STORE_MEMORY_STORE_H_
#define THROTTLEKIT_STORE_MEMORY_STORE_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/core/spin_lock.h"
#include "throttlekit/core/ttl_slack.h"
#include "throttlekit/store/internal/key_hash.h"
#include "throttlekit/store/internal/stored_key.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

struct MemoryStoreOptions {
  // The most keys the store holds at once; 1 .. 2^40.
  size_t max_keys = size_t{1} << 20;
  // Shards (a power of two, 1 .. 64); 0 picks one shard per 1024 keys of
  // `max_keys`, at most 64.
  size_t shards = 0;
  // How long (ms, 0 .. 2^53-1) a key is kept past its expiry before a
  // denial may reclaim it or eviction prefers it: a caller's `now` up to
  // that much older than the one that dropped it never finds its window
  // gone (core/ttl_slack.h). Decisions never depend on it otherwise.
  int64_t ttl_slack_ms = kDefaultTtlSlackMs;
};

template <Strategy S>
class MemoryStore {
 public:
  using State = typename S::State;

  // Validates `options`; errors name the field and its bound.
  static absl::StatusOr<std::unique_ptr<MemoryStore>> create(
      S strategy, const MemoryStoreOptions& options = {}) {
    if (options.max_keys < 1 || options.max_keys > (size_t{1} << 40)) {
      return absl::InvalidArgumentError(
          "memory_store.max_keys must be in [1, 2^40]");
    }
    size_t shards = options.shards;
    if (shards == 0) {
      shards = std::bit_floor(
          std::clamp<size_t>(options.max_keys / 1024, 1, kMaxShards));
    } else if (shards > kMaxShards || !std::has_single_bit(shards)) {
      return absl::InvalidArgumentError(
          "memory_store.shards must be 0 or a power of two in [1, 64]");
    } else if (shards > options.max_keys) {
      return absl::InvalidArgumentError(
          "memory_store.shards must not exceed memory_store.max_keys");
    }
    if (options.ttl_slack_ms < 0 || options.ttl_slack_ms > kMaxSafeInteger) {
      return absl::InvalidArgumentError(
          "memory_store.ttl_slack_ms must be in [0, 2^53-1]");
    }
    return std::unique_ptr<MemoryStore>(new MemoryStore(
        std::move(strategy), options.max_keys, shards, options.ttl_slack_ms));
  }

  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  const S& strategy() const noexcept { return strategy_; }

  // Runs one strategy check for `key` at `now_ms` atomically. `key` must be
  // valid (`validate_key`) and `cost` valid (`validate_cost`); the limiter
  // checks both. Allocates only when an allowed check inserts a key longer
  // than 16 bytes, or grows a table. Thread-safe.
  THROTTLEKIT_ALWAYS_INLINE Decision check(std::string_view key, int64_t now_ms,
                                           double cost) {
    return check_hashed(key, hash(key), now_ms, cost);
  }

  // `check` of each key in turn, at one `now_ms`, into `out` (as many as
  // `keys`): the same decisions as calling `check` in key order (a key
  // twice sees its first check). While deciding one key it has already
  // hashed the next kPrefetchAhead and prefetched their home slots, so the
  // cache misses of distinct cold keys overlap. Keys and cost as for
  // `check`. Thread-safe.
  void check_many(std::span<const std::string_view> keys, int64_t now_ms,
                  double cost, std::span<Decision> out) {
    const size_t n = std::min(keys.size(), out.size());
    std::array<uint64_t, kPrefetchAhead> ahead;
    const size_t first = std::min(n, kPrefetchAhead);
    for (size_t j = 0; j < first; ++j) {
      ahead[j] = hash(keys[j]);
      prefetch_home(ahead[j]);
    }
    for (size_t i = 0; i < n; ++i) {
      const uint64_t h = ahead[i % kPrefetchAhead];
      if (const size_t next = i + kPrefetchAhead; next < n) {
        ahead[i % kPrefetchAhead] = hash(keys[next]);
        prefetch_home(ahead[i % kPrefetchAhead]);
      }
      out[i] = check_hashed(keys[i], h, now_ms, cost);
    }
  }

  // Keys hashed and prefetched ahead of the one `check_many` decides: about
  // the misses one core keeps in flight.
  static constexpr size_t kPrefetchAhead = 10;

 private:
  THROTTLEKIT_ALWAYS_INLINE Decision check_hashed(std::string_view key,
                                                  uint64_t h, int64_t now_ms,
                                                  double cost) {
    Shard& shard = shard_for(h);
    const uint32_t tag = static_cast<uint32_t>(h);
    SpinLockHolder hold(shard.lock);
    const size_t i = find(shard, key, tag);
    if (i != kNotFound) {
      // An expired state decides exactly as a cold one (the contract of
      // `expires_at_ms`), so a hit checks the stored state as it is and pays
      // for no expiry test; only a denial, which writes nothing, looks at
      // expiry to reclaim the key.
      Slot& slot = shard.slots[i];
      slot.key.set_referenced();
      const Decision d = strategy_.check(slot.state, now_ms, cost);
      if (!d.allowed && dropped(slot.state, now_ms)) erase(shard, i);
      return d;
    }
    State cold{};
    Decision d = strategy_.check(cold, now_ms, cost);
    if (d.allowed) insert(shard, key, tag, std::move(cold), now_ms);
    return d;
  }

  // Prefetches the shard's lock line (for writing) and the key's home slot
  // through the shard's hint; a stale hint (a table grown since) prefetches
  // a line nobody reads, which costs nothing but the bandwidth.
  void prefetch_home(uint64_t h) const noexcept {
    const Shard& shard = shard_for(h);
    __builtin_prefetch(&shard, 1, 3);
    const Slot* slots = shard.slots_hint.load(std::memory_order_relaxed);
    const size_t mask = shard.mask_hint.load(std::memory_order_relaxed);
    const char* home = reinterpret_cast<const char*>(
        slots + (static_cast<uint32_t>(h) & mask));
    __builtin_prefetch(home, 1, 3);
    __builtin_prefetch(home + sizeof(Slot) - 1, 1, 3);
  }

 public:
  // Applies `fn(const State&)` to the key's current state (cold if absent;
  // an expired state reads as cold by the strategy's contract) under the
  // shard lock and returns its result. Writes nothing.
  // Thread-safe.
  template <class Fn>
  auto read(std::string_view key, Fn&& fn) const {
    const uint64_t h = hash(key);
    Shard& shard = shard_for(h);
    const uint32_t tag = static_cast<uint32_t>(h);
    SpinLockHolder hold(shard.lock);
    const size_t i = find(shard, key, tag);
    if (i != kNotFound) {
      return fn(static_cast<const State&>(shard.slots[i].state));
    }
    const State cold{};
    return fn(cold);
  }

  // Applies `fn(State&)` to `key`'s state under the shard lock, first
  // inserting a cold state if the key is absent (making room as an
  // allowed check does), and returns its result. For owners that change a
  // state outside the strategy's check (the leased limiter's refills).
  // `key` must be valid. Thread-safe.
  template <class Fn>
  auto update(std::string_view key, int64_t now_ms, Fn&& fn) {
    const uint64_t h = hash(key);
    Shard& shard = shard_for(h);
    const uint32_t tag = static_cast<uint32_t>(h);
    SpinLockHolder hold(shard.lock);
    size_t i = find(shard, key, tag);
    if (i == kNotFound) {
      insert(shard, key, tag, State{}, now_ms);
      i = find(shard, key, tag);
    }
    shard.slots[i].key.set_referenced();
    return fn(shard.slots[i].state);
  }

  // The decision for a cost-1 request, without consuming. Thread-safe.
  Decision peek(std::string_view key, int64_t now_ms) const {
    return read(key, [&](const State& s) { return strategy_.peek(s, now_ms); });
  }

  // See `Forecast`. Writes nothing. Thread-safe.
  Forecast forecast(std::string_view key, int64_t now_ms, double cost) const {
    return read(key, [&](const State& s) {
      return strategy_.forecast(s, now_ms, cost);
    });
  }

  // Forgets `key`; returns whether it was present. Thread-safe.
  bool reset(std::string_view key) {
    const uint64_t h = hash(key);
    Shard& shard = shard_for(h);
    SpinLockHolder hold(shard.lock);
    const size_t i = find(shard, key, static_cast<uint32_t>(h));
    if (i == kNotFound) return false;
    erase(shard, i);
    return true;
  }

  // Keys held now (expired keys not yet dropped included). Thread-safe; a
  // snapshot that may be stale by the time it returns.
  size_t size() const {
    size_t n = 0;
    for (size_t s = 0; s < shard_count_; ++s) {
      SpinLockHolder hold(shards_[s].lock);
      n += shards_[s].count;
    }
    return n;
  }

  size_t max_keys() const noexcept { return max_keys_; }
  size_t shard_count() const noexcept { return shard_count_; }

  // Bytes held by the tables and by out-of-line keys (not counting heap
  // memory owned by states of variable size). Thread-safe.
  size_t memory_bytes() const {
    size_t bytes = sizeof(*this);
    for (size_t s = 0; s < shard_count_; ++s) {
      const Shard& shard = shards_[s];
      SpinLockHolder hold(shard.lock);
      bytes += (shard.mask + 1) * sizeof(Slot);
      for (size_t i = 0; i <= shard.mask; ++i) {
        bytes += shard.slots[i].key.heap_bytes();
      }
    }
    return bytes;
  }

 private:
  static constexpr size_t kMaxShards = 64;
  static constexpr size_t kInitialCapacity = 16;
  static constexpr size_t kNotFound = ~size_t{0};

  struct Slot {
    detail::StoredKey key;
    State state{};
  };

  struct alignas(64) Shard {
    mutable SpinLock lock;
    std::unique_ptr<Slot[]> slots ABSL_GUARDED_BY(lock);
    size_t mask ABSL_GUARDED_BY(lock) = 0;   // capacity - 1
    size_t count ABSL_GUARDED_BY(lock) = 0;  // keys held
    size_t hand ABSL_GUARDED_BY(lock) = 0;   // CLOCK hand
    // `slots` and `mask` as last set under the lock, read without it by
    // `prefetch_home` only (never to find a key).
    std::atomic<const Slot*> slots_hint{nullptr};
    std::atomic<size_t> mask_hint{0};
  };

  static void set_hint(Shard& shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.lock) {
    shard.slots_hint.store(shard.slots.get(), std::memory_order_relaxed);
    shard.mask_hint.store(shard.mask, std::memory_order_relaxed);
  }

  MemoryStore(S strategy, size_t max_keys, size_t shards, int64_t ttl_slack_ms)
      : strategy_(std::move(strategy)),
        max_keys_(max_keys),
        shard_count_(shards),
        shard_bound_(max_keys / shards),
        shard_shift_(64 - std::countr_zero(shards)),
        ttl_slack_ms_(ttl_slack_ms),
        shards_() {
    // A table never needs more than bound * 4/3 slots (3/4 max load).
    max_capacity_ = std::bit_ceil(shard_bound_ + shard_bound_ / 3 + 1);
    for (size_t s = 0; s < shards; ++s) {
      SpinLockHolder hold(shards_[s].lock);
      const size_t cap = std::min(kInitialCapacity, max_capacity_);
      shards_[s].slots.reset(new Slot[cap]);
      shards_[s].mask = cap - 1;
      set_hint(shards_[s]);
    }
  }

  // Whether `state` expired the TTL slack or more before `now_ms` (then a
  // denial reclaims it and eviction takes it first), without overflow.
  bool dropped(const State& state, int64_t now_ms) const noexcept {
    return strategy_.expires_at_ms(state) <= now_ms - ttl_slack_ms_;
  }

  uint64_t hash(std::string_view key) const noexcept { return hasher_(key); }
  Shard& shard_for(uint64_t h) const noexcept {
    return shards_[shard_count_ == 1 ? 0 : (h >> shard_shift_)];
  }

  size_t find(const Shard& shard, std::string_view key, uint32_t tag) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.lock) {
    for (size_t i = tag & shard.mask;; i = (i + 1) & shard.mask) {
      const detail::StoredKey& k = shard.slots[i].key;
      if (k.empty()) return kNotFound;
      if (k.equals(key, tag)) return i;
    }
  }

  void insert(Shard& shard, std::string_view key, uint32_t tag, State state,
              int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.lock) {
    if (shard.count >= shard_bound_) {
      evict_one(shard, now_ms);
    } else if ((shard.count + 1) * 4 > (shard.mask + 1) * 3) {
      grow(shard);
    }
    size_t i = tag & shard.mask;
    while (!shard.slots[i].key.empty()) i = (i + 1) & shard.mask;
    shard.slots[i].key.assign(key, tag);
    shard.slots[i].state = std::move(state);
    ++shard.count;
  }

  void grow(Shard& shard) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.lock) {
    const size_t old_cap = shard.mask + 1;
    if (old_cap >= max_capacity_) return;
    const size_t cap = old_cap * 2;
    std::unique_ptr<Slot[]> slots(new Slot[cap]);
    const size_t mask = cap - 1;
    for (size_t j = 0; j < old_cap; ++j) {
      Slot& from = shard.slots[j];
      if (from.key.empty()) continue;
      size_t i = from.key.tag() & mask;
      while (!slots[i].key.empty()) i = (i + 1) & mask;
      slots[i] = std::move(from);
    }
    shard.slots = std::move(slots);
    shard.mask = mask;
    shard.hand = 0;
    set_hint(shard);
  }

  // CLOCK: at most two sweeps; the second always finds an unreferenced key.
  void evict_one(Shard& shard, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.lock) {
    for (size_t steps = 0; steps <= 2 * (shard.mask + 1); ++steps) {
      const size_t i = shard.hand;
      shard.hand = (shard.hand + 1) & shard.mask;
      Slot& slot = shard.slots[i];
      if (slot.key.empty()) continue;
      if (dropped(slot.state, now_ms) || !slot.key.referenced()) {
        erase(shard, i);
        return;
      }
      slot.key.clear_referenced();
    }
  }

  // Backward-shift deletion: later members of the probe run move into the
  // hole unless that would put them before their home slot.
  void erase(Shard& shard, size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.lock) {
    size_t hole = i;
    for (size_t j = (i + 1) & shard.mask;; j = (j + 1) & shard.mask) {
      Slot& next = shard.slots[j];
      if (next.key.empty()) break;
      const size_t home = next.key.tag() & shard.mask;
      const bool stays =
          hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!stays) {
        shard.slots[hole] = std::move(next);
        hole = j;
      }
    }
    shard.slots[hole].key.clear();
    shard.slots[hole].state = State{};
    --shard.count;
  }

  const S strategy_;
  const size_t max_keys_;
  const size_t shard_count_;
  const size_t shard_bound_;
  const int shard_shift_;
  const int64_t ttl_slack_ms_;
  size_t max_capacity_ = 0;
  const detail::KeyHasher hasher_;
  // Inline (not behind a pointer): one dependent load less per check.
  mutable std::array<Shard, kMaxShards> shards_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_STORE_MEMORY_STORE_H_
