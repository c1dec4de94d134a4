// throttlekit/twotier/deny_cache.h
//
// Provides `DenyCache`: the local memory of the two-tier engine's
// cached-deny mode (docs/twotier.md, "Cached-deny mode"). When the store
// denies `cost` units for a key with a retry hint, the node remembers the
// denial until the hint runs out, and answers every call on that key asking
// for at least that cost with the remembered denial, without a round trip. A
// flood on a blocked key then costs the store nothing.
//
// Exactness: a store strategy's state does not change on a denial and its
// retry hint is the earliest time the same cost could be admitted if no one
// else spends; a cost at least as large cannot be admitted sooner. So a
// cached denial is never an admission the store would have made on its own
// clock, except where other actors free capacity early (a `reset`, a
// give-back, or another node's clock). Those make it conservative for at
// most the hint, and never over-admit. A smaller cost goes to the store.
//
// The cache holds at most `max_keys` keys (at least 16) in a
// `detail::ShardedMap` (store/internal/sharded_map.h); a full shard drops an
// expired entry if one of a few probed is expired, else the
// soonest-expiring of them. An empty cache costs a lookup one relaxed load.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_TWOTIER_DENY_CACHE_H_
#define THROTTLEKIT_TWOTIER_DENY_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/spin_lock.h"
#include "throttlekit/store/internal/sharded_map.h"

namespace throttlekit {

class DenyCache {
 public:
  // `max_keys` is clamped to at least 16 (one key per shard).
  explicit DenyCache(size_t max_keys) : map_(max_keys) {}

  DenyCache(const DenyCache&) = delete;
  DenyCache& operator=(const DenyCache&) = delete;

  // The remembered denial covering `cost` for `key` at local time `now_ms`:
  // the store's decision with `retry_after_ms` counted down to now (>= 1).
  // nullopt when none covers it (none held, expired, or a smaller cost).
  std::optional<Decision> lookup(std::string_view key, int64_t now_ms,
                                 double cost) {
    if (size_.load(std::memory_order_relaxed) == 0) return std::nullopt;
    const absl::string_view k(key.data(), key.size());
    Shard& shard = map_.shard(k);
    SpinLockHolder lock(shard.mu);
    auto it = shard.map.find(k);
    if (it == shard.map.end()) return std::nullopt;
    const Entry& e = it->second;
    if (now_ms >= e.until_ms) {
      shard.map.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    if (cost < e.min_cost) return std::nullopt;
    // A clock stepped backwards cannot stretch the hint past the original.
    const int64_t retry = std::min(e.until_ms - now_ms, e.retry_after_ms);
    return Decision{false, e.limit, e.remaining, e.reset_at_ms, retry};
  }

  // Remembers the store's `denial` of `cost` for `key`, decided at local
  // time `now_ms`, until `now_ms + denial.retry_after_ms`. Ignores an
  // allowed decision and a denial without a positive hint. Replaces what
  // the key held (the newest answer wins).
  void remember(std::string_view key, int64_t now_ms, double cost,
                const Decision& denial) {
    if (denial.allowed || denial.retry_after_ms <= 0) return;
    const absl::string_view k(key.data(), key.size());
    Shard& shard = map_.shard(k);
    const Entry e{now_ms + denial.retry_after_ms,
                  denial.retry_after_ms,
                  cost,
                  denial.limit,
                  denial.remaining,
                  denial.reset_at_ms};
    SpinLockHolder lock(shard.mu);
    auto it = shard.map.find(k);
    if (it != shard.map.end()) {
      it->second = e;
      return;
    }
    // A full shard drops the first expired entry among a few probed, else
    // the one of them expiring first.
    const bool evicted = map_.insert_new(shard, k, e,
                                         [now_ms](Map::Map& m) {
                                           Map::evict_soonest_expiring(
                                               m, now_ms, [](const Entry& x) {
                                                 return x.until_ms;
                                               });
                                         })
                             .second;
    if (!evicted) size_.fetch_add(1, std::memory_order_relaxed);
  }

  // Forgets `key`'s denial (after a reset). Returns whether one was held.
  bool forget(std::string_view key) {
    const absl::string_view k(key.data(), key.size());
    Shard& shard = map_.shard(k);
    SpinLockHolder lock(shard.mu);
    if (shard.map.erase(k) == 0) return false;
    size_.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }

  // Entries held (expired ones not yet dropped included).
  size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }
  size_t max_keys() const noexcept { return map_.max_keys(); }

 private:
  struct Entry {
    int64_t until_ms;        // local time the denial stops covering
    int64_t retry_after_ms;  // the store's hint as given
    double min_cost;         // the denied cost: larger costs are covered
    int64_t limit;
    int64_t remaining;
    int64_t reset_at_ms;
  };
  using Map = detail::ShardedMap<Entry, SpinLock>;
  using Shard = Map::Shard;

  std::atomic<size_t> size_{0};
  Map map_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_DENY_CACHE_H_
