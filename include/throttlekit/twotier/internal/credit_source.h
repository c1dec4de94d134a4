// throttlekit/twotier/internal/credit_source.h
//
// Provides `detail::CreditSource`: where a leased limiter's credits come
// from and go back to, so one spending engine (leased_limiter.h) serves
// both the leased mode (`CoordinatorCreditSource`: `Coordinator::lease`
// on the fixed-window layout) and federation (federation/federated_limiter.h:
// a regional escrow, then the global coordinator's `lease_windowed`, with
// health probes). Called only on the limiter's miss path (one lease in
// flight per key), never on the hit path, and never under a lock.
//
// Thread-safety: implementations are safe to call from many threads (one
// call per key at a time).

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_CREDIT_SOURCE_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_CREDIT_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/key.h"

namespace throttlekit::detail {

class CreditSource {
 public:
  virtual ~CreditSource() = default;
  // Up to `want` (>= 1) credits for `key` (the caller's key, not joined),
  // with the window they belong to; `window_remaining` 0 tells the limiter
  // the window is spent. `paced`: the key has spent in this window already
  // (`want` was sized to its pace), so a source that pools may lease ahead
  // for its peers; false at a window's first lease.
  virtual absl::StatusOr<LeaseGrant> take(std::string_view key, int64_t want,
                                          bool paced) = 0;
  // As `take`, without waiting (core/completion.h): `on_done` runs exactly
  // once with what `take` would return. By default `take`, completed
  // inline (a source without a non-blocking path: federation's).
  virtual void take_async(std::string_view key, int64_t want, bool paced,
                          Completion<LeaseGrant> on_done) {
    std::move(on_done)(take(key, want, paced));
  }
  // Gives `credits` (>= 1) of the window starting at `window_start_ms`
  // back, idempotently per `token`; returns the credits restored.
  virtual absl::StatusOr<int64_t> give_back(std::string_view key,
                                            int64_t window_start_ms,
                                            int64_t credits,
                                            std::string_view token) = 0;
  // Forgets the shared budget of `key`.
  virtual absl::Status reset(std::string_view key) = 0;
};

// The budget as a fixed-window strategy: it names the keys
// `Coordinator::reset` deletes for a budget's key (both sources reset it).
inline AnyStrategy budget_strategy(const LeaseBudget& budget) {
  return *make_strategy(
      FixedWindow::Options{budget.limit(), budget.window_ms()});
}

// The leased mode's source: `Coordinator::lease` and `give_back` on
// `prefix:key`.
class CoordinatorCreditSource final : public CreditSource {
 public:
  CoordinatorCreditSource(std::shared_ptr<Coordinator> coordinator,
                          LeaseBudget budget, std::string prefix)
      : coordinator_(std::move(coordinator)),
        budget_(budget),
        prefix_(std::move(prefix)),
        budget_strategy_(budget_strategy(budget)) {}

  absl::StatusOr<LeaseGrant> take(std::string_view key, int64_t want,
                                  bool /*paced*/) override {
    return coordinator_->lease(budget_, join_key(prefix_, key), want);
  }
  void take_async(std::string_view key, int64_t want, bool /*paced*/,
                  Completion<LeaseGrant> on_done) override {
    coordinator_->lease_async(budget_, join_key(prefix_, key), want,
                              std::move(on_done));
  }
  absl::StatusOr<int64_t> give_back(std::string_view key,
                                    int64_t window_start_ms, int64_t credits,
                                    std::string_view token) override {
    return coordinator_->give_back(budget_, join_key(prefix_, key),
                                   window_start_ms, credits, token);
  }
  absl::Status reset(std::string_view key) override {
    return coordinator_->reset(budget_strategy_, join_key(prefix_, key));
  }

 private:
  const std::shared_ptr<Coordinator> coordinator_;
  const LeaseBudget budget_;
  const std::string prefix_;
  // The budget as a strategy, for `Coordinator::reset` of the budget key.
  const AnyStrategy budget_strategy_;
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_CREDIT_SOURCE_H_
