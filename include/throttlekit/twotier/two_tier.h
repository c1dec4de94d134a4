// throttlekit/twotier/two_tier.h
//
// Provides `TwoTier<S>`: the two-tier engine (docs/twotier.md) behind one
// type, its mode chosen at creation:
//
//   kStrict      every check is one store round trip, exact
//                (`StrictRateLimiter`);
//   kCachedDeny  admissions as strict; denials remembered locally for their
//                retry hint, so a flood on a blocked key costs no round
//                trips (`CachedDenyLimiter`);
//   kLeased      credits leased from the store in batches and spent locally,
//                about one round trip per batch; window-coupled credits
//                hold the fleet at `limit` per window for any number of
//                nodes (`LeasedLimiter`).
//
//     auto limiter = TwoTier<FixedWindow>::create(
//         {.limit = 1000, .window_ms = 1000}, redis,
//         {.mode = TwoTierMode::kLeased, .prefix = "api",
//          .leased = LeasedLimiterOptions{.batch = 50}});
//     absl::StatusOr<Decision> d = limiter->check("tenant:7");
//
// A lease is a share of a fixed window (`LeaseBudget`), so kLeased is
// offered for `TwoTier<FixedWindow>` only: its limit and window are the
// budget's. Other strategies choose strict or cached-deny.
//
// Choosing (docs/twotier.md): strict when every decision must be exact
// on the store's clock and a round trip per check is affordable; cached-deny
// when the hot case is a blocked key under attack; leased when admissions
// dominate and one round trip per batch is the budget.
//
// Thread-safety: every method is safe to call concurrently. The
// coordinator must outlive the limiter.

#ifndef THROTTLEKIT_TWOTIER_TWO_TIER_H_
#define THROTTLEKIT_TWOTIER_TWO_TIER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/strategy.h"
#include "throttlekit/twotier/cached_deny_limiter.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {

enum class TwoTierMode { kStrict, kCachedDeny, kLeased };

struct TwoTierOptions {
  TwoTierMode mode = TwoTierMode::kStrict;
  // Names the keyspace: store keys are `prefix:key`.
  std::string prefix;
  // kCachedDeny and kLeased: keys held per node (cached denials or leased
  // keys); 16 .. 2^32. Setting it in kStrict is an error.
  int64_t max_keys = int64_t{1} << 16;
  // What an outage becomes (fail_policy.h).
  FailPolicy fail_policy = FailPolicy::kPropagate;
  // kLeased only (an error in the other modes): the lease knobs (batch,
  // window coupling, low water, idle return, sizing). Its limit and window
  // are the strategy's and its prefix, max_keys and fail policy the fields
  // above, so setting those inside it is an error too.
  std::optional<LeasedLimiterOptions> leased;
};

template <Strategy S, EpochClock C = SystemClock>
class TwoTier {
 public:
  struct Stats {
    TwoTierMode mode = TwoTierMode::kStrict;
    int64_t outages = 0;         // outages the fail policy decided
    int64_t store_checks = 0;    // kCachedDeny: store round trips
    int64_t cached_denials = 0;  // kCachedDeny: denials from the cache
    int64_t leases = 0;          // kLeased: lease round trips
  };

  // Validates everything; errors name the field. kLeased with a strategy
  // other than FixedWindow is an InvalidArgument.
  static absl::StatusOr<std::unique_ptr<TwoTier>> create(
      const typename S::Options& strategy_options,
      std::shared_ptr<Coordinator> coordinator, TwoTierOptions options = {},
      C clock = C{}) {
    if (absl::Status s = refuse_ignored(options); !s.ok()) return s;
    std::unique_ptr<TwoTier> t(new TwoTier(options.mode));
    switch (options.mode) {
      case TwoTierMode::kStrict: {
        auto strict = StrictRateLimiter<S, C>::create(
            strategy_options, std::move(coordinator),
            {.prefix = options.prefix, .fail_policy = options.fail_policy},
            std::move(clock));
        if (!strict.ok()) return strict.status();
        t->strict_ = *std::move(strict);
        break;
      }
      case TwoTierMode::kCachedDeny: {
        auto cached = CachedDenyLimiter<S, C>::create(
            strategy_options, std::move(coordinator),
            {.prefix = options.prefix,
             .max_keys = options.max_keys,
             .fail_policy = options.fail_policy},
            std::move(clock));
        if (!cached.ok()) return cached.status();
        t->cached_ = *std::move(cached);
        break;
      }
      case TwoTierMode::kLeased: {
        if constexpr (std::is_same_v<S, FixedWindow>) {
          if (absl::StatusOr<S> s = S::create(strategy_options); !s.ok()) {
            return s.status();
          }
          LeasedLimiterOptions l =
              std::move(options.leased).value_or(LeasedLimiterOptions{});
          l.prefix = options.prefix;
          l.limit = strategy_options.limit;
          l.window_ms = strategy_options.window_ms;
          l.max_keys = options.max_keys;
          l.fail_policy = options.fail_policy;
          auto leased = BasicLeasedLimiter<C>::create(
              std::move(l), std::move(coordinator), std::move(clock));
          if (!leased.ok()) return leased.status();
          t->leased_ = *std::move(leased);
          break;
        } else {
          return absl::InvalidArgumentError(
              "two_tier.mode kLeased leases shares of a fixed window: use "
              "TwoTier<FixedWindow> (its limit and window are the budget)");
        }
      }
      default:
        return absl::InvalidArgumentError("two_tier.mode is not a TwoTierMode");
    }
    return t;
  }

  // The `RateEngine` verbs (core/rate_engine.h), answered by the mode's
  // engine: `StrictRateLimiter`, `CachedDenyLimiter` or `LeasedLimiter`
  // (whose `peek` and `forecast` are kUnimplemented).
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return visit([&](auto& e) { return e.check(key, cost); });
  }
  // At a caller-supplied epoch-ms `now_ms` (strict and cached-deny pass it
  // to the store; leased spends at it locally).
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    return visit([&](auto& e) { return e.check_at(key, now_ms, cost); });
  }
  // Without waiting (docs/async.md): the mode's engine's `check_async`,
  // with its rules (inline where no I/O is needed).
  template <DecisionCallback F>
  void check_async(std::string_view key, double cost, F&& on_done) {
    visit([&](auto& e) { e.check_async(key, cost, std::forward<F>(on_done)); });
  }
  template <DecisionCallback F>
  void check_async(std::string_view key, F&& on_done) {
    check_async(key, 1, std::forward<F>(on_done));
  }
  template <DecisionCallback F>
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      F&& on_done) {
    visit([&](auto& e) {
      e.check_at_async(key, now_ms, cost, std::forward<F>(on_done));
    });
  }
  // `co_await limiter->async_check(key)` (core/check_awaitable.h).
  CheckAwaitable<TwoTier> async_check(std::string_view key, double cost = 1) {
    return CheckAwaitable<TwoTier>(*this, key, cost);
  }
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    return visit([&](auto& e) { return e.check_many(keys, out, cost); });
  }
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    return visit([&](auto& e) { return e.check_many(keys, cost); });
  }
  absl::StatusOr<Decision> peek(std::string_view key) {
    return visit([&](auto& e) { return e.peek(key); });
  }
  absl::StatusOr<Forecast> forecast(std::string_view key, double cost = 1) {
    return visit([&](auto& e) { return e.forecast(key, cost); });
  }
  absl::Status reset(std::string_view key) {
    return visit([&](auto& e) { return e.reset(key); });
  }

  // The mode's counters (the engine's own stats, through `strict()`,
  // `cached_deny()` or `leased()`, have more).
  Stats stats() const {
    Stats st{.mode = mode_};
    if (strict_) st.outages = strict_->stats().outages;
    if (cached_) {
      const auto c = cached_->stats();
      st.outages = c.outages;
      st.store_checks = c.store_checks;
      st.cached_denials = c.cached_denials;
    }
    if (leased_) {
      const auto l = leased_->stats();
      st.outages = l.outages;
      st.leases = l.leases;
    }
    return st;
  }

  // Releases what the limiter holds: leased credits go back to their
  // window and the background worker stops. A no-op for the other modes.
  absl::Status close() {
    return mode_ == TwoTierMode::kLeased ? leased_->close() : absl::OkStatus();
  }

  TwoTierMode mode() const noexcept { return mode_; }
  // True in kStrict and kCachedDeny, whose `check` decides on the store's
  // clock (core/rate_engine.h); kLeased spends its credits locally.
  bool decides_at_store() const noexcept {
    return mode_ != TwoTierMode::kLeased;
  }
  // The engine behind the mode (null for the other modes), for its stats.
  StrictRateLimiter<S, C>* strict() const noexcept { return strict_.get(); }
  CachedDenyLimiter<S, C>* cached_deny() const noexcept {
    return cached_.get();
  }
  BasicLeasedLimiter<C>* leased() const noexcept { return leased_.get(); }

 private:
  explicit TwoTier(TwoTierMode mode) : mode_(mode) {}

  template <class Fn>
  auto visit(Fn fn) {
    switch (mode_) {
      case TwoTierMode::kStrict:
        return fn(*strict_);
      case TwoTierMode::kCachedDeny:
        return fn(*cached_);
      default:
        return fn(*leased_);
    }
  }

  // An option the chosen mode would not read is an error, not a silent
  // no-op.
  static absl::Status refuse_ignored(const TwoTierOptions& o) {
    if (o.mode == TwoTierMode::kStrict &&
        o.max_keys != TwoTierOptions{}.max_keys) {
      return absl::InvalidArgumentError(
          "two_tier.max_keys is read by kCachedDeny and kLeased only; kStrict "
          "holds no keys");
    }
    if (o.mode != TwoTierMode::kLeased && o.leased.has_value()) {
      return absl::InvalidArgumentError(
          "two_tier.leased is read by kLeased only");
    }
    if (o.leased.has_value()) {
      const LeasedLimiterOptions& l = *o.leased;
      const LeasedLimiterOptions unset;
      if (l.prefix != unset.prefix || l.limit != unset.limit ||
          l.window_ms != unset.window_ms || l.max_keys != unset.max_keys ||
          !(l.fail_policy == unset.fail_policy)) {
        return absl::InvalidArgumentError(
            "two_tier.leased: prefix, max_keys and fail_policy come from "
            "two_tier's own fields and limit and window_ms from the "
            "strategy; leave them unset in two_tier.leased");
      }
    }
    return absl::OkStatus();
  }

  const TwoTierMode mode_;
  std::unique_ptr<StrictRateLimiter<S, C>> strict_;
  std::unique_ptr<CachedDenyLimiter<S, C>> cached_;
  std::unique_ptr<BasicLeasedLimiter<C>> leased_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_TWO_TIER_H_
