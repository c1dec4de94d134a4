// Tests of detail::ShardedMap (store/internal/sharded_map.h): the bound, the
// clamp, the common eviction policy, and inserts from many threads.

#include "throttlekit/store/internal/sharded_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "support/run_threads.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/spin_lock.h"

namespace throttlekit::detail {
namespace sharded_map_test {
namespace {

using Map = ShardedMap<int64_t, SpinLock>;

// Inserts `key` -> `expires_at` unless held, evicting the soonest-expiring
// entry at `now` from a full shard. Returns whether an entry was evicted.
bool put(Map& m, const std::string& key, int64_t expires_at, int64_t now) {
  Map::Shard& s = m.shard(key);
  SpinLockHolder lock(s.mu);
  if (s.map.contains(key)) return false;
  return m
      .insert_new(s, key, expires_at,
                  [now](Map::Map& t) {
                    Map::evict_soonest_expiring(t, now,
                                                [](int64_t e) { return e; });
                  })
      .second;
}

int64_t size(const Map& m) {
  int64_t n = 0;
  m.for_each_shard([&n](const Map::Map& t) { n += t.size(); });
  return n;
}

TEST(ShardedMap, ClampsToOneKeyPerShardAndRoundsDown) {
  EXPECT_EQ(Map(0).max_keys(), 16u);
  EXPECT_EQ(Map(1).shard_bound(), 1u);
  EXPECT_EQ(Map(100).max_keys(), 96u);
  EXPECT_EQ(Map(1 << 20).shard_bound(), 65536u);
}

TEST(ShardedMap, NeverHoldsMoreThanTheBound) {
  Map m(64);
  int evictions = 0;
  for (int i = 0; i < 10'000; ++i) {
    evictions += put(m, "k" + std::to_string(i), i, 0);
    ASSERT_LE(size(m), 64);
  }
  EXPECT_EQ(size(m), 64);
  EXPECT_EQ(evictions, 10'000 - 64);
}

TEST(ShardedMap, EvictsAnExpiredEntryBeforeALiveOne) {
  Map m(16);  // one key per shard: every second key in a shard evicts
  const std::string first = "a";
  ASSERT_FALSE(put(m, first, /*expires_at=*/100, /*now=*/0));
  // Another key of the same shard.
  std::string other;
  for (int i = 0; other.empty(); ++i) {
    const std::string k = "b" + std::to_string(i);
    if (&m.shard(k) == &m.shard(first)) other = k;
  }
  EXPECT_TRUE(put(m, other, 500, /*now=*/200));  // "a" expired at 100
  Map::Shard& s = m.shard(first);
  SpinLockHolder lock(s.mu);
  EXPECT_FALSE(s.map.contains(first));
  EXPECT_TRUE(s.map.contains(other));
}

TEST(ShardedMap, EvictsTheSoonestExpiringAmongLiveOnes) {
  ShardedMap<int64_t, SpinLock> m(32);  // two keys per shard
  const std::string a = "a";
  std::string b, c;
  for (int i = 0; c.empty(); ++i) {
    const std::string k = "x" + std::to_string(i);
    if (&m.shard(k) != &m.shard(a)) continue;
    (b.empty() ? b : c) = k;
  }
  ASSERT_FALSE(put(m, a, 900, 0));
  ASSERT_FALSE(put(m, b, 300, 0));
  EXPECT_TRUE(put(m, c, 800, 0));  // nothing expired: b (300) goes
  Map::Shard& s = m.shard(a);
  SpinLockHolder lock(s.mu);
  EXPECT_TRUE(s.map.contains(a));
  EXPECT_FALSE(s.map.contains(b));
  EXPECT_TRUE(s.map.contains(c));
}

// Eight threads on two cores insert distinct keys into a map a tenth their
// number: the bound holds and every shard's count stays consistent (run
// under ThreadSanitizer too).
TEST(ShardedMapConcurrency, BoundHoldsUnderThreads) {
  ShardedMap<int64_t, Mutex> m(1024);
  testing::run_threads(8, [&m](int t) {
    for (int i = 0; i < 2000; ++i) {
      const std::string key = std::to_string(t) + ":" + std::to_string(i);
      auto& s = m.shard(key);
      MutexLock lock(s.mu);
      if (s.map.contains(key)) continue;
      m.insert_new(s, key, i, [](auto& t) {
        ShardedMap<int64_t, Mutex>::evict_soonest_expiring(
            t, 0, [](int64_t e) { return e; });
      });
    }
  });
  int64_t n = 0;
  m.for_each_shard([&n](const auto& t) {
    EXPECT_LE(t.size(), 64u);
    n += t.size();
  });
  EXPECT_EQ(n, 1024);
}

}  // namespace
}  // namespace sharded_map_test
}  // namespace throttlekit::detail
