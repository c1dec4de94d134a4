// tests/support/forwarding_coordinator.h
//
// `ForwardingCoordinator`: a `Coordinator` that passes every verb to an
// inner one, the base of the tests' coordinators that change a few verbs
// (fail them, hold them, count them). A caller that waits is answered by
// the inner coordinator's blocking verb; one that does not, by its `*_async`
// verb where it has one. `admit(verb)` runs before each verb: a status
// other than OK answers the call instead, without reaching the inner
// coordinator (an outage a test switches on).
//
// Thread-safety: as the inner coordinator's, and `admit`'s.

#ifndef THROTTLEKIT_TESTS_SUPPORT_FORWARDING_COORDINATOR_H_
#define THROTTLEKIT_TESTS_SUPPORT_FORWARDING_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/verb_completion.h"

namespace throttlekit::testing {

class ForwardingCoordinator : public Coordinator {
 public:
  explicit ForwardingCoordinator(std::shared_ptr<Coordinator> inner)
      : inner_(std::move(inner)) {}

  std::string_view backend() const noexcept override {
    return inner_->backend();
  }

 protected:
  // Runs before every verb (`verb` names it): OK lets it through.
  virtual absl::Status admit(std::string_view /*verb*/) {
    return absl::OkStatus();
  }

  Coordinator& inner() { return *inner_; }

  void do_check(const AnyStrategy& strategy, std::string_view key,
                int64_t now_ms, double cost,
                VerbCompletion<Decision>&& done) override {
    if (refused("check", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->check(strategy, key, now_ms, cost));
      return;
    }
    inner_->check_async(strategy, key, now_ms, cost, std::move(done).release());
  }
  void do_peek(const AnyStrategy& strategy, std::string_view key,
               int64_t now_ms, VerbCompletion<Decision>&& done) override {
    if (refused("peek", done)) return;
    std::move(done)(inner_->peek(strategy, key, now_ms));
  }
  void do_forecast(const AnyStrategy& strategy, std::string_view key,
                   int64_t now_ms, double cost,
                   VerbCompletion<Forecast>&& done) override {
    if (refused("forecast", done)) return;
    std::move(done)(inner_->forecast(strategy, key, now_ms, cost));
  }
  void do_reset(const AnyStrategy& strategy, std::string_view key,
                VerbCompletion<Acknowledged>&& done) override {
    if (refused("reset", done)) return;
    std::move(done)(acknowledged(inner_->reset(strategy, key)));
  }
  void do_lease(const LeaseBudget& budget, std::string_view key, int64_t want,
                VerbCompletion<LeaseGrant>&& done) override {
    if (refused("lease", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->lease(budget, key, want));
      return;
    }
    inner_->lease_async(budget, key, want, std::move(done).release());
  }
  void do_give_back(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token,
                    VerbCompletion<int64_t>&& done) override {
    if (refused("give_back", done)) return;
    if (done.caller_waits()) {
      std::move(done)(
          inner_->give_back(budget, key, window_start_ms, credits, token));
      return;
    }
    inner_->give_back_async(budget, key, window_start_ms, credits, token,
                            std::move(done).release());
  }
  void do_now_ms(VerbCompletion<int64_t>&& done) override {
    if (refused("now_ms", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->now_ms());
      return;
    }
    inner_->now_ms_async(std::move(done).release());
  }
  void do_ping(VerbCompletion<Acknowledged>&& done) override {
    if (refused("ping", done)) return;
    std::move(done)(acknowledged(inner_->ping()));
  }
  absl::Status do_wait_ready(absl::Time deadline) override {
    return inner_->wait_ready(deadline);
  }
  void do_lease_windowed(const LeaseBudget& budget, std::string_view key,
                         int64_t want, int64_t now_ms,
                         VerbCompletion<LeaseGrant>&& done) override {
    if (refused("lease_windowed", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->lease_windowed(budget, key, want, now_ms));
      return;
    }
    inner_->lease_windowed_async(budget, key, want, now_ms,
                                 std::move(done).release());
  }
  void do_reconcile(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms,
                    VerbCompletion<int64_t>&& done) override {
    if (refused("reconcile", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->reconcile(budget, key, window_start_ms, leftover,
                                        token, now_ms));
      return;
    }
    inner_->reconcile_async(budget, key, window_start_ms, leftover, token,
                            now_ms, std::move(done).release());
  }
  void do_escrow_take(std::string_view key, int64_t want, int64_t now_ms,
                      VerbCompletion<LeaseGrant>&& done) override {
    if (refused("escrow_take", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->escrow_take(key, want, now_ms));
      return;
    }
    inner_->escrow_take_async(key, want, now_ms, std::move(done).release());
  }
  void do_escrow_refill(std::string_view key, int64_t granted,
                        int64_t window_start_ms, int64_t expires_at_ms,
                        int64_t now_ms,
                        VerbCompletion<int64_t>&& done) override {
    if (refused("escrow_refill", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->escrow_refill(key, granted, window_start_ms,
                                            expires_at_ms, now_ms));
      return;
    }
    inner_->escrow_refill_async(key, granted, window_start_ms, expires_at_ms,
                                now_ms, std::move(done).release());
  }
  void do_escrow_release(std::string_view key, int64_t window_start_ms,
                         int64_t now_ms,
                         VerbCompletion<int64_t>&& done) override {
    if (refused("escrow_release", done)) return;
    std::move(done)(inner_->escrow_release(key, window_start_ms, now_ms));
  }
  void do_heartbeat(std::string_view key, const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    VerbCompletion<HeartbeatGrant>&& done) override {
    if (refused("heartbeat", done)) return;
    if (done.caller_waits()) {
      std::move(done)(inner_->heartbeat(key, report, options, now_ms));
      return;
    }
    inner_->heartbeat_async(key, report, options, now_ms,
                            std::move(done).release());
  }
  void do_heartbeat_nodes(
      std::string_view key,
      VerbCompletion<std::vector<HeartbeatNode>>&& done) override {
    if (refused("heartbeat_nodes", done)) return;
    std::move(done)(inner_->heartbeat_nodes(key));
  }

 private:
  // Completes `done` with `admit(verb)`'s refusal; false when it admits.
  template <class T>
  bool refused(std::string_view verb, VerbCompletion<T>& done) {
    absl::Status s = admit(verb);
    if (s.ok()) return false;
    std::move(done)(std::move(s));
    return true;
  }
  static absl::StatusOr<Acknowledged> acknowledged(absl::Status s) {
    if (!s.ok()) return s;
    return Acknowledged{};
  }

  const std::shared_ptr<Coordinator> inner_;
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_FORWARDING_COORDINATOR_H_
