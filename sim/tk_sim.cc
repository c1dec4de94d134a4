// tk_sim: the fleet simulator's command line (docs/simulation.md).
//
//     tk_sim leased [--seed S] [--seeds N] [--nodes N] [--uncoupled]
//                   [--trace] [--shrink] [configuration flags]
//
// Runs the leased-fleet scenario (sim/leased_fleet.h) for seeds S .. S+N-1
// (default 1 seed), each with the faults `swarm_config` draws from it, or
// with the configuration the flags give (--keys, --limit, --window-ms,
// --batch, --rate, --duration-ms, --delay-us, --sigma, --loss,
// --partitions 0|1, --crashes 0|1, --clock-skew 0|1, --timeout-ms; any of
// them replaces the drawn configuration by the defaults plus the flags).
// --uncoupled runs the mutation that carries credits past their window.
// Prints one line per failing seed with the command that replays it, then
// a summary: seeds, simulated time, events, failures, events per second.
// --trace prints the run's trace (one seed); --shrink prints a smaller
// configuration that still fails (one failing seed). Exit status: 0 when no
// seed violated the bound, 1 when one did, 2 for bad arguments.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "sim/leased_fleet.h"

namespace {

int usage(const char* problem) {
  std::fprintf(stderr,
               "tk_sim: %s\nusage: tk_sim leased [--seed S] [--seeds N] "
               "[--nodes N] [--uncoupled] [--trace] [--shrink] [--keys K] "
               "[--limit L] [--window-ms W] [--batch B] [--rate R] "
               "[--duration-ms D] [--delay-us U] [--sigma S] [--loss P] "
               "[--partitions 0|1] [--crashes 0|1] [--clock-skew 0|1] "
               "[--timeout-ms T]\n",
               problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using throttlekit::sim::LeasedFleetConfig;
  if (argc < 2 || std::strcmp(argv[1], "leased") != 0) {
    return usage("the scenario must be `leased`");
  }
  uint64_t seed = 1, seeds = 1;
  int nodes = 8;
  bool uncoupled = false, want_trace = false, want_shrink = false;
  bool explicit_config = false;
  LeasedFleetConfig given;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--uncoupled") {
      uncoupled = true;
      continue;
    }
    if (flag == "--trace") {
      want_trace = true;
      continue;
    }
    if (flag == "--shrink") {
      want_shrink = true;
      continue;
    }
    if (i + 1 >= argc) return usage((flag + " needs a value").c_str());
    const char* v = argv[++i];
    int64_t n = 0;
    double d = 0;
    const bool is_int = absl::SimpleAtoi(v, &n);
    const bool is_double = absl::SimpleAtod(v, &d);
    const auto need = [&](bool ok, bool positive) {
      return ok && (!positive || (is_int ? n > 0 : d > 0));
    };
    if (flag == "--seed" && need(is_int, false) && n >= 0) {
      seed = static_cast<uint64_t>(n);
    } else if (flag == "--seeds" && need(is_int, true)) {
      seeds = static_cast<uint64_t>(n);
    } else if (flag == "--nodes" && need(is_int, true) && n <= 100'000) {
      nodes = static_cast<int>(n);
    } else {
      explicit_config = true;
      if (flag == "--keys" && need(is_int, true) && n <= 1'000'000) {
        given.keys = static_cast<int>(n);
      } else if (flag == "--limit" && need(is_int, true)) {
        given.limit = n;
      } else if (flag == "--window-ms" && need(is_int, true)) {
        given.window_ms = n;
      } else if (flag == "--batch" && need(is_int, true)) {
        given.batch = n;
      } else if (flag == "--rate" && need(is_double, true)) {
        given.requests_per_sec_per_node = d;
      } else if (flag == "--duration-ms" && need(is_int, true)) {
        given.duration_ms = n;
      } else if (flag == "--delay-us" && need(is_double, true)) {
        given.network.median_delay_us = d;
      } else if (flag == "--sigma" && need(is_double, false) && d >= 0) {
        given.network.delay_sigma = d;
      } else if (flag == "--loss" && need(is_double, false) && d >= 0 &&
                 d < 1) {
        given.network.loss = d;
      } else if (flag == "--partitions" && is_int && (n == 0 || n == 1)) {
        given.partitions = n == 1;
      } else if (flag == "--crashes" && is_int && (n == 0 || n == 1)) {
        given.crashes = n == 1;
      } else if (flag == "--clock-skew" && is_int && (n == 0 || n == 1)) {
        given.clock_skew = n == 1;
      } else if (flag == "--timeout-ms" && need(is_int, true)) {
        given.timeout_ms = n;
      } else {
        return usage(("bad flag or value: " + flag + " " + v).c_str());
      }
    }
  }
  if (given.batch > given.limit) return usage("--batch must be <= --limit");
  given.nodes = nodes;

  int64_t failures = 0;
  uint64_t events = 0;
  int64_t simulated_ms = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t s = seed; s < seed + seeds; ++s) {
    LeasedFleetConfig c =
        explicit_config ? given : throttlekit::sim::swarm_config(s, nodes);
    c.window_coupled = !uncoupled;
    const throttlekit::sim::SimResult r =
        throttlekit::sim::run_leased_fleet(s, c, want_trace);
    events += r.events;
    simulated_ms += c.duration_ms;
    if (want_trace) {
      for (const std::string& line : r.trace) std::printf("%s\n", line.c_str());
    }
    if (r.violations > 0) {
      ++failures;
      if (failures <= 5) {
        std::printf("seed %llu FAILED: %s\n  replay: %s\n",
                    static_cast<unsigned long long>(s),
                    r.first_violation.c_str(),
                    throttlekit::sim::replay_command(s, c).c_str());
      }
      if (want_shrink && failures == 1) {
        const LeasedFleetConfig small = throttlekit::sim::shrink(s, c);
        std::printf("  shrunk: %s\n",
                    throttlekit::sim::replay_command(s, small).c_str());
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf(
      "tk_sim leased: %llu seeds, %lld simulated s, %llu events, %lld "
      "failures, %.0f events/s (one core)\n",
      static_cast<unsigned long long>(seeds),
      static_cast<long long>(simulated_ms / 1000),
      static_cast<unsigned long long>(events), static_cast<long long>(failures),
      events / seconds);
  return failures > 0 ? 1 : 0;
}
