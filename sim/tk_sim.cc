// tk_sim: the fleet simulator's command line (docs/simulation.md).
//
//     tk_sim leased [--seed S] [--seeds N] [--nodes N] [--uncoupled]
//                   [--trace] [--shrink] [configuration flags]
//     tk_sim concurrency [--seed S] [--seeds N] [--nodes N] [--no-handoff]
//                   [--no-fencing] [--trace] [--shrink] [configuration flags]
//
// Runs the leased-fleet scenario (sim/leased_fleet.h) for seeds S .. S+N-1
// (default 1 seed), each with the faults `swarm_config` draws from it, or
// with the configuration the flags give (--keys, --limit, --window-ms,
// --batch, --rate, --duration-ms, --delay-us, --sigma, --loss,
// --partitions 0|1, --crashes 0|1, --clock-skew 0|1, --timeout-ms; any of
// them replaces the drawn configuration by the defaults plus the flags).
// --uncoupled runs the mutation that carries credits past their window.
// --bursts or --diurnal changes how requests arrive (sim/windowed_fleet.h;
// Poisson otherwise), and --failover fails the store over once to a replica
// 5 ms behind, here and in the federated, admission and strict scenarios;
// --restart restarts the store once with all its state lost.
// Prints one line per failing seed with the command that replays it, then
// a summary: seeds, simulated time, events, failures, events per second.
// --trace prints the run's trace (one seed); --shrink prints a smaller
// configuration that still fails (one failing seed). Exit status: 0 when no
// seed violated the bound (or, where a scenario promises it, fell below its
// liveness floor), 1 when one did, 2 for bad arguments.
//
// `concurrency` runs the distributed-concurrency scenario
// (sim/concurrency_fleet.h) the same way: its configuration flags are
// --limit, --rate, --service-ms, --duration-ms, --delay-us, --loss,
// --partitions 0|1, --crashes 0|1, --drift-ppm; --no-handoff and
// --no-fencing run its mutations.
//
// `federated` runs the federated-fleet scenario (sim/federated_fleet.h):
// the leased fleet's configuration flags plus --regions R, --escrow 0|1
// and --regional-only 0|1; --clocks-behind runs its mutation (process
// clocks behind the coordinator's, the bound's stated assumption broken).
//
// `admission` runs the unified-admission scenario (sim/admission_fleet.h):
// the leased fleet's configuration flags plus --cost-budget U, --max-cost
// C, --max-inflight N and --service-ms M; --uncoupled runs its mutation
// (both leased axes carry credits past their window).
//
// `strict` runs the strict-fleet scenario (sim/strict_fleet.h): the leased
// fleet's configuration flags (--batch unused); --stale-now runs its
// mutation (nodes name their own clock's `now`, and a check that reaches
// the store after its window's key expired counts that window afresh).
// --cached-deny runs the nodes in the two-tier cached-deny mode, and
// --slow-clocks (with it) its mutation: node clocks at half speed.
//
// `fair` runs the federated weighted-fair escrow scenario
// (sim/fair_fleet.h): --nodes is the regions, --keys the tenants per
// region, the leased fleet's other configuration flags (--batch and
// --timeout-ms unused) plus --quantum Q and --weight-seed S;
// --greedy-region runs its mutation (region 0 reports twice its weight).
//
// `rlqs` runs the quota door's fleet (sim/rlqs_fleet.h; built with the
// server): --nodes is the servers; its configuration flags are --clients,
// --budgets 1|2, --limit, --fill-s, --ttl-s, --heartbeat-ms, --report-ms,
// --demand, --shifts, --onoff-ms, --onoff-together 0|1, --abandon-idle-ms,
// --duration-ms, --delay-us, --sigma, --loss, --stream-delay-us,
// --reply-loss, --breaks (per minute), --partitions 0|1, --crashes 0|1,
// --drift-ppm; --no-ttl-accounting, --no-fencing and --no-handoff run its
// mutations, --allow-without-assignment its clients against the bound's
// assumption A4.
//
// `--fail propagate|open|closed` (leased and strict) sets what the nodes
// do when the store cannot answer; the swarm draws it per seed.
// --policy-dropped (leased and strict) is the fail policy's mutation: the
// engines are built without the policy the checker judges.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "sim/admission_fleet.h"
#include "sim/concurrency_fleet.h"
#include "sim/fair_fleet.h"
#include "sim/federated_fleet.h"
#include "sim/leased_fleet.h"
#include "sim/strict_fleet.h"
#ifdef THROTTLEKIT_SIM_RLQS
#include "sim/rlqs_fleet.h"
#endif

namespace {

int usage(const char* problem) {
  std::fprintf(
      stderr,
      "tk_sim: %s\nusage: tk_sim "
      "leased|concurrency|federated|admission|strict|fair|rlqs "
      "[--seed "
      "S] [--seeds N] "
      "[--nodes N] [--uncoupled] [--trace] [--shrink] [--keys K] "
      "[--limit L] [--window-ms W] [--batch B] [--rate R] "
      "[--duration-ms D] [--delay-us U] [--sigma S] [--loss P] "
      "[--partitions 0|1] [--crashes 0|1] [--clock-skew 0|1] "
      "[--timeout-ms T] [--bursts|--diurnal] [--failover|--restart] "
      "[--fail propagate|open|closed] [--policy-dropped] [--cached-deny] "
      "[--slow-clocks]\n",
      problem);
  return 2;
}

// The flags every scenario takes: --seed, --seeds, --nodes (with a value)
// and --trace. `take` consumes one of them, or says it is another.
struct Common {
  uint64_t seed = 1;
  uint64_t seeds = 1;
  int nodes;
  bool want_trace = false;
  // --bursts or --diurnal (the windowed scenarios); Poisson without.
  throttlekit::sim::Workload workload = throttlekit::sim::Workload::kPoisson;
  // --failover (the windowed scenarios): one store failover.
  bool failover = false;
  // --restart (the windowed scenarios): one coordinator restart that loses
  // all its state.
  bool restart = false;

  // True when `flag` (and, unless a switch, `value`) was one of them;
  // `*bad` when its value was wrong (or a second workload, or both store
  // faults, were named).
  bool take(const std::string& flag, const char* value, bool* bad) {
    if (flag == "--trace") {
      want_trace = true;
      return true;
    }
    if (flag == "--failover" || flag == "--restart") {
      *bad = failover || restart;
      (flag == "--failover" ? failover : restart) = true;
      return true;
    }
    if (flag == "--bursts" || flag == "--diurnal") {
      using throttlekit::sim::Workload;
      *bad = workload != Workload::kPoisson;
      workload = flag == "--bursts" ? Workload::kBursts : Workload::kDiurnal;
      return true;
    }
    if (flag != "--seed" && flag != "--seeds" && flag != "--nodes") {
      return false;
    }
    int64_t n = 0;
    *bad = value == nullptr || !absl::SimpleAtoi(value, &n) || n < 0 ||
           (flag != "--seed" && n == 0) || (flag == "--nodes" && n > 100'000);
    if (*bad) return true;
    if (flag == "--seed") seed = static_cast<uint64_t>(n);
    if (flag == "--seeds") seeds = static_cast<uint64_t>(n);
    if (flag == "--nodes") nodes = static_cast<int>(n);
    return true;
  }
};

// A flag's value read as a number both ways.
struct Value {
  std::string text;
  int64_t n = 0;
  double d = 0;
  bool is_int = false;
  bool is_double = false;
};

// A configuration flag: its name, and what takes its value into the
// configuration (false when the value is bad: then nothing is set).
struct ConfigFlag {
  std::string name;
  std::function<bool(const Value&)> take;
};
using ConfigFlags = std::vector<ConfigFlag>;

// An integer in [lo, hi] into `field`.
template <class Int>
ConfigFlag int_flag(const char* name, Int& field, int64_t lo,
                    int64_t hi = std::numeric_limits<int64_t>::max()) {
  return {name, [&field, lo, hi](const Value& v) {
            if (!v.is_int || v.n < lo || v.n > hi) return false;
            field = static_cast<Int>(v.n);
            return true;
          }};
}

// 0 or 1 into `field`.
ConfigFlag bool_flag(const char* name, bool& field) {
  return {name, [&field](const Value& v) {
            if (!v.is_int || (v.n != 0 && v.n != 1)) return false;
            field = v.n == 1;
            return true;
          }};
}

// The values a real number flag takes: above 0, at least 0, or in [0, 1).
// The ranges of real flags: (0, inf), [0, inf), [0, 1), and rates per
// second or minute, (0, 1e6] and [0, 1e6] (a run's events grow with them:
// an absurd rate would exhaust memory, not simulate anything).
enum class Real { kPositive, kNonNegative, kProbability, kRate, kRateOrZero };
constexpr double kMaxRate = 1e6;

// A real number in `range` into `field`.
ConfigFlag real_flag(const char* name, double& field, Real range) {
  return {
      name, [&field, range](const Value& v) {
        const bool positive = range == Real::kPositive || range == Real::kRate;
        const bool rate = range == Real::kRate || range == Real::kRateOrZero;
        const bool ok = v.is_double && (positive ? v.d > 0 : v.d >= 0) &&
                        (range != Real::kProbability || v.d < 1) &&
                        (!rate || v.d <= kMaxRate);
        if (ok) field = v.d;
        return ok;
      }};
}

// `flags`, then `more`.
ConfigFlags plus(ConfigFlags flags, std::initializer_list<ConfigFlag> more) {
  flags.insert(flags.end(), more);
  return flags;
}

// Reads argv[2..]: the switches (flags without a value) set their bool,
// the common flags go to `common`, and every other flag with its value to
// the one of `flags` it names (and sets `*explicit_config`); an unknown
// flag or a bad value is a usage error. Returns 0, or the exit status of a
// usage error.
int parse_args(int argc, char** argv, Common& common,
               const std::vector<std::pair<std::string, bool*>>& switches,
               bool* explicit_config, const ConfigFlags& flags) {
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    bool is_switch = false;
    for (const auto& [name, on] : switches) {
      if (flag == name) {
        *on = true;
        is_switch = true;
      }
    }
    if (is_switch) continue;
    const bool valueless = flag == "--trace" || flag == "--bursts" ||
                           flag == "--diurnal" || flag == "--failover" ||
                           flag == "--restart";
    const char* v = valueless || i + 1 >= argc ? nullptr : argv[i + 1];
    bool bad = false;
    if (common.take(flag, v, &bad)) {
      if (bad) {
        return usage(valueless ? "--bursts and --diurnal exclude each other, "
                                 "as do --failover and --restart"
                               : ("bad value for " + flag).c_str());
      }
      if (!valueless) ++i;
      continue;
    }
    if (v == nullptr) return usage((flag + " needs a value").c_str());
    ++i;
    Value value;
    value.text = v;
    value.is_int = absl::SimpleAtoi(v, &value.n);
    value.is_double = absl::SimpleAtod(v, &value.d);
    *explicit_config = true;
    const auto named =
        std::find_if(flags.begin(), flags.end(),
                     [&](const ConfigFlag& f) { return f.name == flag; });
    if (named == flags.end() || !named->take(value)) {
      return usage(("bad flag or value: " + flag + " " + v).c_str());
    }
  }
  return 0;
}

// The configuration flags of every fleet with a configuration of its own
// (leased, concurrency, rlqs): --duration-ms, --delay-us, --loss,
// --partitions 0|1, --crashes 0|1, and --drift-ppm (0 to 500,000) where
// its clocks drift.
template <class Config>
ConfigFlags fleet_flags(Config& given) {
  ConfigFlags flags = {
      int_flag("--duration-ms", given.duration_ms, 1),
      real_flag("--delay-us", given.network.median_delay_us, Real::kPositive),
      real_flag("--loss", given.network.loss, Real::kProbability),
      bool_flag("--partitions", given.partitions),
      bool_flag("--crashes", given.crashes),
  };
  if constexpr (requires { given.drift_ppm; }) {
    flags.push_back(int_flag("--drift-ppm", given.drift_ppm, 0, 500'000));
  }
  return flags;
}

// The leased fleet's configuration flags (those of the scenarios built on
// it too): `fleet_flags`, --keys, --limit, --window-ms, --batch, --rate,
// --sigma, --clock-skew 0|1, --timeout-ms.
ConfigFlags leased_flags(throttlekit::sim::LeasedFleetConfig& given) {
  return plus(
      fleet_flags(given),
      {
          int_flag("--keys", given.keys, 1, 1'000'000),
          int_flag("--limit", given.limit, 1),
          int_flag("--window-ms", given.window_ms, 1),
          int_flag("--batch", given.batch, 1),
          real_flag("--rate", given.requests_per_sec_per_node, Real::kRate),
          real_flag("--sigma", given.network.delay_sigma, Real::kNonNegative),
          bool_flag("--clock-skew", given.clock_skew),
          int_flag("--timeout-ms", given.timeout_ms, 1),
      });
}

// --fail propagate|open|closed (the leased and strict fleets: what the
// nodes do when the store cannot answer).
ConfigFlag fail_flag(throttlekit::FailPolicy::Mode& mode) {
  return {
      "--fail", [&mode](const Value& v) {
        using throttlekit::FailPolicy;
        for (const FailPolicy::Mode m :
             {FailPolicy::kPropagate, FailPolicy::kOpen, FailPolicy::kClosed}) {
          if (v.text == throttlekit::sim::fail_mode_name(m)) {
            mode = m;
            return true;
          }
        }
        return false;
      }};
}

// One seed's run: what it measured, the command that replays it, and its
// simulated length.
struct SeedRun {
  throttlekit::sim::SimResult result;
  std::string replay;
  int64_t duration_ms = 0;
};

// Runs `run(s)` for seeds `seed` .. `seed + seeds - 1`: prints the trace
// when asked, each failing seed (the first five) with its replay line,
// `on_failure(s)` for the first failing seed, and the summary line. The
// exit status: 1 if any seed failed, else 0.
int run_seeds(const char* scenario, uint64_t seed, uint64_t seeds,
              bool want_trace, const std::function<SeedRun(uint64_t)>& run,
              const std::function<void(uint64_t)>& on_failure) {
  int64_t failures = 0;
  uint64_t events = 0;
  int64_t simulated_ms = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t s = seed; s < seed + seeds; ++s) {
    const SeedRun r = run(s);
    events += r.result.events;
    simulated_ms += r.duration_ms;
    if (want_trace) {
      for (const std::string& line : r.result.trace) {
        std::printf("%s\n", line.c_str());
      }
    }
    if (r.result.violations == 0 && r.result.liveness_failures == 0) continue;
    ++failures;
    if (failures <= 5) {
      std::printf("seed %llu FAILED: %s\n  replay: %s\n",
                  static_cast<unsigned long long>(s),
                  r.result.violations > 0
                      ? r.result.first_violation.c_str()
                      : r.result.first_liveness_failure.c_str(),
                  r.replay.c_str());
    }
    if (failures == 1) on_failure(s);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf(
      "tk_sim %s: %llu seeds, %lld simulated s, %llu events, %lld "
      "failures, %.0f events/s (one core)\n",
      scenario, static_cast<unsigned long long>(seeds),
      static_cast<long long>(simulated_ms / 1000),
      static_cast<unsigned long long>(events), static_cast<long long>(failures),
      events / seconds);
  return failures > 0 ? 1 : 0;
}

// The functions of a scenario whose configuration is `Config`.
template <class Config>
struct Scenario {
  const char* name;
  Config (*swarm)(uint64_t seed, int nodes);
  throttlekit::sim::SimResult (*run)(uint64_t seed, const Config& config,
                                     bool keep_trace);
  std::string (*replay)(uint64_t seed, const Config& config);
};

template <class Config>
int64_t duration_of(const Config& c) {
  if constexpr (requires { c.fleet.duration_ms; }) {
    return c.fleet.duration_ms;
  } else {
    return c.duration_ms;
  }
}

// Runs the seeds of `scenario` (`run_seeds`): each seed's configuration is
// `given` when flags gave one, else the one `swarm` draws; `mutate(c)`
// then applies the mutation flags. `on_failure(seed, config)`, when given,
// runs for the first failing seed.
template <class Config, class Mutate>
int run_scenario(
    const Scenario<Config>& scenario, const Common& common,
    bool explicit_config, const Config& given, Mutate mutate,
    const std::type_identity_t<std::function<void(uint64_t, const Config&)>>&
        on_failure = {}) {
  const auto config_of = [&](uint64_t s) {
    Config c = explicit_config ? given : scenario.swarm(s, common.nodes);
    mutate(c);
    return c;
  };
  return run_seeds(
      scenario.name, common.seed, common.seeds, common.want_trace,
      [&](uint64_t s) {
        const Config c = config_of(s);
        return SeedRun{scenario.run(s, c, common.want_trace),
                       scenario.replay(s, c), duration_of(c)};
      },
      [&](uint64_t s) {
        if (on_failure) on_failure(s, config_of(s));
      });
}

// The command line's workload and store faults, on the leased fleet of a
// scenario built on it (a scenario that takes neither rejected them
// before, so they are the defaults there).
void apply_common(const Common& common,
                  throttlekit::sim::LeasedFleetConfig& fleet) {
  fleet.workload = common.workload;
  fleet.store_failover = common.failover;
  fleet.store_restart = common.restart;
}

// The usage error of a scenario that takes none of the windowed fleets'
// workloads and store faults when `common` names one; else 0.
int refuse_windowed_flags(const Common& common, const char* scenario) {
  if (common.workload == throttlekit::sim::Workload::kPoisson &&
      !common.failover && !common.restart) {
    return 0;
  }
  return usage((std::string("the ") + scenario +
                " scenario takes no --bursts, --diurnal, --failover or "
                "--restart")
                   .c_str());
}

// What runs for a scenario's first failing seed: with --shrink (`want`),
// prints the replay line of the smaller configuration `shrink` finds.
template <class Config>
std::function<void(uint64_t, const Config&)> print_shrunk(
    bool want, Config (*shrink)(uint64_t, Config, int),
    std::string (*replay)(uint64_t, const Config&)) {
  return [want, shrink, replay](uint64_t seed, const Config& c) {
    if (!want) return;
    std::printf("  shrunk: %s\n", replay(seed, shrink(seed, c, 8)).c_str());
  };
}

int run_concurrency(int argc, char** argv) {
  using throttlekit::sim::ConcurrencyFleetConfig;
  Common common{.nodes = 5};
  bool no_handoff = false, no_fencing = false, want_shrink = false;
  bool explicit_config = false;
  ConcurrencyFleetConfig given;
  if (int rc = parse_args(
          argc, argv, common,
          {{"--no-handoff", &no_handoff},
           {"--no-fencing", &no_fencing},
           {"--shrink", &want_shrink}},
          &explicit_config,
          plus(fleet_flags(given),
               {
                   int_flag("--limit", given.local_limit, 1, 100'000),
                   real_flag("--rate", given.arrivals_per_sec_per_node,
                             Real::kRate),
                   real_flag("--service-ms", given.mean_service_ms,
                             Real::kPositive),
               }));
      rc != 0) {
    return rc;
  }
  if (int rc = refuse_windowed_flags(common, "concurrency"); rc != 0) {
    return rc;
  }
  given.nodes = common.nodes;
  return run_scenario(
      Scenario<ConcurrencyFleetConfig>{
          "concurrency", throttlekit::sim::swarm_concurrency_config,
          throttlekit::sim::run_concurrency_fleet,
          throttlekit::sim::concurrency_replay_command},
      common, explicit_config, given,
      [&](ConcurrencyFleetConfig& c) {
        c.handoff = !no_handoff;
        c.self_fencing = !no_fencing;
      },
      print_shrunk<ConcurrencyFleetConfig>(
          want_shrink, throttlekit::sim::shrink_concurrency,
          throttlekit::sim::concurrency_replay_command));
}

int run_admission(int argc, char** argv) {
  using throttlekit::sim::AdmissionFleetConfig;
  Common common{.nodes = 8};
  bool uncoupled = false;
  bool explicit_config = false;
  AdmissionFleetConfig given;
  if (int rc = parse_args(
          argc, argv, common, {{"--uncoupled", &uncoupled}}, &explicit_config,
          plus(leased_flags(given.fleet),
               {
                   int_flag("--cost-budget", given.cost_budget, 1),
                   int_flag("--max-cost", given.max_cost, 1, 1'000'000),
                   int_flag("--max-inflight", given.max_inflight, 1, 1'000'000),
                   real_flag("--service-ms", given.mean_service_ms,
                             Real::kPositive),
               }));
      rc != 0) {
    return rc;
  }
  if (given.fleet.batch > given.fleet.limit) {
    return usage("--batch must be <= --limit");
  }
  given.fleet.nodes = common.nodes;
  return run_scenario(
      Scenario<AdmissionFleetConfig>{
          "admission", throttlekit::sim::swarm_admission_config,
          throttlekit::sim::run_admission_fleet,
          throttlekit::sim::admission_replay_command},
      common, explicit_config, given, [&](AdmissionFleetConfig& c) {
        c.fleet.window_coupled = !uncoupled;
        apply_common(common, c.fleet);
      });
}

int run_federated(int argc, char** argv) {
  using throttlekit::sim::FederatedFleetConfig;
  Common common{.nodes = 9};
  bool clocks_behind = false;
  bool explicit_config = false;
  FederatedFleetConfig given;
  if (int rc =
          parse_args(argc, argv, common, {{"--clocks-behind", &clocks_behind}},
                     &explicit_config,
                     plus(leased_flags(given.fleet),
                          {
                              int_flag("--regions", given.regions, 1, 64),
                              bool_flag("--escrow", given.escrow),
                              bool_flag("--regional-only", given.regional_only),
                          }));
      rc != 0) {
    return rc;
  }
  if (given.fleet.batch > given.fleet.limit) {
    return usage("--batch must be <= --limit");
  }
  if (given.regional_only && !given.escrow) {
    return usage("--regional-only 1 needs --escrow 1");
  }
  given.fleet.nodes = common.nodes;
  return run_scenario(
      Scenario<FederatedFleetConfig>{
          "federated", throttlekit::sim::swarm_federated_config,
          throttlekit::sim::run_federated_fleet,
          throttlekit::sim::federated_replay_command},
      common, explicit_config, given, [&](FederatedFleetConfig& c) {
        c.clocks_behind = clocks_behind;
        apply_common(common, c.fleet);
      });
}

int run_fair(int argc, char** argv) {
  using throttlekit::sim::FairFleetConfig;
  Common common{.nodes = 3};
  bool greedy = false;
  bool explicit_config = false;
  FairFleetConfig given;
  if (int rc = parse_args(
          argc, argv, common, {{"--greedy-region", &greedy}}, &explicit_config,
          plus(leased_flags(given.fleet),
               {
                   int_flag("--quantum", given.quantum, 0),
                   int_flag("--weight-seed", given.weight_seed, 0),
               }));
      rc != 0) {
    return rc;
  }
  if (common.failover || common.restart) {
    return usage("the fair scenario takes no --failover or --restart");
  }
  if (given.quantum > given.fleet.limit) {
    return usage("--quantum must be <= --limit");
  }
  given.fleet.nodes = common.nodes;
  return run_scenario(
      Scenario<FairFleetConfig>{"fair", throttlekit::sim::swarm_fair_config,
                                throttlekit::sim::run_fair_fleet,
                                throttlekit::sim::fair_replay_command},
      common, explicit_config, given, [&](FairFleetConfig& c) {
        c.greedy_region = greedy;
        apply_common(common, c.fleet);
      });
}

int run_strict(int argc, char** argv) {
  using throttlekit::sim::StrictFleetConfig;
  Common common{.nodes = 8};
  bool stale_now = false, cached_deny = false, slow_clocks = false;
  bool policy_dropped = false;
  bool explicit_config = false;
  StrictFleetConfig given;
  if (int rc = parse_args(
          argc, argv, common,
          {{"--stale-now", &stale_now},
           {"--policy-dropped", &policy_dropped},
           {"--cached-deny", &cached_deny},
           {"--slow-clocks", &slow_clocks}},
          &explicit_config,
          plus(leased_flags(given.fleet), {fail_flag(given.fleet.fail_mode)}));
      rc != 0) {
    return rc;
  }
  if (slow_clocks && !cached_deny) {
    return usage(
        "--slow-clocks is the cached-deny mode's mutation: add "
        "--cached-deny");
  }
  given.fleet.nodes = common.nodes;
  return run_scenario(
      Scenario<StrictFleetConfig>{"strict",
                                  throttlekit::sim::swarm_strict_config,
                                  throttlekit::sim::run_strict_fleet,
                                  throttlekit::sim::strict_replay_command},
      common, explicit_config, given, [&](StrictFleetConfig& c) {
        c.stale_now = stale_now;
        if (stale_now) c.store_ttl_slack_ms = 0;  // the mutation (see header)
        c.fleet.policy_dropped = policy_dropped;
        c.cached_deny = cached_deny;
        c.slow_clocks = slow_clocks;
        apply_common(common, c.fleet);
      });
}

#ifdef THROTTLEKIT_SIM_RLQS
int run_rlqs(int argc, char** argv) {
  using throttlekit::sim::RlqsFleetConfig;
  Common common{.nodes = 3};
  bool no_ttl = false, no_fencing = false, no_handoff = false;
  bool allow_unassigned = false, want_shrink = false, explicit_config = false;
  RlqsFleetConfig given;
  if (int rc = parse_args(
          argc, argv, common,
          {{"--no-ttl-accounting", &no_ttl},
           {"--no-fencing", &no_fencing},
           {"--no-handoff", &no_handoff},
           {"--allow-without-assignment", &allow_unassigned},
           {"--shrink", &want_shrink}},
          &explicit_config,
          plus(
              fleet_flags(given),
              {
                  int_flag("--clients", given.clients, 1, 100'000),
                  int_flag("--budgets", given.budgets, 1, 2),
                  int_flag("--limit", given.limit, 1, 1'000'000),
                  int_flag("--fill-s", given.fill_interval_s, 1, 86'400),
                  int_flag("--ttl-s", given.ttl_s, 2, 3'600),
                  int_flag("--heartbeat-ms", given.heartbeat_ms, 10, 60'000),
                  int_flag("--report-ms", given.report_period_ms, 1, 3'600'000),
                  real_flag("--demand", given.demand, Real::kRateOrZero),
                  int_flag("--shifts", given.shifts, 0, 1000),
                  int_flag("--onoff-ms", given.onoff_ms, 0, 86'400'000),
                  bool_flag("--onoff-together", given.onoff_together),
                  int_flag("--abandon-idle-ms", given.abandon_idle_ms, 0,
                           86'400'000),
                  real_flag("--sigma", given.network.delay_sigma,
                            Real::kNonNegative),
                  int_flag("--stream-delay-us", given.stream_delay_us, 0,
                           3'600'000'000),
                  real_flag("--reply-loss", given.reply_loss,
                            Real::kProbability),
                  real_flag("--breaks", given.breaks_per_min,
                            Real::kRateOrZero),
              }));
      rc != 0) {
    return rc;
  }
  if (int rc = refuse_windowed_flags(common, "rlqs"); rc != 0) return rc;
  given.servers = common.nodes;
  return run_scenario(
      Scenario<RlqsFleetConfig>{"rlqs", throttlekit::sim::swarm_rlqs_config,
                                throttlekit::sim::run_rlqs_fleet,
                                throttlekit::sim::rlqs_replay_command},
      common, explicit_config, given,
      [&](RlqsFleetConfig& c) {
        c.ttl_accounting = !no_ttl;
        c.self_fencing = !no_fencing;
        c.handoff = !no_handoff;
        c.allow_without_assignment = allow_unassigned;
      },
      print_shrunk<RlqsFleetConfig>(want_shrink, throttlekit::sim::shrink_rlqs,
                                    throttlekit::sim::rlqs_replay_command));
}
#endif

// The leased scenario's replay line (`replay_command`'s own scenario).
std::string leased_replay(uint64_t seed,
                          const throttlekit::sim::LeasedFleetConfig& config) {
  return throttlekit::sim::replay_command(seed, config);
}

int run_leased(int argc, char** argv) {
  using throttlekit::sim::LeasedFleetConfig;
  Common common{.nodes = 8};
  bool uncoupled = false, want_shrink = false, policy_dropped = false;
  bool explicit_config = false;
  LeasedFleetConfig given;
  if (int rc =
          parse_args(argc, argv, common,
                     {{"--uncoupled", &uncoupled},
                      {"--shrink", &want_shrink},
                      {"--policy-dropped", &policy_dropped}},
                     &explicit_config,
                     plus(leased_flags(given), {fail_flag(given.fail_mode)}));
      rc != 0) {
    return rc;
  }
  if (given.batch > given.limit) return usage("--batch must be <= --limit");
  given.nodes = common.nodes;
  return run_scenario(
      Scenario<LeasedFleetConfig>{"leased", throttlekit::sim::swarm_config,
                                  throttlekit::sim::run_leased_fleet,
                                  leased_replay},
      common, explicit_config, given,
      [&](LeasedFleetConfig& c) {
        c.window_coupled = !uncoupled;
        c.policy_dropped = policy_dropped;
        apply_common(common, c);
      },
      print_shrunk<LeasedFleetConfig>(want_shrink, throttlekit::sim::shrink,
                                      leased_replay));
}

}  // namespace

int main(int argc, char** argv) {
  static constexpr struct {
    const char* name;
    int (*run)(int, char**);
  } kScenarios[] = {
      {"leased", run_leased},       {"concurrency", run_concurrency},
      {"federated", run_federated}, {"admission", run_admission},
      {"strict", run_strict},       {"fair", run_fair},
#ifdef THROTTLEKIT_SIM_RLQS
      {"rlqs", run_rlqs},
#endif
  };
  for (const auto& scenario : kScenarios) {
    if (argc >= 2 && std::strcmp(argv[1], scenario.name) == 0) {
      return scenario.run(argc, argv);
    }
  }
  return usage(
      "the scenario must be `leased`, `concurrency`, `federated`, "
      "`admission`, `strict`, `fair` or `rlqs`");
}
