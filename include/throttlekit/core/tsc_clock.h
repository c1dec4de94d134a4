// throttlekit/core/tsc_clock.h
//
// Provides `TscClock`: epoch milliseconds read from the CPU's invariant
// timestamp counter, a few nanoseconds a read where
// `clock_gettime(CLOCK_REALTIME)` costs 20-30 (docs/performance.md, "The
// fast clock"). It is `DefaultClock`, the clock of the in-memory engines
// (`RateLimiter`, `Cell`, `GcraCell`) unless another is named.
//
// The clock is a line through (counter tick, epoch time) pairs,
//
//     ms(tick) = base + (tick - t0) * slope        (64.64 fixed point)
//
// re-synchronised against CLOCK_REALTIME by the first read after every
// 100 ms (about 0.1 us, on that caller's thread; no background thread). At
// a re-synchronisation at tick T, with S the system clock there and F the
// old line's value at min(T, end of the old line):
//
// - the slope becomes the rate measured over the interval just ended (a
//   rate more than 1000 ppm from the previous one is a step of the system
//   clock, not a rate, and is learned only when two intervals agree);
// - F <= S: the new line starts at S (a forward step, as the system clock's
//   own forward steps are; after an idle gap this is the usual case);
// - F > S (ahead by e): the old line goes on from its value at T (at or
//   above F), slowed by min(e / 100 ms, 1/64), until the system clock has
//   caught up.
//
// So the clock never steps backwards: every read of the old line is at
// most F (a read past a line's end that does not publish the next one
// reads the end), and the new line starts at F or above. Between forward
// steps it advances at least 63/64 of real time. It never runs faster than
// the rate it measured, so over any interval it admits no more than the
// system clock would (up to the measurement's error, below 1 ppm). While no
// one steps the system clock its error against CLOCK_REALTIME is the
// system clock's rate change within one interval (NTP slews at most 500 ppm:
// 50 us) plus the pairing jitter (about 0.1 us); measured over 10 minutes
// in docs/performance.md. After a backward step of the system clock by D it
// stays ahead, catching up at 1/64 (64 D); a strategy then refills at
// 63/64 of its rate for that time, where the system clock would have frozen
// every key for D (the stale-now rule, docs/semantics.md).
//
// Suitability is checked once, at the process's first read: x86-64, the
// CPUID invariant-counter bit, the kernel's clocksource is `tsc` (so the
// kernel has checked that the counters of every CPU agree), a read costing
// under 200 ns (not trapped by a hypervisor) and a calibrated frequency
// between 0.1 and 20 GHz. When any fails, or the counter is later seen
// running backwards, or the measured rate stops making sense, every read is
// CLOCK_REALTIME (`SystemClock`'s value); `status()` says why. For the first
// 10 ms after the first read (the calibration) reads are CLOCK_REALTIME too.
//
// Thread-safety: every method is safe to call concurrently. The line is
// published by a sequence lock whose writers take it with one
// compare-and-swap and hold it for six stores; readers never write.

#ifndef THROTTLEKIT_CORE_TSC_CLOCK_H_
#define THROTTLEKIT_CORE_TSC_CLOCK_H_

#include <time.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <thread>

#include "throttlekit/core/inline.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace throttlekit {

// What a `BasicTscClock` is doing. Plain values; a snapshot.
struct TscClockStatus {
  enum class Mode {
    kCalibrating,  // the first 10 ms: reads are CLOCK_REALTIME
    kFast,         // reads are the counter's line
    kSystem,       // unsuitable counter: reads are CLOCK_REALTIME
  };
  Mode mode = Mode::kCalibrating;
  // Why the clock reads CLOCK_REALTIME (mode kSystem); empty otherwise.
  std::string_view reason;
  // Counter ticks per nanosecond, as last measured (0 before calibration).
  double ticks_per_ns = 0;
  // Lines published so far (calibration and every re-synchronisation).
  int64_t lines = 0;
};

namespace detail {

// 64.64 fixed-point arithmetic (a GCC and Clang extension).
__extension__ typedef unsigned __int128 Uint128;

// The machine's sources: the counter, the system clock, and the suitability
// check. Stateless.
struct HardwareTscSources {
  uint64_t ticks() const noexcept {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
  }
  // A counter read ordered after every earlier instruction (for pairing).
  uint64_t ordered_ticks() const noexcept {
#if defined(__x86_64__)
    __builtin_ia32_lfence();
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
  }
  int64_t system_ns() const noexcept {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  // Null when the counter may be used, else why not (a static string).
  const char* unsuitable() const noexcept {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) {
      return "the CPU does not report whether its timestamp counter is "
             "invariant (CPUID leaf 0x80000007)";
    }
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    if ((d & (1u << 8)) == 0) {
      return "the CPU's timestamp counter is not invariant (CPUID "
             "0x80000007 EDX bit 8)";
    }
    char source[32] = {};
    if (FILE* f = std::fopen(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            "r")) {
      const size_t n = std::fread(source, 1, sizeof(source) - 1, f);
      std::fclose(f);
      source[n] = '\0';
    }
    if (std::strncmp(source, "tsc\n", 4) != 0) {
      return "the kernel's clocksource is not tsc (it does not trust the "
             "counters to agree across CPUs)";
    }
    const int64_t start = system_ns();
    uint64_t sink = 0;
    for (int i = 0; i < 64; ++i) sink += __builtin_ia32_rdtsc();
    const int64_t took = system_ns() - start;
    if (sink == 0 || took > 64 * 200) {
      return "reading the timestamp counter is slow (trapped by a "
             "hypervisor?)";
    }
    return nullptr;
#else
    return "the fast clock reads the x86-64 timestamp counter";
#endif
  }
};

}  // namespace detail

// The fast clock's state over chosen sources (tests substitute theirs;
// `TscClock` reads the process-wide instance over the hardware). `Sources`
// provides `ticks()`, `ordered_ticks()`, `system_ns()` and `unsuitable()`,
// callable concurrently. Thread-safe.
template <class Sources>
class BasicTscClock {
 public:
  // Constant-initialised: a process-wide instance needs no guard.
  constexpr explicit BasicTscClock(Sources sources = Sources{}) noexcept
      : sources_(sources) {}
  BasicTscClock(const BasicTscClock&) = delete;
  BasicTscClock& operator=(const BasicTscClock&) = delete;

  // How often the line is re-synchronised, and how long calibration takes.
  static constexpr int64_t kIntervalNs = 100'000'000;
  static constexpr int64_t kCalibrationNs = 10'000'000;
  // The most a line runs slow to let the system clock catch up.
  static constexpr double kMaxSlowdown = 1.0 / 64;
  // A measured rate this far from the previous one is a step, not a rate.
  static constexpr double kRateTolerance = 1e-3;

  // Epoch milliseconds. Thread-safe; never writes on the fast path.
  THROTTLEKIT_ALWAYS_INLINE int64_t now_ms() noexcept {
    Line line;
    read_line(line);
    const uint64_t t = sources_.ticks();
    // Past the line's end, or before its start (a counter that ran
    // backwards wraps to a huge difference): one compare.
    if (t - line.t0 >= line.span) [[unlikely]] {
      return slow(t);
    }
    return static_cast<int64_t>(eval(line, t) >> 64);
  }

  // The line's value with its fraction, in ms (diagnostics and drift
  // measurement); CLOCK_REALTIME's when the clock is not fast. Thread-safe.
  double now_ms_exact() noexcept {
    (void)now_ms();  // re-synchronises when due
    Line line;
    read_line(line);
    if (line.span == 0) {
      return static_cast<double>(sources_.system_ns()) / 1e6;
    }
    const detail::Uint128 v = eval_clamped(line, sources_.ticks());
    return static_cast<double>(static_cast<int64_t>(v >> 64)) +
           std::ldexp(static_cast<double>(static_cast<uint64_t>(v)), -64);
  }

  TscClockStatus status() const noexcept {
    TscClockStatus s;
    switch (mode_.load(std::memory_order_acquire)) {
      case kModeFast:
        s.mode = TscClockStatus::Mode::kFast;
        break;
      case kModeSystem:
        s.mode = TscClockStatus::Mode::kSystem;
        s.reason = reason_.load(std::memory_order_acquire);
        break;
      default:
        s.mode = TscClockStatus::Mode::kCalibrating;
    }
    const double ns_per_tick =
        std::bit_cast<double>(ns_per_tick_.load(std::memory_order_acquire));
    s.ticks_per_ns = ns_per_tick > 0 ? 1 / ns_per_tick : 0;
    s.lines = static_cast<int64_t>(seq_.load(std::memory_order_acquire) / 2);
    return s;
  }

  const Sources& sources() const noexcept { return sources_; }

 private:
  enum : int {
    kModeUnchecked,
    kModeChecking,
    kModeCalibrating,
    kModeFast,
    kModeSystem
  };

  // The published line. `span == 0` sends every read to the slow path
  // (calibrating, or reading the system clock).
  struct Line {
    uint64_t t0 = 0;         // the tick the line starts at
    int64_t base_ms = 0;     // its value there: whole ms...
    uint64_t base_frac = 0;  // ...and the fraction, in 2^-64 ms
    uint64_t mult = 0;       // ms per tick, in 2^-64 ms
    uint64_t span = 0;       // ticks to its end (the first tick that
                             // re-synchronises is t0 + span)
  };

  // The line's value at tick t in 64.64 fixed-point ms (a tick before t0,
  // read on a thread that raced the line's publication, is t0's value).
  static detail::Uint128 eval(const Line& line, uint64_t t) noexcept {
    const uint64_t d = t > line.t0 ? t - line.t0 : 0;
    const detail::Uint128 base =
        (static_cast<detail::Uint128>(static_cast<uint64_t>(line.base_ms))
         << 64) |
        line.base_frac;
    return base + static_cast<detail::Uint128>(d) * line.mult;
  }

  // The line's value at min(t, its end): what a read that is not
  // publishing the next line may return, so that no read exceeds the
  // floor the next line starts from.
  static detail::Uint128 eval_clamped(const Line& line, uint64_t t) noexcept {
    return eval(line, std::min(t, line.t0 + line.span));
  }

  // A consistent snapshot of the line (the sequence lock's read side).
  // A writer holds the lock for six stores; a reader that finds it held
  // for over a million spins (a writer stopped between them, e.g. by a
  // fork) reads the system clock's line instead: `span = 0`.
  THROTTLEKIT_ALWAYS_INLINE void read_line(Line& line) const noexcept {
    for (int spins = 0;; ++spins) {
      const uint64_t s1 = seq_.load(std::memory_order_acquire);
      line.t0 = t0_.load(std::memory_order_relaxed);
      line.base_ms = base_ms_.load(std::memory_order_relaxed);
      line.base_frac = base_frac_.load(std::memory_order_relaxed);
      line.mult = mult_.load(std::memory_order_relaxed);
      line.span = span_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == s1 && (s1 & 1) == 0)
          [[likely]] {
        return;
      }
      if (spins > (1 << 20)) {
        line.span = 0;
        return;
      }
      if (spins > 64) std::this_thread::yield();
    }
  }

  static int64_t to_ms(int64_t ns) noexcept {
    return ns >= 0 ? ns / 1'000'000 : -((-ns + 999'999) / 1'000'000);
  }

  // A (tick, system ns) pair taken as close together as three tries allow:
  // the tick is the midpoint of two reads around the system clock's.
  void paired_read(uint64_t& tick, int64_t& ns) const noexcept {
    uint64_t best_gap = ~uint64_t{0};
    for (int i = 0; i < 3; ++i) {
      const uint64_t a = sources_.ordered_ticks();
      const int64_t s = sources_.system_ns();
      const uint64_t b = sources_.ordered_ticks();
      const uint64_t gap = b >= a ? b - a : ~uint64_t{0};
      if (gap < best_gap || i == 0) {
        best_gap = gap;
        tick = a + (b >= a ? gap / 2 : 0);
        ns = s;
      }
    }
  }

  // Every read whose tick reached the line's end (or that has no line).
  THROTTLEKIT_NOINLINE int64_t slow(uint64_t t) noexcept {
    const int mode = mode_.load(std::memory_order_acquire);
    if (mode == kModeFast) return resync(t);
    if (mode == kModeSystem || mode == kModeChecking) {
      return to_ms(sources_.system_ns());
    }
    if (mode == kModeUnchecked) {
      int expected = kModeUnchecked;
      if (mode_.compare_exchange_strong(expected, kModeChecking,
                                        std::memory_order_acq_rel)) {
        check_and_anchor();
      }
      return to_ms(sources_.system_ns());
    }
    return calibrate();
  }

  // The first read: the suitability check, then the calibration's anchor.
  THROTTLEKIT_NOINLINE void check_and_anchor() noexcept {
    if (const char* why = sources_.unsuitable()) {
      fall_back(why);
      return;
    }
    uint64_t tick = 0;
    int64_t ns = 0;
    paired_read(tick, ns);
    anchor_tick_.store(tick, std::memory_order_relaxed);
    anchor_ns_.store(ns, std::memory_order_relaxed);
    mode_.store(kModeCalibrating, std::memory_order_release);
  }

  // From now on every read is CLOCK_REALTIME: the line is withdrawn
  // (`span = 0`) under the sequence lock.
  void fall_back(const char* why) noexcept {
    reason_.store(why, std::memory_order_release);
    for (;;) {
      uint64_t s = seq_.load(std::memory_order_acquire);
      if ((s & 1) == 0 &&
          seq_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
        std::atomic_thread_fence(std::memory_order_release);
        span_.store(0, std::memory_order_relaxed);
        mode_.store(kModeSystem, std::memory_order_relaxed);
        seq_.store(s + 2, std::memory_order_release);
        return;
      }
      std::this_thread::yield();
    }
  }

  // Calibrating: CLOCK_REALTIME until 10 ms after the anchor, then the
  // first line, through the system clock's value.
  int64_t calibrate() noexcept {
    const int64_t anchor_ns = anchor_ns_.load(std::memory_order_relaxed);
    if (const int64_t ns = sources_.system_ns();
        ns - anchor_ns < kCalibrationNs) {
      return to_ms(ns);
    }
    const uint64_t s = seq_.load(std::memory_order_acquire);
    uint64_t tick = 0;
    int64_t ns = 0;
    paired_read(tick, ns);
    const uint64_t anchor_tick = anchor_tick_.load(std::memory_order_relaxed);
    if (tick <= anchor_tick) {
      fall_back("the timestamp counter did not advance during calibration");
      return to_ms(ns);
    }
    const double ns_per_tick = static_cast<double>(ns - anchor_ns) /
                               static_cast<double>(tick - anchor_tick);
    if (!(ns_per_tick >= 0.05 && ns_per_tick <= 10)) {
      fall_back("the timestamp counter's frequency is outside 0.1-20 GHz");
      return to_ms(ns);
    }
    if ((s & 1) != 0 ||
        mode_.load(std::memory_order_acquire) != kModeCalibrating) {
      return to_ms(ns);
    }
    const Line line = line_through(tick, ns, ns_per_tick, 0.0);
    if (!publish(s, line, ns, ns_per_tick)) return to_ms(ns);
    return static_cast<int64_t>(eval(line, tick) >> 64);
  }

  // The line from `tick` through the system clock's `ns`, at `ns_per_tick`
  // slowed by `slowdown`.
  static Line line_through(uint64_t tick, int64_t ns, double ns_per_tick,
                           double slowdown) noexcept {
    Line line;
    line.t0 = tick;
    const int64_t ms = to_ms(ns);
    line.base_ms = ms;
    const uint64_t rest = static_cast<uint64_t>(ns - ms * 1'000'000);
    line.base_frac = static_cast<uint64_t>(
        (static_cast<detail::Uint128>(rest) << 64) / 1'000'000);
    set_rate(line, ns_per_tick, slowdown);
    return line;
  }

  static void set_rate(Line& line, double ns_per_tick,
                       double slowdown) noexcept {
    line.mult = static_cast<uint64_t>(
        std::ldexp(ns_per_tick * (1 - slowdown) / 1e6, 64));
    line.span = std::max<uint64_t>(
        1,
        static_cast<uint64_t>(static_cast<double>(kIntervalNs) / ns_per_tick));
  }

  // A read at or past the line's end: the next line (or, when another
  // thread publishes it first, that one's value).
  THROTTLEKIT_NOINLINE int64_t resync(uint64_t t) noexcept {
    const uint64_t s = seq_.load(std::memory_order_acquire);
    Line old;
    read_line(old);
    if (old.span == 0) return to_ms(sources_.system_ns());
    if ((s & 1) != 0 || seq_.load(std::memory_order_acquire) != s) {
      // Another thread published a line since: read it.
      return static_cast<int64_t>(eval_clamped(old, t) >> 64);
    }
    uint64_t tick = 0;
    int64_t ns = 0;
    paired_read(tick, ns);  // ordered after the line's loads
    const int64_t prev_ns = prev_ns_.load(std::memory_order_relaxed);
    if (tick < old.t0) {
      fall_back("the timestamp counter ran backwards");
      return to_ms(ns);
    }
    if (tick - old.t0 < old.span) {
      // `t` was read before the line's loads completed (the counter read is
      // not ordered with them): the line still holds.
      return static_cast<int64_t>(eval(old, tick) >> 64);
    }
    // The rate of the interval just ended; a jump is a step of the system
    // clock (or a suspend) unless the next interval measures it too.
    double ns_per_tick =
        std::bit_cast<double>(ns_per_tick_.load(std::memory_order_relaxed));
    const double measured = static_cast<double>(ns - prev_ns) /
                            static_cast<double>(tick - old.t0 + 1);
    if (tick - old.t0 > 1000 && measured > 0) {
      const double rejected =
          std::bit_cast<double>(rejected_rate_.load(std::memory_order_relaxed));
      if (std::abs(measured / ns_per_tick - 1) <= kRateTolerance ||
          (rejected > 0 &&
           std::abs(measured / rejected - 1) <= kRateTolerance)) {
        ns_per_tick = measured;
        rejected_rate_.store(0, std::memory_order_relaxed);
      } else {
        rejected_rate_.store(std::bit_cast<uint64_t>(measured),
                             std::memory_order_relaxed);
      }
    }
    if (!(ns_per_tick >= 0.05 && ns_per_tick <= 10)) {
      fall_back("the timestamp counter's frequency is outside 0.1-20 GHz");
      return to_ms(ns);
    }
    // Every read of the old line was at most its value at its end.
    const detail::Uint128 floor = eval_clamped(old, tick);
    Line line = line_through(tick, ns, ns_per_tick, 0.0);
    const detail::Uint128 sys = eval(line, tick);
    if (floor > sys) {
      // Ahead: the old line goes on from where it is at `tick` (at or
      // above the floor), slowed until the system clock catches up.
      const detail::Uint128 at_tick = eval(old, tick);
      const double ahead_ms =
          std::ldexp(static_cast<double>(at_tick - sys), -64);
      const double slowdown =
          std::min(kMaxSlowdown, ahead_ms * 1e6 / kIntervalNs);
      line.base_ms = static_cast<int64_t>(at_tick >> 64);
      line.base_frac = static_cast<uint64_t>(at_tick);
      set_rate(line, ns_per_tick, slowdown);
    }
    if (!publish(s, line, ns, ns_per_tick)) {
      Line now_line;
      read_line(now_line);
      if (now_line.span == 0) return to_ms(sources_.system_ns());
      return static_cast<int64_t>(eval_clamped(now_line, t) >> 64);
    }
    return static_cast<int64_t>(eval(line, tick) >> 64);
  }

  // Publishes `line` (and the fast mode) if the sequence is still `s`
  // (even): false when another writer went first.
  bool publish(uint64_t s, const Line& line, int64_t ns,
               double ns_per_tick) noexcept {
    uint64_t expected = s;
    if (!seq_.compare_exchange_strong(expected, s + 1,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return false;
    }
    std::atomic_thread_fence(std::memory_order_release);
    t0_.store(line.t0, std::memory_order_relaxed);
    base_ms_.store(line.base_ms, std::memory_order_relaxed);
    base_frac_.store(line.base_frac, std::memory_order_relaxed);
    mult_.store(line.mult, std::memory_order_relaxed);
    span_.store(line.span, std::memory_order_relaxed);
    prev_ns_.store(ns, std::memory_order_relaxed);
    ns_per_tick_.store(std::bit_cast<uint64_t>(ns_per_tick),
                       std::memory_order_relaxed);
    mode_.store(kModeFast, std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
    return true;
  }

  // Read by every read: one cache line, written once per 100 ms.
  alignas(64) std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> t0_{0};
  std::atomic<int64_t> base_ms_{0};
  std::atomic<uint64_t> base_frac_{0};
  std::atomic<uint64_t> mult_{0};
  std::atomic<uint64_t> span_{0};
  // Written with the line, read by writers and `status()`.
  alignas(64) std::atomic<int64_t> prev_ns_{0};
  std::atomic<uint64_t> ns_per_tick_{0};
  std::atomic<uint64_t> rejected_rate_{0};
  std::atomic<int> mode_{kModeUnchecked};
  std::atomic<const char*> reason_{nullptr};
  std::atomic<uint64_t> anchor_tick_{0};
  std::atomic<int64_t> anchor_ns_{0};
  [[no_unique_address]] Sources sources_;
};

namespace detail {
// The process's fast clock (constant-initialised; no guard on a read).
inline constinit BasicTscClock<HardwareTscSources> process_tsc_clock{};
}  // namespace detail

// The fast clock: stateless, reading the process's one `BasicTscClock`.
// Thread-safe.
struct TscClock {
  THROTTLEKIT_ALWAYS_INLINE int64_t now_ms() const noexcept {
    return detail::process_tsc_clock.now_ms();
  }
  // See `BasicTscClock::now_ms_exact` and `status`.
  static double now_ms_exact() noexcept {
    return detail::process_tsc_clock.now_ms_exact();
  }
  static TscClockStatus status() noexcept {
    return detail::process_tsc_clock.status();
  }
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_TSC_CLOCK_H_
