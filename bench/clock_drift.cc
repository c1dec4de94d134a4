// bench/clock_drift.cc
//
// Measures the fast clock (core/tsc_clock.h) against CLOCK_REALTIME over a
// stretch of real time: every `--every-ms` it reads both (the fast clock's
// line with its fraction, `TscClock::now_ms_exact`, and clock_gettime,
// side by side) and prints, once a minute and at the end, the largest and
// the 99th-percentile difference, how far the integer reads were apart, and
// whether any read of the fast clock went backwards. The docs' figures come
// from
//
//     build/release/bench/clock_drift --seconds 600
//
// (docs/performance.md, "The fast clock"). Exits 1 if the clock is not fast
// here (the status's reason is printed) or a read went backwards.

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "throttlekit/core/clock.h"
#include "throttlekit/core/tsc_clock.h"

namespace {

double system_ms_exact() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 +
         static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Summary {
  double worst_us = 0;
  double p99_us = 0;
  double mean_us = 0;
  int64_t worst_int_ms = 0;
};

Summary summarise(std::vector<double>& errors_us, int64_t worst_int_ms) {
  Summary s;
  if (errors_us.empty()) return s;
  double sum = 0;
  for (double e : errors_us) {
    s.worst_us = std::max(s.worst_us, std::abs(e));
    sum += e;
  }
  s.mean_us = sum / static_cast<double>(errors_us.size());
  std::vector<double> abs_errors(errors_us.size());
  std::transform(errors_us.begin(), errors_us.end(), abs_errors.begin(),
                 [](double e) { return std::abs(e); });
  const size_t k = abs_errors.size() * 99 / 100;
  std::nth_element(abs_errors.begin(), abs_errors.begin() + k,
                   abs_errors.end());
  s.p99_us = abs_errors[k];
  s.worst_int_ms = worst_int_ms;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using throttlekit::SystemClock;
  using throttlekit::TscClock;
  using throttlekit::TscClockStatus;
  int64_t seconds = 600;
  int64_t every_ms = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atoll(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--every-ms") == 0) {
      every_ms = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds N] [--every-ms N]\n", argv[0]);
      return 2;
    }
  }
  if (seconds <= 0 || every_ms <= 0) {
    std::fprintf(stderr, "--seconds and --every-ms must be positive\n");
    return 2;
  }
  (void)TscClock{}.now_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (void)TscClock{}.now_ms();
  const TscClockStatus status = TscClock::status();
  if (status.mode != TscClockStatus::Mode::kFast) {
    std::printf("the fast clock is not fast here: %s\n",
                std::string(status.reason).c_str());
    return 1;
  }
  std::printf("counter at %.6f GHz; sampling every %lld ms for %lld s\n",
              status.ticks_per_ns, static_cast<long long>(every_ms),
              static_cast<long long>(seconds));
  std::printf("%8s %10s %10s %10s %12s %10s\n", "minute", "worst us", "p99 us",
              "mean us", "int ms apart", "lines");
  std::vector<double> all, minute;
  int64_t last = TscClock{}.now_ms(), backwards = 0, worst_int = 0,
          worst_int_minute = 0;
  const auto start = std::chrono::steady_clock::now();
  const int64_t samples = seconds * 1000 / every_ms;
  const int64_t per_minute = 60'000 / every_ms;
  for (int64_t i = 1; i <= samples; ++i) {
    std::this_thread::sleep_until(start +
                                  std::chrono::milliseconds(i * every_ms));
    // The tightest of three brackets of the fast clock by the system
    // clock's reads, so a preemption between two reads is not an error.
    double before = 0, fast = 0, after = 0;
    for (int k = 0; k < 3; ++k) {
      const double b = system_ms_exact();
      const double f = TscClock::now_ms_exact();
      const double a = system_ms_exact();
      if (k == 0 || a - b < after - before) {
        before = b;
        fast = f;
        after = a;
      }
    }
    const int64_t fast_int = TscClock{}.now_ms();
    const int64_t sys_int = SystemClock{}.now_ms();
    if (fast_int < last) ++backwards;
    last = fast_int;
    const double e = (fast - (before + after) / 2) * 1e3;
    all.push_back(e);
    minute.push_back(e);
    worst_int_minute = std::max(worst_int_minute, std::abs(fast_int - sys_int));
    if (i % per_minute == 0 || i == samples) {
      const Summary s = summarise(minute, worst_int_minute);
      std::printf("%8lld %10.2f %10.2f %10.2f %12lld %10lld\n",
                  static_cast<long long>((i + per_minute - 1) / per_minute),
                  s.worst_us, s.p99_us, s.mean_us,
                  static_cast<long long>(s.worst_int_ms),
                  static_cast<long long>(TscClock::status().lines));
      std::fflush(stdout);
      worst_int = std::max(worst_int, worst_int_minute);
      minute.clear();
      worst_int_minute = 0;
    }
  }
  const Summary s = summarise(all, worst_int);
  std::printf(
      "all %lld samples: worst %.2f us, p99 %.2f us, mean %.2f us; integer "
      "reads at most %lld ms apart; %lld backwards reads\n",
      static_cast<long long>(all.size()), s.worst_us, s.p99_us, s.mean_us,
      static_cast<long long>(worst_int), static_cast<long long>(backwards));
  return backwards == 0 ? 0 : 1;
}
