// throttlekit/twotier/two_tier.h
//
// Provides `TwoTier<S>`: the two-tier engine (seed 002, GALE) behind one
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
//          .leased = {.batch = 50}});
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
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/clock.h"
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
  // Keys held per node (cached denials or leased keys); 16 .. 2^32.
  int64_t max_keys = int64_t{1} << 16;
  FailPolicy fail_policy = FailPolicy::kPropagate;
  int64_t fail_closed_retry_ms = 1000;
  // kLeased: the lease knobs (batch, window coupling, low water, idle
  // return, sizing). Its limit and window are the strategy's; its prefix,
  // max_keys and fail policy are the fields above (what it says for them
  // is ignored).
  LeasedLimiterOptions leased = {};
};

template <Strategy S, EpochClock C = SystemClock>
class TwoTier {
 public:
  // Validates everything; errors name the field. kLeased with a strategy
  // other than FixedWindow is an InvalidArgument.
  static absl::StatusOr<std::unique_ptr<TwoTier>> create(
      const typename S::Options& strategy_options,
      std::shared_ptr<Coordinator> coordinator, TwoTierOptions options = {},
      C clock = C{}) {
    std::unique_ptr<TwoTier> t(new TwoTier(options.mode));
    switch (options.mode) {
      case TwoTierMode::kStrict: {
        auto strict = StrictRateLimiter<S>::create(
            strategy_options, std::move(coordinator),
            {.prefix = options.prefix,
             .fail_policy = options.fail_policy,
             .fail_closed_retry_ms = options.fail_closed_retry_ms});
        if (!strict.ok()) return strict.status();
        t->strict_ = *std::move(strict);
        break;
      }
      case TwoTierMode::kCachedDeny: {
        auto cached = CachedDenyLimiter<S, C>::create(
            strategy_options, std::move(coordinator),
            {.prefix = options.prefix,
             .max_keys = options.max_keys,
             .fail_policy = options.fail_policy,
             .fail_closed_retry_ms = options.fail_closed_retry_ms},
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
          LeasedLimiterOptions l = std::move(options.leased);
          l.prefix = options.prefix;
          l.limit = strategy_options.limit;
          l.window_ms = strategy_options.window_ms;
          l.max_keys = options.max_keys;
          l.fail_policy = options.fail_policy;
          l.fail_closed_retry_ms = options.fail_closed_retry_ms;
          auto leased = LeasedLimiter<C>::create(
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

  // Admits or denies `cost` units for `key` now.
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    switch (mode_) {
      case TwoTierMode::kStrict:
        return strict_->check(key, cost);
      case TwoTierMode::kCachedDeny:
        return cached_->check(key, cost);
      default:
        return leased_->check(key, cost);
    }
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms` (strict and
  // cached-deny pass it to the store; leased spends at it locally).
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    switch (mode_) {
      case TwoTierMode::kStrict:
        return strict_->check_at(key, now_ms, cost);
      case TwoTierMode::kCachedDeny:
        return cached_->check_at(key, now_ms, cost);
      default:
        return leased_->check_at(key, now_ms, cost);
    }
  }

  // Releases what the limiter holds: leased credits go back to their
  // window and the background worker stops. A no-op for the other modes.
  absl::Status close() {
    return mode_ == TwoTierMode::kLeased ? leased_->close() : absl::OkStatus();
  }

  TwoTierMode mode() const noexcept { return mode_; }
  // The engine behind the mode (null for the other modes), for its stats.
  StrictRateLimiter<S>* strict() const noexcept { return strict_.get(); }
  CachedDenyLimiter<S, C>* cached_deny() const noexcept {
    return cached_.get();
  }
  LeasedLimiter<C>* leased() const noexcept { return leased_.get(); }

 private:
  explicit TwoTier(TwoTierMode mode) : mode_(mode) {}

  const TwoTierMode mode_;
  std::unique_ptr<StrictRateLimiter<S>> strict_;
  std::unique_ptr<CachedDenyLimiter<S, C>> cached_;
  std::unique_ptr<LeasedLimiter<C>> leased_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_TWOTIER_TWO_TIER_H_
