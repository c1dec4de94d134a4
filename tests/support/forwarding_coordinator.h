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
    forward<&Coordinator::check, &Coordinator::check_async>(
        "check", done, strategy, key, now_ms, cost);
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
    forward<&Coordinator::lease, &Coordinator::lease_async>("lease", done,
                                                            budget, key, want);
  }
  void do_give_back(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token,
                    VerbCompletion<int64_t>&& done) override {
    forward<&Coordinator::give_back, &Coordinator::give_back_async>(
        "give_back", done, budget, key, window_start_ms, credits, token);
  }
  void do_now_ms(VerbCompletion<int64_t>&& done) override {
    forward<&Coordinator::now_ms, &Coordinator::now_ms_async>("now_ms", done);
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
    forward<&Coordinator::lease_windowed, &Coordinator::lease_windowed_async>(
        "lease_windowed", done, budget, key, want, now_ms);
  }
  void do_reconcile(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms,
                    VerbCompletion<int64_t>&& done) override {
    forward<&Coordinator::reconcile, &Coordinator::reconcile_async>(
        "reconcile", done, budget, key, window_start_ms, leftover, token,
        now_ms);
  }
  void do_escrow_take(std::string_view key, int64_t want, int64_t now_ms,
                      VerbCompletion<LeaseGrant>&& done) override {
    forward<&Coordinator::escrow_take, &Coordinator::escrow_take_async>(
        "escrow_take", done, key, want, now_ms);
  }
  void do_escrow_refill(std::string_view key, int64_t granted,
                        int64_t window_start_ms, int64_t expires_at_ms,
                        int64_t now_ms,
                        VerbCompletion<int64_t>&& done) override {
    forward<&Coordinator::escrow_refill, &Coordinator::escrow_refill_async>(
        "escrow_refill", done, key, granted, window_start_ms, expires_at_ms,
        now_ms);
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
    forward<&Coordinator::heartbeat, &Coordinator::heartbeat_async>(
        "heartbeat", done, key, report, options, now_ms);
  }
  void do_heartbeat_nodes(
      std::string_view key,
      VerbCompletion<std::vector<HeartbeatNode>>&& done) override {
    if (refused("heartbeat_nodes", done)) return;
    std::move(done)(inner_->heartbeat_nodes(key));
  }

 private:
  // Answers `done`, once `admit` lets `verb` through, by the inner
  // coordinator: its `Blocking` verb for a caller that waits, else its
  // `Async` verb, given the same arguments and the completion.
  template <auto Blocking, auto Async, class T, class... Args>
  void forward(std::string_view verb, VerbCompletion<T>& done,
               const Args&... args) {
    if (refused(verb, done)) return;
    if (done.caller_waits()) {
      std::move(done)((inner_.get()->*Blocking)(args...));
      return;
    }
    (inner_.get()->*Async)(args..., std::move(done).release());
  }

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
