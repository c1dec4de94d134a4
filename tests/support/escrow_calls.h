// tests/support/escrow_calls.h
//
// The calls both fair escrows' tests make alike
// (tests/twotier/weighted_fair_escrow_test.cc, a `WeightedFairEscrow` over
// a coordinator; tests/federation/federated_fair_escrow_test.cc, a
// `FederatedFairEscrow` over a region pool): `admit_n(escrow, tenant, n)`,
// `n` unit calls, returning how many were allowed; and
// `expect_queued_calls_land_in_order(engine, reference, held, fail_next,
// requests_sent)`, the async scenario (over a held coordinator or a held
// region pool).
// `engine` asks its store through `held`, which keeps each request until
// the test delivers it (`held()`, `deliver_one()`, `deliver_all()`);
// `reference` is the same engine on a store of its own, asked blocking.
//
// - 20 `admit_async` calls (tenant "a" or "b", cost 1 or 2) queue behind
//   the one request in flight: none completes, and a blocking
//   `admit("b", 1)` behind them waits its turn.
// - Delivered, every call lands once, in arrival order, each equal to the
//   reference's answer to the same call; `requests_sent()` is then above 2
//   (a queued call that needs a request of its own sent it).
// - Four calls of 9 credits: the first asks, the others queue behind it;
//   `fail_next()` fails that request, and all four answer kUnavailable at
//   once, with no request sent for the queued ones.
// - The next call asks again and answers as the reference does.

#ifndef THROTTLEKIT_TESTS_SUPPORT_ESCROW_CALLS_H_
#define THROTTLEKIT_TESTS_SUPPORT_ESCROW_CALLS_H_

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::testing {

// Admits `n` unit calls for `tenant` now; returns how many were allowed.
template <class Escrow>
int admit_n(Escrow& e, const std::string& tenant, int n) {
  int allowed = 0;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Decision> d = e.admit(tenant);
    EXPECT_TRUE(d.ok()) << d.status();
    allowed += d.ok() && d->allowed;
  }
  return allowed;
}

template <class Engine, class Reference, class Held>
void expect_queued_calls_land_in_order(
    Engine& engine, Reference& reference, Held& held,
    const std::function<void()>& fail_next,
    const std::function<int64_t()>& requests_sent) {
  std::mutex mu;
  std::vector<std::optional<absl::StatusOr<Decision>>> got(25);
  std::vector<int> order;
  const auto submit = [&](int k, const char* tenant, double cost) {
    engine.admit_async(tenant, cost, [&, k](absl::StatusOr<Decision> d) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_FALSE(got[k].has_value()) << "once, " << k;
      got[k] = std::move(d);
      order.push_back(k);
    });
  };
  const auto tenant_of = [](int k) { return k % 3 ? "a" : "b"; };
  for (int k = 0; k < 20; ++k) submit(k, tenant_of(k), 1 + k % 2);
  EXPECT_EQ(held.held(), 1u) << "one request in flight, the rest queued";
  // A blocking call behind them waits its turn in the queue.
  std::atomic<bool> blocking_done{false};
  absl::StatusOr<Decision> blocking_answer;
  std::thread blocking([&] {
    blocking_answer = engine.admit("b", 1);
    blocking_done = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(blocking_done.load());
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty());
  }
  held.deliver_all();
  blocking.join();
  ASSERT_TRUE(blocking_answer.ok()) << blocking_answer.status();
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(order.size(), 20u);
    for (int k = 0; k < 20; ++k) {
      EXPECT_EQ(order[k], k) << "arrival order";
      ASSERT_TRUE(got[k]->ok()) << got[k]->status();
      EXPECT_EQ(**got[k], *reference.admit(tenant_of(k), 1 + k % 2))
          << "call " << k;
    }
  }
  EXPECT_EQ(*blocking_answer, *reference.admit("b", 1));
  EXPECT_GT(requests_sent(), 2);
  // Calls of 9 credits each need a request of their own: the first is
  // sent, the other three queue; it fails, and so do they, at once.
  for (int k = 20; k < 24; ++k) submit(k, "a", 9);
  EXPECT_EQ(held.held(), 1u);
  fail_next();
  ASSERT_TRUE(held.deliver_one());
  EXPECT_EQ(held.held(), 0u) << "no request sent for the queued calls";
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int k = 20; k < 24; ++k) {
      ASSERT_TRUE(got[k].has_value()) << k;
      EXPECT_EQ(got[k]->status().code(), absl::StatusCode::kUnavailable) << k;
    }
  }
  // The next call asks again.
  submit(24, "a", 9);
  EXPECT_EQ(held.held(), 1u);
  held.deliver_all();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_TRUE(got[24].has_value());
  ASSERT_TRUE(got[24]->ok()) << got[24]->status();
  EXPECT_EQ(**got[24], *reference.admit("a", 9));
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_ESCROW_CALLS_H_
