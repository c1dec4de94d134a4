// bench/sim/adaptive_limiter.h
//
// Provides `AdaptiveSimLimiter`: drives the library's
// `BasicAdaptiveConcurrency<SimClock>` (throttlekit/concurrency/
// adaptive_concurrency.h) from the simulator. Each admitted request keeps its
// RAII lease until it settles; success releases `kSuccess` (the limiter
// measures the latency on simulated time), a client timeout releases
// `kDropped`.

#ifndef THROTTLEKIT_BENCH_SIM_ADAPTIVE_LIMITER_H_
#define THROTTLEKIT_BENCH_SIM_ADAPTIVE_LIMITER_H_

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "simulation.h"
#include "throttlekit/concurrency/adaptive_concurrency.h"

namespace throttlekit::sim {

class AdaptiveSimLimiter final : public SimLimiter {
 public:
  using Limiter = BasicAdaptiveConcurrency<SimClock>;

  // Throws std::invalid_argument if `options` are rejected by create().
  AdaptiveSimLimiter(const AdaptiveConcurrencyOptions& options,
                     SimClock clock) {
    auto made = Limiter::create(options, clock);
    if (!made.ok()) {
      throw std::invalid_argument(std::string(made.status().message()));
    }
    limiter_ = *std::move(made);
  }

  bool acquire(int64_t id) override {
    Limiter::Permit lease = limiter_->acquire();
    if (!lease) return false;
    const auto slot = static_cast<size_t>(id);
    if (leases_.size() <= slot) leases_.resize(slot + 1);
    leases_[slot] = std::move(lease);
    return true;
  }

  void release(int64_t id, bool success) override {
    leases_[static_cast<size_t>(id)].release(success ? PermitOutcome::kSuccess
                                                     : PermitOutcome::kDropped);
  }

  LimitSample sample() const override {
    const AdaptiveConcurrencyStats s = limiter_->stats();
    return {0,
            static_cast<double>(s.limit),
            static_cast<double>(s.effective_limit),
            s.inflight,
            static_cast<double>(s.rtt_noload_ns) / 1e6,
            s.recalibrating,
            s.recalibrations};
  }

  bool pinned() const override { return limiter_->stats().recalibrating; }

  const Limiter& limiter() const { return *limiter_; }

 private:
  std::unique_ptr<Limiter> limiter_;
  std::vector<Limiter::Permit> leases_;  // by request id; settled ones false
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_BENCH_SIM_ADAPTIVE_LIMITER_H_
