// sim/shrink.h
//
// Provides `shrink_greedy`: the simulator's shrinker (docs/simulation.md,
// "Replay and shrink"). Given a configuration on which a seed fails, it
// tries each step (turn a fault off, calm the network, halve the fleet or
// the run) in turn, keeps the smaller configuration whenever the seed
// still fails on it, and repeats the pass while one changed something, at
// most `rounds` passes. `shrink_seed` is the same for a scenario's run
// function and replay line.
//
// Thread-safety: none (it runs the simulation on the calling thread).

#ifndef THROTTLEKIT_SIM_SHRINK_H_
#define THROTTLEKIT_SIM_SHRINK_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace throttlekit::sim {

// `fails(c)`: the seed still fails on `c`; `same(a, b)`: a step changed
// nothing (then it is not run). `failing` must fail.
template <class Config, class Fails, class Same>
Config shrink_greedy(Config failing,
                     const std::vector<std::function<void(Config&)>>& steps,
                     Fails fails, Same same, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    bool changed = false;
    for (const auto& step : steps) {
      Config smaller = failing;
      step(smaller);
      if (same(smaller, failing)) continue;
      if (fails(smaller)) {
        failing = smaller;
        changed = true;
      }
    }
    if (!changed) break;
  }
  return failing;
}

// `shrink_greedy` for `seed` of a scenario: a configuration fails when
// `run(seed, c, false)` (a `SimResult`, sim/world.h) counts a violation,
// and a step changed nothing when `replay(seed, c)` reads the same.
template <class Config, class Run, class Replay>
Config shrink_seed(uint64_t seed, Config failing,
                   const std::vector<std::function<void(Config&)>>& steps,
                   Run run, Replay replay, int rounds) {
  return shrink_greedy(
      std::move(failing), steps,
      [&](const Config& c) { return run(seed, c, false).violations > 0; },
      [&](const Config& a, const Config& b) {
        return replay(seed, a) == replay(seed, b);
      },
      rounds);
}

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_SHRINK_H_
