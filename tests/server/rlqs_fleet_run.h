// tests/server/rlqs_fleet_run.h
//
// `run_rlqs_fleet`: the quota door's fleet scenario (docs/rlqs.md, "What
// proves it"), 50 clients that behave as Envoy's filter does
// (rlqs_emulator.h) spread over one to three throttlekit-servers, on the
// real clock, one budget of 100 requests per second (TTL 2 s, so
// L = ttl + slack = 2.5 s; reports every 2 s):
//
// 1. Over the limit: every client asks 4 per second (200 in all); three
//    streams break and reconnect. The clients together must admit at
//    least 0.9 of the limit.
// 2. Under it: every client asks one per 4 s; they must admit at least
//    0.9 of what they ask. Then one client's demand jumps to 60 per
//    second: within 3 reports it must hold at least 0.8 of its
//    water-filling share (51 of 100: each of the 49 others wants 1).
// 3. With more than one server: over the limit again; the last server is
//    killed (its clients move to the others, as a load balancer sends
//    them), then restarted (a new incarnation) and its clients move back.
//    The fleet must admit at least 0.7 of the limit at the end.
// Throughout, the admissions of all clients in any window of 1, 2.5 and 5
// seconds stay within the bound R*I/F + R + R*(floor(I/L) + 1), and the
// token buckets installed at any one instant hold at most R together. Each
// client's requests come from a thread of its own (LoadThreads).
//
// The clients deny requests while they hold no assignment (docs/rlqs.md,
// assumption A4), so every admission is under an assignment.

#ifndef THROTTLEKIT_TESTS_SERVER_RLQS_FLEET_RUN_H_
#define THROTTLEKIT_TESTS_SERVER_RLQS_FLEET_RUN_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "config.h"
#include "policies.h"
#include "rlqs_emulator.h"
#include "rlqs_load.h"
#include "server.h"
#include "started_server.h"
#include "support/manual_clock_server.h"

namespace throttlekit::testing {

inline constexpr int64_t kFleetLimit = 100;
inline constexpr int64_t kFleetCommitMs = 2500;  // ttl 2 s + slack 0.5 s
inline constexpr int64_t kFleetReportMs = 2000;
inline constexpr int kFleetClients = 50;

// The `rlqs:` configuration of the scenario's domain.
inline std::string rlqs_fleet_yaml(const std::string& domain) {
  return absl::StrCat(R"(
version: 1
rlqs:
  fleetHeartbeat: 100ms
  domains:
    - domain: )",
                      domain, R"(
      assignmentTtl: 2s
      buckets:
        - match: {name: api}
          limit: {requests: 100, per: 1s}
)");
}

// A server of `config` over `store` (null: the embedded one) as node
// `node_id`, on a free loopback port; null (and a test failure) if it
// cannot start.
inline std::unique_ptr<server::Server> start_rlqs_server(
    const server::ServerConfig& config, std::shared_ptr<Coordinator> store,
    const std::string& node_id) {
  return start_server(config, std::move(store), {.node_id = node_id});
}

// Runs the scenario on servers `start(i)` starts (i in [0, servers); the
// same i again after a kill: a new process on the same store). Reports
// failures through gtest.
inline void run_rlqs_fleet(
    int servers, const std::string& domain,
    const std::function<std::unique_ptr<server::Server>(int)>& start) {
  std::vector<std::unique_ptr<server::Server>> fleet;
  for (int i = 0; i < servers; ++i) {
    fleet.push_back(start(i));
    ASSERT_NE(fleet.back(), nullptr);
  }
  const RlqsId api = {{"name", "api"}};
  std::vector<std::unique_ptr<RlqsEmulator>> clients;
  std::vector<Load> load;
  for (int c = 0; c < kFleetClients; ++c) {
    clients.push_back(std::make_unique<RlqsEmulator>(
        loopback_channel(fleet[c % servers]->port()),
        RlqsEmulatorOptions{.domain = domain,
                            .report_period_ms = kFleetReportMs,
                            .deny_without_assignment = true}));
    load.push_back({clients.back().get(), api, 4});
  }
  const auto admitted_between = [&](int64_t from, int64_t to) {
    int64_t n = 0;
    for (auto& c : clients) {
      for (int64_t t : c->admitted(api)) n += t >= from && t < to ? 1 : 0;
    }
    return n;
  };
  // Admissions per 500 ms from `from` on, for failure messages.
  const auto timeline = [&](int64_t from) {
    std::vector<int64_t> per;
    for (auto& c : clients) {
      for (int64_t t : c->admitted(api)) {
        if (t < from) continue;
        const auto i = static_cast<size_t>((t - from) / 500);
        if (per.size() <= i) per.resize(i + 1);
        ++per[i];
      }
    }
    return absl::StrJoin(per, " ");
  };
  // Each live server's fleet metrics (its beats, how often it fenced, its
  // slowest beat), for failure messages.
  const auto fleet_state = [&] {
    std::string out;
    for (size_t i = 0; i < fleet.size(); ++i) {
      if (fleet[i] == nullptr) continue;
      absl::StrAppend(&out, "\nserver ", i, ":");
      for (absl::string_view line :
           absl::StrSplit(fleet[i]->prometheus_text(), '\n')) {
        if (absl::StartsWith(line, "throttlekit_rlqs_fleet_")) {
          absl::StrAppend(&out, " ", line.substr(23), ";");
        }
      }
    }
    return out;
  };
  const auto rate = [&](int64_t from, int64_t to) {
    return static_cast<double>(admitted_between(from, to)) * 1000.0 /
           static_cast<double>(to - from);
  };

  LoadThreads threads(load);

  // 1. Over the limit, with three stream breaks.
  LoadThreads::wait(2000);
  for (int c : {5, 10, 15}) clients[c]->break_stream();
  LoadThreads::wait(2000);
  int64_t from = steady_ms();
  LoadThreads::wait(3000);
  EXPECT_GE(rate(from, steady_ms()), 0.9 * kFleetLimit)
      << "over the limit, " << servers
      << " server(s); admitted per 500 ms: " << timeline(from) << fleet_state();

  // 2. Under it, then one client's demand jumps.
  threads.set_all(0.25);
  LoadThreads::wait(4500);
  from = steady_ms();
  LoadThreads::wait(4000);  // one request of each client
  const double asked = 0.25 * kFleetClients;
  EXPECT_GE(rate(from, steady_ms()), 0.9 * asked)
      << "under the limit, " << servers
      << " server(s); admitted per 500 ms: " << timeline(from) << fleet_state();
  RlqsEmulator& jumper = *clients[0];
  threads.set_rate(0, 60);
  const int64_t jump = steady_ms();
  // Its water-filling share: 100 less the 49 others' demand of 1 each.
  const uint32_t share = kFleetLimit - (kFleetClients - 1);
  EXPECT_TRUE(LoadThreads::wait(3 * kFleetReportMs,
                                [&] {
                                  return holds_tokens(
                                      jumper, api,
                                      static_cast<uint32_t>(0.8 * share + 1));
                                }))
      << "the jumping client holds " << tokens_of(jumper, api) << " after "
      << steady_ms() - jump << " ms, " << servers << " server(s)";

  // 3. A server killed and restarted, over the limit.
  if (servers > 1) {
    threads.set_all(4);
    LoadThreads::wait(2000);
    const int last = servers - 1;
    const int64_t killed_at = steady_ms();
    fleet[last]->shutdown();
    fleet[last].reset();
    for (int c = last; c < kFleetClients; c += servers) {
      clients[c]->move_to(loopback_channel(fleet[c % last]->port()));
    }
    LoadThreads::wait(3000);
    fleet[last] = start(last);
    ASSERT_NE(fleet[last], nullptr);
    for (int c = last; c < kFleetClients; c += servers) {
      clients[c]->move_to(loopback_channel(fleet[last]->port()));
    }
    LoadThreads::wait(3500);
    from = steady_ms();
    LoadThreads::wait(2000);
    EXPECT_GE(rate(from, steady_ms()), 0.7 * kFleetLimit)
        << "after a server was killed and restarted; admitted per 500 ms "
           "from the kill: "
        << timeline(killed_at) << fleet_state();
  }

  threads.stop();
  std::vector<int64_t> all;
  std::vector<RlqsEmulator::Held> held;
  for (auto& c : clients) {
    for (int64_t t : c->admitted(api)) all.push_back(t);
    for (const RlqsEmulator::Held& h : c->held(api)) held.push_back(h);
  }
  // The invariant the bound rests on, at every instant of the run: the
  // token buckets installed at once hold at most the budget.
  EXPECT_LE(most_held_at_once(held), kFleetLimit) << servers << " server(s)";
  for (int64_t w : {int64_t{1000}, kFleetCommitMs, int64_t{5000}}) {
    EXPECT_LE(most_in_window(all, w),
              rlqs_bound(kFleetLimit, 1, kFleetCommitMs, w))
        << "window " << w << " ms, " << servers << " server(s)";
  }
  clients.clear();
  for (auto& s : fleet) {
    if (s != nullptr) s->shutdown();
  }
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_RLQS_FLEET_RUN_H_
