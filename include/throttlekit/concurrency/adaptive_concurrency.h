// throttlekit/concurrency/adaptive_concurrency.h
//
// Provides `AdaptiveConcurrency<C>`: caps in-flight requests at a ceiling
// inferred from latency instead of a hand-tuned constant
// (docs/adaptive_concurrency.md). `acquire()` hands out a move-only RAII
// `Permit`; settling it feeds one sample to the control law (gradient2 by
// default, `gradient2.h`; AIMD opt-in, `aimd.h`), and an Envoy-style minRTT
// recalibration (on by default) periodically drains the queue to re-measure
// the no-load latency. There is no background timer: every adjustment
// happens when a lease settles, on the injected clock.

#ifndef THROTTLEKIT_CONCURRENCY_ADAPTIVE_CONCURRENCY_H_
#define THROTTLEKIT_CONCURRENCY_ADAPTIVE_CONCURRENCY_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/concurrency/aimd.h"
#include "throttlekit/concurrency/gradient2.h"
#include "throttlekit/concurrency/windowed_min.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/core/spin_lock.h"

namespace throttlekit {

// The largest limit, ceiling or window accepted (2^30): keeps `2 * inflight`
// and the ring of the rolling minimum far from overflow.
inline constexpr int64_t kMaxConcurrencyLimit = int64_t{1} << 30;

// The most successes one round may average (`round_samples`), and the
// latency a sample is capped at inside a round's sum (2^46 ns, about 19.5
// hours): together they keep the sum far from overflow.
inline constexpr int64_t kMaxRoundSamples = int64_t{1} << 16;
inline constexpr int64_t kMaxRoundSampleNs = int64_t{1} << 46;

// `set_ceiling(kNoConcurrencyCeiling)` removes an external ceiling.
inline constexpr int64_t kNoConcurrencyCeiling =
    std::numeric_limits<int64_t>::max();

// `set_grant_deadline_ns(kNoGrantDeadline)` removes a grant deadline.
inline constexpr int64_t kNoGrantDeadline = std::numeric_limits<int64_t>::max();

// How a lease ended.
// - `kSuccess`: the work completed; its latency is a sample.
// - `kDropped`: the work was dropped, failed from overload or timed out; an
//   overload signal without a usable latency.
// - `kIgnored`: the outcome says nothing about the backend (cancelled by the
//   client, a non-overload error); frees the slot, feeds no sample.
enum class PermitOutcome { kSuccess, kDropped, kIgnored };

// Which control law moves the limit.
enum class ConcurrencyLaw { kGradient2, kAimd };

// Options of `BasicAdaptiveConcurrency`. Every field is checked by `create()`.
//
// The defaults are gradient2 in the shape of Envoy's gradient controller:
// the law steps once per round of 32 successes, on their mean latency,
// against a no-load latency that a pin re-measures every 60 s plus up to
// 9 s of jitter (128 successes at `min_limit` 3, the queue drained) and that
// stays frozen between pins; tolerance 1.0 puts the law's fixed point at
// the backend's knee. docs/adaptive_concurrency.md ("The defaults over
// 10-minute runs") measures them with pins at this interval and chose the
// interval and the pin's length from the trade-off it reports: the
// shortest interval whose pins refuse at most 1% of arrivals at 0.8x load,
// and the pin that keeps the most goodput at 2x overload with both of the
// simulator's service-time shapes. Their costs: the pins; a lasting change
// of the no-load latency reads as a queue until the next pin (up to an
// interval plus jitter); before the first pin the baseline is a rolling
// minimum of round means. Give each node of a fleet its own
// `recalibration_seed`, so that the nodes do not pin in lockstep.
//
// `per_sample_gradient2()` is the earlier default law, kept by name.
struct AdaptiveConcurrencyOptions {
  // gradient2 stepped by every success against the rolling minimum of its
  // last 100 latencies, tolerance 1.5, min_limit 1, no recalibration (the
  // other fields as the defaults). It holds latency near the no-load
  // latency, but when the service time's own spread is wider than its
  // tolerance it stalls at a limit set by that spread rather than by
  // capacity (docs/adaptive_concurrency.md, "Why per-sample gradient2
  // stalls"). These were the defaults before the Envoy shape.
  static constexpr AdaptiveConcurrencyOptions per_sample_gradient2() noexcept {
    AdaptiveConcurrencyOptions o;
    o.min_limit = 1;
    o.rtt_window = 100;
    o.round_samples = 1;
    o.tolerance = kGradient2PerSampleTolerance;
    o.recalibration_interval_ns = 0;
    o.recalibration_jitter_ns = 0;
    o.recalibration_samples = 20;
    o.recalibrate_at_create = false;
    o.freeze_rtt_noload = false;
    return o;
  }

  ConcurrencyLaw law = ConcurrencyLaw::kGradient2;
  // Limits are whole numbers of in-flight requests, in [1, 2^30].
  int64_t initial_limit = 20;  // in [min_limit, max_limit]
  // Also the limit a recalibration pin holds: 3 in flight (Envoy's
  // min_concurrency) measure the no-load latency without a queue and end a
  // pin of 128 successes in about 43 service times. A `max_limit` below 3
  // needs `min_limit` lowered too.
  int64_t min_limit = 3;
  int64_t max_limit = 1000;  // >= min_limit
  // Law samples (round means, with rounds) over which rtt_noload is the
  // rolling minimum, in [1, 2^30]; the ring is allocated at `create` (16
  // bytes a sample). With `freeze_rtt_noload` the window rolls only until
  // the first pin ends, then holds that pin's rounds. The default, 512
  // rounds (16 384 successes), is for that first interval: in the
  // simulator's 2x overload the minimum of 128 rounds crept up with the
  // queue before the first pin (p99 42.3 ms), that of 512 did not (21.6 ms).
  int64_t rtt_window = 512;
  // Successes averaged into one law sample, in [1, 2^16]. With 1 every
  // success steps the law with its own latency. With n > 1 the law steps
  // once per n successes (a "round") with their mean latency, that mean is
  // what enters the rtt window, and the round may grow the limit iff at
  // least half its samples were utilized. Averaging compares like with
  // like: a single sample against the window's minimum reads the service
  // time's own spread as queueing (see docs/adaptive_concurrency.md). Drops
  // still step the law one by one.
  int64_t round_samples = 32;
  // gradient2: latency up to tolerance * rtt_noload counts as no queue;
  // in [1, 100]. With rounds and a frozen baseline the law settles near
  // L = tolerance * c + sqrt(L) for c busy servers, so 1.0 is the knee.
  double tolerance = 1.0;
  // gradient2: EMA weight of each new limit, in (0, 1].
  double smoothing = kGradient2DefaultSmoothing;
  // AIMD: factor applied on a drop, in (0, 1).
  double backoff_ratio = kAimdDefaultBackoffRatio;
  // minRTT recalibration: 0 disables it (then `freeze_rtt_noload` must be
  // false); otherwise the ns between the end of one pin and the start of
  // the next, in [1, 2^53 - 1]. The default is Envoy's 60 s.
  int64_t recalibration_interval_ns = int64_t{60'000'000'000};
  // Each interval is lengthened by a deterministic pseudo-random jitter in
  // [0, recalibration_jitter_ns] drawn from `recalibration_seed`, so a fleet
  // does not recalibrate in lockstep. In [0, 2^53 - 1]. The default, 9 s,
  // is 15% of the interval.
  int64_t recalibration_jitter_ns = int64_t{9'000'000'000};
  // Any value. Nodes with the same seed and interval pin at the same
  // offsets from their creation: give each node its own (e.g. a hash of
  // its node id).
  uint64_t recalibration_seed = 0;
  // Successes (of leases acquired after the pin began) that end a pin, in
  // [1, rtt_window * round_samples] (so the pin's rounds fit in the
  // window); checked only when recalibration is enabled. The default is 4
  // rounds of 32: more rounds measure a steadier baseline, but a lower one
  // (the minimum of more round means) when latency is widely spread, and
  // each pin refuses traffic for longer.
  int64_t recalibration_samples = 128;
  // On, the first pin begins at `create` (as Envoy's gradient controller
  // starts in a minRTT calculation window): the limiter admits `min_limit`
  // until `recalibration_samples` successes (of leases acquired after
  // `create`) have measured rtt_noload, then the law starts from
  // `initial_limit` on that measurement, and the next pin is due an
  // interval plus jitter after this one ends. Off (the default), the first
  // pin is due an interval plus jitter after `create` and until it ends the
  // baseline is a rolling minimum of round means. Ignored when
  // recalibration_interval_ns is 0. Off by default because the simulator's
  // published runs did not confirm it: with exponential service its first
  // minute kept 13.3% of capacity instead of 12.3%, and the 10-minute
  // exponential column fell from 85.1% to 66.1%, though over 20 seeds its
  // first minute kept 79.5% against 15.4% (docs/adaptive_concurrency.md,
  // "A pin at creation"). A limiter whose leases never settle `kSuccess`
  // (e.g. all `kIgnored`) never leaves that pin.
  bool recalibrate_at_create = false;
  // Envoy's minRTT: once a pin has ended, rtt_noload is that pin's
  // measurement (the minimum of its rounds) and stays fixed until the next
  // pin; samples between pins no longer enter the window, so a standing
  // queue cannot raise the baseline (the upward creep of a rolling
  // minimum). Before the first pin the window rolls. Needs
  // recalibration_interval_ns > 0.
  bool freeze_rtt_noload = true;
};

// A snapshot of a limiter (see `BasicAdaptiveConcurrency::stats`).
struct AdaptiveConcurrencyStats {
  // L_local: the control law's limit, floor(estimate). Not lowered by a
  // recalibration pin nor by the ceiling, so a coordinator aggregating
  // L_local across a fleet is not dragged down by one node's pin.
  int64_t limit = 0;
  // What `acquire` enforces: min(ceiling, recalibrating ? min_limit : limit).
  int64_t effective_limit = 0;
  // The external ceiling (`kNoConcurrencyCeiling` when none).
  int64_t ceiling = kNoConcurrencyCeiling;
  // Granted leases not yet settled. May exceed `effective_limit` right
  // after the limit falls: lowering a limit never revokes a lease.
  int64_t inflight = 0;
  // Rolling minimum of the last `rtt_window` latencies; 0 before the first
  // success and right after a recalibration pin resets the window.
  int64_t rtt_noload_ns = 0;
  // Latency of the most recent success folded in; 0 before the first.
  int64_t last_rtt_ns = 0;
  int64_t samples = 0;         // successes folded in
  int64_t drops = 0;           // kDropped outcomes folded in
  int64_t recalibrations = 0;  // pins begun
  // Success samples not folded in because another thread held the slow
  // path at that instant (see `settle`).
  int64_t skipped_samples = 0;
  bool recalibrating = false;  // a pin is in force
  double estimate = 0;         // the law's real-valued limit
};

// The limiter.
//
// Hot path. `acquire` is one compare-and-swap loop on `inflight <
// effective_limit` (no load-then-increment race, unlike Envoy's TODO): the
// CAS publishes inflight + 1 only if no other thread moved inflight since it
// was compared with the limit, so a grant never takes inflight above the
// effective limit it read. `effective_limit_` is one atomic word the slow
// path republishes whenever the law, a pin or the ceiling changes it, so the
// ceiling costs the hot path nothing. Then one clock read, and the limit
// read again and the grant deadline (two loads; see `acquire` and
// `set_grant_deadline_ns`). A
// rejection by the limit reads no clock, writes nothing and allocates
// nothing. Settling a lease is one `fetch_sub` (plus one clock read for a
// sample).
//
// Slow path (a kSuccess or kDropped settle; kIgnored stops after the
// `fetch_sub`), under `mu_`:
// 1. recalibration (if enabled): when now >= next_recalibration, a pin
//    begins: effective limit = min_limit, the rtt window is cleared, the
//    triggering sample is discarded (unless acquired at that instant). While
//    pinned, successes of leases acquired after the pin began are gathered
//    in rounds of `round_samples` whose means enter the fresh window
//    (earlier leases carry the queue being drained and are discarded) and
//    the law is frozen. After `recalibration_samples` of them (a last
//    partial round included) the pin ends: the law resumes from the
//    pre-pin estimate (as Envoy does) with the re-measured rtt_noload, and
//    the next pin is due recalibration_interval_ns + jitter later. With
//    `freeze_rtt_noload`, that rtt_noload then stays until the next pin.
//    With `recalibrate_at_create` the first pin begins at `create`.
// 2. a success's latency (now - acquire time, floored at 0) joins the
//    round; a round of `round_samples` (32 by default) is one sample, its
//    mean latency, and it enters the window (unless frozen); rtt_noload =
//    the window's minimum, this sample included.
// 3. the law steps the estimate (`gradient2.h` / `aimd.h`); a success is
//    utilized iff 2 * inflight >= limit, both as seen by its own acquire
//    (inflight counting itself; limit = the effective limit it was checked
//    against), and a round iff at least half its successes were.
//    gradient2: an under-utilized sample cannot grow the limit; a drop
//    steps with the floor gradient 0.5 at once and never grows it. AIMD:
//    +1 on a utilized sample, * backoff_ratio on a drop.
// 4. limit = floor(estimate); effective limit republished.
//
// Thread-safety: every public method may be called concurrently. The
// limiter must outlive its leases; it is neither copyable nor movable
// (leases point at it), hence `create` returns a unique_ptr.
template <NanoClock C = MonotonicClock>
class BasicAdaptiveConcurrency {
 public:
  using Outcome = PermitOutcome;
  using Options = AdaptiveConcurrencyOptions;
  using Stats = AdaptiveConcurrencyStats;

  // A slot in the limiter, or a rejection (false). Move-only; settles
  // exactly once: the first `release` records its outcome and later calls
  // do nothing. Destroying (or assigning over) an unreleased granted lease
  // releases it as kIgnored: the slot is freed but no sample is fed, since
  // a lease abandoned without a verdict (an exception, an early return)
  // says nothing reliable about the backend's latency. A rejected or
  // moved-from lease is false and releasing it does nothing.
  //
  // Thread-safety: like std::unique_ptr, one lease is used by one thread at
  // a time; distinct leases may settle concurrently.
  class [[nodiscard]] Permit {
   public:
    // A rejection.
    Permit() noexcept = default;
    Permit(Permit&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)),
          start_ns_(other.start_ns_),
          inflight_at_acquire_(other.inflight_at_acquire_),
          limit_at_acquire_(other.limit_at_acquire_) {}
    Permit& operator=(Permit&& other) noexcept {
      if (this != &other) {
        release(Outcome::kIgnored);
        owner_ = std::exchange(other.owner_, nullptr);
        start_ns_ = other.start_ns_;
        inflight_at_acquire_ = other.inflight_at_acquire_;
        limit_at_acquire_ = other.limit_at_acquire_;
      }
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { release(Outcome::kIgnored); }

    // True iff this lease holds a slot (granted and not yet settled).
    explicit operator bool() const noexcept { return owner_ != nullptr; }

    // Settles the lease with `outcome`; a no-op unless it holds a slot.
    void release(Outcome outcome) noexcept {
      if (owner_ == nullptr) return;
      std::exchange(owner_, nullptr)->settle(*this, outcome);
    }

    // The clock's ns when the slot was granted (0 for a rejection).
    int64_t start_ns() const noexcept { return start_ns_; }
    // In-flight count right after this grant, counting itself; for a
    // rejection by `acquire`, the count it saw (at or above the limit).
    int64_t inflight_at_acquire() const noexcept {
      return inflight_at_acquire_;
    }
    // The effective limit the grant (or the rejection) was checked against;
    // 0 for a default-constructed or moved-from lease.
    int64_t limit_at_acquire() const noexcept { return limit_at_acquire_; }

   private:
    friend class BasicAdaptiveConcurrency;
    Permit(BasicAdaptiveConcurrency* owner, int64_t start_ns, int64_t inflight,
           int64_t limit) noexcept
        : owner_(owner),
          start_ns_(start_ns),
          inflight_at_acquire_(inflight),
          limit_at_acquire_(limit) {}

    BasicAdaptiveConcurrency* owner_ = nullptr;  // null: holds no slot
    int64_t start_ns_ = 0;
    int64_t inflight_at_acquire_ = 0;
    int64_t limit_at_acquire_ = 0;
  };

  // Validates `options`; kInvalidArgument names
  // "adaptive_concurrency.<field>" and its bound.
  static absl::StatusOr<std::unique_ptr<BasicAdaptiveConcurrency>> create(
      const Options& options, C clock = C{}) {
    if (absl::Status s = validate(options); !s.ok()) return s;
    return std::unique_ptr<BasicAdaptiveConcurrency>(
        new BasicAdaptiveConcurrency(options, std::move(clock)));
  }

  BasicAdaptiveConcurrency(const BasicAdaptiveConcurrency&) = delete;
  BasicAdaptiveConcurrency& operator=(const BasicAdaptiveConcurrency&) = delete;

  // Grants a slot iff inflight < effective limit, atomically. Never blocks,
  // never allocates. The limit is read again after the compare-and-swap
  // that takes the slot, and the slot given back if the limit has fallen
  // below it meanwhile (a thread preempted between its read of the limit
  // and its CAS): the CAS, that second read, the limit's publication and
  // the in-flight read of `stats()` are sequentially consistent, so a grant
  // either counts in every `stats().inflight` read after a decrease was
  // published or sees the decrease. That is what lets a fleet coordinator
  // trust a node's reported in-flight (DistributedConcurrency). Leases
  // granted before a decrease are not revoked: inflight drains to the new
  // limit. Thread-safe.
  [[nodiscard]] Permit acquire() noexcept {
    int64_t seen = inflight_.load(std::memory_order_relaxed);
    int64_t limit;
    do {
      limit = effective_limit_.load(std::memory_order_relaxed);
      if (seen >= limit) return Permit(nullptr, 0, seen, limit);
    } while (!inflight_.compare_exchange_weak(
        seen, seen + 1, std::memory_order_seq_cst, std::memory_order_relaxed));
    const int64_t now = clock_.now_ns();
    const int64_t limit_now = effective_limit_.load(std::memory_order_seq_cst);
    if (seen >= limit_now ||
        now >= grant_deadline_ns_.load(std::memory_order_relaxed))
        [[unlikely]] {
      inflight_.fetch_sub(1, std::memory_order_release);
      return Permit(nullptr, 0, seen + 1, seen >= limit_now ? limit_now : 0);
    }
    return Permit(this, now, seen + 1, limit);
  }

  // Grants only while the clock reads before `deadline_ns`
  // (`kNoGrantDeadline`: always, the default); from then on every acquire
  // is refused, after its clock read, with `limit_at_acquire()` 0. For a
  // node whose fleet share is valid only until its lease lapses
  // (DistributedConcurrency's self-fencing): a process stopped past the
  // deadline admits nothing when it resumes, before any thread of it has
  // noticed. Leases already granted are not revoked. Thread-safe.
  void set_grant_deadline_ns(int64_t deadline_ns) noexcept {
    grant_deadline_ns_.store(deadline_ns, std::memory_order_relaxed);
  }

  // Imposes an external cap: acquire enforces min(ceiling, law's limit).
  // For a coordinator granting a share (effective = min(share, L_local)).
  // Negative values act as 0 (admit nothing); `kNoConcurrencyCeiling`
  // removes it. Leases already granted are not revoked. Thread-safe.
  void set_ceiling(int64_t ceiling) noexcept {
    SpinLockHolder hold(mu_);
    ceiling_ = std::max<int64_t>(0, ceiling);
    publish_effective_limit();
  }

  // A snapshot taken under the slow-path lock: every field but `inflight`
  // changes only under that lock, so they describe one state between two
  // settles. `inflight` is atomic and moves outside the lock; it is read
  // inside it (sequentially consistent), so it is the count at one instant
  // during the snapshot. A settle decrements inflight before it takes the lock,
  // so a snapshot may show a lease as gone whose sample is not yet folded in.
  // Thread-safe.
  [[nodiscard]] Stats stats() const {
    SpinLockHolder hold(mu_);
    Stats s;
    s.limit = limit_;
    s.effective_limit = effective_limit_.load(std::memory_order_relaxed);
    s.ceiling = ceiling_;
    s.inflight = inflight_.load(std::memory_order_seq_cst);  // see acquire
    s.rtt_noload_ns = window_.min();
    s.last_rtt_ns = last_rtt_ns_;
    s.samples = samples_;
    s.drops = drops_;
    s.recalibrations = recalibrations_;
    s.recalibrating = pinned_;
    s.skipped_samples = skipped_samples_.load(std::memory_order_relaxed);
    s.estimate = estimate_;
    return s;
  }

  // Latency of the most recent success folded in (0 before the first), as
  // `stats().last_rtt_ns` but one relaxed load, no lock: for hints on a
  // rejection path (unified admission's retry-after). Thread-safe.
  int64_t last_rtt_ns() const noexcept {
    return last_rtt_hint_ns_.load(std::memory_order_relaxed);
  }

  // Granted, unsettled leases (one relaxed load). Thread-safe.
  int64_t inflight() const noexcept {
    return inflight_.load(std::memory_order_relaxed);
  }

  const Options& options() const noexcept { return options_; }

 private:
  BasicAdaptiveConcurrency(const Options& options, C clock)
      : options_(options),
        clock_(std::move(clock)),
        window_(options.rtt_window),
        estimate_(static_cast<double>(options.initial_limit)),
        limit_(options.initial_limit) {
    effective_limit_.store(limit_, std::memory_order_relaxed);
    if (options_.recalibration_interval_ns > 0) {
      SpinLockHolder hold(mu_);
      const int64_t now_ns = clock_.now_ns();
      if (options_.recalibrate_at_create) {
        begin_pin(now_ns);
      } else {
        next_recalibration_ns_ = now_ns + next_interval_ns();
      }
    }
  }

  static absl::Status validate(const Options& o) {
    constexpr const char* kWhat = "adaptive_concurrency";
    absl::Status s;
    if (o.law != ConcurrencyLaw::kGradient2 && o.law != ConcurrencyLaw::kAimd) {
      return absl::InvalidArgumentError(
          "adaptive_concurrency.law must be kGradient2 or kAimd");
    }
    s.Update(detail::check_int_option(kWhat, "min_limit", o.min_limit, 1,
                                      kMaxConcurrencyLimit));
    if (!s.ok()) return s;
    s.Update(detail::check_int_option(kWhat, "max_limit", o.max_limit,
                                      o.min_limit, kMaxConcurrencyLimit));
    s.Update(detail::check_int_option(kWhat, "initial_limit", o.initial_limit,
                                      o.min_limit, o.max_limit));
    s.Update(detail::check_int_option(kWhat, "rtt_window", o.rtt_window, 1,
                                      kMaxConcurrencyLimit));
    s.Update(detail::check_int_option(kWhat, "round_samples", o.round_samples,
                                      1, kMaxRoundSamples));
    s.Update(check_real("tolerance", o.tolerance, 1, true, 100));
    s.Update(check_real("smoothing", o.smoothing, 0, false, 1));
    s.Update(check_real("backoff_ratio", o.backoff_ratio, 0, false, 1, false));
    s.Update(detail::check_int_option(kWhat, "recalibration_interval_ns",
                                      o.recalibration_interval_ns, 0,
                                      kMaxSafeInteger));
    s.Update(detail::check_int_option(kWhat, "recalibration_jitter_ns",
                                      o.recalibration_jitter_ns, 0,
                                      kMaxSafeInteger));
    if (o.recalibration_interval_ns > 0) {
      // The pin's rounds must fit in the window.
      s.Update(detail::check_int_option(
          kWhat, "recalibration_samples", o.recalibration_samples, 1,
          o.rtt_window *
              std::clamp<int64_t>(o.round_samples, 1, kMaxRoundSamples)));
    } else if (o.freeze_rtt_noload && s.ok()) {
      s = absl::InvalidArgumentError(
          "adaptive_concurrency.freeze_rtt_noload needs "
          "recalibration_interval_ns > 0 (the baseline is frozen between "
          "pins)");
    }
    return s;
  }

  // OK iff value is finite and within lo..hi, each end inclusive or not.
  static absl::Status check_real(const char* field, double value, double lo,
                                 bool lo_inclusive, double hi,
                                 bool hi_inclusive = true) {
    const bool above_lo = lo_inclusive ? value >= lo : value > lo;
    const bool below_hi = hi_inclusive ? value <= hi : value < hi;
    if (std::isfinite(value) && above_lo && below_hi) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive_concurrency.", field, " must be finite and in ",
                     lo_inclusive ? "[" : "(", lo, ", ", hi,
                     hi_inclusive ? "]" : ")", "; got ", value));
  }

  // The settle path of `lease` (its owner pointer already cleared).
  void settle(const Permit& lease, Outcome outcome) noexcept {
    if (outcome == Outcome::kIgnored) {
      inflight_.fetch_sub(1, std::memory_order_release);
      return;
    }
    const int64_t now_ns = clock_.now_ns();
    inflight_.fetch_sub(1, std::memory_order_release);
    if (outcome == Outcome::kDropped) {
      // A drop is the strongest signal the law has: always folded in.
      SpinLockHolder hold(mu_);
      fold_sample(lease, true, now_ns);
      return;
    }
    // A success sample never waits: when another thread is folding its own
    // sample right now, this one is skipped (counted). The law then sees
    // fewer samples under contention, never a wrong one, and settling never
    // queues threads behind one lock (measured: ~0.6 us per settle with two
    // threads waiting on each other, against ~60 ns without the wait).
    if (!mu_.try_lock()) {
      skipped_samples_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    fold_sample(lease, false, now_ns);
    mu_.unlock();
  }

  // Slow-path steps 1-4 of the class comment.
  void fold_sample(const Permit& lease, bool dropped, int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t rtt_ns = std::max<int64_t>(0, now_ns - lease.start_ns());
    if (dropped) {
      ++drops_;
    } else {
      ++samples_;
      last_rtt_ns_ = rtt_ns;
      last_rtt_hint_ns_.store(rtt_ns, std::memory_order_relaxed);
    }
    if (options_.recalibration_interval_ns > 0) {
      if (!pinned_ && now_ns >= next_recalibration_ns_) begin_pin(now_ns);
      if (pinned_) {
        if (!dropped && lease.start_ns() >= pin_start_ns_) {
          round_.add(rtt_ns, true);
          const bool last = ++pin_samples_ >= options_.recalibration_samples;
          if (round_.count >= options_.round_samples || last) {
            window_.push(round_.mean_ns());
            round_ = Round{};
          }
          if (last) {
            pinned_ = false;
            next_recalibration_ns_ = now_ns + next_interval_ns();
            publish_effective_limit();
          }
        }
        return;
      }
    }
    const bool utilized =
        2 * lease.inflight_at_acquire() >= lease.limit_at_acquire();
    int64_t sample_ns = rtt_ns;
    bool may_grow = utilized;
    if (!dropped) {
      // A round of `round_samples` successes is one law sample: its mean
      // latency, growth allowed iff at least half of it was utilized.
      round_.add(rtt_ns, utilized);
      if (round_.count < options_.round_samples) return;
      sample_ns = round_.mean_ns();
      may_grow = 2 * round_.utilized >= round_.count;
      round_ = Round{};
      if (!(options_.freeze_rtt_noload && recalibrations_ > 0)) {
        window_.push(sample_ns);
      }
    }
    const double lo = static_cast<double>(options_.min_limit);
    const double hi = static_cast<double>(options_.max_limit);
    if (options_.law == ConcurrencyLaw::kAimd) {
      estimate_ = aimd_next_estimate(estimate_, dropped, may_grow,
                                     options_.backoff_ratio, lo, hi);
    } else {
      const double gradient =
          dropped ? kGradient2MinGradient
                  : gradient2_gradient(options_.tolerance, window_.min(),
                                       sample_ns);
      estimate_ =
          gradient2_next_estimate(estimate_, gradient, options_.smoothing,
                                  may_grow && !dropped, lo, hi);
    }
    const int64_t limit = static_cast<int64_t>(std::floor(estimate_));
    if (limit != limit_) {
      limit_ = limit;
      publish_effective_limit();
    }
  }

  // Step 1's pin begins at `now_ns`: the effective limit drops to
  // `min_limit` and the window and the round restart empty.
  void begin_pin(int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pinned_ = true;
    pin_start_ns_ = now_ns;
    pin_samples_ = 0;
    ++recalibrations_;
    window_.clear();
    round_ = Round{};
    publish_effective_limit();
  }

  void publish_effective_limit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t law = pinned_ ? options_.min_limit : limit_;
    // Sequentially consistent: see `acquire`.
    effective_limit_.store(std::min(ceiling_, law), std::memory_order_seq_cst);
  }

  // recalibration_interval_ns + the next deterministic jitter (splitmix64 of
  // the seed and the pin count).
  int64_t next_interval_ns() noexcept ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t jitter = 0;
    if (options_.recalibration_jitter_ns > 0) {
      uint64_t z = options_.recalibration_seed +
                   0x9e3779b97f4a7c15ULL * (jitter_draws_ + 1);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      jitter = static_cast<int64_t>(
          z % static_cast<uint64_t>(options_.recalibration_jitter_ns + 1));
    }
    ++jitter_draws_;
    return options_.recalibration_interval_ns + jitter;
  }

  const Options options_;
  const C clock_;

  // Hot-path words. `inflight_` is the counter every acquire CASes and every
  // settle decrements; `effective_limit_` is written only under `mu_` (when
  // it changes) and read lock-free by acquire. They share a cache line: the
  // limit changes rarely. The slow-path state starts a new line so taking
  // the lock does not bounce the counter's line.
  std::atomic<int64_t> inflight_{0};
  std::atomic<int64_t> effective_limit_{0};
  std::atomic<int64_t> grant_deadline_ns_{kNoGrantDeadline};
  // Success samples skipped because the slow path was busy (`settle`).
  std::atomic<int64_t> skipped_samples_{0};

  // Slow path: everything a sample moves, under one lock held for a few
  // tens of ns (no allocation: the window's ring is preallocated).
  alignas(64) mutable SpinLock mu_;
  // `last_rtt_ns_` published for lock-free readers (written under `mu_`).
  std::atomic<int64_t> last_rtt_hint_ns_{0};
  WindowedMin window_ ABSL_GUARDED_BY(mu_);
  double estimate_ ABSL_GUARDED_BY(mu_);
  int64_t limit_ ABSL_GUARDED_BY(mu_);
  int64_t ceiling_ ABSL_GUARDED_BY(mu_) = kNoConcurrencyCeiling;
  int64_t last_rtt_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t drops_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t recalibrations_ ABSL_GUARDED_BY(mu_) = 0;
  bool pinned_ ABSL_GUARDED_BY(mu_) = false;
  int64_t pin_start_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pin_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_recalibration_ns_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t jitter_draws_ ABSL_GUARDED_BY(mu_) = 0;
  // The successes of the round being gathered (`round_samples`).
  struct Round {
    int64_t sum_ns = 0;  // <= 2^16 samples of <= 2^46 ns: cannot overflow
    int64_t count = 0;
    int64_t utilized = 0;
    void add(int64_t rtt_ns, bool was_utilized) noexcept {
      sum_ns += std::min<int64_t>(rtt_ns, kMaxRoundSampleNs);
      ++count;
      utilized += was_utilized ? 1 : 0;
    }
    int64_t mean_ns() const noexcept {
      return count == 0 ? 0 : (sum_ns + count / 2) / count;
    }
  };
  Round round_ ABSL_GUARDED_BY(mu_);
};

// The AdaptiveConcurrency on the monotonic clock, the common case
// (`BasicAdaptiveConcurrency<C>` takes another clock, e.g. a
// `ClockRef<ManualClock>` in tests).
using AdaptiveConcurrency = BasicAdaptiveConcurrency<MonotonicClock>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_CONCURRENCY_ADAPTIVE_CONCURRENCY_H_
