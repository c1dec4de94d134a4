// throttlekit/federation/region_pool.h
//
// Provides level 1 of the federated weighted-fair escrow (docs/federation.md,
// "Federated weighted-fair escrow"), the region pool, which splits one
// global budget of `L` credits per window between regions by weight:
//
// - `RegionPoolState`, `RegionPoolGrant` and `region_pool_step(...)`: the
//   pure core every backend runs (the memory pool under its mutex, the
//   Redis pool as a Lua script that a conformance test holds equal to it,
//   as federation_core.h is held equal to its scripts);
// - `RegionPool`: the interface of the backends, validating arguments once
//   before any backend sees them;
// - `BasicMemoryRegionPool<C>` / `MemoryRegionPool`: the in-process pool
//   (regions that are threads of one process, and tests).
// `RedisRegionPool` (federation/redis_region_pool.h, target
// `throttlekit::redis`) serves regions that are processes.
//
//     auto pool = std::make_shared<MemoryRegionPool>();
//     absl::StatusOr<RegionPoolGrant> g = pool->grant(
//         *LeaseBudget::create({.limit = 600, .window_ms = 1000}), "api",
//         "eu-west", /*weight=*/5, /*want=*/32);
//
// The step, for region r of weight w asking for an allowance of `want`
// credits at `now` (L = budget.limit(), T = budget.window_ms()):
//
//   1. roll: a cold state, or `now >= ws + T`, starts the window
//      `ws = floor(now / T) * T` with every weight and grant cleared. A
//      `now` behind the stored window stays in it (a clock stepped back
//      never gets a second budget for instants already granted);
//   2. upsert `w_r = w` (a region new to the window has `g_r = 0`);
//   3. if `want <= g_r`, the answer is `g_r` (grants are monotone within a
//      window);
//   4. else `W = sum_j w_j`, `fair_j = floor(w_j * L / W)`,
//      `others = sum_{j != r} max(g_j, fair_j)`,
//      `ceiling = max(g_r, L - others)`, and
//      `g_r = max(g_r, max(0, min(want, ceiling)))`.
//
// `g_r` is cumulative: the region's whole allowance for the window, never
// an increment. A region may use its fair share whenever it asks, and the
// fair share of every other region that asked in the window is reserved
// for it even while unused; what no registered region's fair share covers
// (rounding, regions not yet registered) goes to whoever asks first.
//
// Invariant: `sum_j g_j <= L` after every step. Proof: a roll sets every
// `g_j` to 0 and an upsert changes no grant. A step changes only `g_r`, and
// only upwards; then `g_r' = min(want, ceiling) > g_r`, so `ceiling > g_r`
// and `ceiling = L - others`; hence `sum_j g_j' = g_r' + sum_{j != r} g_j
// <= L - others + sum_{j != r} g_j <= L`, since `g_j <= max(g_j, fair_j)`
// term by term. The weights play no part in the proof: any weights, wants,
// times and orders keep it (tests/federation/region_pool_test.cc checks it
// over random step sequences).
//
// Bounds: weights in [1, 2^31], at most `kMaxPoolRegions` (1024) regions
// per key and window, so `W <= 2^41` and `fair_j` is computed exactly (in
// 128 bits here, by long division in the Lua script, whose numbers are
// doubles); `want` in [0, 2^53-1] (0 registers the weight and reads the
// grant). A new region in a full window is kResourceExhausted and changes
// nothing.
//
// Thread-safety: `region_pool_step` is pure (the caller makes a step
// atomic); a `RegionPool` is safe to call from many threads.

#ifndef THROTTLEKIT_FEDERATION_REGION_POOL_H_
#define THROTTLEKIT_FEDERATION_REGION_POOL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit {

// The most regions one key holds in one window.
inline constexpr size_t kMaxPoolRegions = 1024;
// The longest region name, in bytes.
inline constexpr size_t kMaxRegionNameBytes = 64;
// The largest weight a region reports.
inline constexpr int64_t kMaxRegionWeight = int64_t{1} << 31;

// One key's pool in its current window. No regions: a cold key.
struct RegionPoolState {
  struct Region {
    int64_t weight = 0;   // w_r, as last reported in the window
    int64_t granted = 0;  // g_r, the region's allowance for the window

    friend bool operator==(const Region&, const Region&) = default;
  };
  int64_t window_start_ms = 0;
  std::map<std::string, Region, std::less<>> regions;

  friend bool operator==(const RegionPoolState&,
                         const RegionPoolState&) = default;
};

// The answer of one step.
struct RegionPoolGrant {
  // g_r after the step: the region's whole allowance for the window.
  int64_t granted = 0;
  // g_r before the step (0 for a region new to the window).
  int64_t previous = 0;
  // floor(w_r * L / W) and W, over the regions registered in the window.
  int64_t fair_share = 0;
  int64_t total_weight = 0;
  // The window, [window_start_ms, window_start_ms + window_ms).
  int64_t window_start_ms = 0;

  friend bool operator==(const RegionPoolGrant&,
                         const RegionPoolGrant&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const RegionPoolGrant& g) {
  return os << "{granted=" << g.granted << " previous=" << g.previous
            << " fair_share=" << g.fair_share
            << " total_weight=" << g.total_weight
            << " window_start_ms=" << g.window_start_ms << "}";
}

namespace detail {

// floor(x * y / d), exactly, for 0 <= x, y and 1 <= d with a result that
// fits in an int64 (here x <= d, so the result is at most y).
inline int64_t mul_div_floor(int64_t x, int64_t y, int64_t d) noexcept {
  const absl::uint128 p = absl::uint128(static_cast<uint64_t>(x)) *
                          absl::uint128(static_cast<uint64_t>(y));
  return static_cast<int64_t>(
      absl::Uint128Low64(p / absl::uint128(static_cast<uint64_t>(d))));
}

}  // namespace detail

// OK, or kInvalidArgument naming the field and its bound: `region` 1 .. 64
// bytes, `weight` in [1, 2^31], `want` in [0, 2^53-1].
inline absl::Status validate_region_pool_step(std::string_view region,
                                              int64_t weight, int64_t want) {
  if (region.empty() || region.size() > kMaxRegionNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region_pool.region must be 1 .. 64 bytes; got ", region.size()));
  }
  if (weight < 1 || weight > kMaxRegionWeight) {
    return absl::InvalidArgumentError(
        absl::StrCat("region_pool.weight must be in [1, 2^31]; got ", weight));
  }
  if (want < 0 || want > kMaxSafeInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat("region_pool.want must be in [0, 2^53-1]; got ", want));
  }
  return absl::OkStatus();
}

// The window `s` is in at `now_ms` (see the file comment, rule 1), and
// whether reaching it clears `s`.
inline std::pair<int64_t, bool> region_pool_window(const RegionPoolState& s,
                                                   const LeaseBudget& budget,
                                                   int64_t now_ms) noexcept {
  if (s.regions.empty() || now_ms >= s.window_start_ms + budget.window_ms()) {
    return {budget.window_start(now_ms), true};
  }
  return {s.window_start_ms, false};
}

// One step (see the file comment) at `now_ms` in [0, 2^53-1]. Bad
// arguments are kInvalidArgument and a new region in a full window
// kResourceExhausted; either leaves `s` unchanged.
inline absl::StatusOr<RegionPoolGrant> region_pool_step(
    RegionPoolState& s, const LeaseBudget& budget, std::string_view region,
    int64_t weight, int64_t want, int64_t now_ms) {
  if (absl::Status st = validate_region_pool_step(region, weight, want);
      !st.ok()) {
    return st;
  }
  if (now_ms < 0 || now_ms > kMaxSafeInteger) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region_pool.now_ms must be in [0, 2^53-1]; got ", now_ms));
  }
  const auto [ws, rolls] = region_pool_window(s, budget, now_ms);
  const bool known = !rolls && s.regions.find(region) != s.regions.end();
  if (!known && !rolls && s.regions.size() >= kMaxPoolRegions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("region_pool: the window already holds ", kMaxPoolRegions,
                     " regions; a new region is refused"));
  }
  if (rolls) {
    s.regions.clear();
    s.window_start_ms = ws;
  }
  auto it = s.regions.find(region);
  if (it == s.regions.end()) {
    it =
        s.regions.emplace(std::string(region), RegionPoolState::Region{}).first;
  }
  it->second.weight = weight;
  const int64_t limit = budget.limit();
  int64_t total_weight = 0;
  for (const auto& [name, r] : s.regions) total_weight += r.weight;
  const auto fair = [&](int64_t w) {
    return detail::mul_div_floor(w, limit, total_weight);
  };
  RegionPoolGrant out{it->second.granted, it->second.granted, fair(weight),
                      total_weight, ws};
  if (want <= out.previous) return out;
  // ceiling = max(g_r, L - others), subtracted term by term (every partial
  // result lies in [-L, L], exact in the script's doubles too).
  int64_t ceiling = limit;
  for (const auto& [name, r] : s.regions) {
    if (name != region) ceiling -= std::max(r.granted, fair(r.weight));
  }
  ceiling = std::max(out.previous, ceiling);
  const int64_t fresh = std::max<int64_t>(0, std::min(want, ceiling));
  out.granted = std::max(out.previous, fresh);
  it->second.granted = out.granted;
  return out;
}

// A pool of allowances per key, shared by the regions of a federated
// weighted-fair escrow. Every verb validates its arguments here, before a
// backend sees them; backends return kUnavailable / kDeadlineExceeded when
// their store fails, never a grant they did not make.
//
// Thread-safety: implementations are safe to call from many threads.
class RegionPool {
 public:
  virtual ~RegionPool() = default;

  virtual std::string_view backend() const noexcept = 0;

  // One `region_pool_step` for `region` on `key` (1 byte .. 1 MiB) over
  // `budget`, atomically with every other caller of the pool. `now_ms` 0
  // (the default) reads the pool's clock; a caller time in [1, 2^53-1]
  // decides the window instead (a federated escrow passes its own, as do
  // conformance tests). Every region of a key must pass the same budget.
  absl::StatusOr<RegionPoolGrant> grant(const LeaseBudget& budget,
                                        std::string_view key,
                                        std::string_view region, int64_t weight,
                                        int64_t want, int64_t now_ms = 0) {
    if (absl::Status s = validate_grant(key, region, weight, want, now_ms);
        !s.ok()) {
      return s;
    }
    return do_grant(budget, key, region, weight, want, now_ms);
  }

  // As `grant`, without waiting (core/completion.h, docs/async.md):
  // `on_done` runs exactly once with what `grant` returns; inline for bad
  // arguments and for a pool in memory, from the thread that reads the
  // store's reply for a pool over a store that sends its step without
  // waiting (the Redis pool).
  void grant_async(const LeaseBudget& budget, std::string_view key,
                   std::string_view region, int64_t weight, int64_t want,
                   int64_t now_ms, Completion<RegionPoolGrant> on_done) {
    if (absl::Status s = validate_grant(key, region, weight, want, now_ms);
        !s.ok()) {
      std::move(on_done)(std::move(s));
      return;
    }
    do_grant_async(budget, key, region, weight, want, now_ms,
                   std::move(on_done));
  }

  // `key`'s stored state (no regions: cold or expired), for tests and
  // operators.
  absl::StatusOr<RegionPoolState> state(std::string_view key) {
    if (absl::Status s = validate_pool_key(key); !s.ok()) return s;
    return do_state(key);
  }

 protected:
  virtual absl::StatusOr<RegionPoolGrant> do_grant(const LeaseBudget& budget,
                                                   std::string_view key,
                                                   std::string_view region,
                                                   int64_t weight, int64_t want,
                                                   int64_t now_ms) = 0;
  virtual absl::StatusOr<RegionPoolState> do_state(std::string_view key) = 0;
  // Arguments validated. The default runs `do_grant` and completes inline.
  virtual void do_grant_async(const LeaseBudget& budget, std::string_view key,
                              std::string_view region, int64_t weight,
                              int64_t want, int64_t now_ms,
                              Completion<RegionPoolGrant> on_done) {
    std::move(on_done)(do_grant(budget, key, region, weight, want, now_ms));
  }

 private:
  static absl::Status validate_grant(std::string_view key,
                                     std::string_view region, int64_t weight,
                                     int64_t want, int64_t now_ms) {
    if (absl::Status s = validate_pool_key(key); !s.ok()) return s;
    if (absl::Status s = validate_region_pool_step(region, weight, want);
        !s.ok()) {
      return s;
    }
    if (now_ms < 0 || now_ms > kMaxSafeInteger) {
      return absl::InvalidArgumentError(
          absl::StrCat("region_pool.now_ms must be 0 (the pool's clock) or in "
                       "[1, 2^53-1]; got ",
                       now_ms));
    }
    return absl::OkStatus();
  }
  static absl::Status validate_pool_key(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("region_pool.key: ", s.message()));
    }
    return absl::OkStatus();
  }
};

// The in-process pool: one state per key in a hash map under one mutex,
// the step run under it. `now_ms` 0 reads the injected clock `C`. A key's
// state is dropped once its window ended a whole window ago (swept when the
// map has doubled since the last sweep), which is a cold key to the step
// in every case but a caller clock more than a window behind.
//
// Thread-safety: every method is safe to call concurrently; the clock must
// be thread-safe (every EpochClock is).
template <EpochClock C = SystemClock>
class BasicMemoryRegionPool final : public RegionPool {
 public:
  explicit BasicMemoryRegionPool(C clock = C{}) : clock_(std::move(clock)) {}

  std::string_view backend() const noexcept override { return "memory"; }

  // Keys held (for tests of the sweep).
  size_t size() const {
    MutexLock lock(mu_);
    return states_.size();
  }

 protected:
  absl::StatusOr<RegionPoolGrant> do_grant(const LeaseBudget& budget,
                                           std::string_view key,
                                           std::string_view region,
                                           int64_t weight, int64_t want,
                                           int64_t now_ms) override {
    const int64_t now = now_ms != 0 ? now_ms : clock_.now_ms();
    MutexLock lock(mu_);
    auto [it, fresh] = states_.try_emplace(std::string(key));
    absl::StatusOr<RegionPoolGrant> g =
        region_pool_step(it->second.state, budget, region, weight, want,
                         std::max<int64_t>(0, now));
    if (!g.ok()) {
      if (fresh) states_.erase(it);
      return g;
    }
    it->second.dead_at_ms = g->window_start_ms + 2 * budget.window_ms();
    if (states_.size() >= next_sweep_) sweep(now);
    return g;
  }

  absl::StatusOr<RegionPoolState> do_state(std::string_view key) override {
    MutexLock lock(mu_);
    auto it = states_.find(absl::string_view(key.data(), key.size()));
    if (it == states_.end()) return RegionPoolState{};
    return it->second.state;
  }

 private:
  struct Entry {
    RegionPoolState state;
    // A window past the end of the state's window (epoch ms).
    int64_t dead_at_ms = 0;
  };

  void sweep(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::erase_if(states_, [now_ms](const auto& kv) {
      return now_ms >= kv.second.dead_at_ms;
    });
    next_sweep_ = std::max<size_t>(64, 2 * states_.size());
  }

  const C clock_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> states_ ABSL_GUARDED_BY(mu_);
  size_t next_sweep_ ABSL_GUARDED_BY(mu_) = 64;
};

// The memory pool on the system clock, the common case.
using MemoryRegionPool = BasicMemoryRegionPool<SystemClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_FEDERATION_REGION_POOL_H_
