// sim/network.h
//
// Provides `Network`: the simulated links between each node and the
// coordinator (docs/simulation.md, "Faults"). A message takes a lognormal
// delay (median and shape per run; a wide shape reorders messages), is lost
// with a fixed probability, and is dropped while its node is partitioned
// from the coordinator (at its sending or its delivery instant).
//
// Thread-safety: none (the simulation's one thread).

#ifndef THROTTLEKIT_SIM_NETWORK_H_
#define THROTTLEKIT_SIM_NETWORK_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sim/random.h"

namespace throttlekit::sim {

struct NetworkOptions {
  double median_delay_us = 300;  // one way
  double delay_sigma = 0.5;      // lognormal shape
  double loss = 0;               // probability that a message is lost
};

class Network {
 public:
  Network(NetworkOptions options, int nodes)
      : options_(options), partitions_(static_cast<size_t>(nodes)) {}

  // The delay of one message of `node` sent at `now_us`, or nothing when it
  // is lost (drawn, or the node is cut off then).
  std::optional<int64_t> delay(int node, int64_t now_us, Rng& rng) const {
    if (cut(node, now_us)) return std::nullopt;
    if (options_.loss > 0 && rng.uniform() <= options_.loss) {
      return std::nullopt;
    }
    return static_cast<int64_t>(
        rng.lognormal(options_.median_delay_us, options_.delay_sigma));
  }
  // True while `node` is partitioned from the coordinator at `at_us`.
  bool cut(int node, int64_t at_us) const {
    for (const auto& [from, until] : partitions_[static_cast<size_t>(node)]) {
      if (at_us >= from && at_us < until) return true;
    }
    return false;
  }
  // Cuts `node` off from `from_us` until `until_us`.
  void partition(int node, int64_t from_us, int64_t until_us) {
    partitions_[static_cast<size_t>(node)].emplace_back(from_us, until_us);
  }

 private:
  NetworkOptions options_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> partitions_;
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_NETWORK_H_
