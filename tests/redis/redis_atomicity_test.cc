// Atomicity across processes: two OS processes x several threads issue 200
// concurrent checks on one key at limit 50 against a real Redis; exactly 50
// are admitted, for every strategy whose limit is a count.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "support/redis_test_server.h"
#include "support/run_threads.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_atomicity_test {
namespace {

constexpr int kThreads = 4;
constexpr int kPerThread = 25;  // 2 processes x 4 threads x 25 = 200

// Runs this process's share: kThreads threads released together at
// `start`, each making kPerThread checks. Returns the admitted count.
int run_share(const AnyStrategy& strategy, const std::string& key,
              absl::Time start) {
  auto redis = testing::redis_coordinator({.connections = 2});
  std::atomic<int> errors{0};
  const long admitted = testing::run_threads(kThreads, [&](int) {
    absl::SleepFor(start - absl::Now());
    int n = 0;
    for (int i = 0; i < kPerThread; ++i) {
      absl::StatusOr<Decision> d = redis->check(strategy, key, 0);
      if (!d.ok()) {
        // The first error's status, for the failure's cause.
        if (errors.fetch_add(1) == 0) {
          std::fprintf(stderr, "pid %d: %s\n", static_cast<int>(getpid()),
                       d.status().ToString().c_str());
        }
      } else if (d->allowed) {
        ++n;
      }
    }
    return n;
  });
  return errors.load() == 0 ? static_cast<int>(admitted) : -1000;
}

// Forks one child; both processes run their share; returns the total.
int two_processes(const AnyStrategy& strategy, const std::string& key) {
  const absl::Time start = absl::Now() + absl::Milliseconds(300);
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const int mine = run_share(strategy, key, start);
    (void)!write(fds[1], &mine, sizeof mine);
    _exit(0);
  }
  close(fds[1]);
  const int mine = run_share(strategy, key, start);
  int theirs = -1000;
  if (read(fds[0], &theirs, sizeof theirs) != sizeof theirs) theirs = -1000;
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return mine + theirs;
}

TEST(RedisAtomicity, TwoProcessesAdmitExactlyTheLimit) {
  // Each strategy's options admit exactly 50 within the test's second.
  const std::vector<StrategyOptions> all = {
      Gcra::Options{50, 3'600'000, 50},
      TokenBucket::Options{50, 0.001},
      FixedWindow::Options{50, 3'600'000},
      SlidingWindow::Options{50, 3'600'000, 10},
      SlidingLog::Options{50, 3'600'000},
      Quota::Options{50, QuotaPeriod::kFixed, 1, 0, 0, 3'600'000},
      TokenBudget::Options{50, 3'600'000},
  };
  const std::string run = std::to_string(getpid()) + "." +
                          std::to_string(absl::ToUnixNanos(absl::Now()));
  for (const StrategyOptions& o : all) {
    const AnyStrategy s = *make_strategy(o);
    const std::string key =
        "atomic:" + run + ":" + std::string(strategy_name(s));
    EXPECT_EQ(two_processes(s, key), 50) << strategy_name(s);
  }
}

}  // namespace
}  // namespace redis_atomicity_test
}  // namespace throttlekit
