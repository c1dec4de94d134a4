// throttlekit/coordinator/any_strategy.h
//
// Provides `StrategyOptions` and `AnyStrategy`: the closed set of rate
// strategies as `std::variant`s, which is how a strategy crosses the
// `Coordinator` interface (docs/architecture.md, "The Coordinator"). Each
// backend implements every alternative: the C++ transition in memory, a Lua
// script on Redis, a stored function on Postgres.
//
//     absl::StatusOr<AnyStrategy> s =
//         make_strategy(Gcra::Options{.limit = 10, .period_ms = 1000});
//
// `make_strategy` validates once (the error names the field and its bound);
// an `AnyStrategy` is immutable and safe to share across threads.

#ifndef THROTTLEKIT_COORDINATOR_ANY_STRATEGY_H_
#define THROTTLEKIT_COORDINATOR_ANY_STRATEGY_H_

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <variant>

#include "absl/status/statusor.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/strategy/token_budget.h"

namespace throttlekit {
namespace detail {

template <class T, class V>
struct VariantIndex;
template <class T, class... Ts>
struct VariantIndex<T, std::variant<Ts...>> {
  static constexpr size_t value = [] {
    constexpr bool same[] = {std::is_same_v<T, Ts>...};
    for (size_t i = 0; i < sizeof...(Ts); ++i) {
      if (same[i]) return i;
    }
    return sizeof...(Ts);
  }();
};

}  // namespace detail

// The options of any rate strategy, unvalidated.
using StrategyOptions =
    std::variant<Gcra::Options, TokenBucket::Options, FixedWindow::Options,
                 SlidingWindow::Options, SlidingLog::Options, Quota::Options,
                 TokenBudget::Options>;

// A validated rate strategy. Alternatives are in the order of
// `StrategyOptions`.
using AnyStrategy = std::variant<Gcra, TokenBucket, FixedWindow, SlidingWindow,
                                 SlidingLog, Quota, TokenBudget>;

// Validates `options` into the matching strategy; the error names the field.
inline absl::StatusOr<AnyStrategy> make_strategy(
    const StrategyOptions& options) {
  return std::visit(
      [](const auto& o) -> absl::StatusOr<AnyStrategy> {
        using O = std::decay_t<decltype(o)>;
        using S = std::variant_alternative_t<
            detail::VariantIndex<O, StrategyOptions>::value, AnyStrategy>;
        absl::StatusOr<S> s = S::create(o);
        if (!s.ok()) return s.status();
        return AnyStrategy(std::in_place_type<S>, *std::move(s));
      },
      options);
}

// The strategy's stable name (`S::kName`): metrics, script and function
// names.
inline std::string_view strategy_name(const AnyStrategy& strategy) noexcept {
  return std::visit(
      [](const auto& s) { return std::decay_t<decltype(s)>::kName; }, strategy);
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_ANY_STRATEGY_H_
