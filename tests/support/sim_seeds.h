// tests/support/sim_seeds.h
//
// What the fleet simulator's tests (tests/sim/) share: `sound(r, replay)`,
// a run that broke no invariant and fell below no liveness floor (else the
// first of each and the command that replays the run);
// `expect_seed_holds(r, replay)`, a swarm seed's run that broke no bound (a
// fatal failure, naming the first violation and `replay`) and admitted
// something; `first_failing_seed(within, run)`, the first seed in
// 1 .. `within` whose run breaks an invariant: how a mutation row is
// caught; `expect_caught_within(within, what, run, naming)`, a mutation
// row's test: some seed in 1 .. `within` breaks an invariant (its first
// violation naming `naming`, when given), and which one is printed;
// `mutated_swarm(swarm, nodes, run_fleet, mutate)`, how a mutation row's
// seeds run: each seed's swarm configuration with `mutate` applied;
// `SwarmTally`, a swarm test's totals over its seeds (admissions, seeds at
// the limit, the faults that ran) and their summary line; and
// `expect_replays(run_fleet, config, seed, other_seed)`:
// `run_fleet(seed, config, keep_trace)` twice makes the same history (a
// trace of over 100 events, its hash, the event count and the first
// violation) and, if `other_seed` is given, that seed another history
// (another hash).

#ifndef THROTTLEKIT_TESTS_SUPPORT_SIM_SEEDS_H_
#define THROTTLEKIT_TESTS_SUPPORT_SIM_SEEDS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "sim/world.h"

namespace throttlekit::testing {

inline ::testing::AssertionResult sound(const sim::SimResult& r,
                                        const std::string& replay) {
  if (r.violations == 0 && r.liveness_failures == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << r.first_violation << r.first_liveness_failure
         << "\n  replay: " << replay;
}

inline void expect_seed_holds(const sim::SimResult& r,
                              const std::string& replay) {
  ASSERT_EQ(r.violations, 0) << r.first_violation << "\n  replay: " << replay;
  EXPECT_GT(r.admitted, 0) << replay;
}

// The first seed `s` in 1 .. `within` for which `run(s)` (a `SimResult`)
// broke an invariant, with that run's first violation in `*first` when
// given; 0 when every seed held.
template <class Run>
uint64_t first_failing_seed(uint64_t within, Run run,
                            std::string* first = nullptr) {
  for (uint64_t seed = 1; seed <= within; ++seed) {
    const sim::SimResult r = run(seed);
    if (r.violations > 0) {
      if (first != nullptr) *first = r.first_violation;
      return seed;
    }
  }
  return 0;
}

// A mutation row: `run` (as for `first_failing_seed`) breaks an invariant
// on some seed in 1 .. `within`, else a fatal failure "`what` survived
// `within` seeds"; when `naming` is given, that run's first violation
// contains it. Prints "`what`: caught at seed N" and the first violation.
template <class Run>
void expect_caught_within(uint64_t within, const std::string& what, Run run,
                          const std::string& naming = "") {
  std::string first;
  const uint64_t caught = first_failing_seed(within, run, &first);
  ASSERT_GT(caught, 0u) << what << " survived " << within << " seeds";
  EXPECT_NE(first.find(naming), std::string::npos) << first;
  std::printf("%s: caught at seed %llu: %s\n", what.c_str(),
              static_cast<unsigned long long>(caught), first.c_str());
}

// A mutation row's run of a seed: `run_fleet(seed, c)` on the
// configuration `c = swarm(seed, nodes)` with `mutate(c)` applied.
template <class Config>
std::function<sim::SimResult(uint64_t)> mutated_swarm(
    Config (*swarm)(uint64_t, int), int nodes,
    sim::SimResult (*run_fleet)(uint64_t, const Config&, bool),
    std::function<void(Config&)> mutate) {
  return [swarm, nodes, run_fleet, mutate = std::move(mutate)](uint64_t seed) {
    Config c = swarm(seed, nodes);
    mutate(c);
    return run_fleet(seed, c, /*keep_trace=*/false);
  };
}

// A swarm test's totals over the seeds it ran: what was admitted, how many
// seeds had a worst window at the limit, and the faults that ran.
struct SwarmTally {
  uint64_t seeds = 0;
  int64_t admitted = 0;
  int64_t full_windows = 0;  // seeds whose worst window reached the limit
  int64_t lost = 0;          // messages lost
  int64_t crashes = 0;
  int64_t timeouts = 0;
  int64_t errors = 0;

  void add(const sim::SimResult& r, int64_t limit) {
    ++seeds;
    admitted += r.admitted;
    full_windows += r.worst_window == limit;
    lost += r.messages_lost;
    crashes += r.crashes;
    timeouts += r.timeouts;
    errors += r.errors;
  }

  std::string summary() const {
    char line[256];
    std::snprintf(
        line, sizeof line,
        "%llu seeds: %lld admitted, %lld seeds with a window at "
        "the limit, %lld messages lost, %lld crashes, %lld "
        "timeouts, %lld errors",
        static_cast<unsigned long long>(seeds),
        static_cast<long long>(admitted), static_cast<long long>(full_windows),
        static_cast<long long>(lost), static_cast<long long>(crashes),
        static_cast<long long>(timeouts), static_cast<long long>(errors));
    return line;
  }
};

template <class RunFleet, class Config>
void expect_replays(RunFleet run_fleet, const Config& config, uint64_t seed,
                    std::optional<uint64_t> other_seed) {
  const auto run = [&](uint64_t s, bool keep_trace) {
    return run_fleet(s, config, keep_trace);
  };
  const sim::SimResult a = run(seed, /*keep_trace=*/true);
  const sim::SimResult b = run(seed, /*keep_trace=*/true);
  ASSERT_GT(a.trace.size(), 100u);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.first_violation, b.first_violation);
  EXPECT_EQ(a.events, b.events);
  if (!other_seed) return;
  const sim::SimResult other = run(*other_seed, /*keep_trace=*/false);
  EXPECT_NE(other.trace_hash, a.trace_hash);
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_SIM_SEEDS_H_
