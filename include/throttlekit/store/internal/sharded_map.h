// throttlekit/store/internal/sharded_map.h
//
// Provides `detail::ShardedMap<V, Lock>`: the bounded, sharded key -> V map
// under `MemoryCoordinator`, `DenyCache` and the leased limiter's entries.
// Sixteen shards, each a `Lock` (core/mutex.h or core/spin_lock.h) over an
// `absl::flat_hash_map<std::string, V>`; a key's shard is its absl::Hash
// modulo 16. At most `max_keys` keys in all: `max_keys / 16` per shard.
//
// The map owns the layout and the bound, and its users own the rest: which
// lock type, how long it is held (a caller locks `shard(key).mu` and works
// on `map` for one step), and which entry a full shard gives up
// (`insert_new` takes the policy; `evict_soonest_expiring` is the common
// one).
//
// Thread-safety: `shard`, `max_keys` and `shard_bound` are safe to call
// concurrently; a shard's `map` is guarded by its `mu` (checked by clang's
// thread safety analysis).

#ifndef THROTTLEKIT_STORE_INTERNAL_SHARDED_MAP_H_
#define THROTTLEKIT_STORE_INTERNAL_SHARDED_MAP_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace throttlekit::detail {

template <class V, class Lock>
class ShardedMap {
 public:
  static constexpr size_t kShards = 16;
  using Map = absl::flat_hash_map<std::string, V>;

  struct Shard {
    mutable Lock mu;
    Map map ABSL_GUARDED_BY(mu);
  };

  // `max_keys` is clamped to at least one key per shard.
  explicit ShardedMap(size_t max_keys)
      : shard_bound_(std::max(max_keys, kShards) / kShards) {}

  ShardedMap(const ShardedMap&) = delete;
  ShardedMap& operator=(const ShardedMap&) = delete;

  Shard& shard(absl::string_view key) {
    return shards_[absl::Hash<absl::string_view>{}(key) % kShards];
  }

  // The bound as applied: shard_bound() * 16.
  size_t max_keys() const noexcept { return shard_bound_ * kShards; }
  size_t shard_bound() const noexcept { return shard_bound_; }

  // Stores `value` for `key`, which the shard must not hold. A full shard
  // first gives up one entry: `evict(map)` erases one of them (it is only
  // called on a non-empty map). Returns the stored value and whether an
  // entry was evicted.
  template <class Evict>
  std::pair<V*, bool> insert_new(Shard& s, absl::string_view key, V value,
                                 Evict&& evict)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    bool evicted = false;
    if (s.map.size() >= shard_bound_) {
      evict(s.map);
      evicted = true;
    }
    V& v = s.map.emplace(std::string(key), std::move(value)).first->second;
    return {&v, evicted};
  }

  // The common eviction: among the first `kProbes` entries, the first one
  // that has expired at `now_ms`, else the one expiring first.
  // `expires_at(value)` is the instant from which an entry is dead.
  static constexpr int kProbes = 8;
  template <class ExpiresAt>
  static void evict_soonest_expiring(Map& map, int64_t now_ms,
                                     ExpiresAt&& expires_at) {
    auto victim = map.begin();
    int probes = 0;
    for (auto it = map.begin(); it != map.end() && probes < kProbes;
         ++it, ++probes) {
      if (expires_at(it->second) <= now_ms) {
        victim = it;
        break;
      }
      if (expires_at(it->second) < expires_at(victim->second)) victim = it;
    }
    map.erase(victim);
  }

  // `fn(map)` on every shard in turn, each under its lock.
  template <class Fn>
  void for_each_shard(Fn&& fn) const {
    for (const Shard& s : shards_) {
      s.mu.lock();
      fn(static_cast<const Map&>(s.map));
      s.mu.unlock();
    }
  }
  template <class Fn>
  void for_each_shard(Fn&& fn) {
    for (Shard& s : shards_) {
      s.mu.lock();
      fn(s.map);
      s.mu.unlock();
    }
  }

 private:
  const size_t shard_bound_;
  std::array<Shard, kShards> shards_;
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_STORE_INTERNAL_SHARDED_MAP_H_
