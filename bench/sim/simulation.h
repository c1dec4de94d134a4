// bench/sim/simulation.h
//
// Provides the discrete-event runner of the concurrency simulator (issue 5,
// "Proof: a simulator"): open-loop Poisson arrivals pass a concurrency
// limiter, admitted requests go to the `Backend`, and each admitted request
// settles exactly once, either
//
// - success: the backend finished it within the client timeout; the lease is
//   released with `kSuccess` at completion (the limiter measures the latency
//   on the simulated clock), or
// - dropped: the client timeout fired first; the lease is released with
//   `kDropped` at `arrival + timeout` and the backend still serves the request
//   (wasted work).
//
// A request the limiter rejects is load shed (counted, never sent); a
// rejection while the limiter's recalibration pin is in force is marked as
// such, so the pins' cost can be told from ordinary shedding.
//
// The limiter runs on simulated time: `SimClock::now_ns()` returns the
// runner's current instant, so latency, windows and recalibration periods are
// all simulated nanoseconds. Determinism: the arrival stream and each
// request's work come from two seeded generators drawn in arrival order, so
// every limiter sees the same requests (common random numbers), and the
// event loop (sim/event_loop.h, the fleet simulator's, in nanoseconds here)
// breaks ties by scheduling order.

#ifndef THROTTLEKIT_BENCH_SIM_SIMULATION_H_
#define THROTTLEKIT_BENCH_SIM_SIMULATION_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend_model.h"
#include "sim/event_loop.h"
#include "sim/random.h"

namespace throttlekit::sim {

inline constexpr int64_t kNsPerMs = 1000000;
inline constexpr int64_t kNsPerSec = 1000000000;

// A NanoClock (throttlekit/core/clock.h) reading simulated time: the
// loop's. The loop must outlive the clock.
struct SimClock {
  const EventLoop* loop;
  int64_t now_ns() const noexcept { return loop->now_ns(); }
};

// One reading of a limiter, taken every `Scenario::sample_period_ms`.
struct LimitSample {
  int64_t t_ns = 0;
  double limit = 0;            // the control law's limit (L_local)
  double effective_limit = 0;  // what acquire enforces (lower while pinned)
  int64_t inflight = 0;
  double rtt_noload_ms = 0;    // the limiter's baseline (0 if it has none)
  bool recalibrating = false;  // a recalibration pin is in force
  int64_t recalibrations = 0;  // pins begun so far
};

// What the runner needs from a limiter: admit or reject a request, settle it
// once, and report its state.
class SimLimiter {
 public:
  virtual ~SimLimiter() = default;
  // True if request `id` is admitted (it then holds one slot until release).
  virtual bool acquire(int64_t id) = 0;
  // Settles admitted request `id`: success or dropped (timeout).
  virtual void release(int64_t id, bool success) = 0;
  // The limiter's state now (t_ns is filled in by the runner).
  virtual LimitSample sample() const = 0;
  // True while a recalibration pin is in force (a rejection then is charged
  // to the pin: `RequestRecord::during_pin`).
  virtual bool pinned() const { return false; }
};

// A fixed ceiling: admit while in-flight < limit.
class StaticLimiter final : public SimLimiter {
 public:
  explicit StaticLimiter(int64_t limit) : limit_(limit) {}
  bool acquire(int64_t) override {
    if (inflight_ >= limit_) return false;
    ++inflight_;
    return true;
  }
  void release(int64_t, bool) override { --inflight_; }
  LimitSample sample() const override {
    const auto l = static_cast<double>(limit_);
    return {0, l, l, inflight_, 0, false, 0};
  }

 private:
  int64_t limit_;
  int64_t inflight_ = 0;
};

struct CapacityStep {
  double at_s;
  int servers;
};
struct SlowdownStep {
  double at_s;
  double factor;  // 1.0 ends the slow phase
};

struct Scenario {
  std::string name;   // file-name friendly
  std::string title;  // for tables and plots
  int servers = 32;
  ServiceModel service;
  double arrival_rate_per_s = 1000;
  double duration_s = 30;
  double timeout_ms = 100;
  std::vector<CapacityStep> capacity_steps;
  std::vector<SlowdownStep> slowdowns;
  double sample_period_ms = 10;
  uint64_t seed = 1;

  // Requests per second the backend completes at full capacity.
  double capacity_per_s() const { return servers * 1000.0 / service.mean_ms(); }
};

enum class Settle : uint8_t { kPending, kRejected, kSuccess, kDropped };

struct RequestRecord {
  int64_t arrival_ns = 0;
  int64_t settle_ns = 0;  // release time (admitted) or arrival (rejected)
  Settle settle = Settle::kPending;
  bool during_pin = false;  // rejected while a recalibration pin was in force
};

struct RunResult {
  std::vector<RequestRecord> requests;  // by id, in arrival order
  std::vector<LimitSample> samples;
  int64_t max_inflight = 0;        // counted by the runner, not the limiter
  int64_t backend_busy_ns = 0;     // total service time finished
  int64_t wasted_completions = 0;  // served after the client gave up
};

// Runs `scenario` against the limiter built by `make_limiter` (which receives
// the simulated clock) and returns every request's fate and the limit's
// history. Deterministic in (scenario, limiter).
inline RunResult run_scenario(
    const Scenario& scenario,
    const std::function<std::unique_ptr<SimLimiter>(SimClock)>& make_limiter) {
  EventLoop loop;
  std::unique_ptr<SimLimiter> limiter = make_limiter(SimClock{&loop});
  RunResult result;
  int64_t inflight = 0;
  // A finished request: a success, unless its client gave up first.
  const auto service_done = [&](int64_t id, Backend& backend) {
    const int64_t now = loop.now_ns();
    backend.on_done(id, now);
    RequestRecord& r = result.requests[static_cast<size_t>(id)];
    if (r.settle == Settle::kPending) {
      r.settle = Settle::kSuccess;
      r.settle_ns = now;
      --inflight;
      limiter->release(id, /*success=*/true);
    } else {
      ++result.wasted_completions;
    }
  };
  Backend backend(scenario.servers, [&](int64_t at_ns, int64_t id) {
    loop.at_ns(at_ns, [&, id] { service_done(id, backend); });
  });
  Rng arrivals(scenario.seed * 2 + 1);
  Rng work(scenario.seed * 2 + 2);
  const double mean_gap_ns = 1e9 / scenario.arrival_rate_per_s;
  const auto end_ns = static_cast<int64_t>(scenario.duration_s * 1e9);
  const auto timeout_ns = static_cast<int64_t>(scenario.timeout_ms * 1e6);
  const auto sample_ns = static_cast<int64_t>(scenario.sample_period_ms * 1e6);

  result.requests.reserve(static_cast<size_t>(
      scenario.arrival_rate_per_s * scenario.duration_s * 1.05 + 16));
  for (const CapacityStep& s : scenario.capacity_steps) {
    loop.at_ns(static_cast<int64_t>(s.at_s * 1e9), [&, servers = s.servers] {
      backend.set_servers(servers, loop.now_ns());
    });
  }
  for (const SlowdownStep& s : scenario.slowdowns) {
    // In thousandths, as the published runs had it.
    const double factor = static_cast<double>(std::llround(s.factor * 1000));
    loop.at_ns(static_cast<int64_t>(s.at_s * 1e9),
               [&, factor] { backend.set_slowdown(factor / 1000.0); });
  }
  // The limiter's state every sample period.
  std::function<void()> sample = [&] {
    result.samples.push_back(limiter->sample());
    result.samples.back().t_ns = loop.now_ns();
    loop.at_ns(loop.now_ns() + sample_ns, [&] { sample(); });
  };
  loop.at_ns(0, [&] { sample(); });
  // A client gives up on request `id`: dropped, unless it finished.
  const auto client_timeout = [&](int64_t id) {
    RequestRecord& r = result.requests[static_cast<size_t>(id)];
    if (r.settle == Settle::kPending) {
      r.settle = Settle::kDropped;
      r.settle_ns = loop.now_ns();
      --inflight;
      limiter->release(id, /*success=*/false);
    }
  };
  // Poisson arrivals: each admits or rejects, then schedules the next.
  std::function<void()> arrive = [&] {
    const int64_t now = loop.now_ns();
    const auto id = static_cast<int64_t>(result.requests.size());
    const int64_t work_ns = scenario.service.draw_ns(work);
    result.requests.push_back({now, now, Settle::kPending});
    if (limiter->acquire(id)) {
      ++inflight;
      result.max_inflight = std::max(result.max_inflight, inflight);
      loop.at_ns(now + timeout_ns, [&, id] { client_timeout(id); });
      backend.submit(id, work_ns, now);
    } else {
      result.requests.back().settle = Settle::kRejected;
      result.requests.back().during_pin = limiter->pinned();
    }
    loop.at_ns(
        now + std::max<int64_t>(
                  1, static_cast<int64_t>(arrivals.exponential(mean_gap_ns))),
        [&] { arrive(); });
  };
  loop.at_ns(static_cast<int64_t>(arrivals.exponential(mean_gap_ns)),
             [&] { arrive(); });
  loop.run_until_ns(end_ns);
  result.backend_busy_ns = backend.busy_ns();
  return result;
}

// Metrics over the requests that arrived in [from_s, to_s).
struct Summary {
  double goodput_per_s = 0;    // successes settled in the window, per second
  double p50_ms = 0;           // client-observed latency of admitted requests
  double p99_ms = 0;           // (a dropped request counts as the timeout)
  double reject_rate = 0;      // rejected / arrivals
  double pin_reject_rate = 0;  // rejected while pinned / arrivals
  double drop_rate = 0;        // dropped / admitted
  double mean_limit = 0;       // mean of the sampled limit
  int64_t arrivals = 0;
};

inline double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  // Nearest rank: the smallest value with at least q of the data at or below.
  const auto rank =
      static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  const size_t idx = rank == 0 ? 0 : rank - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(idx), v.end());
  return v[idx];
}

inline Summary summarize(const RunResult& r, double from_s, double to_s) {
  const auto from = static_cast<int64_t>(from_s * 1e9);
  const auto to = static_cast<int64_t>(to_s * 1e9);
  Summary s;
  int64_t rejected = 0, pin_rejected = 0, admitted = 0, dropped = 0, good = 0;
  std::vector<double> lat;
  for (const RequestRecord& q : r.requests) {
    if (q.settle == Settle::kSuccess && q.settle_ns >= from &&
        q.settle_ns < to) {
      ++good;
    }
    if (q.arrival_ns < from || q.arrival_ns >= to) continue;
    ++s.arrivals;
    if (q.settle == Settle::kRejected) {
      ++rejected;
      pin_rejected += q.during_pin ? 1 : 0;
      continue;
    }
    ++admitted;
    if (q.settle == Settle::kPending) continue;  // unsettled at the end
    if (q.settle == Settle::kDropped) ++dropped;
    lat.push_back(static_cast<double>(q.settle_ns - q.arrival_ns) / 1e6);
  }
  s.goodput_per_s = static_cast<double>(good) / (to_s - from_s);
  s.p50_ms = percentile(lat, 0.50);
  s.p99_ms = percentile(lat, 0.99);
  s.reject_rate = s.arrivals ? static_cast<double>(rejected) /
                                   static_cast<double>(s.arrivals)
                             : 0;
  s.pin_reject_rate = s.arrivals ? static_cast<double>(pin_rejected) /
                                       static_cast<double>(s.arrivals)
                                 : 0;
  s.drop_rate =
      admitted ? static_cast<double>(dropped) / static_cast<double>(admitted)
               : 0;
  double sum = 0;
  int64_t n = 0;
  for (const LimitSample& l : r.samples) {
    if (l.t_ns >= from && l.t_ns < to) {
      sum += l.limit;
      ++n;
    }
  }
  s.mean_limit = n ? sum / static_cast<double>(n) : 0;
  return s;
}

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_BENCH_SIM_SIMULATION_H_
