// Concurrency of the memory store, the limiter and the cells (run under
// ThreadSanitizer in CI, label `tsan`).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "support/run_threads.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/store/cell.h"
#include "throttlekit/store/gcra_cell.h"
#include "throttlekit/store/memory_store.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace memory_store_concurrency_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;
constexpr int kThreads = 8;
constexpr int kChecksPerThread = 2000;

// kThreads threads released together each make kChecksPerThread checks,
// `allowed(i)` for i = 0 .. kChecksPerThread - 1 (whether check i was
// admitted); returns how many were admitted in all.
template <class Allowed>
long admitted_by_threads(Allowed allowed) {
  return testing::admitted_by_threads(kThreads, kChecksPerThread,
                                      [&](int, int i) { return allowed(i); });
}

TEST(MemoryStoreConcurrency, OneKeyAtLimitAdmitsExactlyLimit) {
  constexpr int64_t kLimit = 500;
  auto store = *MemoryStore<Gcra>::create(*Gcra::create({kLimit, 60'000, 0}));
  const long admitted = admitted_by_threads(
      [&](int) { return store->check("hot", kEpoch, 1).allowed; });
  EXPECT_EQ(admitted, kLimit);
}

TEST(MemoryStoreConcurrency, EvictionUnderFloodIsRaceFreeAndBounded) {
  constexpr size_t kMaxKeys = 256;
  auto store = *MemoryStore<Gcra>::create(*Gcra::create({3, 1000, 0}),
                                          {.max_keys = kMaxKeys, .shards = 4});
  std::atomic<bool> over{false};
  testing::run_threads(kThreads, [&](int t) {
    long n = 0;
    for (int i = 0; i < kChecksPerThread; ++i) {
      // Far more distinct keys than max_keys, plus a shared hot set.
      std::string key = i % 4 == 0
                            ? "hot" + std::to_string(i % 16)
                            : "t" + std::to_string(t) + ":" + std::to_string(i);
      n += store->check(key, kEpoch + i, 1).allowed;
      if (i % 64 == 0) {
        (void)store->peek(key, kEpoch + i);
        if (i % 128 == 0) (void)store->reset(key);
        if (store->size() > kMaxKeys) over = true;
      }
    }
    return n;
  });
  EXPECT_FALSE(over.load());
  EXPECT_LE(store->size(), kMaxKeys);
}

// check_many on threads whose batches share keys, while the tables grow
// from 16 slots a shard (the prefetch hints move under the readers): every
// key admits exactly its limit, as with check.
TEST(MemoryStoreConcurrency, CheckManyWhileTablesGrowAdmitsExactlyLimit) {
  constexpr int64_t kLimit = 3;
  constexpr int kKeys = 2000;
  auto store = *MemoryStore<Gcra>::create(*Gcra::create({kLimit, 60'000, 0}),
                                          {.max_keys = 8192, .shards = 4});
  std::vector<std::string> names;
  for (int k = 0; k < kKeys; ++k) names.push_back("k" + std::to_string(k));
  std::vector<std::atomic<int>> admitted(kKeys);
  testing::run_threads(kThreads, [&](int t) {
    std::vector<std::string_view> batch(37);
    std::vector<int> index(batch.size());
    std::vector<Decision> out(batch.size());
    for (int round = 0; round < 300; ++round) {
      for (size_t j = 0; j < batch.size(); ++j) {
        index[j] = static_cast<int>((round * 37 + j * 53 + t * 11) % kKeys);
        batch[j] = names[static_cast<size_t>(index[j])];
      }
      store->check_many(batch, kEpoch, 1, out);
      for (size_t j = 0; j < batch.size(); ++j) {
        if (out[j].allowed) admitted[static_cast<size_t>(index[j])]++;
      }
    }
    return 0L;
  });
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_LE(admitted[static_cast<size_t>(k)].load(), kLimit) << k;
  }
  // Every key was asked more than its limit: each admitted exactly it.
  int exact = 0;
  for (int k = 0; k < kKeys; ++k) {
    exact += admitted[static_cast<size_t>(k)].load() == kLimit ? 1 : 0;
  }
  EXPECT_EQ(exact, kKeys);
}

// The same bound as it is used: RateLimiter::check_many on the real clock
// (one read per batch, so batches carry stale nows), 8 threads on 2 cores,
// fixed windows of 10 ms crossed some 150 times, each admission counted in
// the window its decision names (reset_at): at most the limit per key and
// window, and the limit reached in most windows a key was pressed in.
TEST(RateLimiterConcurrency, CheckManyOnTheRealClockHoldsEachWindow) {
  constexpr int64_t kLimit = 3;
  constexpr int64_t kWindowMs = 10;
  constexpr int kKeys = 64;
  auto limiter = *RateLimiter<FixedWindow>::create(
      {.limit = kLimit, .window_ms = kWindowMs},
      {.store = {.max_keys = 1024, .shards = 4}});
  std::vector<std::string> names;
  for (int k = 0; k < kKeys; ++k) names.push_back("k" + std::to_string(k));
  // (key, window end) -> admitted; one map per thread, merged after.
  using Counts = std::map<std::pair<int, int64_t>, int64_t>;
  std::vector<Counts> counts(kThreads);
  const int64_t end = SystemClock{}.now_ms() + 150 * kWindowMs;
  testing::run_threads(kThreads, [&](int t) {
    std::vector<std::string_view> batch(16);
    std::vector<int> index(batch.size());
    std::vector<Decision> out(batch.size());
    for (int round = 0; SystemClock{}.now_ms() < end; ++round) {
      for (size_t j = 0; j < batch.size(); ++j) {
        index[j] = static_cast<int>((round * 7 + j * 5 + t * 3) % kKeys);
        batch[j] = names[static_cast<size_t>(index[j])];
      }
      if (!limiter.check_many(batch, std::span<Decision>(out)).ok()) break;
      for (size_t j = 0; j < batch.size(); ++j) {
        if (out[j].allowed) ++counts[t][{index[j], out[j].reset_at_ms}];
      }
    }
    return 0L;
  });
  Counts all;
  for (const Counts& c : counts) {
    for (const auto& [at, n] : c) all[at] += n;
  }
  int64_t full = 0;
  std::set<int64_t> windows;
  for (const auto& [at, n] : all) {
    EXPECT_LE(n, kLimit) << "key " << at.first << ", window ending "
                         << at.second;
    full += n == kLimit ? 1 : 0;
    windows.insert(at.second);
  }
  EXPECT_GE(windows.size(), 100u);
  EXPECT_GE(full * 2, static_cast<int64_t>(all.size()));
}

TEST(RateLimiterConcurrency, ManyKeysEachAdmitExactlyLimit) {
  constexpr int64_t kLimit = 10;
  auto limiter = *RateLimiter<Gcra>::create({kLimit, 3'600'000, 0});
  const long admitted = admitted_by_threads([&](int i) {
    std::string key = "k" + std::to_string(i % 20);
    return limiter.check_at(key, kEpoch, 1)->allowed;
  });
  EXPECT_EQ(admitted, 20 * kLimit);
}

TEST(GcraCellConcurrency, AtLimitAdmitsExactlyLimit) {
  constexpr int64_t kLimit = 777;
  auto cell = *GcraCell::create({kLimit, 60'000, 0});
  const long admitted = admitted_by_threads(
      [&](int) { return cell.check_at(kEpoch, 1)->allowed; });
  EXPECT_EQ(admitted, kLimit);
}

TEST(CellConcurrency, AtLimitAdmitsExactlyLimit) {
  constexpr int64_t kLimit = 333;
  auto cell = *Cell<Gcra>::create({kLimit, 60'000, 0});
  const long admitted = admitted_by_threads(
      [&](int) { return cell->check_at(kEpoch, 1)->allowed; });
  EXPECT_EQ(admitted, kLimit);
}

}  // namespace
}  // namespace memory_store_concurrency_test
}  // namespace throttlekit
