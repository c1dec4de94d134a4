// tests/support/held_coordinator.h
//
// `HeldCoordinator`: a `Coordinator` over another one whose asynchronous
// leases wait until the test lets them through, so a test chooses the
// instant the store runs a lease and the instant its answer arrives (a
// network it drives). A blocking `lease` is held as well (it waits for its
// delivery); every other verb goes straight to the inner coordinator
// (support/forwarding_coordinator.h).
//
//     auto held = std::make_shared<HeldCoordinator>(memory);
//     limiter->check_async("k", 1, done);  // a miss: the lease is held
//     held->deliver_all();                 // the store runs it; done runs
//
// `fail_next(status)` makes the next delivered leases answer a status
// instead (an outage), without reaching the store.
//
// Asynchronous heartbeats are held the same way (`beats_held`,
// `deliver_beat`); a blocking `heartbeat` goes straight through.
//
// Thread-safety: safe from any thread; completions run on the thread that
// delivers, outside the coordinator's lock.

#ifndef THROTTLEKIT_TESTS_SUPPORT_HELD_COORDINATOR_H_
#define THROTTLEKIT_TESTS_SUPPORT_HELD_COORDINATOR_H_

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "support/forwarding_coordinator.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/verb_completion.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::testing {

class HeldCoordinator final : public ForwardingCoordinator {
 public:
  explicit HeldCoordinator(std::shared_ptr<Coordinator> inner)
      : ForwardingCoordinator(std::move(inner)) {}

  // Leases waiting for delivery.
  size_t held() {
    MutexLock lock(mu_);
    return held_.size();
  }
  // The `want` of each held lease, oldest first.
  std::vector<int64_t> wants() {
    MutexLock lock(mu_);
    std::vector<int64_t> out;
    for (const Held& h : held_) out.push_back(h.want);
    return out;
  }
  // The key of each held lease, oldest first.
  std::vector<std::string> keys() {
    MutexLock lock(mu_);
    std::vector<std::string> out;
    for (const Held& h : held_) out.push_back(h.key);
    return out;
  }
  // Runs the oldest held lease on the inner store and completes it; false
  // if none is held.
  bool deliver_one() {
    Held h;
    absl::Status fail;
    {
      MutexLock lock(mu_);
      if (held_.empty()) return false;
      h = std::move(held_.front());
      held_.pop_front();
      if (fails_ > 0) {
        --fails_;
        fail = fail_status_;
      }
    }
    if (!fail.ok()) {
      std::move(h.done)(fail);
      return true;
    }
    absl::StatusOr<LeaseGrant> grant = inner().lease(h.budget, h.key, h.want);
    {
      MutexLock lock(mu_);
      last_ = grant;
    }
    std::move(h.done)(std::move(grant));
    return true;
  }
  // The store's answer to the last lease delivered (not a failure made by
  // `fail_next`); kNotFound before any.
  absl::StatusOr<LeaseGrant> last_delivered() {
    MutexLock lock(mu_);
    return last_;
  }
  // Delivers until nothing is held (including leases issued meanwhile).
  void deliver_all() {
    while (deliver_one()) {
    }
  }
  // Heartbeats waiting for delivery.
  size_t beats_held() {
    MutexLock lock(mu_);
    return beats_.size();
  }
  // Runs the oldest held heartbeat on the inner store and completes it
  // (with `status` instead, not reaching the store, when it is not OK);
  // false if none is held.
  bool deliver_beat(absl::Status status = absl::OkStatus()) {
    HeldBeat b;
    {
      MutexLock lock(mu_);
      if (beats_.empty()) return false;
      b = std::move(beats_.front());
      beats_.pop_front();
    }
    if (!status.ok()) {
      std::move(b.done)(std::move(status));
    } else {
      std::move(b.done)(inner().heartbeat(b.key, b.report, b.options, b.now));
    }
    return true;
  }
  // The next `n` deliveries answer `status` without reaching the store.
  void fail_next(int n, absl::Status status) {
    MutexLock lock(mu_);
    fails_ = n;
    fail_status_ = std::move(status);
  }

 protected:
  // A lease is held, whether its caller waits (then it blocks until
  // delivered) or not.
  void do_lease(const LeaseBudget& budget, std::string_view key, int64_t want,
                VerbCompletion<LeaseGrant>&& done) override {
    MutexLock lock(mu_);
    held_.push_back(
        Held{budget, std::string(key), want, std::move(done).release()});
  }
  // A heartbeat whose caller does not wait is held; a waited one goes
  // straight through.
  void do_heartbeat(std::string_view key, const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    VerbCompletion<HeartbeatGrant>&& done) override {
    if (done.caller_waits()) {
      ForwardingCoordinator::do_heartbeat(key, report, options, now_ms,
                                          std::move(done));
      return;
    }
    MutexLock lock(mu_);
    beats_.push_back(HeldBeat{std::string(key), report, options, now_ms,
                              std::move(done).release()});
  }

 private:
  struct Held {
    LeaseBudget budget = *LeaseBudget::create({1, 1});
    std::string key;
    int64_t want = 0;
    Completion<LeaseGrant> done;
  };

  struct HeldBeat {
    std::string key;
    HeartbeatReport report;
    HeartbeatOptions options;
    int64_t now = 0;
    Completion<HeartbeatGrant> done;
  };

  Mutex mu_;
  std::deque<Held> held_ ABSL_GUARDED_BY(mu_);
  std::deque<HeldBeat> beats_ ABSL_GUARDED_BY(mu_);
  int fails_ ABSL_GUARDED_BY(mu_) = 0;
  absl::StatusOr<LeaseGrant> last_ ABSL_GUARDED_BY(mu_) =
      absl::NotFoundError("no lease delivered yet");
  absl::Status fail_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_HELD_COORDINATOR_H_
