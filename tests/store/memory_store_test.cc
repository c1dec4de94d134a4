#include "throttlekit/store/memory_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "support/allocation_counter.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace memory_store_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

// GCRA with `limit` units per `limit` seconds (T = 1 s, burst = limit).
std::unique_ptr<MemoryStore<Gcra>> make_store(int64_t limit,
                                              MemoryStoreOptions o = {}) {
  auto store =
      MemoryStore<Gcra>::create(*Gcra::create({limit, limit * 1000, 0}), o);
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

TEST(MemoryStore, KeysAreIndependent) {
  auto store = make_store(2);
  EXPECT_TRUE(store->check("a", kEpoch, 1).allowed);
  EXPECT_TRUE(store->check("a", kEpoch, 1).allowed);
  EXPECT_FALSE(store->check("a", kEpoch, 1).allowed);
  EXPECT_TRUE(store->check("b", kEpoch, 1).allowed);
  EXPECT_EQ(store->size(), 2u);
}

TEST(MemoryStore, DeniedCheckOnColdKeyWritesAndAllocatesNothing) {
  auto store = make_store(5);
  // Warm the key path once so nothing lazy is left to allocate.
  EXPECT_TRUE(store->check("warm", kEpoch, 1).allowed);
  const size_t bytes = store->memory_bytes();
  const long before = ::throttlekit::testing::allocations();
  for (int i = 0; i < 1000; ++i) {
    // Cost 6 > burst 5: always denied. Keys longer than the inline size too.
    std::string_view key =
        i % 2 ? std::string_view("cold-key")
              : std::string_view("a-cold-key-longer-than-16-bytes");
    Decision d = store->check(key, kEpoch, 6);
    ASSERT_FALSE(d.allowed);
  }
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
  EXPECT_EQ(store->size(), 1u);
  EXPECT_EQ(store->memory_bytes(), bytes);
}

TEST(MemoryStore, AllowedCheckOnKnownShortKeyAllocatesNothing) {
  auto store = make_store(1'000'000);
  EXPECT_TRUE(store->check("user:42", kEpoch, 1).allowed);
  const long before = ::throttlekit::testing::allocations();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(store->check("user:42", kEpoch + i, 1).allowed);
  }
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
}

TEST(MemoryStore, NeverHoldsMoreThanMaxKeys) {
  auto store = make_store(10, {.max_keys = 100, .shards = 4});
  for (int i = 0; i < 10'000; ++i) {
    ASSERT_TRUE(store->check("k" + std::to_string(i), kEpoch + i, 1).allowed);
    ASSERT_LE(store->size(), 100u);
  }
  EXPECT_EQ(store->size(), 100u);  // 4 shards x 25
}

TEST(MemoryStore, ClockGivesRecentlyUsedKeysASecondChance) {
  // One shard of 4 keys. "hot" is touched before every insertion, so the
  // hand always finds its reference bit set and evicts a cold key instead.
  auto store = make_store(1000, {.max_keys = 4, .shards = 1});
  ASSERT_TRUE(store->check("hot", kEpoch, 1).allowed);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(store->check("hot", kEpoch, 1).allowed);
    ASSERT_TRUE(store->check("c" + std::to_string(i), kEpoch, 1).allowed);
  }
  // "hot" kept its state: 101 units consumed, so peek shows less than burst.
  Decision p = store->peek("hot", kEpoch);
  EXPECT_EQ(p.remaining, 1000 - 101);
  EXPECT_EQ(store->size(), 4u);
}

TEST(MemoryStore, EvictsExpiredKeysFirst) {
  auto store = make_store(2, {.max_keys = 2, .shards = 1, .ttl_slack_ms = 0});
  // T = 1 s
  // Both keys used twice, so both carry the CLOCK mark.
  ASSERT_TRUE(store->check("expired", kEpoch, 1).allowed);
  ASSERT_TRUE(store->check("expired", kEpoch, 1).allowed);  // tat +2000
  ASSERT_TRUE(store->check("live", kEpoch + 1900, 1).allowed);
  ASSERT_TRUE(store->check("live", kEpoch + 1900, 1).allowed);  // tat +3900
  // At +2500 "expired" has expired and "live" has not: it goes first.
  ASSERT_TRUE(store->check("new", kEpoch + 2500, 1).allowed);
  EXPECT_FALSE(store->check("live", kEpoch + 2500, 1).allowed);
  EXPECT_EQ(store->size(), 2u);
}

TEST(MemoryStore, ExpiredKeyBehavesColdAndIsDroppedOnDenial) {
  auto store = make_store(2, {.ttl_slack_ms = 0});
  ASSERT_TRUE(store->check("k", kEpoch, 2).allowed);
  EXPECT_FALSE(store->check("k", kEpoch, 1).allowed);
  // At +2000 the state has expired: a cold key admits the full burst.
  Decision d = store->check("k", kEpoch + 2000, 2);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  // Expired again at +4000; a denied (cost 3 > burst) check drops it.
  EXPECT_FALSE(store->check("k", kEpoch + 4000, 3).allowed);
  EXPECT_EQ(store->size(), 0u);
}

// The TTL slack: a state is reclaimed only once it has been expired for the
// whole slack, so a stale `now` arriving after a fresher denial still finds
// it (core/ttl_slack.h).
TEST(MemoryStore, AStaleNowWithinTheSlackFindsTheStateAFresherDenialKept) {
  auto store = make_store(2, {.ttl_slack_ms = 5'000});  // T = 1 s
  ASSERT_TRUE(store->check("k", kEpoch, 2).allowed);    // tat +2000
  // At +3000 the state has expired; a denied check (cost 3 > burst) there
  // keeps it: it has not been expired for the slack.
  EXPECT_FALSE(store->check("k", kEpoch + 3'000, 3).allowed);
  EXPECT_EQ(store->size(), 1u);
  // A `now` from before the fresher call still sees the burst spent.
  EXPECT_FALSE(store->check("k", kEpoch + 500, 1).allowed);
  // Expired for the whole slack at +7000: the denial reclaims it.
  EXPECT_FALSE(store->check("k", kEpoch + 7'000, 3).allowed);
  EXPECT_EQ(store->size(), 0u);
  EXPECT_FALSE(MemoryStore<Gcra>::create(*Gcra::create({1, 1000, 0}),
                                         {.ttl_slack_ms = -1})
                   .ok());
}

TEST(MemoryStore, PeekAndForecastWriteNothing) {
  auto store = make_store(3);
  Decision p = store->peek("k", kEpoch);
  EXPECT_TRUE(p.allowed);
  EXPECT_EQ(p.remaining, 3);
  Forecast f = store->forecast("k", kEpoch, 2);
  EXPECT_EQ(f.spendable_now, 3);
  EXPECT_EQ(store->size(), 0u);
  ASSERT_TRUE(store->check("k", kEpoch, 1).allowed);
  EXPECT_EQ(store->peek("k", kEpoch).remaining, 2);
  EXPECT_EQ(store->peek("k", kEpoch).remaining, 2);
}

TEST(MemoryStore, ResetForgetsTheKey) {
  auto store = make_store(1);
  ASSERT_TRUE(store->check("k", kEpoch, 1).allowed);
  EXPECT_FALSE(store->check("k", kEpoch, 1).allowed);
  EXPECT_TRUE(store->reset("k"));
  EXPECT_FALSE(store->reset("k"));
  EXPECT_TRUE(store->check("k", kEpoch, 1).allowed);
}

TEST(MemoryStore, ArbitraryBytesAndLongKeysAreOrdinaryKeys) {
  auto store = make_store(1);
  const std::string keys[] = {"with space",
                              "{braces}",
                              "\"quotes\"",
                              "new\nline",
                              std::string("nul\0byte", 8),
                              std::string("nul\0bytf", 8),
                              "\xff\xfe",
                              std::string(1 << 20, 'x'),
                              std::string(17, 'y'),
                              std::string(16, 'y')};
  for (const auto& k : keys) EXPECT_TRUE(store->check(k, kEpoch, 1).allowed);
  for (const auto& k : keys) EXPECT_FALSE(store->check(k, kEpoch, 1).allowed);
  EXPECT_EQ(store->size(), std::size(keys));
}

TEST(MemoryStore, SurvivesHeavyChurnWithBackwardShiftDeletes) {
  // Many inserts, resets and evictions in one small shard; every key that is
  // present must still be found (a broken probe run would lose keys).
  auto store = make_store(1, {.max_keys = 64, .shards = 1});
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 40; ++i) {
      (void)store->check("k" + std::to_string(round * 7 + i), kEpoch, 1);
    }
    for (int i = 0; i < 40; i += 3) {
      (void)store->reset("k" + std::to_string(round * 7 + i));
    }
  }
  // Every key the store holds is found by a probe (peek writes nothing):
  // a key lost in a broken probe run would read as cold.
  size_t held = store->size();
  size_t found = 0;
  for (int i = 0; i < 200 * 7 + 40; ++i) {
    if (store->peek("k" + std::to_string(i), kEpoch).remaining == 0) ++found;
  }
  EXPECT_EQ(found, held);
  EXPECT_GT(held, 0u);
}

// check_many against check one by one on a twin store: random batches
// (empty to 3x the prefetch distance and beyond) of keys drawn with
// repeats, so batches hit present keys, cold keys, keys twice in one
// batch, expired keys dropped on denial and tables that grow mid-batch
// (from 16 slots), with costs that deny; every decision and the stores'
// sizes equal. (No eviction: each store seeds its own hash, so twins would
// evict different keys.)
TEST(MemoryStore, CheckManyDecidesAsCheckOneByOne) {
  const MemoryStoreOptions small{.max_keys = 4096, .shards = 4};
  auto batched = make_store(3, small);
  auto single = make_store(3, small);
  std::mt19937_64 rng(20261126);
  std::vector<std::string> pool;
  for (int i = 0; i < 600; ++i) {
    pool.push_back(i % 5 == 0
                       ? "a-key-longer-than-sixteen-bytes-" + std::to_string(i)
                       : "k" + std::to_string(i));
  }
  int64_t now = kEpoch;
  size_t decisions = 0;
  size_t denied = 0;
  for (int round = 0; round < 2000; ++round) {
    const size_t n = std::uniform_int_distribution<size_t>(
        0, 3 * MemoryStore<Gcra>::kPrefetchAhead + 7)(rng);
    std::vector<std::string_view> keys;
    for (size_t i = 0; i < n; ++i) {
      // A small hot set repeats within batches; the rest spreads.
      const size_t k = rng() % 4 == 0 ? rng() % 8 : rng() % pool.size();
      keys.push_back(pool[k]);
    }
    const double cost = static_cast<double>(1 + rng() % 2);
    now += static_cast<int64_t>(rng() % 700);
    std::vector<Decision> out(n);
    batched->check_many(keys, now, cost, out);
    for (size_t i = 0; i < n; ++i) {
      const Decision want = single->check(keys[i], now, cost);
      ASSERT_EQ(out[i].allowed, want.allowed)
          << "round " << round << " i " << i;
      ASSERT_EQ(out[i].remaining, want.remaining);
      ASSERT_EQ(out[i].reset_at_ms, want.reset_at_ms);
      ASSERT_EQ(out[i].retry_after_ms, want.retry_after_ms);
      ++decisions;
      denied += want.allowed ? 0 : 1;
    }
    ASSERT_EQ(batched->size(), single->size()) << "round " << round;
  }
  EXPECT_GT(decisions, 20'000u);
  EXPECT_GT(denied, decisions / 20);  // denials were exercised
  EXPECT_GT(batched->size(), 64u);    // tables grew past 16 slots a shard
}

// A batch of present short keys allocates nothing.
TEST(MemoryStore, CheckManyOfKnownKeysAllocatesNothing) {
  auto store = make_store(1'000'000);
  std::vector<std::string> names;
  for (int i = 0; i < 64; ++i) names.push_back("user:" + std::to_string(i));
  std::vector<std::string_view> keys(names.begin(), names.end());
  std::vector<Decision> out(keys.size());
  store->check_many(keys, kEpoch, 1, out);
  const long before = ::throttlekit::testing::allocations();
  for (int i = 0; i < 100; ++i) store->check_many(keys, kEpoch, 1, out);
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
  for (const Decision& d : out) EXPECT_TRUE(d.allowed);
}

TEST(MemoryStore, RejectsBadOptions) {
  auto gcra = *Gcra::create({1, 1000, 0});
  EXPECT_FALSE(MemoryStore<Gcra>::create(gcra, {.max_keys = 0}).ok());
  EXPECT_FALSE(MemoryStore<Gcra>::create(gcra, {.shards = 3}).ok());
  EXPECT_FALSE(MemoryStore<Gcra>::create(gcra, {.shards = 128}).ok());
  EXPECT_FALSE(
      MemoryStore<Gcra>::create(gcra, {.max_keys = 2, .shards = 4}).ok());
  auto s = MemoryStore<Gcra>::create(gcra, {.shards = 3});
  EXPECT_NE(s.status().message().find("memory_store.shards"),
            std::string::npos);
}

TEST(MemoryStore, GcraSlotIs32Bytes) {
  auto store = make_store(1, {.max_keys = 1'000'000});
  EXPECT_EQ(store->shard_count(), 64u);
  const size_t empty = store->memory_bytes();
  for (int i = 0; i < 100'000; ++i) {
    (void)store->check("key-" + std::to_string(1'000'000 + i), kEpoch, 1);
  }
  const double per_key =
      static_cast<double>(store->memory_bytes() - empty) / 100'000;
  EXPECT_LE(per_key, 32.0 / 0.375);  // worst case 3/8 load after doubling
}

}  // namespace
}  // namespace memory_store_test
}  // namespace throttlekit
