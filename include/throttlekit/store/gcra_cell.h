// throttlekit/store/gcra_cell.h
//
// Provides `GcraCell<C>`: GCRA for one resource (no keys, no map), its whole
// state one atomic double (the theoretical arrival time) updated by one
// compare-and-swap loop, in the manner of folly's TokenBucket. Decisions are
// exactly those of `Gcra` (docs/semantics.md, "GCRA"): the loop computes the
// decision from a snapshot of the TAT and publishes the new TAT only if no
// other thread moved it meanwhile; a denial writes nothing.
//
// Lock-free: a thread retries only because another thread's CAS succeeded.
//
// Thread-safety: `check`/`check_at`/`peek` are safe to call concurrently.
// Moving a cell is not (do it before sharing it).

#ifndef THROTTLEKIT_STORE_GCRA_CELL_H_
#define THROTTLEKIT_STORE_GCRA_CELL_H_

#include <atomic>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {

template <EpochClock C = DefaultClock>
class BasicGcraCell {
 public:
  static absl::StatusOr<BasicGcraCell> create(const Gcra::Options& options,
                                              C clock = C{}) {
    absl::StatusOr<Gcra> gcra = Gcra::create(options);
    if (!gcra.ok()) return gcra.status();
    return BasicGcraCell(*gcra, std::move(clock));
  }

  // Not thread-safe (see the file comment).
  BasicGcraCell(BasicGcraCell&& other) noexcept
      : gcra_(other.gcra_),
        clock_(std::move(other.clock_)),
        tat_(other.tat_.load(std::memory_order_relaxed)) {}

  // Admits or denies `cost` units now. Thread-safe.
  absl::StatusOr<Decision> check(double cost = 1) {
    return check_at(clock_.now_ms(), cost);
  }

  // As `check`, at a caller-supplied epoch-ms `now_ms`. Thread-safe.
  absl::StatusOr<Decision> check_at(int64_t now_ms, double cost = 1) {
    if (!is_valid_cost(cost)) [[unlikely]] {
      return validate_cost(cost);
    }
    double seen = tat_.load(std::memory_order_relaxed);
    for (;;) {
      Gcra::State state{seen};
      const Decision d = gcra_.check(state, now_ms, cost);
      if (!d.allowed) return d;
      if (tat_.compare_exchange_weak(seen, state.tat, std::memory_order_acq_rel,
                                     std::memory_order_relaxed)) {
        return d;
      }
    }
  }

  // The decision for a cost-1 request, without consuming. Thread-safe.
  Decision peek_at(int64_t now_ms) const noexcept {
    return gcra_.peek(Gcra::State{tat_.load(std::memory_order_acquire)},
                      now_ms);
  }

  const Gcra& strategy() const noexcept { return gcra_; }

 private:
  BasicGcraCell(const Gcra& gcra, C clock)
      : gcra_(gcra), clock_(std::move(clock)), tat_(Gcra::State{}.tat) {}

  const Gcra gcra_;
  C clock_;
  // The TAT: the cell's whole state. Atomic because concurrent checks race
  // to publish a new value; the CAS makes each publication one step of the
  // sequential GCRA.
  std::atomic<double> tat_;
  static_assert(std::atomic<double>::is_always_lock_free);
};

// The GcraCell on the default clock, the common case (`BasicGcraCell<C>`
// takes another clock, e.g. a `ClockRef<ManualClock>` in tests).
using GcraCell = BasicGcraCell<DefaultClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_STORE_GCRA_CELL_H_
