// sim/random.h
//
// Provides the simulators' seeded random numbers (the fleet simulator,
// sim/, and the concurrency simulator, bench/sim/): xoshiro256** (Blackman and
// Vigna) seeded through splitmix64, with exponential and lognormal draws
// written out here rather than taken from <random>, whose distributions are
// implementation-defined. Same seed, same stream.

#ifndef THROTTLEKIT_SIM_RANDOM_H_
#define THROTTLEKIT_SIM_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <numbers>

namespace throttlekit::sim {

// xoshiro256**. Not thread-safe; one instance per stream.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      s = z ^ (z >> 31);
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in (0, 1]: never 0, so log() below is finite.
  double uniform() {
    return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
  }

  // Exponential with the given mean.
  double exponential(double mean) { return -mean * std::log(uniform()); }

  // Standard normal (Box-Muller, one of the pair).
  double normal() {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    return r * std::cos(2.0 * std::numbers::pi * uniform());
  }

  // Lognormal with the given median and shape sigma: median * exp(sigma * Z).
  double lognormal(double median, double sigma) {
    return median * std::exp(sigma * normal());
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace throttlekit::sim

#endif  // THROTTLEKIT_SIM_RANDOM_H_
