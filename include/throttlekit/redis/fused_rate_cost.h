// throttlekit/redis/fused_rate_cost.h
//
// Provides `FusedRateCost` (target throttlekit::redis): the rate and cost
// axes of unified admission as ONE atomic Redis script (docs/admission.md,
// "The fused Redis path"). Put it on the rate axis of a `UnifiedAdmission`
// with no cost axis; `admit` then asks both in one round trip:
//
//     auto fused = throttlekit::FusedRateCost::create(
//         {.rate = throttlekit::Gcra::Options{.limit = 100, .period_ms =
//         60'000},
//          .cost = throttlekit::TokenBucket::Options{.capacity = 50'000,
//                                                    .refill_per_sec = 800},
//          .prefix = "llm"},
//         redis);
//     auto admission =
//     throttlekit::UnifiedAdmission<throttlekit::FusedRateCost>
//         ::create({.concurrency = adaptive, .rate = *std::move(fused)});
//
// Only rate = GCRA and cost = token bucket are fused; any other pair is
// refused at `create`. Keys: `{prefix:key}:r` and `{prefix:key}:c`, one
// hash tag, so the two keys live in one Redis Cluster slot. Decisions and
// stored states equal the two strict checks in sequence (rate for one
// request, then, if it admits, cost for the request's cost) step for step:
// the fusion buys atomicity and one round trip, not different answers.
//
// Without waiting: `check_pair_async` (docs/async.md), which
// `UnifiedAdmission::admit_async` uses.
//
// Thread-safety: every method may be called concurrently.

#ifndef THROTTLEKIT_REDIS_FUSED_RATE_COST_H_
#define THROTTLEKIT_REDIS_FUSED_RATE_COST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/key.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {

struct FusedRateCostOptions {
  // The rate axis (must be GCRA) and the cost axis (must be a token
  // bucket).
  StrategyOptions rate;
  StrategyOptions cost;
  // Names the keyspace; no '{' or '}' (they would break the hash tag).
  std::string prefix;
};

template <EpochClock C = SystemClock>
class BasicFusedRateCost {
 public:
  using Options = FusedRateCostOptions;
  using FusedDecision = RedisCoordinator::FusedDecision;

  // Validates the pair and both strategies' options; kInvalidArgument
  // names the problem (another pair than GCRA + token bucket included).
  static absl::StatusOr<std::unique_ptr<BasicFusedRateCost>> create(
      Options options, std::shared_ptr<RedisCoordinator> redis, C clock = C{}) {
    if (redis == nullptr) {
      return absl::InvalidArgumentError("fused_rate_cost: no coordinator");
    }
    if (!std::holds_alternative<Gcra::Options>(options.rate) ||
        !std::holds_alternative<TokenBucket::Options>(options.cost)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fused_rate_cost: only rate = gcra and cost = token_bucket are "
          "fused; got rate = ",
          av(name_of(options.rate)), ", cost = ", av(name_of(options.cost))));
    }
    if (options.prefix.find_first_of("{}") != std::string::npos) {
      return absl::InvalidArgumentError(
          "fused_rate_cost.prefix must not contain '{' or '}'");
    }
    absl::StatusOr<Gcra> rate =
        Gcra::create(std::get<Gcra::Options>(options.rate));
    if (!rate.ok()) return rate.status();
    absl::StatusOr<TokenBucket> cost =
        TokenBucket::create(std::get<TokenBucket::Options>(options.cost));
    if (!cost.ok()) return cost.status();
    return std::unique_ptr<BasicFusedRateCost>(new BasicFusedRateCost(
        *std::move(rate), *std::move(cost), std::move(options.prefix),
        std::move(redis), std::move(clock)));
  }

  // Both axes for one request of `cost` on `key` at `now_ms` (0: the Redis
  // clock): one round trip. Thread-safe.
  absl::StatusOr<FusedDecision> check_pair(std::string_view key, int64_t now_ms,
                                           double cost) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    const std::string tag = tag_of(key);
    return redis_->fused_check(rate_, cost_, tag + ":r", tag + ":c", now_ms,
                               cost);
  }

  // As `check_pair`, without waiting for Redis (core/completion.h):
  // `on_done` runs exactly once with what `check_pair` would return; inline
  // for bad input, else on the coordinator's I/O thread. `key` is copied
  // before this returns. Thread-safe.
  void check_pair_async(std::string_view key, int64_t now_ms, double cost,
                        Completion<FusedDecision> on_done) {
    if (absl::Status s = validate_key(key); !s.ok()) {
      std::move(on_done)(std::move(s));
      return;
    }
    const std::string tag = tag_of(key);
    redis_->fused_check_async(rate_, cost_, tag + ":r", tag + ":c", now_ms,
                              cost, std::move(on_done));
  }

  // As `check_pair` at the injected clock's now.
  absl::StatusOr<FusedDecision> check_pair(std::string_view key, double cost) {
    return check_pair(key, clock_.now_ms(), cost);
  }

  const Gcra& rate() const noexcept { return rate_; }
  const TokenBucket& cost() const noexcept { return cost_; }
  // `check_pair(key, 0, cost)` decides on the Redis clock
  // (core/rate_engine.h).
  static constexpr bool decides_at_store() noexcept { return true; }

  // The keys of `key`'s two axes (for operators and tests).
  std::string rate_key(std::string_view key) const {
    return absl::StrCat(tag_of(key), ":r");
  }
  std::string cost_key(std::string_view key) const {
    return absl::StrCat(tag_of(key), ":c");
  }

 private:
  BasicFusedRateCost(Gcra rate, TokenBucket cost, std::string prefix,
                     std::shared_ptr<RedisCoordinator> redis, C clock)
      : rate_(std::move(rate)),
        cost_(std::move(cost)),
        prefix_(std::move(prefix)),
        redis_(std::move(redis)),
        clock_(std::move(clock)) {}

  std::string tag_of(std::string_view key) const {
    return absl::StrCat("{", prefix_, prefix_.empty() ? "" : ":",
                        absl::string_view(key.data(), key.size()), "}");
  }

  static absl::string_view av(std::string_view v) {
    return absl::string_view(v.data(), v.size());
  }

  static std::string_view name_of(const StrategyOptions& o) {
    return std::visit(
        [](const auto& x) -> std::string_view {
          using O = std::decay_t<decltype(x)>;
          using S = std::variant_alternative_t<
              detail::VariantIndex<O, StrategyOptions>::value, AnyStrategy>;
          return S::kName;
        },
        o);
  }

  const Gcra rate_;
  const TokenBucket cost_;
  const std::string prefix_;
  const std::shared_ptr<RedisCoordinator> redis_;
  const C clock_;
};

using FusedRateCost = BasicFusedRateCost<SystemClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_REDIS_FUSED_RATE_COST_H_
