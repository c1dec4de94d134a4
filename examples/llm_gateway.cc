// An LLM gateway on ThrottleKit's embedded in-memory default.
//
// Four tenants send chat completions to one model backend for 5 simulated
// minutes (seeded Poisson arrivals, bursts, a retry storm, short and long
// completions). Each request is one `admit_reserved` on its tenant's
// `UnifiedAdmission` (docs/admission.md, "The cost axis when cost is known
// only afterwards"):
//
//   concurrency  one AdaptiveConcurrency (gradient2) shared by every tenant:
//                the streams in flight on the backend, a limit learned from
//                the latency each finished stream reports (release(kSuccess))
//   rate         the tenant's requests: GCRA
//   cost         the tenant's LLM tokens per minute: a TokenBudget meter. The
//                gate asks for a reservation (a PredictiveReservation per
//                tenant: the request's prompt + max_tokens when that has
//                proved a good predictor, the learned 0.8 quantile when not);
//                once admitted, the prompt is debited and the completion
//                streams in chunks through Admission::debit(); a denied
//                debit stops the stream. Finished streams teach the
//                reservation (observe(prediction, debited())).
//
// The backend: 24 decode lanes at 60 tokens/s per stream; above 24 streams
// every stream slows in proportion (the accelerators are shared), and the
// prefill (100 ms + prompt / 10 ms) stretches the same way. An overloaded
// backend shows as latency: the signal the adaptive limit follows.
//
// Time is simulated: a ManualClock (epoch ms) for the rate and cost axes and
// a ManualMonotonicClock (ns) for the latencies, both moved 10 ms per tick,
// so the run takes well under a second and is the same for a seed.
//
// Usage: llm_gateway [--seed N] [--verbose] [--redis HOST:PORT]
//   --seed N           the traffic's seed (default 42)
//   --verbose          print every 429 on one line, with its headers
//   --redis HOST:PORT  the rate and cost engines become StrictRateLimiter
//                      over a RedisCoordinator (the state a fleet of
//                      gateways would share), still at simulated time; needs
//                      the example built with throttlekit::redis (CMake
//                      defines THROTTLEKIT_EXAMPLE_REDIS when it is)

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "throttlekit/admission/predictive_reservation.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/observe/names.h"
#include "throttlekit/observe/rate_limit_headers.h"
#include "throttlekit/throttlekit.h"

#ifdef THROTTLEKIT_EXAMPLE_REDIS
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/redis/redis_coordinator.h"
#endif

namespace tk = throttlekit;

namespace {

constexpr int64_t kStartMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int64_t kRunMs = 300'000;              // arrivals stop here
constexpr int64_t kDrainMs = 120'000;            // then streams may finish
constexpr int64_t kTickMs = 10;
constexpr int64_t kWindowMs = 60'000;  // the token budgets' window
constexpr int64_t kTimelineMs = 30'000;

// The backend.
constexpr double kLanes = 24;              // streams decoded at full speed
constexpr double kTokensPerSecond = 60;    // per stream, at full speed
constexpr int64_t kChunkTokens = 16;       // tokens per streamed chunk (debit)
constexpr int kMaxPrintedErrors = 5;       // store errors printed in full
constexpr int kMaxConsecutiveErrors = 50;  // then the run stops

using EpochRef = tk::ClockRef<tk::ManualClock>;
using NanoRef = tk::NanoClockRef<tk::ManualMonotonicClock>;
using Concurrency = tk::BasicAdaptiveConcurrency<NanoRef>;
using Admission = tk::BasicAdmission<NanoRef>;

struct Burst {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  double factor = 0;
};

// One tenant's plan and traffic.
struct TenantSpec {
  const char* name;
  const char* shape;  // what its traffic looks like
  double base_rps;
  Burst bursts[2];     // factor 0: none
  int64_t rate_per_s;  // GCRA: requests per second
  int64_t rate_burst;
  int64_t tokens_per_min;  // the token budget
  int prompt_min;          // tokens, uniform in [min, max]
  int prompt_max;
  int completion_min;
  int completion_max;
  // The client's max_tokens: a fixed cap, or 0 for a tight one (the
  // completion's length x U(1.0, 1.2), as a client that knows its task).
  int max_tokens;

  double rps_at(int64_t t_ms) const {
    for (const Burst& b : bursts) {
      if (b.factor > 0 && t_ms >= b.from_ms && t_ms < b.to_ms) {
        return base_rps * b.factor;
      }
    }
    return base_rps;
  }
};

constexpr std::array<TenantSpec, 4> kTenants = {{
    {.name = "acme",
     .shape = "chat app, 4x burst 60-80 s",
     .base_rps = 1.5,
     .bursts = {{60'000, 80'000, 4}},
     .rate_per_s = 4,
     .rate_burst = 10,
     .tokens_per_min = 120'000,
     .prompt_min = 100,
     .prompt_max = 1500,
     .completion_min = 30,
     .completion_max = 600,
     .max_tokens = 1024},
    {.name = "globex",
     .shape = "batch summaries, 12x bursts 120-135 s, 240-255 s",
     .base_rps = 0.4,
     .bursts = {{120'000, 135'000, 12}, {240'000, 255'000, 12}},
     .rate_per_s = 5,
     .rate_burst = 40,
     .tokens_per_min = 300'000,
     .prompt_min = 2000,
     .prompt_max = 6000,
     .completion_min = 200,
     .completion_max = 1200,
     .max_tokens = 0},
    {.name = "initech",
     .shape = "coding agent, steady 1/s, long prompts",
     .base_rps = 1.0,
     .bursts = {},
     .rate_per_s = 1,
     .rate_burst = 3,
     .tokens_per_min = 90'000,
     .prompt_min = 1000,
     .prompt_max = 4000,
     .completion_min = 50,
     .completion_max = 400,
     .max_tokens = 4096},
    {.name = "umbrella",
     .shape = "retry storm 30x 200-215 s",
     .base_rps = 0.3,
     .bursts = {{200'000, 215'000, 30}},
     .rate_per_s = 2,
     .rate_burst = 5,
     .tokens_per_min = 60'000,
     .prompt_min = 50,
     .prompt_max = 500,
     .completion_min = 20,
     .completion_max = 200,
     .max_tokens = 256},
}};

constexpr std::array<tk::Axis, 3> kAxes = {tk::Axis::kConcurrency,
                                           tk::Axis::kRate, tk::Axis::kCost};

// The reservation learner's options: reserve in [64, 16384] tokens, start
// at 4096 (a guess; 0 would start at the safe end, 16384), track the
// p / (h + p) = 0.8 quantile of the costs.
tk::PredictiveReservationOptions reservation_options() {
  tk::PredictiveReservationOptions o;
  o.learned.min = 64;
  o.learned.max = 16384;
  o.learned.over_cost = 1;
  o.learned.under_cost = 4;
  o.learned.initial = 4096;
  o.learned.step_scale = 500;
  return o;
}
constexpr double kFractile = 0.8;

// The adaptive concurrency limit of the backend.
tk::AdaptiveConcurrencyOptions concurrency_options() {
  // From the per-sample configuration (a rolling baseline, no recalibration
  // pins), the law this example was written with; the defaults would add a
  // pin to `min_limit` streams about every minute.
  tk::AdaptiveConcurrencyOptions o =
      tk::AdaptiveConcurrencyOptions::per_sample_gradient2();
  o.law = tk::ConcurrencyLaw::kGradient2;
  o.initial_limit = 32;
  o.min_limit = 8;
  o.max_limit = 128;
  o.rtt_window = 30;
  // Completions last from under a second to half a minute: one stream's
  // latency against the window's minimum would read that spread as a
  // queue. Rounds of 10 compare means with means.
  o.round_samples = 10;
  o.tolerance = 2.0;
  return o;
}

void print_status(const char* what, const std::string& tenant,
                  const absl::Status& s) {
  std::printf("  store error (%s, %s): %s\n", what, tenant.c_str(),
              s.ToString().c_str());
}

// ----- The engines: in memory (default) or strict over Redis.

// The embedded default: each axis a RateLimiter on the simulated clock.
struct MemoryEngines {
  using Rate = tk::RateLimiter<tk::Gcra, EpochRef>;
  using Cost = tk::RateLimiter<tk::TokenBudget, EpochRef>;
  static constexpr const char* kName = "in-memory RateLimiter";

  const tk::ManualClock& clock;

  absl::StatusOr<std::shared_ptr<Rate>> rate(const TenantSpec& t) {
    auto r =
        Rate::create({t.rate_per_s, 1000, t.rate_burst}, {}, EpochRef(clock));
    if (!r.ok()) return r.status();
    return std::make_shared<Rate>(*std::move(r));
  }
  absl::StatusOr<std::shared_ptr<Cost>> cost(const TenantSpec& t) {
    auto c = Cost::create({t.tokens_per_min, kWindowMs}, {}, EpochRef(clock));
    if (!c.ok()) return c.status();
    return std::make_shared<Cost>(*std::move(c));
  }
};

#ifdef THROTTLEKIT_EXAMPLE_REDIS
// A StrictRateLimiter at the simulation's time. Asked without a `now`, an
// admission lets a strict axis decide on the store's clock (real time;
// docs/admission.md, "Caveats"), and the cost axis's gate (`peek`) and meter
// (`check(key, units)`) read the engine's clock, which for a strict engine
// is the store's too. This passes the simulated now to every call, so
// every axis lives in one timeline. (The simulated now never goes stale:
// one thread advances it, faster than real time, so a key's real TTL
// outlives its simulated life.)
template <tk::Strategy S>
class AtSimTime {
 public:
  using Strict = tk::StrictRateLimiter<S>;
  using Stats = typename Strict::Stats;

  AtSimTime(std::unique_ptr<Strict> strict, const tk::ManualClock& clock)
      : strict_(std::move(strict)), clock_(&clock) {}

  absl::StatusOr<tk::Decision> check(std::string_view key, double cost = 1) {
    return strict_->check_at(key, clock_->now_ms(), cost);
  }
  absl::StatusOr<tk::Decision> check_at(std::string_view key, int64_t now_ms,
                                        double cost = 1) {
    return strict_->check_at(key, now_ms, cost);
  }
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<tk::Decision> out, double cost = 1) {
    return tk::check_each(keys, out, cost,
                          [&](std::string_view k) { return check(k, cost); });
  }
  absl::StatusOr<std::vector<tk::Decision>> check_many(
      std::span<const std::string_view> keys, double cost = 1) {
    return tk::check_many_vector(*this, keys, cost);
  }
  absl::StatusOr<tk::Decision> peek(std::string_view key) {
    return strict_->coordinator().peek(
        tk::AnyStrategy(std::in_place_type<S>, strict_->strategy()),
        tk::join_key(strict_->prefix(), key), clock_->now_ms());
  }
  absl::StatusOr<tk::Forecast> forecast(std::string_view key, double cost = 1) {
    return strict_->coordinator().forecast(
        tk::AnyStrategy(std::in_place_type<S>, strict_->strategy()),
        tk::join_key(strict_->prefix(), key), clock_->now_ms(), cost);
  }
  absl::Status reset(std::string_view key) { return strict_->reset(key); }
  Stats stats() const { return strict_->stats(); }
  const S& strategy() const noexcept { return strict_->strategy(); }

 private:
  std::unique_ptr<Strict> strict_;
  const tk::ManualClock* clock_;
};
static_assert(tk::RateEngine<AtSimTime<tk::TokenBudget>>);

// Both axes on one Redis server. Keys are `throttlekit_example:llm_gateway:
// {rate,tokens}:<tenant>`, reset before the run (the simulated clock starts
// at the same instant every run).
struct RedisEngines {
  using Rate = AtSimTime<tk::Gcra>;
  using Cost = AtSimTime<tk::TokenBudget>;
  static constexpr const char* kName = "StrictRateLimiter over Redis";

  const tk::ManualClock& clock;
  std::shared_ptr<tk::Coordinator> redis;

  absl::StatusOr<std::shared_ptr<Rate>> rate(const TenantSpec& t) {
    auto r = tk::StrictRateLimiter<tk::Gcra>::create(
        {t.rate_per_s, 1000, t.rate_burst}, redis,
        {.prefix = "throttlekit_example:llm_gateway:rate"});
    if (!r.ok()) return r.status();
    if (absl::Status s = (*r)->reset(t.name); !s.ok()) return s;
    return std::make_shared<Rate>(*std::move(r), clock);
  }
  absl::StatusOr<std::shared_ptr<Cost>> cost(const TenantSpec& t) {
    auto c = tk::StrictRateLimiter<tk::TokenBudget>::create(
        {t.tokens_per_min, kWindowMs}, redis,
        {.prefix = "throttlekit_example:llm_gateway:tokens"});
    if (!c.ok()) return c.status();
    if (absl::Status s = (*c)->reset(t.name); !s.ok()) return s;
    return std::make_shared<Cost>(*std::move(c), clock);
  }
};
#endif  // THROTTLEKIT_EXAMPLE_REDIS

// ----- The simulation, over either set of engines.

struct Tally {
  int requests = 0;
  int admitted = 0;
  std::array<int, 3> denied = {0, 0, 0};  // by binding axis
  int completed = 0;
  int cut = 0;     // streams stopped by a denied debit
  int errors = 0;  // store errors
  int64_t tokens = 0;
};

// Tokens served in one budget window.
struct WindowUse {
  int64_t served = 0;
  int64_t largest_debit = 0;
};

// The reservation at the end of a window.
struct Checkpoint {
  int64_t t_ms = 0;          // simulated time, from the start
  double estimate = 0;       // the learned (robust) expert
  double follow_weight = 0;  // Hedge's weight on prompt + max_tokens
  double fractile = 0;       // the 0.8 quantile of the costs observed
  int64_t observed = 0;
};

struct TimelineRow {
  int64_t limit = 0;  // the adaptive limit at the end
  int64_t peak_inflight = 0;
  int64_t rtt_noload_ms = 0;
  int admitted = 0;
  std::array<int, 3> denied = {0, 0, 0};
  int cut = 0;
};

template <class Engines>
class Gateway {
 public:
  using Rate = typename Engines::Rate;
  using Cost = typename Engines::Cost;
  using Admit = tk::BasicUnifiedAdmission<Rate, Cost, EpochRef, NanoRef>;

  Gateway(Engines engines, tk::ManualClock& clock,
          tk::ManualMonotonicClock& mono, uint32_t seed, bool verbose)
      : engines_(std::move(engines)),
        clock_(clock),
        mono_(mono),
        rng_(seed),
        verbose_(verbose) {}

  // Builds the axes; false (printed) on a configuration or store error.
  bool init() {
    auto c = Concurrency::create(concurrency_options(), NanoRef(mono_));
    if (!c.ok()) return fail("concurrency", c.status());
    concurrency_ = std::shared_ptr<Concurrency>(*std::move(c));
    for (const TenantSpec& spec : kTenants) {
      Tenant t{.spec = &spec};
      auto rate = engines_.rate(spec);
      if (!rate.ok()) return fail(spec.name, rate.status());
      auto cost = engines_.cost(spec);
      if (!cost.ok()) return fail(spec.name, cost.status());
      t.rate = *rate;
      t.cost = *cost;
      auto admit = Admit::create(
          {.concurrency = concurrency_, .rate = t.rate, .cost = t.cost},
          EpochRef(clock_), NanoRef(mono_));
      if (!admit.ok()) return fail(spec.name, admit.status());
      t.admit = *std::move(admit);
      auto r = tk::PredictiveReservation::create(reservation_options());
      if (!r.ok()) return fail("reservation", r.status());
      t.reservation.emplace(*r);
      tenants_.push_back(std::move(t));
    }
    return true;
  }

  // Runs the traffic; false if the store kept failing (the run stops
  // early, and what it saw is still reported).
  bool run() {
    bool ok = true;
    const int64_t end_ms = kRunMs + kDrainMs;
    for (int64_t t = 0; t < end_ms; t += kTickMs) {
      if (t > 0) mono_.advance_ns(kTickMs * 1'000'000);
      clock_.set_ms(kStartMs + t);
      if (t % kWindowMs == 0 && t > 0) checkpoint();
      if (t % kTimelineMs == 0) close_timeline_row();
      decode(t);
      if (t < kRunMs) arrive(t);
      now_row().peak_inflight = std::max<int64_t>(
          now_row().peak_inflight, static_cast<int64_t>(streams_.size()));
      if (consecutive_errors_ >= kMaxConsecutiveErrors) {
        std::printf(
            "\n  %d store errors in a row: stopping (is the store up?)\n",
            consecutive_errors_);
        ok = false;
        break;
      }
      if (t >= kRunMs && streams_.empty()) break;
    }
    for (Stream& s : streams_) {  // cut short: give the slots back
      s.admission.release(tk::PermitOutcome::kIgnored);
    }
    streams_.clear();
    if (now_t() % kWindowMs != 0) checkpoint();  // the last, partial window
    close_timeline_row();
    return ok;
  }

  void print_report() const;

 private:
  struct Tenant {
    const TenantSpec* spec;
    std::shared_ptr<Rate> rate;
    std::shared_ptr<Cost> cost;
    std::unique_ptr<Admit> admit;
    std::optional<tk::PredictiveReservation> reservation;
    Tally tally;
    std::vector<WindowUse> windows;
    std::vector<Checkpoint> checkpoints;
    std::vector<double> costs;  // of finished streams, for the fractile
  };

  // A completion in flight.
  struct Stream {
    size_t tenant;
    Admission admission;
    double prediction;       // prompt + max_tokens
    int64_t left;            // completion tokens still to decode
    int64_t first_token_ms;  // decoding starts (after the prefill)
    double decoded = 0;      // decoded, not yet sent (fractional)
  };

  bool fail(const std::string& what, const absl::Status& s) {
    std::fprintf(stderr, "llm_gateway: setting up %s: %s\n", what.c_str(),
                 s.ToString().c_str());
    return false;
  }

  int64_t now_t() const { return clock_.now_ms() - kStartMs; }

  TimelineRow& now_row() { return timeline_.back(); }

  void close_timeline_row() {
    if (!timeline_.empty()) {
      const tk::AdaptiveConcurrencyStats s = concurrency_->stats();
      timeline_.back().limit = s.limit;
      timeline_.back().rtt_noload_ms = s.rtt_noload_ns / 1'000'000;
    }
    timeline_.emplace_back();
  }

  void checkpoint() {
    for (Tenant& t : tenants_) {
      Checkpoint c;
      c.t_ms = now_t();
      c.estimate = t.reservation->robust().estimate();
      c.follow_weight = t.reservation->follow_weight();
      c.observed = t.reservation->robust().observed();
      if (!t.costs.empty()) {
        std::vector<double> v = t.costs;
        const size_t k = static_cast<size_t>(kFractile * (v.size() - 1));
        std::nth_element(v.begin(), v.begin() + k, v.end());
        c.fractile = v[k];
      }
      t.checkpoints.push_back(c);
    }
  }

  void error(Tenant& t, const char* what, const absl::Status& s) {
    ++t.tally.errors;
    ++consecutive_errors_;
    if (++printed_errors_ <= kMaxPrintedErrors) {
      print_status(what, t.spec->name, s);
    }
  }

  // Counts tokens the meter let through, in the window they fell in.
  void served(Tenant& t, int64_t tokens) {
    consecutive_errors_ = 0;
    t.tally.tokens += tokens;
    const size_t w = static_cast<size_t>(now_t() / kWindowMs);
    if (t.windows.size() <= w) t.windows.resize(w + 1);
    t.windows[w].served += tokens;
    t.windows[w].largest_debit = std::max(t.windows[w].largest_debit, tokens);
  }

  int64_t window_of(const Tenant& t, tk::Axis axis,
                    const tk::Decision& d) const {
    switch (axis) {
      case tk::Axis::kConcurrency:
        return d.retry_after_ms;  // a slot frees in about one latency
      case tk::Axis::kRate:
        return t.rate->strategy().policy_window_ms();
      case tk::Axis::kCost:
        return t.cost->strategy().policy_window_ms();
    }
    return 0;
  }

  std::string headers(const tk::Decision& d, int64_t window_ms,
                      const char* sep) const {
    std::string out;
    tk::rate_limit_headers(d, clock_.now_ms(), window_ms)
        .for_each([&](const char* name, const std::string& value) {
          out += sep + std::string(name) + ": " + value;
        });
    return out;
  }

  // A 429: counted by its binding axis, printed in full the first time an
  // axis binds (every time with --verbose, on one line).
  void reply_429(Tenant& t, const Admission& a) {
    const tk::Axis axis = *a.binding_axis();
    const tk::Decision d = *a.axis(axis);
    const int i = static_cast<int>(axis);
    ++t.tally.denied[i];
    ++now_row().denied[i];
    const int64_t window = window_of(t, axis, d);
    const std::string_view lane = *a.deny_lane();
    if (verbose_) {
      std::printf("  t=%6.2fs %-8s 429 %-11.*s%s\n", now_t() / 1000.0,
                  t.spec->name, static_cast<int>(lane.size()), lane.data(),
                  headers(d, window, "  ").c_str());
    }
    if (first_429_[i].empty()) {
      char line[160];
      std::snprintf(
          line, sizeof line,
          "t=%6.2fs  %-8s -> 429, binding axis %.*s "
          "(%s{lane=\"%.*s\"})",
          now_t() / 1000.0, t.spec->name, static_cast<int>(lane.size()),
          lane.data(),
          tk::names::prometheus_name(tk::names::kDeniesByAxis, true).c_str(),
          static_cast<int>(lane.size()), lane.data());
      first_429_[i] = line + headers(d, window, "\n             ");
    }
  }

  // A debit; false when the stream must stop (denied: the window's budget
  // is spent; or a store error).
  bool debit(Tenant& t, Stream& s, int64_t tokens) {
    absl::StatusOr<tk::Decision> d = s.admission.debit(tokens);
    if (!d.ok()) {
      error(t, "debit", d.status());
      return false;
    }
    if (!d->allowed) {
      ++t.tally.cut;
      ++now_row().cut;
      if (first_cut_.empty()) {
        char line[160];
        std::snprintf(line, sizeof line,
                      "t=%6.2fs  %-8s stream stopped after %lld tokens: "
                      "the debit of %lld was denied",
                      now_t() / 1000.0, t.spec->name,
                      static_cast<long long>(s.admission.debited()),
                      static_cast<long long>(tokens));
        first_cut_ = line + headers(*d, t.cost->strategy().policy_window_ms(),
                                    "\n             ");
      }
      return false;
    }
    served(t, tokens);
    return true;
  }

  // One tick of the backend: every stream past its prefill decodes its
  // share and sends whole chunks.
  void decode(int64_t t_ms) {
    const double n = static_cast<double>(streams_.size());
    const double share = n > kLanes ? kLanes / n : 1.0;
    for (size_t i = 0; i < streams_.size();) {
      Stream& s = streams_[i];
      Tenant& t = tenants_[s.tenant];
      bool done = false;
      if (t_ms >= s.first_token_ms) {
        s.decoded += kTokensPerSecond * kTickMs / 1000.0 * share;
        while (!done) {
          const int64_t chunk = std::min(kChunkTokens, s.left);
          if (s.decoded < static_cast<double>(chunk)) break;
          if (!debit(t, s, chunk)) {
            // Stopped by the budget (finish_reason "length") or an error:
            // says nothing of the backend's latency.
            s.admission.release(tk::PermitOutcome::kIgnored);
            done = true;
            break;
          }
          s.decoded -= static_cast<double>(chunk);
          s.left -= chunk;
          if (s.left == 0) {
            // Only whole completions teach the reservation: a stopped one's
            // cost is unknown (censored), and would bias it low.
            t.reservation->observe(s.prediction, s.admission.debited());
            t.costs.push_back(s.admission.debited());
            s.admission.release(tk::PermitOutcome::kSuccess);
            ++t.tally.completed;
            done = true;
          }
        }
      }
      if (done) {
        if (i + 1 != streams_.size()) s = std::move(streams_.back());
        streams_.pop_back();
      } else {
        ++i;
      }
    }
  }

  // This tick's arrivals, tenant by tenant.
  void arrive(int64_t t_ms) {
    for (size_t ti = 0; ti < tenants_.size(); ++ti) {
      Tenant& t = tenants_[ti];
      const TenantSpec& spec = *t.spec;
      std::poisson_distribution<int> arrivals(spec.rps_at(t_ms) * kTickMs /
                                              1000.0);
      for (int n = arrivals(rng_); n > 0; --n) {
        const int64_t prompt = std::uniform_int_distribution<int>(
            spec.prompt_min, spec.prompt_max)(rng_);
        const int64_t completion = std::uniform_int_distribution<int>(
            spec.completion_min, spec.completion_max)(rng_);
        const double slack =
            std::uniform_real_distribution<double>(1, 1.2)(rng_);
        const int64_t max_tokens =
            spec.max_tokens > 0
                ? spec.max_tokens
                : static_cast<int64_t>(std::ceil(completion * slack));
        const double prediction = static_cast<double>(prompt + max_tokens);
        admit(t, ti, prompt, completion, prediction);
      }
    }
  }

  void admit(Tenant& t, size_t ti, int64_t prompt, int64_t completion,
             double prediction) {
    ++t.tally.requests;
    const int64_t reserve = t.reservation->reserve(prediction);
    absl::StatusOr<Admission> a =
        t.admit->admit_reserved(t.spec->name, reserve);
    if (!a.ok()) {
      error(t, "admit", a.status());
      return;
    }
    consecutive_errors_ = 0;
    if (!*a) {
      reply_429(t, *a);
      return;
    }
    ++t.tally.admitted;
    ++now_row().admitted;
    // The prefill, stretched when the backend is past its lanes.
    const double load =
        std::max(1.0, static_cast<double>(streams_.size() + 1) / kLanes);
    Stream s{.tenant = ti,
             .admission = *std::move(a),
             .prediction = prediction,
             .left = completion,
             .first_token_ms =
                 now_t() + static_cast<int64_t>((100 + prompt / 10.0) * load)};
    // The prompt is the first debit.
    if (!debit(t, s, prompt)) {
      s.admission.release(tk::PermitOutcome::kIgnored);
      return;
    }
    streams_.push_back(std::move(s));
  }

  Engines engines_;
  tk::ManualClock& clock_;
  tk::ManualMonotonicClock& mono_;
  std::mt19937 rng_;
  const bool verbose_;
  std::shared_ptr<Concurrency> concurrency_;
  std::vector<Tenant> tenants_;
  std::vector<Stream> streams_;
  std::vector<TimelineRow> timeline_;
  std::array<std::string, 3> first_429_;
  std::string first_cut_;
  int printed_errors_ = 0;
  int consecutive_errors_ = 0;
};

template <class Engines>
void Gateway<Engines>::print_report() const {
  std::printf(
      "\nFirst 429 of each axis, with the response headers (concurrency: a\n"
      "  slot frees when a stream ends, so Retry-After and w are one typical\n"
      "  latency and the reset is now)\n\n");
  for (tk::Axis axis : kAxes) {
    const std::string& s = first_429_[static_cast<int>(axis)];
    if (!s.empty()) std::printf("  %s\n\n", s.c_str());
  }
  if (!first_cut_.empty()) {
    std::printf(
        "First stream stopped by the meter (the budget ran out mid-stream)"
        "\n\n  %s\n\n",
        first_cut_.c_str());
  }

  std::printf(
      "Backend, per 30 s (limit: the adaptive concurrency limit at the end;\n"
      "  peak: streams in flight; rtt: the limit's no-load latency, a mean of\n"
      "  10 streams; 429s by binding axis; cut: streams the meter stopped)\n\n"
      "  %-9s %5s %5s %6s %8s %11s %5s %5s %4s\n",
      "time", "limit", "peak", "rtt", "admitted", "concurrency", "rate", "cost",
      "cut");
  for (size_t i = 0; i + 1 < timeline_.size(); ++i) {
    const TimelineRow& r = timeline_[i];
    const int64_t from = static_cast<int64_t>(i) * kTimelineMs / 1000;
    char when[32];
    std::snprintf(when, sizeof when, "%lld-%llds", static_cast<long long>(from),
                  static_cast<long long>(from + kTimelineMs / 1000));
    std::printf("  %-9s %5lld %5lld %5.1fs %8d %11d %5d %5d %4d\n", when,
                static_cast<long long>(r.limit),
                static_cast<long long>(r.peak_inflight),
                r.rtt_noload_ms / 1000.0, r.admitted, r.denied[0], r.denied[1],
                r.denied[2], r.cut);
  }

  std::printf(
      "\nSummary per tenant (429s by binding axis, the lanes of %s)\n\n"
      "  %-9s %8s %8s %11s %5s %5s %9s %4s %10s\n",
      tk::names::prometheus_name(tk::names::kDeniesByAxis, true).c_str(),
      "tenant", "requests", "admitted", "concurrency", "rate", "cost",
      "completed", "cut", "tokens");
  Tally total;
  for (const Tenant& t : tenants_) {
    const Tally& y = t.tally;
    std::printf("  %-9s %8d %8d %11d %5d %5d %9d %4d %10lld\n", t.spec->name,
                y.requests, y.admitted, y.denied[0], y.denied[1], y.denied[2],
                y.completed, y.cut, static_cast<long long>(y.tokens));
    total.requests += y.requests;
    total.admitted += y.admitted;
    for (int i = 0; i < 3; ++i) total.denied[i] += y.denied[i];
    total.completed += y.completed;
    total.cut += y.cut;
    total.errors += y.errors;
    total.tokens += y.tokens;
  }
  std::printf("  %-9s %8d %8d %11d %5d %5d %9d %4d %10lld\n", "all",
              total.requests, total.admitted, total.denied[0], total.denied[1],
              total.denied[2], total.completed, total.cut,
              static_cast<long long>(total.tokens));
  if (total.errors > 0) std::printf("  store errors: %d\n", total.errors);

  std::printf(
      "\nTokens served per 1-minute window vs budget (k tokens). The meter\n"
      "  lets the debit that crosses the budget through in full, so a window\n"
      "  serves at most budget + largest debit - 1; overshoot: the worst\n"
      "  window's tokens above budget, bound: its largest debit - 1\n\n"
      "  %-9s %6s",
      "tenant", "budget");
  size_t windows = 0;
  for (const Tenant& t : tenants_) {
    windows = std::max(windows, t.windows.size());
  }
  for (size_t w = 0; w < windows; ++w) std::printf("  min %zu", w);
  std::printf("  %9s %6s %5s\n", "overshoot", "bound", "holds");
  bool all_hold = true;
  for (const Tenant& t : tenants_) {
    std::printf("  %-9s %6.1f", t.spec->name, t.spec->tokens_per_min / 1000.0);
    int64_t worst = 0;        // the largest overshoot
    int64_t worst_bound = 0;  // largest debit - 1 in that window
    bool holds = true;
    for (size_t w = 0; w < windows; ++w) {
      const WindowUse u = w < t.windows.size() ? t.windows[w] : WindowUse{};
      std::printf(" %6.1f", u.served / 1000.0);
      const int64_t over = u.served - t.spec->tokens_per_min;
      if (over > 0 && over > u.largest_debit - 1) holds = false;
      if (over > worst) {
        worst = over;
        worst_bound = u.largest_debit - 1;
      }
    }
    all_hold = all_hold && holds;
    if (worst > 0) {
      std::printf("  %9lld %6lld %5s\n", static_cast<long long>(worst),
                  static_cast<long long>(worst_bound), holds ? "yes" : "NO");
    } else {
      std::printf("  %9d %6s %5s\n", 0, "-", holds ? "yes" : "NO");
    }
  }
  std::printf("  %s\n", all_hold ? "every window within its bound"
                                 : "A WINDOW BROKE ITS BOUND");

  std::printf(
      "\nReservations per tenant (tokens, the learned estimate; it tracks the\n"
      "  0.8 quantile of finished requests' prompt + completion; w: Hedge's\n"
      "  weight on the prediction prompt + max_tokens)\n\n  %-9s %6s",
      "tenant", "start");
  for (const Checkpoint& c : tenants_.front().checkpoints) {
    if (c.t_ms % kWindowMs == 0) {
      std::printf(" %5llds", static_cast<long long>(c.t_ms / 1000));
    } else {
      std::printf(" %6s", "end");  // after the drain, or a run cut short
    }
  }
  std::printf("  %6s %5s %8s %10s\n", "p80", "w", "finished", "max_tokens");
  for (const Tenant& t : tenants_) {
    std::printf("  %-9s %6.0f", t.spec->name,
                reservation_options().learned.initial);
    for (const Checkpoint& c : t.checkpoints) {
      std::printf(" %6.0f", c.estimate);
    }
    const Checkpoint& last = t.checkpoints.back();
    std::printf("  %6.0f %5.2f %8lld %10s\n", last.fractile, last.follow_weight,
                static_cast<long long>(last.observed),
                t.spec->max_tokens > 0
                    ? std::to_string(t.spec->max_tokens).c_str()
                    : "tight");
  }
}

template <class Engines>
int simulate(Engines engines, tk::ManualClock& clock,
             tk::ManualMonotonicClock& mono, uint32_t seed, bool verbose) {
  std::printf(
      "ThrottleKit LLM gateway (simulated %lld s + drain, seed %u, %s)\n\n",
      static_cast<long long>(kRunMs / 1000), seed, Engines::kName);
  for (const TenantSpec& t : kTenants) {
    std::printf(
        "  tenant %-9s GCRA %lld/s burst %-3lld  %4lldk tokens/min  "
        "%s\n",
        t.name, static_cast<long long>(t.rate_per_s),
        static_cast<long long>(t.rate_burst),
        static_cast<long long>(t.tokens_per_min / 1000), t.shape);
  }
  std::printf(
      "  backend  %.0f lanes x %.0f tokens/s; one adaptive concurrency limit "
      "(gradient2)\n  shared by all tenants; streams debit %lld-token "
      "chunks\n",
      kLanes, kTokensPerSecond, static_cast<long long>(kChunkTokens));
  if (verbose) std::printf("\nEvery 429\n\n");

  Gateway<Engines> gateway(std::move(engines), clock, mono, seed, verbose);
  if (!gateway.init()) return 1;
  const bool ok = gateway.run();
  gateway.print_report();
  return ok ? 0 : 1;
}

int usage(const char* why) {
  std::fprintf(
      stderr,
      "llm_gateway: %s\n"
      "usage: llm_gateway [--seed N] [--verbose] [--redis HOST:PORT]\n",
      why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t seed = 42;
  bool verbose = false;
  std::optional<std::string> redis;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) {
      seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--redis" && i + 1 < argc) {
      redis = argv[++i];
    } else {
      return usage(
          ("unknown or incomplete argument: " + std::string(arg)).c_str());
    }
  }

  tk::ManualClock clock(kStartMs);
  tk::ManualMonotonicClock mono(0);
  if (!redis) {
    return simulate(MemoryEngines{clock}, clock, mono, seed, verbose);
  }
#ifdef THROTTLEKIT_EXAMPLE_REDIS
  const size_t colon = redis->rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return usage("--redis wants HOST:PORT, e.g. 127.0.0.1:6379");
  }
  tk::RedisCoordinatorOptions options;
  options.host = redis->substr(0, colon);
  if (options.host.size() > 2 && options.host.front() == '[' &&
      options.host.back() == ']') {
    options.host = options.host.substr(1, options.host.size() - 2);  // [::1]
  }
  char* end = nullptr;
  const long port = std::strtol(redis->c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 1 || port > 65535) {
    return usage("--redis wants HOST:PORT with a port in 1..65535");
  }
  options.port = static_cast<int>(port);
  absl::StatusOr<std::unique_ptr<tk::RedisCoordinator>> coordinator =
      tk::RedisCoordinator::create(options);
  if (!coordinator.ok()) {
    std::fprintf(stderr, "llm_gateway: %s\n",
                 coordinator.status().ToString().c_str());
    return 1;
  }
  return simulate(RedisEngines{clock, std::shared_ptr<tk::Coordinator>(
                                          *std::move(coordinator))},
                  clock, mono, seed, verbose);
#else
  std::fprintf(stderr,
               "llm_gateway: --redis %s: this example was built without "
               "Redis support.\n"
               "  It needs the throttlekit::redis target, which CMake builds "
               "when hiredis is found\n"
               "  (Debian: apt-get install libhiredis-dev pkg-config), then "
               "reconfigure and rebuild.\n",
               redis->c_str());
  return 2;
#endif
}
