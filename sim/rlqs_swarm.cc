// sim/rlqs_swarm.cc: the rlqs fleet's configurations (sim/rlqs_fleet.h):
// the figures derived from one, what a seed draws (swarm testing), the
// command line that replays a run, and the shrinker.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/random.h"
#include "sim/rlqs_fleet.h"
#include "sim/shrink.h"

namespace throttlekit::sim {

int64_t rlqs_budget_limit(const RlqsFleetConfig& c, int b) {
  return b == 0 ? c.limit : std::max<int64_t>(1, c.limit / 3);
}

int64_t rlqs_slack_ms(const RlqsFleetConfig& c) {
  return std::min<int64_t>(1000, c.ttl_s * 1000 / 4);
}

int64_t rlqs_commit_ms(const RlqsFleetConfig& c) {
  return c.ttl_s * 1000 + rlqs_slack_ms(c);
}

RlqsFleetConfig swarm_rlqs_config(uint64_t seed, int servers) {
  Rng rng(seed ^ 0x51A5F1EE7ull);
  RlqsFleetConfig c;
  c.servers = servers;
  c.clients = 4 + static_cast<int>(rng.next() % 37);
  c.budgets = 1 + static_cast<int>(rng.next() % 2);
  c.limit = 5 + static_cast<int64_t>(rng.next() % 116);
  constexpr int64_t kFills[] = {1, 1, 1, 1, 1, 2, 2, 10, 60, 60};
  c.fill_interval_s = kFills[rng.next() % 10];
  // A longer fill interval, a larger budget: requests about as frequent.
  c.limit *= std::max<int64_t>(1, c.fill_interval_s / 2);
  c.ttl_s = 2 + static_cast<int64_t>(rng.next() % 5);
  c.heartbeat_ms = 100 + static_cast<int64_t>(rng.next() % 901);
  constexpr int64_t kPeriods[] = {1000, 2000, 5000};
  c.report_period_ms = kPeriods[rng.next() % 3];
  c.demand = 0.3 + rng.uniform() * 2.7;
  c.shifts = static_cast<int>(rng.next() % 4);
  c.network.median_delay_us = 100 + rng.uniform() * 2'000;
  c.network.delay_sigma = rng.uniform() < 0.3 ? 1.5 : 0.5;
  c.network.loss = rng.uniform() < 0.3 ? rng.uniform() * 0.1 : 0;
  c.drift_ppm = rng.uniform() < 0.5 ? 500 : 0;
  // A1 on the server's clock: within the slack less its drift over L and
  // 2 ms (its whole milliseconds).
  const int64_t l_ms = rlqs_commit_ms(c);
  const int64_t max_delay_us =
      rlqs_slack_ms(c) * 1000 - 2000 - c.drift_ppm * l_ms / 1000;
  c.stream_delay_us =
      static_cast<int64_t>(rng.uniform() * static_cast<double>(max_delay_us));
  c.reply_loss = rng.uniform() < 0.3 ? rng.uniform() * 0.1 : 0;
  c.breaks_per_min = rng.uniform() < 0.4 ? 1 + rng.uniform() * 20 : 0;
  c.partitions = rng.uniform() < 0.4;
  c.crashes = rng.uniform() < 0.4;
  c.onoff_ms = rng.uniform() < 0.4 ? 500 + rng.next() % 4501 : 0;
  c.onoff_together = rng.uniform() < 0.5;
  // abandonIdle: the default (a minute) or 1 to 10 s.
  c.abandon_idle_ms = rng.uniform() < 0.4
                          ? 1000 * (1 + static_cast<int64_t>(rng.next() % 10))
                          : 60'000;
  // Windows of F, L, 2L and 5L inside the run.
  c.duration_ms =
      std::max({int64_t{30'000}, 6 * l_ms, c.fill_interval_s * 1000 + l_ms});
  return c;
}

std::string rlqs_replay_command(uint64_t seed, const RlqsFleetConfig& c) {
  return absl::StrCat(
      "tk_sim rlqs --seed ", seed, " --nodes ", c.servers, " --clients ",
      c.clients, " --budgets ", c.budgets, " --limit ", c.limit, " --fill-s ",
      c.fill_interval_s, " --ttl-s ", c.ttl_s, " --heartbeat-ms ",
      c.heartbeat_ms, " --report-ms ", c.report_period_ms, " --demand ",
      exact(c.demand), " --shifts ", c.shifts, " --onoff-ms ", c.onoff_ms,
      " --onoff-together ", c.onoff_together ? 1 : 0, " --abandon-idle-ms ",
      c.abandon_idle_ms, " --duration-ms ", c.duration_ms, " --delay-us ",
      exact(c.network.median_delay_us), " --sigma ",
      exact(c.network.delay_sigma), " --loss ", exact(c.network.loss),
      " --stream-delay-us ", c.stream_delay_us, " --reply-loss ",
      exact(c.reply_loss), " --breaks ", exact(c.breaks_per_min),
      " --partitions ", c.partitions ? 1 : 0, " --crashes ", c.crashes ? 1 : 0,
      " --drift-ppm ", c.drift_ppm,
      c.ttl_accounting ? "" : " --no-ttl-accounting",
      c.self_fencing ? "" : " --no-fencing", c.handoff ? "" : " --no-handoff",
      c.allow_without_assignment ? " --allow-without-assignment" : "");
}

RlqsFleetConfig shrink_rlqs(uint64_t seed, RlqsFleetConfig failing,
                            int rounds) {
  using C = RlqsFleetConfig;
  const std::vector<std::function<void(C&)>> steps = {
      [](C& c) { c.partitions = false; },
      [](C& c) { c.crashes = false; },
      [](C& c) { c.breaks_per_min = 0; },
      [](C& c) { c.reply_loss = 0; },
      [](C& c) { c.network.loss = 0; },
      [](C& c) { c.network.delay_sigma = 0.5; },
      [](C& c) { c.drift_ppm = 0; },
      [](C& c) { c.shifts = 0; },
      [](C& c) { c.onoff_ms = 0; },
      [](C& c) { c.onoff_together = false; },
      [](C& c) { c.abandon_idle_ms = 0; },
      [](C& c) { c.budgets = 1; },
      [](C& c) {
        // Half the clients, the same demand.
        c.clients = std::max(1, c.clients / 2);
      },
      [](C& c) { c.servers = std::max(2, c.servers / 2); },
      [](C& c) {
        c.duration_ms = std::max(6 * rlqs_commit_ms(c), c.duration_ms / 2);
      },
  };
  return shrink_seed(seed, std::move(failing), steps, run_rlqs_fleet,
                     rlqs_replay_command, rounds);
}

}  // namespace throttlekit::sim
