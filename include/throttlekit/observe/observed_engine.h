// throttlekit/observe/observed_engine.h
//
// Provides `Observed<E>`: any rate engine (core/rate_engine.h) that reports
// each `check`, `check_at` and `check_many` decision to a
// `DecisionObserver` (observe/decision_observer.h), and is itself a
// `RateEngine`, so it drops in wherever the engine did:
//
//     auto engine = std::make_shared<throttlekit::Observed<Limiter>>(
//         *std::move(limiter), observer, "api_rate");
//
// With a null observer a check costs one null test over the engine's own;
// with one, a virtual call and two monotonic clock reads. Peek, forecast,
// reset and stats are passed through unobserved (they decide nothing).
// Errors are not reported (there is no decision to report).
//
// Thread-safety: as the wrapped engine; the observer must be thread-safe.

#ifndef THROTTLEKIT_OBSERVE_OBSERVED_ENGINE_H_
#define THROTTLEKIT_OBSERVE_OBSERVED_ENGINE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/observe/decision_observer.h"

namespace throttlekit {

namespace detail {
// The engine type behind `E`: E itself, or what a pointer E points at.
template <class E>
struct EngineOf {
  using type = E;
};
template <class E>
requires requires(E& e) { *e; }
struct EngineOf<E> {
  using type = std::remove_reference_t<decltype(*std::declval<E&>())>;
};
}  // namespace detail

template <class E, NanoClock NC = MonotonicClock>
class Observed {
 public:
  using Stats = typename detail::EngineOf<E>::type::Stats;

  // `name` is the event's `engine` (e.g. the limiter's role: "api_rate");
  // it must outlive this object (a string literal, typically).
  Observed(E engine, std::shared_ptr<DecisionObserver> observer,
           std::string_view name, NC clock = NC{})
      : engine_(std::move(engine)),
        observer_(std::move(observer)),
        name_(name),
        clock_(std::move(clock)) {}

  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    if (observer_ == nullptr) return deref().check(key, cost);
    const int64_t t0 = clock_.now_ns();
    absl::StatusOr<Decision> d = deref().check(key, cost);
    report(key, cost, d, t0);
    return d;
  }

  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost = 1) {
    if (observer_ == nullptr) return deref().check_at(key, now_ms, cost);
    const int64_t t0 = clock_.now_ns();
    absl::StatusOr<Decision> d = deref().check_at(key, now_ms, cost);
    report(key, cost, d, t0);
    return d;
  }

  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    const int64_t t0 = observer_ == nullptr ? 0 : clock_.now_ns();
    absl::Status s = deref().check_many(keys, out, cost);
    if (observer_ != nullptr && s.ok()) {
      const int64_t each = keys.empty() ? 0
                                        : (clock_.now_ns() - t0) /
                                              static_cast<int64_t>(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        notify(observer_.get(), event(keys[i], cost, out[i], each));
      }
    }
    return s;
  }

  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    return check_many_vector(*this, keys, cost);
  }

  absl::StatusOr<Decision> peek(std::string_view key) {
    return deref().peek(key);
  }
  absl::StatusOr<Forecast> forecast(std::string_view key, double cost = 1) {
    return deref().forecast(key, cost);
  }
  absl::Status reset(std::string_view key) { return deref().reset(key); }
  Stats stats() { return deref().stats(); }

  // The wrapped engine.
  auto& engine() noexcept { return deref(); }

 private:
  // E may be an engine held by value or by pointer (unique_ptr,
  // shared_ptr), as the engines' factories return either.
  auto& deref() noexcept {
    if constexpr (requires { *engine_; }) {
      return *engine_;
    } else {
      return engine_;
    }
  }

  DecisionEvent event(std::string_view key, double cost, const Decision& d,
                      int64_t duration_ns) const noexcept {
    DecisionEvent e;
    e.kind = DecisionKind::kCheck;
    e.engine = name_;
    e.key = key;
    e.cost = cost;
    e.decision = d;
    e.duration_ns = duration_ns;
    return e;
  }

  void report(std::string_view key, double cost,
              const absl::StatusOr<Decision>& d, int64_t t0) const noexcept {
    if (!d.ok()) return;
    notify(observer_.get(), event(key, cost, *d, clock_.now_ns() - t0));
  }

  E engine_;
  const std::shared_ptr<DecisionObserver> observer_;
  const std::string_view name_;
  const NC clock_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_OBSERVE_OBSERVED_ENGINE_H_
