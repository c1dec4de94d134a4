// throttlekit/admission/unified_admission.h
//
// Provides `UnifiedAdmission<Rate, Cost>`: one `admit()` over the three
// admission axes of a request (docs/admission.md), with one combined
// decision and one slot lifecycle:
//
//     auto admission = throttlekit::UnifiedAdmission<
//         throttlekit::RateLimiter<throttlekit::Gcra>,
//         throttlekit::RateLimiter<throttlekit::TokenBucket>>::create(
//         {.concurrency = adaptive, .rate = per_tenant, .cost = tokens});
//     absl::StatusOr<throttlekit::Admission> a =
//         (*admission)->admit("tenant:acme", /*cost=*/prompt_tokens);
//     if (!a.ok()) return fail(a.status());
//     if (!*a) return reply_429(a->decision(), a->binding_axis());
//     ... serve ...
//     a->release(throttlekit::PermitOutcome::kSuccess);  // or destruction
//
// Design
// - Axes are evaluated concurrency -> rate -> cost, and the first denial
//   short-circuits: later axes are not asked (their decisions stay empty)
//   and spend nothing. The order only sets what a denial costs: the
//   concurrency axis is in-process and cheapest.
// - Any axis may be absent: a null engine (or `NoAxis` as its type) is the
//   identity `kAllowFull`. The rate and cost axes take any `RateEngine`
//   (memory, strict over Redis or Postgres, cached-deny, leased, two-tier):
//   the rate axis is asked for cost 1 (one request), the cost axis for the
//   request's cost, both on the same key and the same `now`.
// - Which `now`: a caller-supplied one (`admit_at`, `AdmitRequest::now_ms`)
//   is every axis's. Without one the admission reads its clock once for
//   the in-process axes, and an axis that decides at a shared store
//   (`decides_at_store`, core/rate_engine.h: strict, cached-deny, the
//   fused pair) is asked without a `now`, so the store's clock decides
//   inside its atomic step. A `now` read before the round trip can reach
//   the store after the window's state expired there and count the ended
//   window afresh (docs/redis.md, "Physical TTL and a stale now").
// - The concurrency axis is an `AdaptiveConcurrency` (its permit is the
//   slot) or a fixed ceiling (`max_inflight`). As a decision (the lease
//   shim): granted -> {allowed, limit, limit - inflight, now, 0}; refused ->
//   {denied, limit, 0, now, max(1, round(last_rtt_ms))}: a slot frees by an
//   event, not by the clock, so the hint is one typical request's latency
//   (Little's law), and reset_at = now lets a rate or cost reset dominate
//   the combined reset.
// - The combined decision is `combine` over the evaluated axes (AND, min
//   limit, min remaining, max reset_at, max retry_after); the binding axis
//   is the first denying axis in evaluation order (`binding_axis`).
// - Lifecycle: the slot is taken first. A later axis's denial releases it
//   at once as kIgnored (the denial is upstream, not an overload, and its
//   near-zero latency must not reach the latency law) and the handle's
//   `release` becomes a no-op. An error from a later axis releases it the
//   same way before the status is returned. On admission the caller holds
//   the slot in the returned `Admission` until `release(outcome)` or its
//   destruction (kIgnored). A slot never leaks.
// - A denial by an earlier axis does not refund a later one, and a denial
//   by a later axis does not refund an earlier one: the rate axis has
//   counted a request that the cost axis then denied, exactly as the same
//   two engines called in sequence (and the fused Redis path, which must
//   equal it step for step).
// - Bad input (an empty or oversized key, cost 0, negative, NaN, infinite)
//   is kInvalidArgument before any axis is asked.
// - Observation: an optional `DecisionObserver` sees every admission (one
//   virtual call; swallowed if it throws).
//
// Thread-safety: `admit` may be called concurrently from any thread; an
// `Admission` is used by one thread at a time (like a unique_ptr). The
// engines are shared and must outlive every admission they decided.

#ifndef THROTTLEKIT_ADMISSION_UNIFIED_ADMISSION_H_
#define THROTTLEKIT_ADMISSION_UNIFIED_ADMISSION_H_

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/admission/admission.h"
#include "throttlekit/admission/bid_price_policy.h"
#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/core/check_awaitable.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/observe/decision_observer.h"

namespace throttlekit {

// One request for `admit`: the key, its cost, and for the bid-price policy
// its value (revenue if served) and expected hold (seconds in flight).
struct AdmitRequest {
  std::string_view key;
  double cost = 1;
  // Required (finite) when a policy is set; ignored otherwise.
  double value = std::numeric_limits<double>::quiet_NaN();
  // The 3-axis policy's concurrency hold; a non-finite or negative hold
  // counts as 0 (bid_price_policy.h).
  double hold_s = 0;
  // Epoch ms, every axis's; 0: the admission's clock, and the store's for
  // an axis that decides at a store (see "Which `now`" above).
  int64_t now_ms = 0;
};

// An absent rate or cost axis, as a type: `UnifiedAdmission<RateLimiter<
// Gcra>, NoAxis>` has no cost axis (and no engine to hold for it).
struct NoAxis {};

// Rate and cost decided together in one atomic step (the fused Redis path,
// redis/fused_rate_cost.h): `check_pair(key, now_ms, cost)` returns both
// axes' decisions, the cost axis empty when the rate axis denied. Put on
// the rate axis with `NoAxis` as the cost axis.
template <class F>
concept FusedAxes = requires(F& f, std::string_view key, int64_t now_ms,
                             double cost) {
  { f.check_pair(key, now_ms, cost)->rate } -> std::convertible_to<Decision>;
  {
    f.check_pair(key, now_ms, cost)->cost
    } -> std::convertible_to<std::optional<Decision>>;
};

// Fused axes that also answer without waiting: `check_pair_async(key,
// now_ms, cost, done)` runs `done` once with what `check_pair` returns.
template <class F>
concept AsyncFusedAxes = FusedAxes<F> &&
    requires(F& f, std::string_view key, int64_t now_ms, double cost,
             Completion<typename F::FusedDecision> done) {
  f.check_pair_async(key, now_ms, cost, std::move(done));
};

// An axis `admit_async` asks without waiting: absent, an asynchronous
// engine, or asynchronous fused axes.
template <class E>
concept AsyncAxis =
    std::is_same_v<E, NoAxis> || AsyncRateEngine<E> || AsyncFusedAxes<E>;

template <class Rate = NoAxis, class Cost = NoAxis, EpochClock C = SystemClock,
          NanoClock NC = MonotonicClock>
class BasicUnifiedAdmission {
  static_assert(std::is_same_v<Rate, NoAxis> || RateEngine<Rate> ||
                    FusedAxes<Rate>,
                "the rate axis must be a RateEngine, FusedAxes or NoAxis");
  static_assert(!FusedAxes<Rate> || std::is_same_v<Cost, NoAxis>,
                "a fused rate axis decides the cost axis too: Cost = NoAxis");
  static_assert(std::is_same_v<Cost, NoAxis> || RateEngine<Cost>,
                "the cost axis must be a RateEngine or NoAxis");

 public:
  using Concurrency = BasicAdaptiveConcurrency<NC>;
  using Admission = BasicAdmission<NC>;

  struct Options {
    // The concurrency axis: an adaptive limiter (shared: its stats and
    // ceiling stay reachable), or a fixed ceiling `max_inflight` in
    // [1, 2^30] (0: none). At most one of the two.
    std::shared_ptr<Concurrency> concurrency;
    int64_t max_inflight = 0;
    // The rate axis (asked for cost 1) and the cost axis (asked for the
    // request's cost); null: absent.
    std::shared_ptr<Rate> rate;
    std::shared_ptr<Cost> cost;
    // Sees every admission; null: none.
    std::shared_ptr<DecisionObserver> observer;
    // The joint-LP bid-price policy (bid_price_policy.h), asked before any
    // axis: a request whose value is below its bid is denied with
    // `policy_denied()` and no binding axis, and spends nothing. Null: none.
    std::shared_ptr<BidPricePolicy> policy;
  };

  // Validates `options`: kInvalidArgument naming "unified_admission.<field>"
  // for a ceiling out of range, or both an adaptive limiter and a ceiling.
  static absl::StatusOr<std::unique_ptr<BasicUnifiedAdmission>> create(
      Options options, C clock = C{}, NC nano_clock = NC{}) {
    if (options.max_inflight != 0) {
      if (options.concurrency != nullptr) {
        return absl::InvalidArgumentError(
            "unified_admission: set concurrency or max_inflight, not both");
      }
      if (options.max_inflight < 1 ||
          options.max_inflight > kMaxConcurrencyLimit) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unified_admission.max_inflight must be in [1, 2^30] (0: no "
            "ceiling); got ",
            options.max_inflight));
      }
      // A fixed ceiling: AIMD pinned at one limit. Its permits are always
      // released as kIgnored, so the law never runs.
      AdaptiveConcurrencyOptions fixed;
      fixed.law = ConcurrencyLaw::kAimd;
      fixed.initial_limit = fixed.min_limit = fixed.max_limit =
          options.max_inflight;
      auto c = Concurrency::create(fixed, nano_clock);
      if (!c.ok()) return c.status();
      options.concurrency = std::shared_ptr<Concurrency>(*std::move(c));
    }
    return std::unique_ptr<BasicUnifiedAdmission>(new BasicUnifiedAdmission(
        std::move(options), std::move(clock), std::move(nano_clock)));
  }

  BasicUnifiedAdmission(const BasicUnifiedAdmission&) = delete;
  BasicUnifiedAdmission& operator=(const BasicUnifiedAdmission&) = delete;

  // Admits or denies `r` (the policy first, when set: kInvalidArgument if
  // `r.value` is not finite). Thread-safe.
  absl::StatusOr<Admission> admit(const AdmitRequest& r) {
    const int64_t now_ms = r.now_ms != 0 ? r.now_ms : clock_.now_ms();
    if (policy_ != nullptr) {
      if (std::optional<absl::StatusOr<Admission>> g = policy_gate(r, now_ms)) {
        return *std::move(g);
      }
    }
    return evaluate(r.key, now_ms, r.now_ms != 0, r.cost);
  }

  // Admits or denies one request of `cost` for `key` now (the clock read
  // once). With a policy set, use `admit(AdmitRequest)` (this form has no
  // value: kInvalidArgument). Thread-safe.
  absl::StatusOr<Admission> admit(std::string_view key, double cost = 1) {
    return admit(AdmitRequest{.key = key, .cost = cost});
  }

  // As `admit`, at a caller-supplied epoch-ms `now_ms` (every axis decides
  // at it, a store-backed one too; the concurrency decision's reset_at is
  // it). Thread-safe.
  absl::StatusOr<Admission> admit_at(std::string_view key, int64_t now_ms,
                                     double cost = 1) {
    if (policy_ != nullptr) [[unlikely]] {
      return needs_value();
    }
    return evaluate(key, now_ms, /*caller_now=*/true, cost);
  }

  // As `admit`, without waiting for a store (docs/async.md): `on_done` runs
  // exactly once with what `admit` would return. The axes are asked in the
  // same order with the same short-circuits, each through its engine's
  // asynchronous verb (`check_at_async`; the fused pair's
  // `check_pair_async`), the next one started from the previous one's
  // completion. When every axis answers inline (memory, a leased local hit,
  // a cached denial) and on bad input or a policy or concurrency denial,
  // `on_done` runs before this returns and nothing is allocated; otherwise
  // it runs on the thread that completed the last axis asked (a store
  // backend's I/O thread), never with a lock of the library held. The key
  // is copied when an axis keeps the continuation. Only for axes that
  // answer without waiting (`AsyncAxis`). Thread-safe.
  template <class Done>
  requires std::invocable<Done, absl::StatusOr<Admission>> && AsyncAxis<Rate> &&
      AsyncAxis<Cost>
  void admit_async(const AdmitRequest& r, Done&& on_done) {
    const int64_t now_ms = r.now_ms != 0 ? r.now_ms : clock_.now_ms();
    if (policy_ != nullptr) {
      if (std::optional<absl::StatusOr<Admission>> g = policy_gate(r, now_ms)) {
        std::forward<Done>(on_done)(*std::move(g));
        return;
      }
    }
    if (!is_valid_key(r.key) || !is_valid_cost(r.cost)) [[unlikely]] {
      absl::Status s = validate_key(r.key);
      if (s.ok()) s = validate_cost(r.cost);
      std::forward<Done>(on_done)(absl::StatusOr<Admission>(std::move(s)));
      return;
    }
    Pending<std::decay_t<Done>> p(this, std::forward<Done>(on_done), r.key,
                                  now_ms, r.now_ms != 0, r.cost);
    run(p);
  }
  template <class Done>
  requires std::invocable<Done, absl::StatusOr<Admission>> && AsyncAxis<Rate> &&
      AsyncAxis<Cost>
  void admit_async(std::string_view key, double cost, Done&& on_done) {
    admit_async(AdmitRequest{.key = key, .cost = cost},
                std::forward<Done>(on_done));
  }

  // `co_await admission->async_admit(key, cost)` (core/check_awaitable.h):
  // `admit_async` as an awaitable; does not suspend when every axis
  // answered inline. `key` must stay valid until the co_await ends.
  class [[nodiscard]] AdmitAwaitable
      : public CompletionAwaitable<absl::StatusOr<Admission>> {
   public:
    AdmitAwaitable(BasicUnifiedAdmission& admission, AdmitRequest r)
        : admission_(admission), r_(r) {}
    bool await_suspend(std::coroutine_handle<> waiting) {
      return this->suspend(waiting, [this](auto done) {
        admission_.admit_async(r_, std::move(done));
      });
    }

   private:
    BasicUnifiedAdmission& admission_;
    AdmitRequest r_;
  };
  AdmitAwaitable async_admit(
      const AdmitRequest& r) requires AsyncAxis<Rate> && AsyncAxis<Cost> {
    return AdmitAwaitable(*this, r);
  }
  AdmitAwaitable async_admit(std::string_view key, double cost = 1) requires
      AsyncAxis<Rate> && AsyncAxis<Cost> {
    return AdmitAwaitable(*this, AdmitRequest{.key = key, .cost = cost});
  }

  // The cost axis for work whose cost is known only afterwards (an LLM
  // completion): evaluates concurrency and rate as `admit`, then gates the
  // cost axis on `reserve <= remaining` WITHOUT debiting: the cost
  // engine's `peek(key)` (on its own clock) must show at least `reserve`
  // units left. When admitted, the caller streams actual usage with
  // `Admission::debit(units)` (the meter's rule, e.g. the token budget's:
  // the debit that crosses the budget counts in full, later ones are
  // refused) and feeds the total to its reservation learner. Safety is the
  // meter's alone: whatever `reserve` is, a window serves at most budget +
  // largest debit - 1. `reserve` in [1, 2^53 - 1] (a learner's `reserve()`);
  // kFailedPrecondition without a cost axis. An allowed result allocates
  // its meter (the key is copied for the stream). Thread-safe.
  absl::StatusOr<Admission> admit_reserved(std::string_view key,
                                           double reserve) {
    if constexpr (std::is_same_v<Cost, NoAxis>) {
      return absl::FailedPreconditionError(
          "unified_admission.admit_reserved: no cost axis");
    } else {
      if (cost_ == nullptr) {
        return absl::FailedPreconditionError(
            "unified_admission.admit_reserved: no cost axis");
      }
      if (policy_ != nullptr) return needs_value();
      if (absl::Status s = validate_key(key); !s.ok()) return s;
      if (absl::Status s = validate_cost(reserve); !s.ok()) return s;
      const int64_t now_ms = clock_.now_ms();
      const int64_t t0 = observer_ == nullptr ? 0 : nano_clock_.now_ns();
      absl::StatusOr<Admission> out =
          decide<false>(key, now_ms, /*caller_now=*/false, reserve);
      if (!out.ok() || !out->allowed()) {
        report(key, reserve, out, t0);
        return out;
      }
      Admission& a = *out;
      absl::StatusOr<Decision> left = cost_->peek(key);
      if (!left.ok()) {
        a.permit_.release(PermitOutcome::kIgnored);
        return left.status();
      }
      Decision gate = *left;
      gate.allowed = static_cast<double>(left->remaining) >= reserve;
      if (gate.allowed) {
        gate.retry_after_ms = 0;
      } else {
        gate.retry_after_ms = std::max<int64_t>(
            {int64_t{1}, left->retry_after_ms, left->reset_at_ms - now_ms});
      }
      a.set_axis(Axis::kCost, gate);
      a.decision_ = combine(a.decision_, gate);
      if (!gate.allowed) {
        give_back_slot(a);
      } else {
        a.meter_ = std::make_unique<typename Admission::Meter>(
            typename Admission::Meter{
                cost_.get(),
                [](void* engine, std::string_view k, double units) {
                  return static_cast<Cost*>(engine)->check(k, units);
                },
                std::string(key)});
      }
      report(key, reserve, out, t0);
      return out;
    }
  }

  // The concurrency limiter (the one made for `max_inflight` included);
  // null without a concurrency axis.
  const std::shared_ptr<Concurrency>& concurrency() const noexcept {
    return concurrency_;
  }

 private:
  BasicUnifiedAdmission(Options options, C clock, NC nano_clock)
      : concurrency_(std::move(options.concurrency)),
        fixed_ceiling_(options.max_inflight != 0),
        rate_(std::move(options.rate)),
        cost_(std::move(options.cost)),
        observer_(std::move(options.observer)),
        policy_(std::move(options.policy)),
        clock_(std::move(clock)),
        nano_clock_(std::move(nano_clock)) {}

  // admit without the policy check (done by the caller). `caller_now`:
  // `now_ms` is the caller's, for every axis (else the admission's clock
  // read, and store-backed axes decide on the store's).
  absl::StatusOr<Admission> evaluate(std::string_view key, int64_t now_ms,
                                     bool caller_now, double cost) {
    if (!is_valid_key(key) || !is_valid_cost(cost)) [[unlikely]] {
      if (absl::Status s = validate_key(key); !s.ok()) return s;
      return validate_cost(cost);
    }
    if (observer_ == nullptr) [[likely]] {
      return decide<true>(key, now_ms, caller_now, cost);
    }
    const int64_t t0 = nano_clock_.now_ns();
    absl::StatusOr<Admission> a = decide<true>(key, now_ms, caller_now, cost);
    report(key, cost, a, t0);
    return a;
  }

  // The bid-price policy's gate (`policy_` set): a status for a non-finite
  // value or bad key or cost, a policy denial for a value below its bid;
  // nullopt when the axes are to be asked.
  std::optional<absl::StatusOr<Admission>> policy_gate(const AdmitRequest& r,
                                                       int64_t now_ms) const {
    if (!std::isfinite(r.value)) {
      return absl::StatusOr<Admission>(absl::InvalidArgumentError(
          absl::StrCat("unified_admission: the bid-price policy needs a "
                       "finite request value; got ",
                       r.value)));
    }
    if (!is_valid_key(r.key) || !is_valid_cost(r.cost)) [[unlikely]] {
      absl::Status s = validate_key(r.key);
      if (s.ok()) s = validate_cost(r.cost);
      return absl::StatusOr<Admission>(std::move(s));
    }
    if (policy_->admits(r.value, r.cost, r.hold_s)) return std::nullopt;
    std::optional<absl::StatusOr<Admission>> out(std::in_place, absl::in_place);
    (*out)->policy_denied_ = true;
    // No axis ran out: nothing to wait for until prices change.
    (*out)->decision_ =
        Decision{false, kMaxSafeInteger, kMaxSafeInteger, now_ms, 0};
    const int64_t t0 = observer_ == nullptr ? 0 : nano_clock_.now_ns();
    report(r.key, r.cost, *out, t0);
    return out;
  }

  static absl::Status needs_value() {
    return absl::InvalidArgumentError(
        "unified_admission: a bid-price policy is set: admit with an "
        "AdmitRequest carrying the request's value");
  }

  // The lease shim: the concurrency axis as a decision.
  static Decision granted(const typename Admission::Permit& p,
                          int64_t now_ms) noexcept {
    const int64_t limit = p.limit_at_acquire();
    return Decision{true, limit,
                    std::max<int64_t>(0, limit - p.inflight_at_acquire()),
                    now_ms, 0};
  }
  Decision refused(const typename Admission::Permit& p,
                   int64_t now_ms) const noexcept {
    const int64_t rtt_ns = concurrency_->last_rtt_ns();
    // max(1, round(last_rtt_ms)), rounding half up.
    const int64_t retry = std::max<int64_t>(1, (rtt_ns + 500'000) / 1'000'000);
    return Decision{false, p.limit_at_acquire(), 0, now_ms, retry};
  }

  // Reports an admission to the observer (if any; `t0` its start).
  void report(std::string_view key, double cost,
              const absl::StatusOr<Admission>& a, int64_t t0) const noexcept {
    if (observer_ == nullptr || !a.ok()) return;
    DecisionEvent e;
    e.kind = DecisionKind::kAdmit;
    e.engine = "unified_admission";
    e.key = key;
    e.cost = cost;
    e.decision = a->decision();
    e.binding_axis = a->binding_axis();
    e.policy_denied = a->policy_denied();
    e.duration_ns = nano_clock_.now_ns() - t0;
    notify(observer_.get(), e);
  }

  // The steps of one admission, shared by `admit` (asking each axis with
  // its blocking verb) and `admit_async` (with its asynchronous one): one
  // decision path.

  // The concurrency axis: takes a slot. False when refused (`a` is final).
  bool take_slot(Admission& a, int64_t now_ms) {
    a.fixed_ceiling_ = fixed_ceiling_;
    if (concurrency_ == nullptr) return true;
    a.permit_ = concurrency_->acquire();
    const Decision d =
        a.permit_ ? granted(a.permit_, now_ms) : refused(a.permit_, now_ms);
    a.set_axis(Axis::kConcurrency, d);
    a.decision_ = d;
    return d.allowed;
  }

  // One axis's answer: an error releases the slot (kIgnored) and is
  // returned; a denial gives the slot back. Ok: the next axis may be asked
  // iff `a.allowed()`.
  static absl::Status apply(Admission& a, Axis axis,
                            const absl::StatusOr<Decision>& d) {
    if (!d.ok()) [[unlikely]] {
      a.permit_.release(PermitOutcome::kIgnored);
      return d.status();
    }
    a.set_axis(axis, *d);
    a.decision_ = combine(a.decision_, *d);
    if (!a.decision_.allowed) give_back_slot(a);
    return absl::OkStatus();
  }

  // The fused pair's answer (both axes, the cost axis when asked), as
  // `apply`.
  template <class FD>
  static absl::Status apply_fused(Admission& a, const absl::StatusOr<FD>& f) {
    if (!f.ok()) [[unlikely]] {
      a.permit_.release(PermitOutcome::kIgnored);
      return f.status();
    }
    a.set_axis(Axis::kRate, f->rate);
    a.decision_ = combine(a.decision_, f->rate);
    if (f->cost) {
      a.set_axis(Axis::kCost, *f->cost);
      a.decision_ = combine(a.decision_, *f->cost);
    }
    if (!a.decision_.allowed) give_back_slot(a);
    return absl::OkStatus();
  }

  // Whether `e` is asked on the store's clock rather than at `now_ms`: the
  // caller supplied no `now` and `e` decides at a store.
  template <class E>
  static bool on_store_clock(const E& e, bool caller_now) noexcept {
    return !caller_now && decides_at_store(e);
  }

  // One axis's decision: at `now_ms`, or on the store's clock.
  template <class E>
  static absl::StatusOr<Decision> ask(E& e, std::string_view key,
                                      int64_t now_ms, bool caller_now,
                                      double cost) {
    if (on_store_clock(e, caller_now)) return e.check(key, cost);
    return e.check_at(key, now_ms, cost);
  }
  template <class E, class F>
  static void ask_async(E& e, std::string_view key, int64_t now_ms,
                        bool caller_now, double cost, F&& step) {
    if (on_store_clock(e, caller_now)) {
      e.check_async(key, cost, std::forward<F>(step));
    } else {
      e.check_at_async(key, now_ms, cost, std::forward<F>(step));
    }
  }

  // A denial by a later axis: the slot goes back at once (kIgnored).
  static void give_back_slot(Admission& a) noexcept {
    a.permit_.release(PermitOutcome::kIgnored);
  }

  // Built in place in the returned StatusOr (every return returns `out`),
  // so the ~200-byte admission is never copied: a copy right after its
  // fields were written costs store-forwarding stalls on the hot path.
  // `kWithCost`: ask the cost axis too (admit); without, stop after the
  // rate axis (admit_reserved gates the cost axis itself).
  template <bool kWithCost>
  absl::StatusOr<Admission> decide(std::string_view key, int64_t now_ms,
                                   bool caller_now, double cost) {
    absl::StatusOr<Admission> out(absl::in_place);
    Admission& a = *out;
    if (!take_slot(a, now_ms)) [[unlikely]] {
      return out;
    }
    if constexpr (FusedAxes<Rate>) {
      if (rate_ != nullptr) {
        if (absl::Status s = apply_fused(
                a, rate_->check_pair(
                       key, on_store_clock(*rate_, caller_now) ? 0 : now_ms,
                       cost));
            !s.ok()) [[unlikely]] {
          out = std::move(s);
        }
        return out;
      }
    } else if constexpr (!std::is_same_v<Rate, NoAxis>) {
      if (rate_ != nullptr) {
        if (absl::Status s =
                apply(a, Axis::kRate, ask(*rate_, key, now_ms, caller_now, 1));
            !s.ok()) {
          out = std::move(s);
          return out;
        }
        if (!a.decision_.allowed) return out;
      }
    }
    if constexpr (kWithCost && !std::is_same_v<Cost, NoAxis>) {
      if (cost_ != nullptr) {
        if (absl::Status s = apply(a, Axis::kCost,
                                   ask(*cost_, key, now_ms, caller_now, cost));
            !s.ok()) {
          out = std::move(s);
        }
      }
    }
    return out;
  }

  // One `admit_async` in progress: the admission so far, the caller's
  // completion, and what the next axis is asked with. It lives in
  // `admit_async`'s frame while every axis answers inline; an axis that
  // keeps its continuation moves it to the heap (`Step`), and the move
  // copies the key, which the caller's view no longer covers.
  enum class Stage : uint8_t { kSlot, kRate, kCost, kDone };
  template <class Done>
  struct Pending {
    Pending(BasicUnifiedAdmission* self, Done done, std::string_view key,
            int64_t now_ms, bool caller_now, double cost)
        : self(self),
          out(absl::in_place),
          done(std::move(done)),
          key(key),
          now_ms(now_ms),
          caller_now(caller_now),
          cost(cost),
          t0(self->observer_ == nullptr ? 0 : self->nano_clock_.now_ns()) {}
    Pending(Pending&& o) noexcept
        : self(o.self),
          out(std::move(o.out)),
          done(std::move(o.done)),
          // Copied, never moved: the engine being asked still holds a view
          // of `o.key` while its continuation (this move) is stored, and a
          // moved-from string (a short key's in-place buffer above all)
          // would change under it.
          owned_key(o.key),
          key(owned_key),
          now_ms(o.now_ms),
          caller_now(o.caller_now),
          cost(o.cost),
          t0(o.t0),
          next(o.next) {}
    Pending& operator=(Pending&&) = delete;

    BasicUnifiedAdmission* self;
    absl::StatusOr<Admission> out;
    Done done;
    std::string owned_key;  // empty while in admit_async's frame
    std::string_view key;
    int64_t now_ms;
    bool caller_now;  // `now_ms` is the caller's (else: the admission's)
    double cost;
    int64_t t0;                 // the observer's start (0 without one)
    Stage next = Stage::kSlot;  // what `run` does next
  };

  // The continuation an axis's asynchronous verb gets: a pointer to the
  // frame's `Pending` while called inline; moved (into the engine's stored
  // completion), it owns a heap copy.
  template <class Done>
  class Step {
   public:
    explicit Step(Pending<Done>* p) noexcept : p_(p) {}
    Step(Step&& o)
        : owned_(o.owned_ != nullptr
                     ? std::move(o.owned_)
                     : std::make_unique<Pending<Done>>(std::move(*o.p_))),
          p_(owned_.get()) {}
    Step& operator=(Step&&) = delete;

    void operator()(absl::StatusOr<Decision> d) {
      Pending<Done>& p = *p_;
      // `run` moved past the axis it asked.
      const Axis asked = p.next == Stage::kCost ? Axis::kRate : Axis::kCost;
      if (absl::Status s = apply(*p.out, asked, d); !s.ok()) {
        p.out = std::move(s);
      } else if (p.out->allowed()) {
        p.self->run(p);
        return;
      }
      p.self->finish(p);
    }
    template <class FD>
    requires(!std::is_same_v<FD, Decision>) void operator()(
        absl::StatusOr<FD> f) {
      Pending<Done>& p = *p_;
      if (absl::Status s = apply_fused(*p.out, f); !s.ok()) {
        p.out = std::move(s);
      }
      p.self->finish(p);
    }

   private:
    std::unique_ptr<Pending<Done>> owned_;
    Pending<Done>* p_;
  };

  // Asks `p`'s next axis (returning: its completion goes on), or finishes
  // when no axis is left. The axes and short-circuits of `decide<true>`.
  template <class Done>
  void run(Pending<Done>& p) {
    Admission& a = *p.out;
    if (p.next == Stage::kSlot) {
      p.next = Stage::kRate;
      if (!take_slot(a, p.now_ms)) [[unlikely]] {
        finish(p);
        return;
      }
    }
    if (p.next == Stage::kRate) {
      p.next = Stage::kCost;
      if constexpr (FusedAxes<Rate>) {
        if (rate_ != nullptr) {
          rate_->check_pair_async(
              p.key, on_store_clock(*rate_, p.caller_now) ? 0 : p.now_ms,
              p.cost, Completion<typename Rate::FusedDecision>(Step<Done>(&p)));
          return;
        }
      } else if constexpr (!std::is_same_v<Rate, NoAxis>) {
        if (rate_ != nullptr) {
          ask_async(*rate_, p.key, p.now_ms, p.caller_now, 1, Step<Done>(&p));
          return;
        }
      }
    }
    if (p.next == Stage::kCost) {
      p.next = Stage::kDone;
      if constexpr (!std::is_same_v<Cost, NoAxis>) {
        if (cost_ != nullptr) {
          ask_async(*cost_, p.key, p.now_ms, p.caller_now, p.cost,
                    Step<Done>(&p));
          return;
        }
      }
    }
    finish(p);
  }

  template <class Done>
  void finish(Pending<Done>& p) {
    report(p.key, p.cost, p.out, p.t0);
    std::move(p.done)(std::move(p.out));
  }

  const std::shared_ptr<Concurrency> concurrency_;
  const bool fixed_ceiling_;
  const std::shared_ptr<Rate> rate_;
  const std::shared_ptr<Cost> cost_;
  const std::shared_ptr<DecisionObserver> observer_;
  const std::shared_ptr<BidPricePolicy> policy_;
  const C clock_;
  const NC nano_clock_;
};

// The common case: the system clock, the monotonic clock for slots.
template <class Rate = NoAxis, class Cost = NoAxis>
using UnifiedAdmission =
    BasicUnifiedAdmission<Rate, Cost, SystemClock, MonotonicClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_ADMISSION_UNIFIED_ADMISSION_H_
