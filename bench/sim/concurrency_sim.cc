// bench/sim/concurrency_sim.cc
//
// The concurrency simulator (issue 5, "Proof: a simulator"): runs
// `AdaptiveConcurrency` (gradient2, AIMD, gradient2 with minRTT
// recalibration) and static limits (too low, optimal, too high) against a
// simulated backend of c servers under open-loop Poisson load, through
// steady 2x overload, a capacity halving and recovery, a slow dependency and
// modest 1.2x overload, then prints markdown tables, checks the issue's
// "Done when" targets and writes SVG plots.
//
// Usage: concurrency_sim [--out-dir=DIR] [--markdown=FILE] [--img-prefix=P]
//   --out-dir     where the SVGs go (default docs/img/concurrency)
//   --markdown    the results page (default DIR/results.md)
//   --img-prefix  how the page refers to the SVGs (default img/concurrency/)
//
// Deterministic: every run prints the same bytes (seeded generators,
// simulated time, no wall-clock input).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adaptive_limiter.h"
#include "simulation.h"
#include "svg_plot.h"

namespace throttlekit::sim {
namespace {

// ---------------------------------------------------------------------------
// The fixed setup. Chosen before any run and not tuned to the results: a
// backend of 32 servers whose service time has a floor-like shape
// (lognormal, median 10 ms, sigma 0.3: p99 / median = 2.0), and clients that
// give up after 100 ms (10x the median).

constexpr int kServers = 32;
constexpr double kMedianMs = 10;
constexpr double kSigma = 0.3;
constexpr double kTimeoutMs = 100;
constexpr double kWarmupS = 5;
// No-load latency: the median service time (the latency of a request that
// never queues, at its median). The p99 target is 3x this.
constexpr double kNoLoadMs = kMedianMs;
constexpr double kP99Bound = 3 * kNoLoadMs;

ServiceModel lognormal_service() {
  ServiceModel m;
  m.kind = ServiceModel::Kind::kLognormal;
  m.median_ms = kMedianMs;
  m.sigma = kSigma;
  return m;
}

Scenario base_scenario(std::string name, std::string title, double load,
                       double duration_s, uint64_t seed) {
  Scenario s;
  s.name = std::move(name);
  s.title = std::move(title);
  s.servers = kServers;
  s.service = lognormal_service();
  s.arrival_rate_per_s = load * s.capacity_per_s();
  s.duration_s = duration_s;
  s.timeout_ms = kTimeoutMs;
  s.seed = seed;
  return s;
}

// ---------------------------------------------------------------------------
// Limiter variants.

using MakeLimiter = std::function<std::unique_ptr<SimLimiter>(SimClock)>;

struct Variant {
  std::string name;
  std::string color;
  bool dashed = false;
  MakeLimiter make;
  int64_t static_limit = 0;  // 0: adaptive
};

MakeLimiter adaptive(AdaptiveConcurrencyOptions o) {
  return [o](SimClock clock) -> std::unique_ptr<SimLimiter> {
    return std::make_unique<AdaptiveSimLimiter>(o, clock);
  };
}

MakeLimiter fixed(int64_t limit) {
  return [limit](SimClock) -> std::unique_ptr<SimLimiter> {
    return std::make_unique<StaticLimiter>(limit);
  };
}

// Library defaults (gradient2, initial 20, min 1, max 1000, window 100,
// tolerance 1.5, smoothing 0.2).
AdaptiveConcurrencyOptions gradient2_options() { return {}; }

AdaptiveConcurrencyOptions aimd_options() {
  AdaptiveConcurrencyOptions o;
  o.law = ConcurrencyLaw::kAimd;
  return o;
}

// Envoy's gradient controller shape: re-measure minRTT every interval (+
// jitter) at a small pinned concurrency. Envoy's defaults are a 60 s
// interval, 15% jitter, 50 requests, min_concurrency 3; the simulated runs
// last 30-60 s, so the interval is 5 s (+ up to 0.5 s), and the pin ends
// after the library's default 20 samples at min_limit 3.
AdaptiveConcurrencyOptions recal_options() {
  AdaptiveConcurrencyOptions o;
  o.min_limit = 3;
  o.recalibration_interval_ns = 5 * kNsPerSec;
  o.recalibration_jitter_ns = kNsPerSec / 2;
  o.recalibration_seed = 7;
  return o;
}

// gradient2 with Envoy's two measurement choices, shown next to the defaults
// (never replacing them); each knob with a reason (docs: "Rounds and a
// frozen baseline").
// - round_samples 32: the law steps on the mean latency of 32 successes, so
//   a gradient compares like with like (a mean against a minimum of means)
//   instead of one sample's service-time spread against the window's
//   extreme; 32 samples bring a round's spread to ~5% here.
// - freeze_rtt_noload with recalibration every 5 s (+ up to 0.5 s) at
//   min_limit 3, 128 successes (4 rounds) per pin: the baseline is measured
//   with the queue drained and cannot creep into a standing queue.
// - tolerance 1.0: with like-for-like statistics the law's fixed point is
//   about L = tolerance * c + sqrt(L) (Little's law: a queue of
//   (tolerance - 1) * c requests plus the sqrt headroom), and the knee is
//   about c + sqrt(c), so 1.0 puts the fixed point at the knee whatever the
//   service distribution. The default 1.5 tolerates a queue of c / 2.
// Chosen by that reasoning and then checked on these scenarios; the grid
// in the same section shows how each knob moves the results.
AdaptiveConcurrencyOptions envoy_options() {
  AdaptiveConcurrencyOptions o = recal_options();
  o.round_samples = 32;
  o.freeze_rtt_noload = true;
  o.tolerance = 1.0;
  o.recalibration_samples = 128;
  o.rtt_window = 128;
  return o;
}

const char* kColorG2 = "#1f77b4";
const char* kColorEnvoy = "#17becf";
const char* kColorAimd = "#ff7f0e";
const char* kColorRecal = "#2ca02c";
const char* kColorLow = "#9467bd";
const char* kColorOpt = "#d62728";
const char* kColorHigh = "#8c564b";
const char* kColorRef = "#7f7f7f";

std::vector<Variant> variants(int64_t static_low, int64_t static_opt,
                              int64_t static_high) {
  std::vector<Variant> v;
  v.push_back({"gradient2", kColorG2, false, adaptive(gradient2_options()), 0});
  v.push_back({"AIMD", kColorAimd, false, adaptive(aimd_options()), 0});
  v.push_back(
      {"gradient2+recal", kColorRecal, false, adaptive(recal_options()), 0});
  v.push_back(
      {"gradient2 envoy", kColorEnvoy, false, adaptive(envoy_options()), 0});
  v.push_back({"static " + std::to_string(static_low) + " (low)", kColorLow,
               true, fixed(static_low), static_low});
  v.push_back({"static " + std::to_string(static_opt) + " (opt)", kColorOpt,
               true, fixed(static_opt), static_opt});
  v.push_back({"static " + std::to_string(static_high) + " (high)", kColorHigh,
               true, fixed(static_high), static_high});
  return v;
}

// ---------------------------------------------------------------------------
// Formatting.

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pct(double fraction) { return fmt("%.1f%%", 100 * fraction); }

struct Window {
  std::string name;
  double from_s, to_s;
};

const char* kSummaryHeader =
    "| limiter | goodput/s | % of capacity | p50 ms | p99 ms | rejected | "
    "dropped | mean limit |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|\n";

std::string summary_row(const std::string& name, const Summary& s,
                        double capacity) {
  return "| " + name + " | " + fmt("%.0f", s.goodput_per_s) + " | " +
         pct(s.goodput_per_s / capacity) + " | " + fmt("%.1f", s.p50_ms) +
         " | " + fmt("%.1f", s.p99_ms) + " | " + pct(s.reject_rate) + " | " +
         pct(s.drop_rate) + " | " + fmt("%.1f", s.mean_limit) + " |\n";
}

// ---------------------------------------------------------------------------
// Time series for plots.

// Samples of the effective limit every `stride` samples.
std::vector<std::pair<double, double>> limit_series(const RunResult& r,
                                                    size_t stride,
                                                    bool effective) {
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < r.samples.size(); i += stride) {
    const LimitSample& s = r.samples[i];
    pts.push_back({static_cast<double>(s.t_ns) / 1e9,
                   effective ? s.effective_limit : s.limit});
  }
  return pts;
}

std::vector<std::pair<double, double>> rtt_noload_series(const RunResult& r,
                                                         size_t stride) {
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < r.samples.size(); i += stride) {
    pts.push_back({static_cast<double>(r.samples[i].t_ns) / 1e9,
                   r.samples[i].rtt_noload_ms});
  }
  return pts;
}

// Goodput (per s) and p99 (ms) in buckets of `bucket_s`, plotted at the
// bucket's midpoint.
void bucket_series(const RunResult& r, double duration_s, double bucket_s,
                   std::vector<std::pair<double, double>>* goodput,
                   std::vector<std::pair<double, double>>* p99) {
  const auto n = static_cast<size_t>(std::ceil(duration_s / bucket_s));
  std::vector<int64_t> good(n, 0);
  std::vector<std::vector<double>> lat(n);
  const auto bucket_ns = static_cast<int64_t>(bucket_s * 1e9);
  for (const RequestRecord& q : r.requests) {
    if (q.settle == Settle::kSuccess) {
      const auto b = static_cast<size_t>(q.settle_ns / bucket_ns);
      if (b < n) ++good[b];
    }
    if (q.settle == Settle::kSuccess || q.settle == Settle::kDropped) {
      const auto b = static_cast<size_t>(q.arrival_ns / bucket_ns);
      if (b < n) {
        lat[b].push_back(static_cast<double>(q.settle_ns - q.arrival_ns) / 1e6);
      }
    }
  }
  for (size_t b = 0; b < n; ++b) {
    const double mid = (static_cast<double>(b) + 0.5) * bucket_s;
    goodput->push_back({mid, static_cast<double>(good[b]) / bucket_s});
    if (!lat[b].empty()) p99->push_back({mid, percentile(lat[b], 0.99)});
  }
}

struct Outputs {
  std::string out_dir = "docs/img/concurrency";
  std::string markdown;
  std::string img_prefix = "img/concurrency/";
  std::string md;  // the page being built
  std::vector<std::string> files;

  void write_svg(const std::string& name, const Plot& plot) {
    const std::string path = out_dir + "/" + name + ".svg";
    std::ofstream f(path, std::ios::binary);
    f << render_svg(plot);
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      std::exit(1);
    }
    files.push_back(path);
  }
  std::string image(const std::string& name, const std::string& alt) const {
    return "![" + alt + "](" + img_prefix + name + ".svg)\n\n";
  }
};

// ---------------------------------------------------------------------------
// The static sweep: the optimal static limit.

struct SweepPoint {
  int64_t limit;
  Summary s;
};

struct SweepResult {
  std::vector<SweepPoint> points;
  double best_goodput = 0;  // max goodput among p99-bounded limits
  int64_t optimum = 0;      // smallest limit within 1% of best_goodput
};

// Runs `scenario` with each static limit and picks the optimum: among the
// limits whose p99 stays within kP99Bound and that drop nothing, the best
// goodput G*; the optimum is the smallest limit reaching 99% of G* (the knee:
// above it, more concurrency only adds queueing delay).
SweepResult sweep(const Scenario& scenario, const std::vector<int64_t>& limits,
                  double from_s) {
  SweepResult out;
  for (int64_t l : limits) {
    const RunResult r = run_scenario(scenario, fixed(l));
    out.points.push_back({l, summarize(r, from_s, scenario.duration_s)});
  }
  for (const SweepPoint& p : out.points) {
    if (p.s.p99_ms <= kP99Bound && p.s.drop_rate == 0) {
      out.best_goodput = std::max(out.best_goodput, p.s.goodput_per_s);
    }
  }
  for (const SweepPoint& p : out.points) {
    if (p.s.p99_ms <= kP99Bound && p.s.drop_rate == 0 &&
        p.s.goodput_per_s >= 0.99 * out.best_goodput) {
      out.optimum = p.limit;
      break;
    }
  }
  return out;
}

std::string sweep_table(const SweepResult& sw, double capacity) {
  std::string t =
      "| static limit | goodput/s | % of capacity | p50 ms | p99 ms | "
      "rejected | dropped |\n|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const SweepPoint& p : sw.points) {
    t += "| " + std::to_string(p.limit) +
         (p.limit == sw.optimum ? " (optimum)" : "") + " | " +
         fmt("%.0f", p.s.goodput_per_s) + " | " +
         pct(p.s.goodput_per_s / capacity) + " | " + fmt("%.1f", p.s.p50_ms) +
         " | " + fmt("%.1f", p.s.p99_ms) + " | " + pct(p.s.reject_rate) +
         " | " + pct(p.s.drop_rate) + " |\n";
  }
  return t;
}

// ---------------------------------------------------------------------------
// Settling: the first instant from which the limit stays inside
// [0.9, 1.1] x optimum until the end of the phase.

struct Settling {
  double settle_s = -1;  // seconds after the phase start; -1: never
  double in_band = 0;    // fraction of the phase's samples in the band
  double mean = 0, min = 0, max = 0;  // over [start + 5 s, end)
};

// With `smooth_s` > 0 the limit is first replaced by its trailing mean over
// `smooth_s` seconds (to separate a biased limit from a noisy one).
Settling settling(const RunResult& r, double start_s, double end_s,
                  double optimum, double smooth_s = 0) {
  const auto start = static_cast<int64_t>(start_s * 1e9);
  const auto end = static_cast<int64_t>(end_s * 1e9);
  const auto tail = static_cast<int64_t>((start_s + 5) * 1e9);
  const double lo = 0.9 * optimum, hi = 1.1 * optimum;
  Settling s;
  int64_t last_out = -1, n = 0, inside = 0, tail_n = 0;
  s.min = 1e300;
  s.max = -1e300;
  std::vector<double> smoothed(r.samples.size());
  {
    const auto span = static_cast<int64_t>(smooth_s * 1e9);
    double sum = 0;
    size_t first = 0;
    for (size_t i = 0; i < r.samples.size(); ++i) {
      sum += r.samples[i].limit;
      while (r.samples[first].t_ns + span < r.samples[i].t_ns) {
        sum -= r.samples[first++].limit;
      }
      smoothed[i] = sum / static_cast<double>(i - first + 1);
    }
  }
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const LimitSample& l = r.samples[i];
    if (l.t_ns < start || l.t_ns >= end) continue;
    ++n;
    const double v = smooth_s > 0 ? smoothed[i] : l.limit;
    if (v >= lo && v <= hi) {
      ++inside;
    } else {
      last_out = l.t_ns;
    }
    if (l.t_ns >= tail) {
      ++tail_n;
      s.mean += l.limit;
      s.min = std::min(s.min, l.limit);
      s.max = std::max(s.max, l.limit);
    }
  }
  if (tail_n > 0) s.mean /= static_cast<double>(tail_n);
  s.in_band = n ? static_cast<double>(inside) / static_cast<double>(n) : 0;
  const int64_t period =
      r.samples.size() > 1 ? r.samples[1].t_ns - r.samples[0].t_ns : 0;
  if (last_out < 0) {
    s.settle_s = 0;
  } else if (last_out + period < end) {
    s.settle_s = static_cast<double>(last_out + period - start) / 1e9;
  }
  return s;
}

// Least-squares slope of the law's limit over [from_s, to_s), per second.
double limit_slope(const RunResult& r, double from_s, double to_s) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const LimitSample& l : r.samples) {
    const double t = static_cast<double>(l.t_ns) / 1e9;
    if (t < from_s || t >= to_s) continue;
    n += 1;
    sx += t;
    sy += l.limit;
    sxx += t * t;
    sxy += t * l.limit;
  }
  const double d = n * sxx - sx * sx;
  return d == 0 ? 0 : (n * sxy - sx * sy) / d;
}

double mean_rtt_noload(const RunResult& r, double from_s, double to_s) {
  double sum = 0, n = 0;
  for (const LimitSample& l : r.samples) {
    const double t = static_cast<double>(l.t_ns) / 1e9;
    if (t >= from_s && t < to_s && l.rtt_noload_ms > 0) {
      sum += l.rtt_noload_ms;
      n += 1;
    }
  }
  return n ? sum / n : 0;
}

// ---------------------------------------------------------------------------
// Running one scenario against every variant, with plots.

struct ScenarioRun {
  Scenario scenario;
  std::vector<Variant> variants;
  std::vector<RunResult> results;
};

ScenarioRun run_all(const Scenario& sc, std::vector<Variant> vs) {
  ScenarioRun run{sc, std::move(vs), {}};
  for (const Variant& v : run.variants) {
    run.results.push_back(run_scenario(sc, v.make));
  }
  return run;
}

std::string scenario_tables(const ScenarioRun& run,
                            const std::vector<Window>& windows,
                            const std::vector<double>& capacity_per_window) {
  std::string md;
  for (size_t w = 0; w < windows.size(); ++w) {
    md += "**" + windows[w].name + "** (" + fmt("%.0f", windows[w].from_s) +
          "-" + fmt("%.0f", windows[w].to_s) + " s; capacity " +
          fmt("%.0f", capacity_per_window[w]) + "/s)\n\n" + kSummaryHeader;
    for (size_t i = 0; i < run.variants.size(); ++i) {
      md += summary_row(
          run.variants[i].name,
          summarize(run.results[i], windows[w].from_s, windows[w].to_s),
          capacity_per_window[w]);
    }
    md += "\n";
  }
  return md;
}

void scenario_plots(Outputs* out, const ScenarioRun& run,
                    const std::vector<PlotMarker>& markers,
                    const PlotSeries& reference, double limit_y_max) {
  const Scenario& sc = run.scenario;
  Plot limit;
  limit.title = sc.title + ": concurrency limit";
  limit.x_label = "simulated time (s)";
  limit.y_label = "limit (requests in flight)";
  limit.markers = markers;
  limit.x_min = 0;
  limit.x_max = sc.duration_s;
  limit.y_min = 0;
  limit.y_max = limit_y_max;
  for (size_t i = 0; i < run.variants.size(); ++i) {
    const Variant& v = run.variants[i];
    if (v.static_limit != 0 && v.name.find("(opt)") == std::string::npos) {
      continue;
    }
    PlotSeries s{v.name, v.color, v.dashed,
                 limit_series(run.results[i], 5, /*effective=*/true)};
    limit.series.push_back(std::move(s));
  }
  limit.series.push_back(reference);
  // AIMD's wide sawtooth goes under the others (the last series is drawn
  // first).
  std::stable_partition(limit.series.begin(), limit.series.end(),
                        [](const PlotSeries& s) { return s.name != "AIMD"; });
  out->write_svg(sc.name + "_limit", limit);

  Plot good;
  good.title = sc.title + ": goodput (0.5 s buckets)";
  good.x_label = "simulated time (s)";
  good.y_label = "successful completions / s";
  good.markers = markers;
  good.x_min = 0;
  good.x_max = sc.duration_s;
  good.y_min = 0;
  good.y_max = std::ceil(sc.capacity_per_s() * 1.25 / 500) * 500;
  Plot p99 = good;
  p99.title = sc.title + ": p99 latency of admitted requests (0.5 s buckets)";
  p99.y_label = "p99 latency (ms)";
  p99.y_max = kTimeoutMs * 1.1;
  for (size_t i = 0; i < run.variants.size(); ++i) {
    const Variant& v = run.variants[i];
    PlotSeries g{v.name, v.color, v.dashed, {}};
    PlotSeries l{v.name, v.color, v.dashed, {}};
    bucket_series(run.results[i], sc.duration_s, 0.5, &g.points, &l.points);
    good.series.push_back(std::move(g));
    p99.series.push_back(std::move(l));
  }
  PlotSeries bound{"3x no-load (" + fmt("%.0f", kP99Bound) + " ms)",
                   kColorRef,
                   true,
                   {{0, kP99Bound}, {sc.duration_s, kP99Bound}}};
  p99.series.push_back(bound);
  out->write_svg(sc.name + "_goodput", good);
  out->write_svg(sc.name + "_p99", p99);
}

PlotSeries reference_series(const std::string& name,
                            std::vector<std::pair<double, double>> pts) {
  return PlotSeries{name, kColorRef, true, std::move(pts)};
}

// The no-queue equilibrium of gradient2, predicted without a simulation.
// Feed a stream of no-load latencies through the library's own rolling
// minimum and gradient (the sample enters the window first, as in the
// limiter) and average the gradient: E[g]. gradient2's fixed point is
// estimate * (1 - E[g]) = sqrt(estimate), i.e. L = 1 / (1 - E[g])^2 (the EMA
// does not move it). If that L is below c, the law stalls there, below
// capacity, whatever c is: its equilibrium is set by latency dispersion.
struct Equilibrium {
  double mean_gradient = 0;
  double mean_rtt_noload_ms = 0;
  double limit = 0;  // +inf when E[g] == 1
};

Equilibrium no_queue_equilibrium(const ServiceModel& service, double tolerance,
                                 int64_t window) {
  Rng rng(99);
  WindowedMin min(window);
  constexpr int kDraws = 200000;
  double sum_g = 0, sum_min = 0;
  for (int i = 0; i < kDraws; ++i) {
    const int64_t rtt = service.draw_ns(rng);
    min.push(rtt);
    sum_g += gradient2_gradient(tolerance, min.min(), rtt);
    sum_min += static_cast<double>(min.min());
  }
  Equilibrium e;
  e.mean_gradient = sum_g / kDraws;
  e.mean_rtt_noload_ms = sum_min / kDraws / 1e6;
  e.limit = e.mean_gradient >= 1
                ? std::numeric_limits<double>::infinity()
                : 1 / ((1 - e.mean_gradient) * (1 - e.mean_gradient));
  return e;
}

AdaptiveConcurrencyOptions with_tolerance(AdaptiveConcurrencyOptions o,
                                          double tolerance) {
  o.tolerance = tolerance;
  return o;
}

std::string verdict(bool ok) { return ok ? "**PASS**" : "**MISS**"; }

// ---------------------------------------------------------------------------

int run_main(Outputs* out) {
  std::string& md = out->md;
  const Scenario s1 = base_scenario("overload_2x", "2x overload", 2.0, 30, 11);
  const double cap = s1.capacity_per_s();
  const ServiceModel svc = lognormal_service();

  md += "## Simulator results\n\n";
  md +=
      "Generated by `concurrency_sim` (bench/sim/); every number and plot "
      "below comes from one deterministic run (seeded generators, "
      "simulated time).\n\n";
  md += "### Setup\n\n";
  md += "- Backend: " + std::to_string(kServers) +
        " servers, one unbounded FIFO queue, service time " + svc.describe() +
        ": mean " + fmt("%.2f", svc.mean_ms()) + " ms, p99 " +
        fmt("%.1f", svc.quantile_ms(0.99)) +
        " ms. Capacity = servers / mean service = " + fmt("%.0f", cap) +
        " requests/s.\n";
  md +=
      "- Load: open-loop Poisson arrivals at a multiple of that "
      "capacity. Each request's work is drawn in arrival order from its "
      "own seeded stream, so every limiter faces the same requests.\n";
  md += "- Client timeout " + fmt("%.0f", kTimeoutMs) +
        " ms: a request not finished by then is *dropped* (its lease is "
        "released `kDropped` at the timeout; the backend still serves it: "
        "wasted work, no deadline propagation). Others release `kSuccess` "
        "at completion; the limiter measures their latency on simulated "
        "time. A request the limiter rejects is *rejected* (load shed).\n";
  md += "- Metrics over requests arriving in the window (the first " +
        fmt("%.0f", kWarmupS) +
        " s are warm-up and excluded where noted): goodput = successes "
        "completed per second; p50/p99 = client-observed latency of "
        "admitted requests (a dropped request counts as the timeout); "
        "rejected = rejected / arrivals; dropped = dropped / admitted; mean "
        "limit = mean of the law's limit sampled every 10 ms.\n";
  md += "- **No-load latency** = the median service time, " +
        fmt("%.0f", kNoLoadMs) +
        " ms (what a request that never queues takes at its median). The "
        "p99 target is therefore " +
        fmt("%.0f", kP99Bound) + " ms; with no queueing at all p99 is " +
        fmt("%.1f", svc.quantile_ms(0.99)) + " ms.\n";
  md +=
      "- Limiters: `gradient2` = library defaults (initial 20, min 1, "
      "max 1000, rtt_window 100 samples, tolerance 1.5, smoothing 0.2); "
      "`AIMD` = defaults with `law = kAimd` (backoff 0.9); "
      "`gradient2+recal` = defaults plus minRTT recalibration every 5 s "
      "(+ up to 0.5 s jitter), pinned at min_limit 3 for 20 samples "
      "(Envoy's shape, interval shortened to fit the runs; the window "
      "keeps rolling after a pin); `gradient2 envoy` = gradient2+recal "
      "with rounds of 32 successes, `freeze_rtt_noload`, tolerance 1.0 "
      "and pins of 128 successes (non-default; see \"Rounds and a frozen "
      "baseline\"); static limits: half the optimum (low), the optimum "
      "(opt), 4x the optimum (high).\n\n";

  // The optimal static limit at full capacity, by sweep.
  const std::vector<int64_t> limits = {8,  16, 24, 28, 30, 32, 33,  34,  36,
                                       40, 44, 48, 56, 64, 96, 128, 192, 256};
  const SweepResult sw = sweep(s1, limits, kWarmupS);
  // And at half capacity at the capacity-step scenario's load (0.8x of full
  // = 1.6x of half), for its settling target.
  Scenario half = base_scenario("half", "half capacity", 0.8, 20, 12);
  half.servers = kServers / 2;
  const std::vector<int64_t> half_limits = {4,  8,  12, 14, 15, 16, 17,
                                            18, 20, 22, 24, 28, 32, 48};
  const SweepResult sw_half = sweep(half, half_limits, kWarmupS);

  md += "### The optimal static limit\n\n";
  md +=
      "Found by sweeping static limits on the 2x-overload scenario "
      "(measured over 5-30 s): among limits whose p99 stays within " +
      fmt("%.0f", kP99Bound) +
      " ms and that drop nothing, the best goodput G*; the optimum is "
      "the *smallest* limit reaching 99% of G* (the knee: above it, more "
      "concurrency only adds queueing delay). Analytically it is about "
      "c = " +
      std::to_string(kServers) +
      " (every server busy, no standing queue); the sweep puts it at " +
      std::to_string(sw.optimum) + ", G* = " + fmt("%.0f", sw.best_goodput) +
      "/s.\n\n";
  md += sweep_table(sw, cap) + "\n";
  md += "The same sweep with " + std::to_string(half.servers) +
        " servers at the capacity-step scenario's load gives the optimum "
        "after capacity halves: " +
        std::to_string(sw_half.optimum) +
        " (analytically c/2 = " + std::to_string(kServers / 2) + ").\n\n";
  md += out->image("static_sweep", "static limit sweep");
  {
    Plot g;
    g.title = "Static limit sweep at 2x overload";
    g.x_label = "static limit (log scale)";
    g.y_label = "% of capacity / p99 ms";
    g.log_x = true;
    g.x_min = static_cast<double>(limits.front());
    g.x_max = static_cast<double>(limits.back());
    g.y_min = 0;
    g.y_max = 110;
    PlotSeries gp{"goodput (% of capacity)", kColorG2, false, {}};
    PlotSeries lat{"p99 latency (ms)", kColorOpt, false, {}};
    for (const SweepPoint& p : sw.points) {
      gp.points.push_back(
          {static_cast<double>(p.limit), 100 * p.s.goodput_per_s / cap});
      lat.points.push_back({static_cast<double>(p.limit), p.s.p99_ms});
    }
    g.series = {gp, lat,
                reference_series("p99 bound " + fmt("%.0f", kP99Bound) + " ms",
                                 {{g.x_min, kP99Bound}, {g.x_max, kP99Bound}})};
    g.markers = {{static_cast<double>(sw.optimum), "optimum"}};
    out->write_svg("static_sweep", g);
  }

  const int64_t opt = sw.optimum;
  const std::vector<Variant> vs = variants(opt / 2, opt, 4 * opt);
  // Limit plots stop at about 3x the optimum; AIMD's excursions are clipped.
  const double limit_y_max = std::ceil(3 * static_cast<double>(opt) / 10) * 10;

  // (1) Steady 2x overload.
  md +=
      "Limit plots show the *effective* limit (what `acquire` enforces: "
      "gradient2+recal's pins show as dips to 3), sampled every 50 ms, "
      "with the y axis cut at about 3x the optimum (AIMD's excursions are "
      "clipped). `gradient2 envoy` is the documented non-default "
      "configuration of the section \"Rounds and a frozen baseline\" "
      "below (round_samples 32, freeze_rtt_noload, tolerance 1.0, "
      "recalibration every 5 s).\n\n";
  md += "### Scenario 1: steady 2x overload\n\n";
  md += "Arrivals at 2x capacity (" + fmt("%.0f", s1.arrival_rate_per_s) +
        "/s) for 30 s.\n\n";
  const ScenarioRun r1 = run_all(s1, vs);
  md += scenario_tables(r1, {{"steady state", kWarmupS, s1.duration_s}}, {cap});
  scenario_plots(out, r1, {},
                 reference_series("optimum " + std::to_string(opt),
                                  {{0, static_cast<double>(opt)},
                                   {s1.duration_s, static_cast<double>(opt)}}),
                 limit_y_max);
  md += out->image("overload_2x_limit", "limit at 2x overload");
  md += out->image("overload_2x_p99", "p99 at 2x overload");

  // (2) Capacity halves at 20 s and recovers at 40 s, at 0.8x load.
  Scenario s2 =
      base_scenario("capacity_step", "Capacity halves at 20 s", 0.8, 60, 21);
  s2.capacity_steps = {{20, kServers / 2}, {40, kServers}};
  md += "### Scenario 2: capacity halves, then recovers\n\n";
  md += "Arrivals at 0.8x full capacity (" +
        fmt("%.0f", s2.arrival_rate_per_s) +
        "/s); the backend loses half "
        "its servers at 20 s (load becomes 1.6x) and gets them back at "
        "40 s.\n\n";
  const ScenarioRun r2 = run_all(s2, vs);
  md += scenario_tables(r2,
                        {{"before", kWarmupS, 20},
                         {"halved", 20, 40},
                         {"halved, after 5 s", 25, 40},
                         {"recovered", 40, 60}},
                        {cap, cap / 2, cap / 2, cap});
  scenario_plots(out, r2, {{20, "c = 16"}, {40, "c = 32"}},
                 reference_series("optimum (halved: " +
                                      std::to_string(sw_half.optimum) + ")",
                                  {{20, static_cast<double>(sw_half.optimum)},
                                   {40, static_cast<double>(sw_half.optimum)}}),
                 limit_y_max);
  md += out->image("capacity_step_limit", "limit when capacity halves");
  md += out->image("capacity_step_p99", "p99 when capacity halves");
  md += out->image("capacity_step_goodput", "goodput when capacity halves");

  // (3) Slow dependency: service x3 from 20 s to 40 s, at 0.6x load.
  Scenario s3 = base_scenario(
      "slow_dependency", "Slow dependency (x3) from 20 s to 40 s", 0.6, 60, 31);
  s3.slowdowns = {{20, 3.0}, {40, 1.0}};
  md += "### Scenario 3: slow dependency\n\n";
  md += "Arrivals at 0.6x capacity (" + fmt("%.0f", s3.arrival_rate_per_s) +
        "/s); from 20 s to 40 s every service takes 3x its work (capacity "
        "falls to a third: load 1.8x). The concurrency the backend can use "
        "is still c = 32: only latency changed.\n\n";
  const ScenarioRun r3 = run_all(s3, vs);
  md += scenario_tables(
      r3, {{"before", kWarmupS, 20}, {"slow", 20, 40}, {"recovered", 40, 60}},
      {cap, cap / 3, cap});
  scenario_plots(out, r3, {{20, "x3 slower"}, {40, "normal"}},
                 reference_series("c = 32", {{0, static_cast<double>(kServers)},
                                             {s3.duration_s,
                                              static_cast<double>(kServers)}}),
                 limit_y_max);
  md += out->image("slow_dependency_limit", "limit with a slow dependency");
  md += out->image("slow_dependency_goodput", "goodput with a slow dependency");

  // (4) Modest overload: the upward creep bRPC describes.
  const Scenario s4 =
      base_scenario("overload_1_2x", "1.2x overload", 1.2, 60, 41);
  md += "### Scenario 4: modest (1.2x) overload, 60 s\n\n";
  const ScenarioRun r4 = run_all(s4, vs);
  md += scenario_tables(r4, {{"steady state", kWarmupS, s4.duration_s}}, {cap});
  scenario_plots(out, r4, {},
                 reference_series("optimum " + std::to_string(opt),
                                  {{0, static_cast<double>(opt)},
                                   {s4.duration_s, static_cast<double>(opt)}}),
                 limit_y_max);
  {
    Plot p;
    p.title = "1.2x overload: rtt_noload (rolling min of 100 samples)";
    p.x_label = "simulated time (s)";
    p.y_label = "rtt_noload (ms)";
    p.x_min = 0;
    p.x_max = s4.duration_s;
    p.y_min = 0;
    p.y_max = 20;
    for (size_t i = 0; i < 4; ++i) {
      p.series.push_back({r4.variants[i].name, r4.variants[i].color, false,
                          rtt_noload_series(r4.results[i], 5)});
    }
    p.series.push_back(reference_series(
        "service p01 " + fmt("%.1f", svc.quantile_ms(0.01)) + " ms",
        {{0, svc.quantile_ms(0.01)}, {s4.duration_s, svc.quantile_ms(0.01)}}));
    out->write_svg("overload_1_2x_rtt_noload", p);
  }
  md += out->image("overload_1_2x_limit", "limit at 1.2x overload");
  md += out->image("overload_1_2x_rtt_noload", "rtt_noload at 1.2x overload");
  md +=
      "Limit drift (the law's limit; slope by least squares):\n\n"
      "| limiter | mean limit 5-15 s | mean limit 50-60 s | slope 5-60 s "
      "(/s) | rtt_noload 5-15 s | rtt_noload 50-60 s |\n"
      "|---|---:|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < 4; ++i) {
    md += "| " + r4.variants[i].name + " | " +
          fmt("%.1f", summarize(r4.results[i], 5, 15).mean_limit) + " | " +
          fmt("%.1f", summarize(r4.results[i], 50, 60).mean_limit) + " | " +
          fmt("%+.3f", limit_slope(r4.results[i], 5, 60)) + " | " +
          fmt("%.2f ms", mean_rtt_noload(r4.results[i], 5, 15)) + " | " +
          fmt("%.2f ms", mean_rtt_noload(r4.results[i], 50, 60)) + " |\n";
  }
  md += "\n";

  // (5) Sensitivity: 2x overload with exponential service (no latency floor).
  Scenario s5 = base_scenario("overload_2x_exponential",
                              "2x overload, exponential service", 2.0, 30, 51);
  s5.service.kind = ServiceModel::Kind::kExponential;
  s5.service.mean_ms_exp = svc.mean_ms();
  s5.arrival_rate_per_s = 2.0 * s5.capacity_per_s();
  md += "### Sensitivity: 2x overload with exponential service times\n\n";
  md += "Same capacity, but service ~ exponential(mean " +
        fmt("%.2f", svc.mean_ms()) +
        " ms): no latency floor, so the rolling minimum of 100 samples is a "
        "small fraction of the typical latency. (No-load p99 of this "
        "service is already " +
        fmt("%.1f", s5.service.quantile_ms(0.99)) +
        " ms, so the p99 target cannot be met by any limiter here.)\n\n";
  const ScenarioRun r5 = run_all(s5, vs);
  md += scenario_tables(r5, {{"steady state", kWarmupS, s5.duration_s}},
                        {s5.capacity_per_s()});

  // ---- Why gradient2 stalls, and a sensitivity sweep over tolerance ------
  md += "### Why default gradient2 stalls below capacity\n\n";
  {
    md +=
        "gradient2 compares each sample's latency with the rolling "
        "minimum of the last 100 samples. With no queue at all, that "
        "minimum is a low quantile of the service time, so a typical "
        "sample already looks like a queue: the gradient averages E[g] < "
        "1. The law's fixed point is estimate * (1 - E[g]) = "
        "sqrt(estimate), i.e. L = 1 / (1 - E[g])^2, *independent of the "
        "number of servers*. Predicted from the no-load latency "
        "distribution alone (library `WindowedMin` and "
        "`gradient2_gradient` over 200k draws, no simulation) versus the "
        "mean limit measured at 2x overload:\n\n"
        "| tolerance | rtt_noload (mean) | E[g] with no queue | predicted "
        "L | measured mean limit (2x overload) |\n"
        "|---:|---:|---:|---:|---:|\n";
  }
  const std::vector<double> tolerances = {1.5, 2.0, 2.5, 3.0, 4.0};
  struct TolRun {
    double tolerance;
    bool recal;
    Summary s1;
    Settling strict, smooth;
    double s2_mean;
    double s4_slope, s4_rtt_early, s4_rtt_late, s4_limit_early, s4_limit_late;
    Summary s4;
  };
  // Scenarios 1, 2 and 4 for one configuration (also used by the grid of
  // "Rounds and a frozen baseline").
  const auto measure = [&](const AdaptiveConcurrencyOptions& o) {
    TolRun t{};
    t.tolerance = o.tolerance;
    const RunResult a = run_scenario(s1, adaptive(o));
    t.s1 = summarize(a, kWarmupS, s1.duration_s);
    const RunResult b = run_scenario(s2, adaptive(o));
    t.strict = settling(b, 20, 40, static_cast<double>(sw_half.optimum));
    t.smooth = settling(b, 20, 40, static_cast<double>(sw_half.optimum), 1.0);
    t.s2_mean = summarize(b, 25, 40).mean_limit;
    const RunResult c = run_scenario(s4, adaptive(o));
    t.s4 = summarize(c, kWarmupS, s4.duration_s);
    t.s4_slope = limit_slope(c, kWarmupS, s4.duration_s);
    t.s4_rtt_early = mean_rtt_noload(c, 5, 15);
    t.s4_rtt_late = mean_rtt_noload(c, 50, 60);
    t.s4_limit_early = summarize(c, 5, 15).mean_limit;
    t.s4_limit_late = summarize(c, 50, 60).mean_limit;
    return t;
  };
  std::vector<TolRun> tol_runs;
  for (bool recal : {false, true}) {
    for (double tol : tolerances) {
      TolRun t = measure(
          with_tolerance(recal ? recal_options() : gradient2_options(), tol));
      t.recal = recal;
      tol_runs.push_back(t);
      if (!recal) {
        const Equilibrium e = no_queue_equilibrium(svc, tol, 100);
        md += "| " + fmt("%.1f", tol) + " | " +
              fmt("%.2f ms", e.mean_rtt_noload_ms) + " | " +
              fmt("%.3f", e.mean_gradient) + " | " +
              (std::isinf(e.limit) ? std::string("unbounded")
                                   : fmt("%.1f", e.limit)) +
              " | " + fmt("%.1f", t.s1.mean_limit) + " |\n";
      }
    }
  }
  md += "\nWhen the predicted L is below c = " + std::to_string(kServers) +
        ", the limit stalls there (the backend is never even full, so no "
        "queueing signal exists to correct it). When it is above c, the "
        "limit grows until real queueing delay brings E[g] down: only "
        "then does it track capacity. The service time here has p50 / "
        "p1 = " +
        fmt("%.2f", svc.median() / svc.quantile_ms(0.01)) +
        ", larger than the default tolerance 1.5.\n\n";
  md += "### Sensitivity to tolerance (non-default configurations)\n\n";
  md +=
      "Only `tolerance` changes; everything else is as above. Settling "
      "is shown strictly (every 10 ms sample in the band) and on the "
      "limit's 1 s trailing mean (does the limit centre on the optimum, "
      "even if it is noisy?).\n\n"
      "| limiter | tolerance | 2x: goodput / G* | 2x: p99 ms | 2x: mean "
      "limit | halved: settles (strict) | halved: settles (1 s mean) | "
      "halved: mean limit 25-40 s | 1.2x: limit 5-15 s -> 50-60 s | 1.2x: "
      "rtt_noload 5-15 s -> 50-60 s | 1.2x: p99 ms |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto settle_text = [](const Settling& st) {
    return st.settle_s < 0 ? std::string("never") : fmt("%.2f s", st.settle_s);
  };
  for (const TolRun& t : tol_runs) {
    md += std::string("| ") + (t.recal ? "gradient2+recal" : "gradient2") +
          " | " + fmt("%.1f", t.tolerance) + " | " +
          pct(t.s1.goodput_per_s / sw.best_goodput) + " | " +
          fmt("%.1f", t.s1.p99_ms) + " | " + fmt("%.1f", t.s1.mean_limit) +
          " | " + settle_text(t.strict) + " | " + settle_text(t.smooth) +
          " | " + fmt("%.1f", t.s2_mean) + " | " +
          fmt("%.1f", t.s4_limit_early) + " -> " +
          fmt("%.1f", t.s4_limit_late) + " | " + fmt("%.2f", t.s4_rtt_early) +
          " -> " + fmt("%.2f", t.s4_rtt_late) + " ms | " +
          fmt("%.1f", t.s4.p99_ms) + " |\n";
  }
  md += "\n";

  // ---- Rounds and a frozen baseline: the grid ----------------------------
  md += "### Rounds and a frozen baseline (non-default configurations)\n\n";
  md +=
      "gradient2 with recalibration every 5 s (+ up to 0.5 s) at "
      "min_limit 3 and `freeze_rtt_noload`, varying `tolerance`, "
      "`round_samples` and the successes per pin (`recalibration_samples`; "
      "rtt_window 128). `gradient2 envoy` above is tolerance 1.0, rounds "
      "of 32, pins of 128. The last columns rerun 2x overload with "
      "exponential service (its goodput as a share of capacity).\n\n"
      "| tolerance | round_samples | pin | 2x: goodput / G* | 2x: p99 ms | "
      "halved: settles (strict) | halved: settles (1 s mean) | halved: "
      "mean limit 25-40 s | 1.2x: limit 5-15 s -> 50-60 s | 1.2x: p99 ms | "
      "exp 2x: goodput / capacity | exp 2x: mean limit |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (double tol : {1.0, 1.25, 1.5}) {
    for (int64_t n : {1, 8, 32}) {
      for (int64_t pin : {32, 128}) {
        AdaptiveConcurrencyOptions o = recal_options();
        o.freeze_rtt_noload = true;
        o.tolerance = tol;
        o.round_samples = n;
        o.recalibration_samples = pin;
        o.rtt_window = 128;
        const TolRun t = measure(o);
        const Summary e =
            summarize(run_scenario(s5, adaptive(o)), kWarmupS, s5.duration_s);
        md += "| " + fmt("%.2f", tol) + " | " + std::to_string(n) + " | " +
              std::to_string(pin) + " | " +
              pct(t.s1.goodput_per_s / sw.best_goodput) + " | " +
              fmt("%.1f", t.s1.p99_ms) + " | " + settle_text(t.strict) + " | " +
              settle_text(t.smooth) + " | " + fmt("%.1f", t.s2_mean) + " | " +
              fmt("%.1f", t.s4_limit_early) + " -> " +
              fmt("%.1f", t.s4_limit_late) + " | " + fmt("%.1f", t.s4.p99_ms) +
              " | " + pct(e.goodput_per_s / s5.capacity_per_s()) + " | " +
              fmt("%.1f", e.mean_limit) + " |\n";
      }
    }
  }
  md += "\n";

  // ---- Targets -----------------------------------------------------------
  md += "### The issue's targets\n\n";
  std::string targets;
  {
    const Summary g = summarize(r1.results[0], kWarmupS, s1.duration_s);
    const double ratio = g.goodput_per_s / sw.best_goodput;
    targets +=
        "- 2x overload, gradient2 goodput >= 90% of the best static "
        "limit's (G* = " +
        fmt("%.0f", sw.best_goodput) + "/s): " + fmt("%.0f", g.goodput_per_s) +
        "/s = " + pct(ratio) + " " + verdict(ratio >= 0.9) + "\n";
    targets += "- 2x overload, gradient2 p99 <= 3x no-load latency (" +
               fmt("%.0f", kP99Bound) + " ms): " + fmt("%.1f", g.p99_ms) +
               " ms " + verdict(g.p99_ms <= kP99Bound) + "\n";
    for (size_t i = 1; i < 4; ++i) {
      const Summary v = summarize(r1.results[i], kWarmupS, s1.duration_s);
      targets += "  - " + vs[i].name + " for comparison: goodput " +
                 pct(v.goodput_per_s / sw.best_goodput) + " of G*, p99 " +
                 fmt("%.1f", v.p99_ms) + " ms " +
                 verdict(v.goodput_per_s >= 0.9 * sw.best_goodput &&
                         v.p99_ms <= kP99Bound) +
                 "\n";
    }
    const auto opt_half = static_cast<double>(sw_half.optimum);
    for (size_t i = 0; i < 4; ++i) {
      const Settling st = settling(r2.results[i], 20, 40, opt_half);
      const Settling sm = settling(r2.results[i], 20, 40, opt_half, 1.0);
      const bool ok = st.settle_s >= 0 && st.settle_s <= 5;
      targets +=
          std::string(i == 0 ? "- " : "  - ") + "capacity halves at 20 s, " +
          vs[i].name + " settles within 10% of the new optimum (" +
          fmt("%.0f", opt_half) + ", band " + fmt("%.1f", 0.9 * opt_half) +
          "-" + fmt("%.1f", 1.1 * opt_half) + ") within 5 s: " +
          (st.settle_s < 0
               ? std::string("never settles")
               : "settles after " + fmt("%.2f", st.settle_s) + " s") +
          "; its 1 s trailing mean " +
          (sm.settle_s < 0
               ? std::string("never settles")
               : "settles after " + fmt("%.2f", sm.settle_s) + " s") +
          " (in band " + pct(st.in_band) +
          " of the phase; 25-40 s limit mean " + fmt("%.1f", st.mean) +
          ", range " + fmt("%.0f", st.min) + "-" + fmt("%.0f", st.max) + ") " +
          verdict(ok) + "\n";
    }
  }
  // ---- Findings: why each variant misses --------------------------------
  {
    const Summary g1 = summarize(r1.results[0], kWarmupS, s1.duration_s);
    const Summary a1 = summarize(r1.results[1], kWarmupS, s1.duration_s);
    const Summary t1 = summarize(r1.results[3], kWarmupS, s1.duration_s);
    const Summary t2 = summarize(r2.results[3], 25, 40);
    const TolRun& creep = tol_runs[1];  // gradient2, tolerance 2.0
    const TolRun& creep_recal = tol_runs[tolerances.size() + 1];
    md += "### Findings\n\n";
    md +=
        "- **Default gradient2 is safe but starves the backend.** Its p99 "
        "stays at the no-load p99 (" +
        fmt("%.1f", g1.p99_ms) +
        " ms at 2x overload), but its limit sits near " +
        fmt("%.1f", g1.mean_limit) + " with c = " + std::to_string(kServers) +
        " servers, so goodput is " + pct(g1.goodput_per_s / sw.best_goodput) +
        " of the best static limit. The E[g] table explains it: with "
        "rolling-minimum baseline, per-sample gradients and tolerance 1.5, "
        "service-time dispersion alone (p50 / p1 = " +
        fmt("%.2f", svc.median() / svc.quantile_ms(0.01)) +
        ") holds the limit at L = 1 / (1 - E[g])^2, whatever the capacity. "
        "The same mechanism makes it blind to a capacity halving (the "
        "limit was already below the new optimum) and to recovery.\n";
    md +=
        "- **The upward creep (bRPC's critique) is real, and shows once "
        "the limit can reach the backend.** At tolerance 2.0 and 1.2x "
        "overload the 100-sample rolling minimum is " +
        fmt("%.1f", creep.s4_rtt_early) + " ms (5-15 s) and " +
        fmt("%.1f", creep.s4_rtt_late) +
        " ms (50-60 s) against a service "
        "floor of " +
        fmt("%.1f", no_queue_equilibrium(svc, 1.5, 100).mean_rtt_noload_ms) +
        " ms (100 samples are ~40 ms of traffic here: shorter than the "
        "standing queue lives, so the minimum itself contains queueing "
        "delay), the gradient returns to 1 and the limit runs to " +
        fmt("%.0f", creep.s4_limit_late) +
        ", stopped only by client timeouts (p99 " +
        fmt("%.0f", creep.s4.p99_ms) +
        " ms). With the defaults the creep cannot start because the limit "
        "never fills the servers (no standing queue).\n";
    md +=
        "- **Recalibration as specified does not stop the creep** "
        "(tolerance 2.0 with recalibration: rtt_noload " +
        fmt("%.1f", creep_recal.s4_rtt_early) + " -> " +
        fmt("%.1f", creep_recal.s4_rtt_late) + " ms, limit " +
        fmt("%.0f", creep_recal.s4_limit_late) +
        "): after a pin the law resumes from the pre-pin estimate, the "
        "queue rebuilds at once, and a 100-sample window is refilled with "
        "queued samples within tens of ms. Envoy freezes minRTT between "
        "recalibrations; with `freeze_rtt_noload` this limiter does too "
        "(`gradient2 envoy`).\n";
    md +=
        "- **AIMD reacts only to drops**, and with a 100 ms client timeout "
        "(10x no-load) the only drop signal is a timeout: it grows the "
        "queue until requests time out, and the backend keeps serving the "
        "abandoned ones (wasted work): " +
        pct(a1.drop_rate) + " dropped, p99 " + fmt("%.0f", a1.p99_ms) +
        " ms, goodput " + pct(a1.goodput_per_s / sw.best_goodput) +
        " of G* at 2x overload. It suits backends that signal overload "
        "early (a 503 from a bounded queue, a tight deadline), not "
        "latency-only ones.\n";
    md +=
        "- **gradient2 with rounds and a frozen baseline (`gradient2 "
        "envoy`, non-default)**: " +
        pct(t1.goodput_per_s / sw.best_goodput) + " of G* at p99 " +
        fmt("%.1f", t1.p99_ms) +
        " ms at 2x overload; after the halving its limit averages " +
        fmt("%.1f", t2.mean_limit) + " against an optimum of " +
        std::to_string(sw_half.optimum) +
        ". Averaging removes the dispersion bias, freezing removes the "
        "creep, and tolerance 1.0 puts the fixed point (L = tolerance * c "
        "+ sqrt(L)) at the knee. The price is the pins: " +
        "the limit sits at min_limit for 128 successes every ~5 s. See "
        "the grid for how fragile each choice is.\n";
    md +=
        "- **Static limits**: the optimum static limit is best only for the "
        "capacity it was chosen for; after the halving it runs a standing "
        "queue, and with a slow dependency the too-high limit collapses "
        "(" +
        pct(summarize(r3.results[6], 20, 40).drop_rate) +
        " dropped): timed-out work the backend still serves crowds out "
        "live requests.\n\n";
  }
  md += "Definitions: no-load latency = median service time (" +
        fmt("%.0f", kNoLoadMs) +
        " ms); \"settles\" = the first instant after the step from which the "
        "law's limit (sampled every 10 ms; with recalibration the law's "
        "limit, not the pinned effective limit) stays inside the band until "
        "capacity recovers at 40 s. The target is judged on that strict "
        "reading; the 1 s trailing mean is shown to tell a biased limit from "
        "a noisy one.\n\n";
  md += targets + "\n";
  std::fputs(md.c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace throttlekit::sim

int main(int argc, char** argv) {
  throttlekit::sim::Outputs out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--out-dir=")) {
      out.out_dir = v;
    } else if (const char* v = value("--markdown=")) {
      out.markdown = v;
    } else if (const char* v = value("--img-prefix=")) {
      out.img_prefix = v;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--out-dir=DIR] [--markdown=FILE] "
                   "[--img-prefix=P]\n",
                   argv[0]);
      return 2;
    }
  }
  if (out.markdown.empty()) out.markdown = out.out_dir + "/results.md";
  const int rc = throttlekit::sim::run_main(&out);
  std::ofstream f(out.markdown, std::ios::binary);
  f << out.md;
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", out.markdown.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s and %zu SVG files\n", out.markdown.c_str(),
               out.files.size());
  return rc;
}
