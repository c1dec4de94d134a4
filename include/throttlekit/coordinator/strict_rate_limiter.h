// throttlekit/coordinator/strict_rate_limiter.h
//
// Provides `StrictRateLimiter<S>`: `RateLimiter`'s API (check, check_at,
// check_many, peek, forecast, reset) over any
// `Coordinator` (strict mode: one store round trip per check, exact). Point
// it at a `RedisCoordinator` or `PostgresCoordinator` and every process
// sharing the store shares one limit:
//
//     auto limiter = StrictRateLimiter<Gcra>::create(
//         {.limit = 100, .period_ms = 60'000}, redis,
//         {.prefix = "api", .fail_policy = FailPolicy::kOpen});
//     absl::StatusOr<Decision> d = limiter->check("user:42");
//
// Keys become `prefix:key` (`join_key`). `check` uses the store's clock
// (`now = 0` on the wire) so that processes with skewed clocks agree;
// `check_at` takes a caller-supplied `now`.
//
// Failure: with `FailPolicy::kPropagate` (default) an outage or deadline is
// returned as its status. With kOpen / kClosed it becomes an allowed /
// denied decision (`limit` is the strategy's, `remaining` 0, a denial's
// `retry_after_ms` is `fail_closed_retry_ms`), and `outages()` counts it.
// Invalid arguments and kFailedPrecondition are always returned as statuses.
//
// Thread-safety: every method is safe to call concurrently. The coordinator
// must outlive the limiter (it is shared).

#ifndef THROTTLEKIT_COORDINATOR_STRICT_RATE_LIMITER_H_
#define THROTTLEKIT_COORDINATOR_STRICT_RATE_LIMITER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/key.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

struct StrictRateLimiterOptions {
  // Names the keyspace: keys become `prefix:key`.
  std::string prefix;
  // What an outage becomes (see the file comment).
  FailPolicy fail_policy = FailPolicy::kPropagate;
  // The retry hint of a fail-closed denial; 1 .. 2^53-1.
  int64_t fail_closed_retry_ms = 1000;
};

template <Strategy S>
class StrictRateLimiter {
 public:
  // Validates the strategy and options; errors name the field.
  static absl::StatusOr<std::unique_ptr<StrictRateLimiter>> create(
      const typename S::Options& strategy_options,
      std::shared_ptr<Coordinator> coordinator,
      StrictRateLimiterOptions options = {}) {
    absl::StatusOr<S> strategy = S::create(strategy_options);
    if (!strategy.ok()) return strategy.status();
    if (coordinator == nullptr) {
      return absl::InvalidArgumentError(
          "strict_rate_limiter: coordinator is null");
    }
    if (options.fail_closed_retry_ms < 1 ||
        options.fail_closed_retry_ms > kMaxSafeInteger) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strict_rate_limiter.fail_closed_retry_ms must be in [1, 2^53-1]; "
          "got ",
          options.fail_closed_retry_ms));
    }
    return std::unique_ptr<StrictRateLimiter>(new StrictRateLimiter(
        *std::move(strategy), std::move(coordinator), std::move(options)));
  }

  // Admits or denies `cost` units for `key` at the store's clock.
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return check_at(key, 0, cost);
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms` (0: store clock).
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return decide(
        coordinator_->check(strategy_, join_key(prefix_, key), now_ms, cost),
        now_ms);
  }

  // Checks every key (each independently) at one `now` read from the store
  // once. On an invalid key or cost nothing is checked. Under kPropagate
  // the first outage stops the batch and is returned.
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    for (std::string_view key : keys) {
      if (absl::Status s = validate_key(key); !s.ok()) return s;
    }
    if (absl::Status s = validate_cost(cost); !s.ok()) return s;
    absl::StatusOr<int64_t> now = coordinator_->now_ms();
    if (!now.ok()) {
      if (policy_ == FailPolicy::kPropagate || !is_outage(now.status())) {
        return now.status();
      }
    }
    const int64_t at = now.ok() ? *now : 0;
    std::vector<Decision> out;
    out.reserve(keys.size());
    for (std::string_view key : keys) {
      absl::StatusOr<Decision> d = check_at(key, at, cost);
      if (!d.ok()) return d.status();
      out.push_back(*d);
    }
    return out;
  }

  // As above, writing one decision per key into `out` (`out.size()` must
  // equal `keys.size()`).
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    if (out.size() != keys.size()) {
      return absl::InvalidArgumentError(
          "check_many: out.size() must equal keys.size()");
    }
    absl::StatusOr<std::vector<Decision>> d = check_many(keys, cost);
    if (!d.ok()) return d.status();
    std::copy(d->begin(), d->end(), out.begin());
    return absl::OkStatus();
  }

  // The decision a cost-1 request would get now, without consuming.
  absl::StatusOr<Decision> peek(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return decide(coordinator_->peek(strategy_, join_key(prefix_, key), 0), 0);
  }

  // What `key` could spend now and when it refills, for requests of
  // `cost`, at the store's clock. Writes nothing. Outages are returned as
  // their status under every fail policy (there is no decision to make).
  absl::StatusOr<Forecast> forecast(std::string_view key, double cost = 1) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return coordinator_->forecast(strategy_, join_key(prefix_, key), 0, cost);
  }

  // Forgets `key` on the store.
  absl::Status reset(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return coordinator_->reset(strategy_, join_key(prefix_, key));
  }

  // Outages turned into decisions by the fail policy so far.
  int64_t outages() const noexcept {
    return outages_.load(std::memory_order_relaxed);
  }

  const S& strategy() const noexcept { return std::get<S>(strategy_); }
  const std::string& prefix() const noexcept { return prefix_; }
  Coordinator& coordinator() const noexcept { return *coordinator_; }

 private:
  StrictRateLimiter(S strategy, std::shared_ptr<Coordinator> coordinator,
                    StrictRateLimiterOptions options)
      : strategy_(std::in_place_type<S>, std::move(strategy)),
        coordinator_(std::move(coordinator)),
        prefix_(std::move(options.prefix)),
        policy_(options.fail_policy),
        fail_closed_retry_ms_(options.fail_closed_retry_ms),
        limit_(std::get<S>(strategy_).peek(typename S::State{}, 1).limit) {}

  absl::StatusOr<Decision> decide(absl::StatusOr<Decision> d, int64_t now_ms) {
    if (d.ok() || policy_ == FailPolicy::kPropagate || !is_outage(d.status())) {
      return d;
    }
    outages_.fetch_add(1, std::memory_order_relaxed);
    const int64_t base = now_ms != 0 ? now_ms : SystemClock{}.now_ms();
    return outage_decision(policy_, limit_, base, fail_closed_retry_ms_);
  }

  const AnyStrategy strategy_;
  const std::shared_ptr<Coordinator> coordinator_;
  const std::string prefix_;
  const FailPolicy policy_;
  const int64_t fail_closed_retry_ms_;
  const int64_t limit_;
  std::atomic<int64_t> outages_{0};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_STRICT_RATE_LIMITER_H_
