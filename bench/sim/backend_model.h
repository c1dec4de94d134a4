// bench/sim/backend_model.h
//
// Provides the simulated backend of the concurrency simulator (issue 5,
// "Proof: a simulator"): `c` identical servers in front of one unbounded FIFO
// queue, each request carrying its own amount of work drawn from the service
// distribution, and two disturbances:
//
// - capacity steps: the server count changes at a given time. A server above
//   the new count finishes the request it holds, then retires; added servers
//   take queued work at once.
// - slow dependency: from a given time every service that starts takes
//   `factor` times its drawn work (a dependency of the backend slowed down).
//
// The backend does not know about client timeouts: a request whose client has
// given up is still served (wasted work), as in a server without deadline
// propagation. This is what makes an over-generous limit collapse goodput.

#ifndef THROTTLEKIT_BENCH_SIM_BACKEND_MODEL_H_
#define THROTTLEKIT_BENCH_SIM_BACKEND_MODEL_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "sim/random.h"

namespace throttlekit::sim {

// A service-time distribution. Lognormal(median, sigma) has a latency floor
// in practice (its minimum over a window is a stable fraction of the median
// when sigma is small); exponential(mean) has none (its minimum tends to 0).
struct ServiceModel {
  enum class Kind { kLognormal, kExponential };
  Kind kind = Kind::kLognormal;
  double median_ms = 10;  // lognormal: the median; exponential: unused
  double sigma = 0.3;     // lognormal shape
  double mean_ms_exp = 10;

  double mean_ms() const {
    return kind == Kind::kLognormal ? median_ms * std::exp(sigma * sigma / 2)
                                    : mean_ms_exp;
  }
  double median() const {
    return kind == Kind::kLognormal ? median_ms : mean_ms_exp * std::log(2.0);
  }
  // The q-quantile of one service time (0 < q < 1), for the no-load p99.
  double quantile_ms(double q) const;
  // One draw, in nanoseconds (at least 1).
  int64_t draw_ns(Rng& rng) const {
    const double ms = kind == Kind::kLognormal ? rng.lognormal(median_ms, sigma)
                                               : rng.exponential(mean_ms_exp);
    const auto ns = static_cast<int64_t>(ms * 1e6);
    return ns < 1 ? 1 : ns;
  }
  std::string describe() const;
};

inline double ServiceModel::quantile_ms(double q) const {
  if (kind == Kind::kExponential) return -mean_ms_exp * std::log(1 - q);
  // Inverse normal CDF by bisection on erfc; precision is ample for a table.
  double lo = -10, hi = 10;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    const double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
    (cdf < q ? lo : hi) = mid;
  }
  return median_ms * std::exp(sigma * lo);
}

inline std::string ServiceModel::describe() const {
  char buf[96];
  if (kind == Kind::kLognormal) {
    std::snprintf(buf, sizeof buf, "lognormal(median %.3g ms, sigma %.3g)",
                  median_ms, sigma);
  } else {
    std::snprintf(buf, sizeof buf, "exponential(mean %.3g ms)", mean_ms_exp);
  }
  return buf;
}

// c servers and a FIFO queue; a request that starts service calls
// `schedule_done(at_ns, id)`, which must call `on_done(id, at_ns)` then.
// Not thread-safe.
class Backend {
 public:
  using ScheduleDone = std::function<void(int64_t at_ns, int64_t id)>;
  Backend(int servers, ScheduleDone schedule_done)
      : servers_(servers), schedule_done_(std::move(schedule_done)) {}

  // Accepts request `id` (ids are dense from 0) needing `work_ns` of service
  // at slowdown factor 1.
  void submit(int64_t id, int64_t work_ns, int64_t now_ns) {
    queue_.push_back({id, work_ns});
    start_queued(now_ns);
  }
  // The server holding request `id` finished it (at the instant given to
  // `schedule_done`).
  void on_done(int64_t id, int64_t now_ns) {
    --busy_;
    busy_ns_ += now_ns - started_ns_[static_cast<size_t>(id)];
    start_queued(now_ns);
  }
  void set_servers(int servers, int64_t now_ns) {
    servers_ = servers;
    start_queued(now_ns);
  }
  void set_slowdown(double factor) { factor_ = factor; }

  int servers() const { return servers_; }
  int busy() const { return busy_; }
  size_t queued() const { return queue_.size(); }
  // Total service time of finished requests (work conservation:
  // busy_ns() <= servers * elapsed at constant capacity).
  int64_t busy_ns() const { return busy_ns_; }

 private:
  struct Job {
    int64_t id;
    int64_t work_ns;
  };
  void start_queued(int64_t now_ns) {
    while (busy_ < servers_ && !queue_.empty()) {
      const Job job = queue_.front();
      queue_.pop_front();
      ++busy_;
      const auto duration = static_cast<int64_t>(
          std::llround(static_cast<double>(job.work_ns) * factor_));
      const auto slot = static_cast<size_t>(job.id);
      if (started_ns_.size() <= slot) started_ns_.resize(slot + 1);
      started_ns_[slot] = now_ns;
      schedule_done_(now_ns + duration, job.id);
    }
  }

  int servers_;
  int busy_ = 0;
  double factor_ = 1.0;
  int64_t busy_ns_ = 0;
  std::deque<Job> queue_;
  std::vector<int64_t> started_ns_;  // by request id
  ScheduleDone schedule_done_;
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_BENCH_SIM_BACKEND_MODEL_H_
