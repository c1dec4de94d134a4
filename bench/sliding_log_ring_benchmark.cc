// Benchmarks SlidingLogRing (lock-free, one CAS per admission) against the
// same algorithm behind a std::mutex over a std::deque (the baseline a
// reader would write first), on one shared resource, 1 and 2 threads, with
// caller-supplied `now`.
//
// Regimes (the benchmark argument):
// - 0, admitting: limit 2^16, window 1 ms; every thread moves a shared
//   `now` forward one ms every 64 of its calls (so time moves even while
//   another thread is descheduled), and nearly every call admits (the
//   `admit_ratio` counter shows how many did).
// - 1, denying: limit 1000, window 60 s, a fixed `now`; the resource is at
//   its limit, so every call is a denial (a read-only path in the ring).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>

#include "throttlekit/core/decision.h"
#include "throttlekit/store/sliding_log_ring.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;
constexpr int64_t kAdmittingLimit = int64_t{1} << 16;
constexpr int64_t kAdmittingWindowMs = 1;
constexpr int64_t kDenyingLimit = 1000;
constexpr int64_t kDenyingWindowMs = 60'000;

// The baseline: the ring's exact semantics (the last `limit` admissions,
// recorded at max(now, newest); admit iff the oldest of them has expired)
// on a deque under one mutex.
class MutexSlidingLog {
 public:
  MutexSlidingLog(int64_t limit, int64_t window_ms)
      : limit_(limit), window_ms_(window_ms) {}

  Decision try_acquire(int64_t now_ms) {
    const int64_t cutoff = now_ms - window_ms_;
    std::lock_guard<std::mutex> lock(mu_);
    const bool full = static_cast<int64_t>(log_.size()) == limit_;
    if (full && log_.front() > cutoff) {
      return Decision{false, limit_, 0, log_.front() + window_ms_,
                      std::max<int64_t>(1, log_.front() + window_ms_ - now_ms)};
    }
    if (full) log_.pop_front();
    const auto first = std::upper_bound(log_.begin(), log_.end(), cutoff);
    const int64_t count = log_.end() - first;
    const int64_t recorded =
        log_.empty() ? now_ms : std::max(now_ms, log_.back());
    const int64_t oldest = count == 0 ? recorded : *first;
    log_.push_back(recorded);
    return Decision{true, limit_, limit_ - count - 1, oldest + window_ms_, 0};
  }

 private:
  const int64_t limit_;
  const int64_t window_ms_;
  std::mutex mu_;
  std::deque<int64_t> log_;
};

// The shared `now` of the admitting regime; it only moves forward, across
// runs too.
std::atomic<int64_t> g_now{kEpoch};

template <class Limiter>
Limiter& limiter(bool admitting);

template <>
SlidingLogRing& limiter<SlidingLogRing>(bool admitting) {
  static SlidingLogRing* const kAdmitting =
      SlidingLogRing::create({kAdmittingLimit, kAdmittingWindowMs})->release();
  static SlidingLogRing* const kDenying = [] {
    SlidingLogRing* r =
        SlidingLogRing::create({kDenyingLimit, kDenyingWindowMs})->release();
    for (int64_t i = 0; i < kDenyingLimit; ++i) (void)r->try_acquire(kEpoch);
    return r;
  }();
  return admitting ? *kAdmitting : *kDenying;
}

template <>
MutexSlidingLog& limiter<MutexSlidingLog>(bool admitting) {
  static MutexSlidingLog* const kAdmitting =
      new MutexSlidingLog(kAdmittingLimit, kAdmittingWindowMs);
  static MutexSlidingLog* const kDenying = [] {
    auto* m = new MutexSlidingLog(kDenyingLimit, kDenyingWindowMs);
    for (int64_t i = 0; i < kDenyingLimit; ++i) (void)m->try_acquire(kEpoch);
    return m;
  }();
  return admitting ? *kAdmitting : *kDenying;
}

template <class Limiter>
void run(benchmark::State& state) {
  const bool admitting = state.range(0) == 0;
  Limiter& l = limiter<Limiter>(admitting);
  int64_t calls = 0;
  int64_t admitted = 0;
  for (auto _ : state) {
    if (admitting && (++calls & 63) == 0) {
      g_now.fetch_add(1, std::memory_order_relaxed);
    }
    const int64_t now =
        admitting ? g_now.load(std::memory_order_relaxed) : kEpoch + 1;
    const Decision d = l.try_acquire(now);
    admitted += d.allowed;
    benchmark::DoNotOptimize(d);
  }
  state.counters["admit_ratio"] = benchmark::Counter(
      static_cast<double>(admitted) / static_cast<double>(state.iterations()),
      benchmark::Counter::kAvgThreads);
}

void BM_SlidingLogRing_TryAcquire(benchmark::State& state) {
  run<SlidingLogRing>(state);
}
void BM_MutexSlidingLog_TryAcquire(benchmark::State& state) {
  run<MutexSlidingLog>(state);
}

BENCHMARK(BM_SlidingLogRing_TryAcquire)
    ->ArgName("denying")
    ->Arg(0)
    ->Arg(1)
    ->ThreadRange(1, 2)
    ->UseRealTime();
BENCHMARK(BM_MutexSlidingLog_TryAcquire)
    ->ArgName("denying")
    ->Arg(0)
    ->Arg(1)
    ->ThreadRange(1, 2)
    ->UseRealTime();

}  // namespace
}  // namespace throttlekit

BENCHMARK_MAIN();
