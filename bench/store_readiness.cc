// Connections ready before calls (docs/redis.md, "Connections ready before
// calls"; docs/postgres.md, "Failure behaviour and deadlines"), measured:
//
// 1. Start-up: a coordinator with a 20 ms command timeout is created and
//    (unless --no-wait) made ready with `wait_ready`, then 8 threads check
//    for one second; prints the errors, the first one's message, and the
//    slowest call.
// 2. Restart: 8 threads check continuously while `--restart-cmd` (a shell
//    command that stops and starts the store) runs; prints the errors
//    after the command returned (the store up again), the time from its
//    return to the first success, and the calls answered meanwhile.
//
//     store_readiness --redis PORT | --postgres PORT [--no-wait]
//                     [--restart-cmd CMD]
//
// scripts/store_readiness.sh runs it on private servers, for the code of
// this checkout and (--compare REF) of another commit.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "throttlekit/postgres/postgres_coordinator.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace tk = throttlekit;

namespace {

constexpr int kThreads = 8;
constexpr absl::Duration kCommandTimeout = absl::Milliseconds(20);

struct Tally {
  std::atomic<int64_t> calls{0}, errors{0}, slowest_us{0};
  std::mutex mu;
  std::string first_error;

  void record(const absl::Status& s, int64_t us) {
    calls.fetch_add(1);
    int64_t prev = slowest_us.load();
    while (us > prev && !slowest_us.compare_exchange_weak(prev, us)) {
    }
    if (s.ok()) return;
    errors.fetch_add(1);
    std::lock_guard lock(mu);
    if (first_error.empty()) first_error = std::string(s.message());
  }
};

// Runs `kThreads` threads checking one key each until `stop`; `on_ok(t)`
// sees each success's time.
template <class OnOk>
void hammer(tk::Coordinator& store, std::atomic<bool>& stop, Tally& tally,
            OnOk on_ok) {
  const tk::AnyStrategy gcra =
      *tk::make_strategy(tk::Gcra::Options{1'000'000'000, 1000});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "readiness:" + std::to_string(t);
      while (!stop.load()) {
        const absl::Time begin = absl::Now();
        const absl::Status s = store.check(gcra, key, 0).status();
        const absl::Time end = absl::Now();
        tally.record(s, absl::ToInt64Microseconds(end - begin));
        if (s.ok()) on_ok(end);
      }
    });
  }
  for (auto& th : threads) th.join();
}

int usage() {
  std::fprintf(stderr,
               "usage: store_readiness --redis PORT | --postgres PORT "
               "[--no-wait] [--restart-cmd CMD]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int redis_port = 0, pg_port = 0;
  bool wait = true;
  std::string restart;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-wait") {
      wait = false;
    } else if (i + 1 < argc && flag == "--redis") {
      if (!absl::SimpleAtoi(argv[++i], &redis_port)) return usage();
    } else if (i + 1 < argc && flag == "--postgres") {
      if (!absl::SimpleAtoi(argv[++i], &pg_port)) return usage();
    } else if (i + 1 < argc && flag == "--restart-cmd") {
      restart = argv[++i];
    } else {
      return usage();
    }
  }
  if ((redis_port == 0) == (pg_port == 0)) return usage();
  std::shared_ptr<tk::Coordinator> store;
  if (redis_port != 0) {
    store = *tk::RedisCoordinator::create(
        {.port = redis_port, .command_timeout = kCommandTimeout});
  } else {
    tk::PostgresCoordinatorOptions o;
    o.port = pg_port;
    o.table = "tk_readiness";
    o.command_timeout = kCommandTimeout;
    store = *tk::PostgresCoordinator::create(o);
  }
  const char* name = redis_port != 0 ? "redis" : "postgres";
#ifndef THROTTLEKIT_NO_WAIT_READY  // a build of code before wait_ready
  if (wait) {
    const absl::Time begin = absl::Now();
    const absl::Status s = store->wait_ready(begin + absl::Seconds(10));
    std::printf("%s: wait_ready %s in %.1f ms\n", name,
                s.ok() ? "ok" : std::string(s.message()).c_str(),
                absl::ToDoubleMilliseconds(absl::Now() - begin));
  }
#else
  (void)wait;
#endif
  {
    Tally tally;
    std::atomic<bool> stop{false};
    std::thread timer([&] {
      absl::SleepFor(absl::Seconds(1));
      stop.store(true);
    });
    hammer(*store, stop, tally, [](absl::Time) {});
    timer.join();
    std::printf(
        "%s: start-up, %d threads, 20 ms deadline, first second: %lld calls, "
        "%lld errors%s%s, slowest %.1f ms\n",
        name, kThreads, static_cast<long long>(tally.calls.load()),
        static_cast<long long>(tally.errors.load()),
        tally.first_error.empty() ? "" : "; first: ", tally.first_error.c_str(),
        tally.slowest_us.load() / 1000.0);
  }
  if (restart.empty()) return 0;
  Tally tally;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> up_ns{0}, first_ok_ns{0};
  std::atomic<int64_t> errors_at_up{-1}, calls_at_up{-1};
  std::atomic<int64_t> errors_at_first_ok{-1}, calls_at_first_ok{-1};
  std::thread restarter([&] {
    absl::SleepFor(absl::Milliseconds(300));
    if (std::system(restart.c_str()) != 0) {
      std::fprintf(stderr, "store_readiness: the restart command failed\n");
    }
    errors_at_up.store(tally.errors.load());
    calls_at_up.store(tally.calls.load());
    up_ns.store(absl::ToUnixNanos(absl::Now()));
    absl::SleepFor(absl::Seconds(3));
    stop.store(true);
  });
  hammer(*store, stop, tally, [&](absl::Time t) {
    const int64_t up = up_ns.load();
    int64_t zero = 0;
    if (up != 0 &&
        first_ok_ns.compare_exchange_strong(zero, absl::ToUnixNanos(t))) {
      errors_at_first_ok.store(tally.errors.load());
      calls_at_first_ok.store(tally.calls.load());
    }
  });
  restarter.join();
  const bool served = first_ok_ns.load() != 0;
  std::printf(
      "%s: restart: %lld errors in all; from the store's return to the first "
      "success %.1f ms, with %lld errors of %lld calls in between\n",
      name, static_cast<long long>(tally.errors.load()),
      served ? (first_ok_ns.load() - up_ns.load()) / 1e6 : -1.0,
      static_cast<long long>(
          served ? errors_at_first_ok.load() - errors_at_up.load() : -1),
      static_cast<long long>(
          served ? calls_at_first_ok.load() - calls_at_up.load() : -1));
  return 0;
}
