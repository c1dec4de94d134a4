// throttlekit/federation/federated_limiter.h
//
// Provides `federate(...)` and `FederatedLimiter` (`BasicFederatedLimiter<C>`
// for another clock), a `RateEngine` (core/rate_engine.h): one global
// per-window budget across regions (docs/federation.md). Each region's
// processes spend credits locally, as the leased engine does (one probe and
// one spend under a spin lock per check; no round trip, no allocation), and
// lease them in batches from one global coordinator whose window, read on
// the coordinator's clock, bounds what they may spend:
//
//     auto limiter = federate(
//         *make_strategy(FixedWindow::Options{.limit = 10000,
//                                             .window_ms = 60000}),
//         global_redis, {.region = "eu-west", .batch = 16});
//     absl::StatusOr<Decision> d = (*limiter)->check("api");
//
// Per key and process: credits left (`balance`) and the window they belong
// to. A check spends from the balance; a shortfall takes the key's lease
// lock (misses on one key share ONE lease in flight, re-checking the
// balance after the wait), takes from the region's escrow when there is one,
// else leases `max(batch, ceil(cost))` with `Coordinator::lease_windowed`
// (`size_to_demand`: only what the key's pace will spend before the window
// ends, credits left at the end being stranded).
// A grant carries the coordinator's window end: credits die there
// (window-coupled), a grant that lands after its window rolled is never
// spendable, and the leftover of a window that rolled is forfeited (the
// coordinator forfeits it too: the new window's grant proves its window
// has rolled, so no reconcile round trip is spent on it). A grant of 0 is
// a denial `{limit, remaining = balance, reset_at = window end, retry =
// max(1, window end - now)}`; the process never invents one. A grant that
// leaves the window empty marks the key spent: misses are denied so
// without a round trip, but for one per `spent_recheck_ms` (default the
// window / 8) that asks again and so sees credits reconciled into the
// window since.
//
// Guarantees (proved by spec/GaleFederatedLeasing.tla and its BFS twin,
// tests/model/federated_bfs_test.cc, and measured in docs/federation.md):
// admitted per coordinator window <= limit for any number of regions and
// processes, given that the processes' clocks do not run behind the
// coordinator's (a process behind by d spends a rolled window's credits
// for d ms; the regional escrow's clock likewise).
//
// Strategies: only windowed ones federate, with the coordinator's window
// equal to the strategy's: fixed window, sliding window (federated, it is
// enforced per fixed window of `window_ms`: a sliding window's smoothing
// needs every region's counts) and a fixed-period quota whose anchor is a
// multiple of its period. Others are refused at `create`.
//
// Regional escrow (opt-in, `regional_escrow`, a Coordinator of the region:
// memory in one process, Redis for the region's processes): a miss takes
// from the region's balance of the key first; a crossing to the global
// coordinator leases `escrow_batch` and parks the excess in the escrow, so
// a region crosses about once per `escrow_batch` admissions.
//
// Outages of the global coordinator (`on_outage`): kFailClosed (default)
// serves the credits the process holds, then denies (overshoot 0);
// kRegionalOnly (needs the escrow) also serves the region's escrow until
// it is empty. Either way no miss waits on a coordinator known to be down:
// it is re-probed by the first miss `health_check_ms` after the outage.
// The outage denial is `{false, limit, 0, now + health_check_ms,
// health_check_ms}`.
//
// `close()` gives every credit this process holds back to its window
// (reconcile, once per window and token); `release_escrow(key)` returns the
// region's escrow balance of `key` to the global window (the first
// releaser wins).
//
// Thread-safety: every method is safe to call concurrently. The
// coordinators must outlive the limiter.

#ifndef THROTTLEKIT_FEDERATION_FEDERATED_LIMITER_H_
#define THROTTLEKIT_FEDERATION_FEDERATED_LIMITER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/inline.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/federation/internal/federation_source.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {

// What a federated limiter does while the global coordinator is out.
enum class FederationOutage {
  kFailClosed,    // serve what the process holds, then deny
  kRegionalOnly,  // also serve the region's escrow until it is empty
};

struct FederationOptions {
  // Names this region (reconcile tokens, escrow keys); 1 .. 64 bytes.
  std::string region;
  // Global keys are `prefix:key`; escrow keys `escrow_prefix:region:key`.
  std::string prefix = "tk:fed";
  std::string escrow_prefix = "tk:l2";
  // Credits per global lease without an escrow; 1 .. limit.
  int64_t batch = 16;
  // The region's escrow (L2): a Coordinator with escrow_* (memory, Redis).
  std::shared_ptr<Coordinator> regional_escrow;
  // Credits per global lease with an escrow; 0 (4 * batch, at most limit)
  // or batch .. limit.
  int64_t escrow_batch = 0;
  FederationOutage on_outage = FederationOutage::kFailClosed;
  // After a global outage, no miss crosses for this long; 1 .. 2^53-1.
  int64_t health_check_ms = 5000;
  // Keys held per process; 16 .. 2^32.
  int64_t max_keys = int64_t{1} << 16;
  // Give back a key's credits after this long unspent; 0 (off) or
  // 1 .. 2^53-1 (run by a worker thread, or by `run_maintenance()` with
  // `background_worker = false`).
  int64_t return_idle_after_ms = 0;
  bool background_worker = true;
  // Lease what the key's pace will spend before the window ends rather than
  // a whole batch (credits left at the end are stranded): its pace in the
  // window, or what it spent in the window before. Safety never depends on
  // it.
  bool size_to_demand = true;
  // A key whose window the coordinator said is spent is denied without a
  // round trip, but one miss per `spent_recheck_ms` asks again, seeing
  // credits another region reconciled into the window since. Unset: the
  // window / 8 (at least 1); 0: never; else 1 .. 2^53-1 (the leased
  // limiter's option, docs/twotier.md).
  std::optional<int64_t> spent_recheck_ms;
};

// The budget a windowed strategy federates: its limit per window.
struct FederatedBudget {
  int64_t limit = 0;
  int64_t window_ms = 0;
};

// `strategy`'s limit and window, or kInvalidArgument for a strategy that
// does not federate (naming it and what does).
inline absl::StatusOr<FederatedBudget> federated_budget(
    const AnyStrategy& strategy) {
  if (const auto* f = std::get_if<FixedWindow>(&strategy)) {
    return FederatedBudget{f->options().limit, f->options().window_ms};
  }
  if (const auto* s = std::get_if<SlidingWindow>(&strategy)) {
    return FederatedBudget{s->options().limit, s->options().window_ms};
  }
  if (const auto* q = std::get_if<Quota>(&strategy)) {
    const Quota::Options& o = q->options();
    if (o.period != QuotaPeriod::kFixed) {
      return absl::InvalidArgumentError(
          "federate: a calendar quota does not federate (its periods are "
          "not fixed windows); use QuotaPeriod::kFixed");
    }
    if (o.anchor_ms % o.period_ms != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("federate: the quota's anchor_ms (", o.anchor_ms,
                       ") must be a multiple of period_ms (", o.period_ms,
                       "): the coordinator's windows are epoch-aligned"));
    }
    return FederatedBudget{o.limit, o.period_ms};
  }
  const std::string_view name = strategy_name(strategy);
  return absl::InvalidArgumentError(
      absl::StrCat("federate: only windowed strategies federate (fixed_window, "
                   "sliding_window, quota with a fixed period); got ",
                   absl::string_view(name.data(), name.size())));
}

// The static partition, the baseline federation is measured against
// (docs/federation.md): region `index` of `regions` enforces its own
// floor(limit / regions) locally, the first limit - regions * floor(limit /
// regions) regions one more. Overshoot 0 with no coordination, but a
// region's unused share never helps another. `regions` >= 1, `index` in
// [0, regions).
constexpr int64_t static_partition_share(int64_t limit, int64_t regions,
                                         int64_t index) noexcept {
  const int64_t base = limit / regions;
  return base + (index < limit - regions * base ? 1 : 0);
}

template <EpochClock C = SystemClock>
class BasicFederatedLimiter {
 public:
  struct Stats {
    int64_t global_leases = 0;       // round trips to the global coordinator
    int64_t global_credits = 0;      // credits they granted this process
    int64_t escrow_takes = 0;        // round trips to the regional escrow
    int64_t escrow_credits = 0;      // credits taken from it
    int64_t escrow_refills = 0;      // grants' excess parked in it
    int64_t escrow_errors = 0;       // escrow calls that failed (skipped)
    int64_t global_outages = 0;      // global calls that failed: outage
    int64_t fast_failures = 0;       // misses refused while unhealthy
    int64_t forfeited_credits = 0;   // escrow credits of an older window
    int64_t reconciled_credits = 0;  // credits given back to their window
    int64_t denials = 0;             // the coordinator's denials passed on
    int64_t outage_denials = 0;      // denials decided by an outage
    bool healthy = true;             // the global coordinator, as last seen
  };

  // Validates everything; errors name the field and its bound.
  static absl::StatusOr<std::unique_ptr<BasicFederatedLimiter>> create(
      const AnyStrategy& strategy, std::shared_ptr<Coordinator> coordinator,
      FederationOptions options, C clock = C{}) {
    absl::StatusOr<FederatedBudget> fb = federated_budget(strategy);
    if (!fb.ok()) return fb.status();
    if (coordinator == nullptr) {
      return absl::InvalidArgumentError("federate: coordinator is null");
    }
    if (options.region.empty() || options.region.size() > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("federate.region must be 1 .. 64 bytes; got ",
                       options.region.size()));
    }
    if (options.batch < 1 || options.batch > fb->limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("federate.batch must be in [1, limit = ", fb->limit,
                       "]; got ", options.batch));
    }
    if (options.escrow_batch == 0) {
      options.escrow_batch = std::min(fb->limit, 4 * options.batch);
    } else if (options.escrow_batch < options.batch ||
               options.escrow_batch > fb->limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "federate.escrow_batch must be 0 (4 * batch) or in [batch = ",
          options.batch, ", limit = ", fb->limit, "]; got ",
          options.escrow_batch));
    }
    if (options.on_outage != FederationOutage::kFailClosed &&
        options.on_outage != FederationOutage::kRegionalOnly) {
      return absl::InvalidArgumentError(
          "federate.on_outage is not a FederationOutage");
    }
    if (options.on_outage == FederationOutage::kRegionalOnly &&
        options.regional_escrow == nullptr) {
      return absl::InvalidArgumentError(
          "federate.on_outage = kRegionalOnly needs a regional_escrow to "
          "serve while the global coordinator is out");
    }
    if (options.health_check_ms < 1 ||
        options.health_check_ms > kMaxSafeInteger) {
      return absl::InvalidArgumentError(
          absl::StrCat("federate.health_check_ms must be in [1, 2^53-1]; got ",
                       options.health_check_ms));
    }
    absl::StatusOr<LeaseBudget> budget =
        LeaseBudget::create({fb->limit, fb->window_ms});
    if (!budget.ok()) return budget.status();
    auto source = std::make_shared<detail::FederationSource>(
        detail::FederationSource::Config{
            .budget = *budget,
            .prefix = options.prefix,
            .escrow_prefix = join_key(options.escrow_prefix, options.region),
            .region = options.region,
            .global = std::move(coordinator),
            .escrow = options.regional_escrow,
            .batch = options.batch,
            .escrow_batch = options.escrow_batch,
            .regional_only =
                options.on_outage == FederationOutage::kRegionalOnly,
            .health_check_ms = options.health_check_ms,
            .now_ms = [clock] { return clock.now_ms(); }});
    // `clock` is copied into the source and the inner limiter above and
    // kept by this limiter below.
    absl::StatusOr<std::unique_ptr<Leased>> inner = Leased::create_on(
        LeasedLimiterOptions{
            .prefix = options.prefix,
            .limit = fb->limit,
            .window_ms = fb->window_ms,
            .batch = options.batch,
            .window_coupled = true,
            .return_idle_after_ms = options.return_idle_after_ms,
            .background_worker = options.background_worker,
            .max_keys = options.max_keys,
            .fail_policy = {FailPolicy::kClosed, options.health_check_ms},
            .size_to_window_end = options.size_to_demand,
            .spent_recheck_ms = options.spent_recheck_ms},
        source, clock);
    if (!inner.ok()) return inner.status();
    return std::unique_ptr<BasicFederatedLimiter>(
        new BasicFederatedLimiter(std::move(options), std::move(source),
                                  *std::move(inner), std::move(clock)));
  }

  // Admits or denies `cost` units for `key` now (this process's clock).
  absl::StatusOr<Decision> check(std::string_view key, double cost = 1) {
    return inner_->check(key, cost);
  }
  // As `check`, at a caller-supplied epoch-ms `now_ms`.
  THROTTLEKIT_ALWAYS_INLINE absl::StatusOr<Decision> check_at(
      std::string_view key, int64_t now_ms, double cost = 1) {
    return inner_->check_at(key, now_ms, cost);
  }
  // Without waiting (docs/async.md): a local hit or a spent-window denial
  // completes inline; a miss joins its key's lease, which goes to the
  // escrow and the global coordinator with their verbs' asynchronous forms
  // (no thread waits on either), and completes from the last answer.
  template <DecisionCallback F>
  void check_async(std::string_view key, double cost, F&& on_done) {
    inner_->check_async(key, cost, std::forward<F>(on_done));
  }
  template <DecisionCallback F>
  void check_async(std::string_view key, F&& on_done) {
    inner_->check_async(key, 1, std::forward<F>(on_done));
  }
  template <DecisionCallback F>
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      F&& on_done) {
    inner_->check_at_async(key, now_ms, cost, std::forward<F>(on_done));
  }
  // `co_await limiter->async_check(key)` (core/check_awaitable.h).
  CheckAwaitable<BasicFederatedLimiter> async_check(std::string_view key,
                                                    double cost = 1) {
    return CheckAwaitable<BasicFederatedLimiter>(*this, key, cost);
  }
  // Checks every key at one `now`, each independently; `out.size()` must
  // equal `keys.size()`.
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost = 1) {
    return inner_->check_many(keys, out, cost);
  }
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    return check_many_vector(*this, keys, cost);
  }
  // `check_many` without waiting: every key at one `now` with
  // `check_at_async`, completed once from the last answer, in key order
  // (the leased limiter's `check_many_async`: an error is the first in key
  // order, the other keys checked all the same).
  void check_many_async(std::span<const std::string_view> keys, double cost,
                        Completion<std::vector<Decision>> on_done) {
    inner_->check_many_async(keys, cost, std::move(on_done));
  }

  // kUnimplemented: a federated decision depends on credits the
  // coordinator has not granted yet, and asking would lease them.
  absl::StatusOr<Decision> peek(std::string_view key) const {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    return unimplemented_verb(
        "federated_limiter", "peek",
        "a federated decision depends on credits the global coordinator "
        "has not granted yet; credits(key) is what this process holds");
  }
  // kUnimplemented, for the reason `peek` gives.
  absl::StatusOr<Forecast> forecast(std::string_view key,
                                    double cost = 1) const {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    if (absl::Status s = validate_cost(cost); !s.ok()) return s;
    return unimplemented_verb(
        "federated_limiter", "forecast",
        "when credits free up depends on every region's spending, which no "
        "one process sees");
  }

  // Forgets `key`: drops this process's credits, the region's escrow
  // balance and the global window's count. Other processes keep what they
  // hold until their window ends.
  absl::Status reset(std::string_view key) { return inner_->reset(key); }

  // Gives every credit this process holds back to its window (reconcile,
  // once per window and token) and stops the worker. Returns the first
  // error. The limiter still answers afterwards.
  absl::Status close() { return inner_->close(); }

  // Returns the region's escrow balance of `key` for the current window to
  // the global window; the credits restored (0 without an escrow).
  absl::StatusOr<int64_t> release_escrow(std::string_view key) {
    if (absl::Status s = validate_key(key); !s.ok()) return s;
    const int64_t w = inner_->options().window_ms;
    const int64_t now = clock_.now_ms();
    return source_->release_escrow(key, now - (((now % w) + w) % w));
  }

  // Idle returns, for `background_worker = false`.
  void run_maintenance() { inner_->run_maintenance(); }

  // The credits `key` holds in this process now.
  double credits(std::string_view key) const { return inner_->credits(key); }

  bool healthy() const noexcept { return source_->healthy(); }

  Stats stats() const {
    const detail::FederationSource::Counters c = source_->counters();
    const typename Leased::Stats l = inner_->stats();
    return Stats{c.global_leases,      c.global_credits, c.escrow_takes,
                 c.escrow_credits,     c.escrow_refills, c.escrow_errors,
                 c.global_outages,     c.fast_failures,  c.forfeited_credits,
                 c.reconciled_credits, l.denials,        l.outages,
                 source_->healthy()};
  }
  const FederationOptions& options() const noexcept { return options_; }

 private:
  using Leased = BasicLeasedLimiter<C>;

  BasicFederatedLimiter(FederationOptions options,
                        std::shared_ptr<detail::FederationSource> source,
                        std::unique_ptr<Leased> inner, C clock)
      : options_(std::move(options)),
        source_(std::move(source)),
        inner_(std::move(inner)),
        clock_(std::move(clock)) {}

  const FederationOptions options_;
  const std::shared_ptr<detail::FederationSource> source_;
  const std::unique_ptr<Leased> inner_;
  const C clock_;
};

// The FederatedLimiter on the system clock, the common case.
using FederatedLimiter = BasicFederatedLimiter<SystemClock>;
static_assert(AsyncRateEngine<FederatedLimiter>);

// Federates `strategy` (a windowed one) over the global `coordinator`:
// `BasicFederatedLimiter<C>::create`.
template <EpochClock C = SystemClock>
absl::StatusOr<std::unique_ptr<BasicFederatedLimiter<C>>> federate(
    const AnyStrategy& strategy, std::shared_ptr<Coordinator> coordinator,
    FederationOptions options, C clock = C{}) {
  return BasicFederatedLimiter<C>::create(strategy, std::move(coordinator),
                                          std::move(options), std::move(clock));
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_FEDERATION_FEDERATED_LIMITER_H_
