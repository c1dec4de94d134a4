// throttlekit/store/cell.h
//
// Provides `Cell<S, C>`: any strategy for one resource (no keys, no map),
// its state guarded by a `SpinLock`. Use `GcraCell` for GCRA (lock-free);
// use this for a token bucket or any other strategy whose state is more than
// one word. Decisions are exactly the strategy's.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_STORE_CELL_H_
#define THROTTLEKIT_STORE_CELL_H_

#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/core/spin_lock.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

template <Strategy S, EpochClock C = DefaultClock>
class Cell {
 public:
  static absl::StatusOr<std::unique_ptr<Cell>> create(
      const typename S::Options& options, C clock = C{}) {
    absl::StatusOr<S> strategy = S::create(options);
    if (!strategy.ok()) return strategy.status();
    return std::unique_ptr<Cell>(
        new Cell(*std::move(strategy), std::move(clock)));
  }

  // Admits or denies `cost` units now. Thread-safe.
  absl::StatusOr<Decision> check(double cost = 1) {
    return check_at(clock_.now_ms(), cost);
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms`. Thread-safe.
  THROTTLEKIT_ALWAYS_INLINE absl::StatusOr<Decision> check_at(int64_t now_ms,
                                                              double cost = 1) {
    if (!is_valid_cost(cost)) [[unlikely]] {
      return validate_cost(cost);
    }
    SpinLockHolder hold(lock_);
    return strategy_.check(state_, now_ms, cost);
  }

  // The decision for a cost-1 request, without consuming. Thread-safe.
  Decision peek_at(int64_t now_ms) const {
    SpinLockHolder hold(lock_);
    return strategy_.peek(state_, now_ms);
  }

  const S& strategy() const noexcept { return strategy_; }

 private:
  Cell(S strategy, C clock)
      : strategy_(std::move(strategy)), clock_(std::move(clock)) {}

  const S strategy_;
  C clock_;
  mutable SpinLock lock_;
  typename S::State state_ ABSL_GUARDED_BY(lock_){};
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_STORE_CELL_H_
