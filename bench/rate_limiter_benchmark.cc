// Benchmarks of the keyed check path (`RateLimiter` over `MemoryStore`) and
// the single-key cells, beside the physical floors they are judged against
// and a naive baseline, all in one binary so every result is a ratio
// measured in one run (docs/performance.md).
//
// Floors: one SystemClock read; one uncontended compare-and-swap on an
// int64; one absl::flat_hash_map lookup of the same 12-character key.
// Baseline: std::mutex + std::unordered_map holding the same strategy.
//
// The strategies run in their admitting regime (a burst far larger than the
// run), so every measured call is an allowed check that writes state.

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;
constexpr int kDistinctKeys = 1'000'000;

// 12-character keys "k00000000042".
const std::vector<std::string>& distinct_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    k.reserve(kDistinctKeys);
    char buf[16];
    for (int i = 0; i < kDistinctKeys; ++i) {
      std::snprintf(buf, sizeof buf, "k%011d", i);
      k.emplace_back(buf);
    }
    return k;
  }();
  return keys;
}

std::string thread_key(int thread) {
  return "hotkey-" + std::to_string(10000 + thread);  // 12 characters
}

// A caller-supplied `now` for one benchmark run: every run starts 10^9 ms
// after the previous one, so time never goes backwards across the runs
// Google Benchmark makes (a restart at the same epoch would send state-
// heavy strategies down their clock-behind path), and stays far below the
// real clock used by the clock-reading benchmarks, whose keys differ.
// Every thread of one run calls it once, so the threads of a run share one
// start (runs are not interleaved).
int64_t run_start_ms(const benchmark::State& state) {
  static std::atomic<int64_t> calls{0};
  const int64_t run =
      calls.fetch_add(1, std::memory_order_relaxed) / state.threads();
  return kEpoch + 1'000'000'000 * (run + 1);
}

// Keys for benchmarks with a caller-supplied `now` (never shared with the
// clock-reading benchmarks' keys).
std::string at_thread_key(int thread) {
  return "at-hotkey-" + std::to_string(10 + thread);  // 12 characters
}

// Options that admit every call of a benchmark run (T = 1 ms, burst 1e12).
template <class S>
typename S::Options admitting_options();
template <>
Gcra::Options admitting_options<Gcra>() {
  return {1'000'000'000'000, 1'000'000'000'000, 0};
}
template <>
TokenBucket::Options admitting_options<TokenBucket>() {
  return {1'000'000'000'000'000, 1'000'000};
}
template <>
FixedWindow::Options admitting_options<FixedWindow>() {
  return {1'000'000'000'000'000, 3'600'000};
}
template <>
SlidingWindow::Options admitting_options<SlidingWindow>() {
  return {1'000'000'000'000'000, 60'000, 10};
}
// The log keeps one run per distinct `now`; a 1 s window bounds it at 1000.
template <>
SlidingLog::Options admitting_options<SlidingLog>() {
  return {1'000'000'000'000, 1'000};
}
template <>
Quota::Options admitting_options<Quota>() {
  Quota::Options o;
  o.limit = 1'000'000'000'000'000;
  o.period = QuotaPeriod::kDay;
  return o;
}
template <>
TokenBudget::Options admitting_options<TokenBudget>() {
  return {1'000'000'000'000'000, 3'600'000};
}

// ---- Floors ---------------------------------------------------------------

void BM_Floor_SystemClockRead(benchmark::State& state) {
  SystemClock clock;
  for (auto _ : state) benchmark::DoNotOptimize(clock.now_ms());
}
BENCHMARK(BM_Floor_SystemClockRead)->ThreadRange(1, 2)->UseRealTime();

// The default clock (core/tsc_clock.h): the counter's line.
void BM_Floor_TscClockRead(benchmark::State& state) {
  TscClock clock;
  (void)clock.now_ms();
  if (TscClock::status().mode != TscClockStatus::Mode::kFast) {
    // Calibrating: wait out the first 10 ms so the fast path is measured.
    const int64_t until = SystemClock{}.now_ms() + 15;
    while (SystemClock{}.now_ms() < until) (void)clock.now_ms();
  }
  if (TscClock::status().mode != TscClockStatus::Mode::kFast) {
    state.SkipWithError(std::string(TscClock::status().reason).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(clock.now_ms());
}
BENCHMARK(BM_Floor_TscClockRead)->ThreadRange(1, 2)->UseRealTime();

// The counter read alone: the fast clock's own floor.
void BM_Floor_Rdtsc(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(detail::HardwareTscSources{}.ticks());
  }
}
BENCHMARK(BM_Floor_Rdtsc);

void BM_Floor_CoarseClockRead(benchmark::State& state) {
  CoarseSystemClock clock;
  for (auto _ : state) benchmark::DoNotOptimize(clock.now_ms());
}
BENCHMARK(BM_Floor_CoarseClockRead);

void BM_Floor_Cas(benchmark::State& state) {
  alignas(64) std::atomic<int64_t> word{0};
  int64_t v = 0;
  for (auto _ : state) {
    word.compare_exchange_strong(v, v + 1, std::memory_order_acq_rel);
    ++v;
  }
  benchmark::DoNotOptimize(word.load());
}
BENCHMARK(BM_Floor_Cas)->ThreadRange(1, 2)->UseRealTime();

// One int64 shared by all threads: the cost of moving a contended cache
// line between cores (the floor of anything that updates one shared word).
void BM_Floor_SharedCas(benchmark::State& state) {
  alignas(64) static std::atomic<int64_t> word{0};
  for (auto _ : state) {
    int64_t v = word.load(std::memory_order_relaxed);
    while (!word.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) {
    }
  }
}
BENCHMARK(BM_Floor_SharedCas)->ThreadRange(1, 2)->UseRealTime();

void BM_Floor_FetchSub(benchmark::State& state) {
  alignas(64) std::atomic<int64_t> word{1'000'000'000'000};
  for (auto _ : state) {
    benchmark::DoNotOptimize(word.fetch_sub(1, std::memory_order_acq_rel));
  }
}
BENCHMARK(BM_Floor_FetchSub);

void BM_Floor_FlatHashMapLookup(benchmark::State& state) {
  absl::flat_hash_map<std::string, double> map;
  const std::string key = thread_key(state.thread_index());
  // The key alone: absl::Hash is seeded per process, so with other keys
  // present the probe length (and this floor) would vary from run to run;
  // alone, the floor is its lowest (the conservative choice).
  map[key] = 1;
  for (auto _ : state) {
    std::string_view probe = key;
    benchmark::DoNotOptimize(probe);  // a fresh key each call: no hoisting
    benchmark::DoNotOptimize(
        map.find(absl::string_view(probe.data(), probe.size())));
  }
}
BENCHMARK(BM_Floor_FlatHashMapLookup)->ThreadRange(1, 2)->UseRealTime();

void BM_Floor_FlatHashMapLookupDistinct(benchmark::State& state) {
  const auto& keys = distinct_keys();
  absl::flat_hash_map<std::string, double> map;
  map.reserve(keys.size());
  for (const auto& k : keys) map[k] = 1;
  size_t i = 0;
  for (auto _ : state) {
    const std::string& k = keys[i];
    benchmark::DoNotOptimize(map.find(absl::string_view(k.data(), k.size())));
    if (++i == keys.size()) i = 0;
  }
}
BENCHMARK(BM_Floor_FlatHashMapLookupDistinct);

// ---- The keyed check --------------------------------------------------------

template <class S>
RateLimiter<S>& shared_limiter() {
  static auto* limiter = new RateLimiter<S>(*RateLimiter<S>::create(
      admitting_options<S>(), {.store = {.max_keys = 2 * kDistinctKeys}}));
  return *limiter;
}

// One hot key per thread, the clock read inside `check`.
template <class S>
void BM_RateLimiter_CheckHotKey(benchmark::State& state) {
  RateLimiter<S>& limiter = shared_limiter<S>();
  const std::string key = thread_key(state.thread_index());
  for (auto _ : state) {
    std::string_view k = key;
    benchmark::DoNotOptimize(k);  // a fresh key each call: no hoisting
    benchmark::DoNotOptimize(limiter.check(k));
  }
}

// As above on `SystemClock` (CLOCK_REALTIME), the default before the fast
// clock.
template <class S>
void BM_RateLimiter_CheckHotKeySystemClock(benchmark::State& state) {
  static auto* limiter = new RateLimiter<S, SystemClock>(
      *RateLimiter<S, SystemClock>::create(admitting_options<S>()));
  const std::string key = thread_key(state.thread_index());
  for (auto _ : state) {
    std::string_view k = key;
    benchmark::DoNotOptimize(k);  // a fresh key each call: no hoisting
    benchmark::DoNotOptimize(limiter->check(k));
  }
}
BENCHMARK_TEMPLATE(BM_RateLimiter_CheckHotKeySystemClock, Gcra)
    ->Threads(1)
    ->UseRealTime();

// One hot key per thread, a caller-supplied `now` (advancing 1 ms a call).
template <class S>
void BM_RateLimiter_CheckAtHotKey(benchmark::State& state) {
  RateLimiter<S>& limiter = shared_limiter<S>();
  const std::string key = at_thread_key(state.thread_index());
  int64_t now = run_start_ms(state);
  for (auto _ : state) {
    std::string_view k = key;
    benchmark::DoNotOptimize(k);  // a fresh key each call: no hoisting
    benchmark::DoNotOptimize(limiter.check_at(k, ++now));
  }
}

// 10^6 distinct keys visited round robin (cache-missing), caller `now`.
template <class S>
void BM_RateLimiter_CheckAtDistinctKeys(benchmark::State& state) {
  RateLimiter<S>& limiter = shared_limiter<S>();
  const auto& keys = distinct_keys();
  size_t i = state.thread_index() * (keys.size() / 2);
  int64_t now = run_start_ms(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter.check_at(keys[i], ++now));
    if (++i == keys.size()) i = 0;
  }
}

// 10^6 distinct keys, the clock read inside.
template <class S>
void BM_RateLimiter_CheckDistinctKeys(benchmark::State& state) {
  RateLimiter<S>& limiter = shared_limiter<S>();
  const auto& keys = distinct_keys();
  size_t i = state.thread_index() * (keys.size() / 2);
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter.check(keys[i]));
    if (++i == keys.size()) i = 0;
  }
}

#define THROTTLEKIT_KEYED_BENCHMARKS(S)                     \
  BENCHMARK_TEMPLATE(BM_RateLimiter_CheckHotKey, S)         \
      ->Threads(1)                                          \
      ->Threads(2)                                          \
      ->UseRealTime();                                      \
  BENCHMARK_TEMPLATE(BM_RateLimiter_CheckAtHotKey, S)       \
      ->Threads(1)                                          \
      ->Threads(2)                                          \
      ->UseRealTime();                                      \
  BENCHMARK_TEMPLATE(BM_RateLimiter_CheckAtDistinctKeys, S) \
      ->Threads(1)                                          \
      ->Threads(2)                                          \
      ->UseRealTime();                                      \
  BENCHMARK_TEMPLATE(BM_RateLimiter_CheckDistinctKeys, S)->Threads(1)

THROTTLEKIT_KEYED_BENCHMARKS(Gcra);
THROTTLEKIT_KEYED_BENCHMARKS(TokenBucket);
THROTTLEKIT_KEYED_BENCHMARKS(FixedWindow);
THROTTLEKIT_KEYED_BENCHMARKS(SlidingWindow);
THROTTLEKIT_KEYED_BENCHMARKS(SlidingLog);
THROTTLEKIT_KEYED_BENCHMARKS(Quota);
THROTTLEKIT_KEYED_BENCHMARKS(TokenBudget);

// ---- Batches of distinct cold keys -----------------------------------------

// Every one of the 10^6 keys present in the shared limiter (once per
// strategy), so the batch benchmarks miss the cache, not the table.
template <class S>
void warm_distinct_keys() {
  static const bool warmed = [] {
    RateLimiter<S>& limiter = shared_limiter<S>();
    for (const std::string& k : distinct_keys()) {
      benchmark::DoNotOptimize(limiter.check(k));
    }
    return true;
  }();
  benchmark::DoNotOptimize(warmed);
}

// The next `views.size()` keys of the 10^6, round robin from `*next`.
void next_batch(std::vector<std::string_view>& views, size_t* next) {
  const auto& keys = distinct_keys();
  for (std::string_view& v : views) {
    v = keys[*next];
    if (++*next == keys.size()) *next = 0;
  }
}

// Runs `decide(limiter, batch)` per iteration on the next `range(0)`
// distinct keys out of 10^6 (all present); items are keys.
template <class S, class Decide>
void run_distinct_batches(benchmark::State& state, Decide decide) {
  RateLimiter<S>& limiter = shared_limiter<S>();
  warm_distinct_keys<S>();
  std::vector<std::string_view> views(static_cast<size_t>(state.range(0)));
  size_t next = 0;
  for (auto _ : state) {
    next_batch(views, &next);
    decide(limiter, views);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// One `check_many` per batch (one clock read, misses overlapped).
template <class S>
void BM_RateLimiter_CheckManyDistinct(benchmark::State& state) {
  std::vector<Decision> out(static_cast<size_t>(state.range(0)));
  run_distinct_batches<S>(state, [&](RateLimiter<S>& limiter, auto& views) {
    benchmark::DoNotOptimize(limiter.check_many(views, out));
  });
}

// The same keys, one `check` each (a clock read and a miss per key).
template <class S>
void BM_RateLimiter_CheckOneByOneDistinct(benchmark::State& state) {
  run_distinct_batches<S>(state, [](RateLimiter<S>& limiter, auto& views) {
    for (std::string_view k : views) benchmark::DoNotOptimize(limiter.check(k));
  });
}

// The same keys, one `check_at` each with one `now` per batch (a miss per
// key, no clock read): what the overlap alone buys.
template <class S>
void BM_RateLimiter_CheckAtOneByOneDistinct(benchmark::State& state) {
  run_distinct_batches<S>(state, [](RateLimiter<S>& limiter, auto& views) {
    const int64_t now = SystemClock{}.now_ms();
    for (std::string_view k : views) {
      benchmark::DoNotOptimize(limiter.check_at(k, now));
    }
  });
}

BENCHMARK_TEMPLATE(BM_RateLimiter_CheckOneByOneDistinct, Gcra)->Arg(64);
BENCHMARK_TEMPLATE(BM_RateLimiter_CheckAtOneByOneDistinct, Gcra)->Arg(64);
BENCHMARK_TEMPLATE(BM_RateLimiter_CheckManyDistinct, Gcra)
    ->Arg(8)
    ->Arg(64)
    ->Arg(1024);
BENCHMARK_TEMPLATE(BM_RateLimiter_CheckOneByOneDistinct, TokenBucket)->Arg(64);
BENCHMARK_TEMPLATE(BM_RateLimiter_CheckManyDistinct, TokenBucket)->Arg(64);

// ---- Naive baseline: std::mutex + std::unordered_map -----------------------

template <class S>
class NaiveLimiter {
 public:
  explicit NaiveLimiter(S strategy) : strategy_(std::move(strategy)) {}
  Decision check_at(const std::string& key, int64_t now_ms, double cost) {
    std::lock_guard<std::mutex> lock(mu_);
    return strategy_.check(states_[key], now_ms, cost);
  }

 private:
  S strategy_;
  std::mutex mu_;
  std::unordered_map<std::string, typename S::State> states_;
};

template <class S>
void BM_NaiveMutexMap_CheckAtHotKey(benchmark::State& state) {
  static auto* naive = new NaiveLimiter<S>(*S::create(admitting_options<S>()));
  std::string key = at_thread_key(state.thread_index());
  int64_t now = run_start_ms(state);
  for (auto _ : state) {
    benchmark::DoNotOptimize(key);  // a fresh key each call: no hoisting
    benchmark::DoNotOptimize(naive->check_at(key, ++now, 1));
  }
}
BENCHMARK_TEMPLATE(BM_NaiveMutexMap_CheckAtHotKey, Gcra)
    ->ThreadRange(1, 2)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_NaiveMutexMap_CheckAtHotKey, TokenBucket)
    ->ThreadRange(1, 2)
    ->UseRealTime();

// One key's cell checked at rising times from the run's start.
template <class C>
void cell_check_at(benchmark::State& state, C& cell) {
  int64_t now = run_start_ms(state);
  for (auto _ : state) benchmark::DoNotOptimize(cell.check_at(++now));
}

// The token-bucket cell (any strategy in a `Cell`, under a spin lock).
void BM_TokenBucketCell_CheckAt(benchmark::State& state) {
  static auto* cell =
      Cell<TokenBucket>::create(admitting_options<TokenBucket>())->release();
  cell_check_at(state, *cell);
}
BENCHMARK(BM_TokenBucketCell_CheckAt)->ThreadRange(1, 2)->UseRealTime();

// ---- Single-key cells -------------------------------------------------------

void BM_GcraCell_CheckAt(benchmark::State& state) {
  static auto* cell =
      new GcraCell(*GcraCell::create(admitting_options<Gcra>()));
  cell_check_at(state, *cell);
}
BENCHMARK(BM_GcraCell_CheckAt)->ThreadRange(1, 2)->UseRealTime();

void BM_GcraCell_Check(benchmark::State& state) {
  static auto* cell =
      new GcraCell(*GcraCell::create(admitting_options<Gcra>()));
  for (auto _ : state) benchmark::DoNotOptimize(cell->check());
}
BENCHMARK(BM_GcraCell_Check);

// ---- Memory per key
// -----------------------------------------------------------

// Everything the store holds for 10^6 GCRA keys of 12 characters, measured
// by the allocator (mallinfo2) and divided by the keys.
void BM_MemoryStore_BytesPerGcraKey(benchmark::State& state) {
  const auto& keys = distinct_keys();
  for (auto _ : state) {
    // In-use heap bytes: small blocks plus mmap()ed large blocks.
    const auto in_use = [] {
      const struct mallinfo2 m = mallinfo2();
      return m.uordblks + m.hblkhd;
    };
    const size_t before = in_use();
    auto store = *MemoryStore<Gcra>::create(*Gcra::create({10, 1000, 0}),
                                            {.max_keys = 2 * kDistinctKeys});
    for (const auto& k : keys) (void)store->check(k, kEpoch, 1);
    const size_t after = in_use();
    state.counters["keys"] = static_cast<double>(store->size());
    state.counters["bytes_per_key"] = static_cast<double>(after - before) /
                                      static_cast<double>(store->size());
    state.counters["table_bytes_per_key"] =
        static_cast<double>(store->memory_bytes()) /
        static_cast<double>(store->size());
  }
}
BENCHMARK(BM_MemoryStore_BytesPerGcraKey)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
