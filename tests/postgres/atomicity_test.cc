// Atomicity across processes: two OS processes with four threads each fire
// 200 concurrent checks at one key limited to 50; exactly 50 are admitted,
// for a cold key (the insert race) and for each of several strategies. The
// test re-executes itself (/proc/self/exe) as the child processes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/pg_test_env.h"
#include "support/run_threads.h"
#include "support/test_time.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/postgres/postgres_coordinator.h"

namespace throttlekit {
namespace atomicity_test {
namespace {

using testing::kEpoch;

constexpr int kProcesses = 2;
constexpr int kThreads = 4;
constexpr int kChecksPerThread = 25;  // 2 x 4 x 25 = 200
constexpr int64_t kLimit = 50;

// The strategies under test, all limited to 50 units at kEpoch.
std::vector<StrategyOptions> strategies() {
  return {
      FixedWindow::Options{.limit = kLimit, .window_ms = 3'600'000},
      Gcra::Options{.limit = kLimit, .period_ms = 3'600'000},
      TokenBucket::Options{.capacity = kLimit, .refill_per_sec = 0.001},
      SlidingWindow::Options{
          .limit = kLimit, .window_ms = 3'600'000, .buckets = 60},
      SlidingLog::Options{.limit = kLimit, .window_ms = 3'600'000},
      Quota::Options{.limit = kLimit, .period = QuotaPeriod::kDay},
      TokenBudget::Options{.budget = kLimit, .window_ms = 3'600'000},
  };
}

// Child: waits for `start_at` (system clock, ms), runs the checks on
// kThreads threads, prints "admitted errors" and exits.
int child_main(const std::string& table, const std::string& key, int which,
               int64_t start_at) {
  PostgresCoordinatorOptions o = testing::pg_options(table);
  o.connections = kThreads;
  auto pg = PostgresCoordinator::create(o);
  if (!pg.ok()) return 3;
  const AnyStrategy s = *make_strategy(strategies()[which]);
  // Warm the pool so every thread has a connection before the start.
  testing::run_threads(kThreads, [&](int) { (void)(*pg)->now_ms(); });
  std::atomic<int> errors{0};
  const long admitted = testing::run_threads(kThreads, [&](int) {
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::max<int64_t>(0, start_at - SystemClock{}.now_ms())));
    int n = 0;
    for (int i = 0; i < kChecksPerThread; ++i) {
      absl::StatusOr<Decision> d = (*pg)->check(s, key, kEpoch);
      if (!d.ok()) {
        std::fprintf(stderr, "child: %s\n", d.status().ToString().c_str());
        errors.fetch_add(1);
      } else if (d->allowed) {
        ++n;
      }
    }
    return n;
  });
  std::printf("%ld %d\n", admitted, errors.load());
  return 0;
}

struct Child {
  pid_t pid;
  FILE* out;
};

Child spawn(const std::string& table, const std::string& key, int which,
            int64_t start_at) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    const std::string w = std::to_string(which);
    const std::string at = std::to_string(start_at);
    ::execl("/proc/self/exe", "atomicity_child", "--tk-child", table.c_str(),
            key.c_str(), w.c_str(), at.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ::close(fds[1]);
  return Child{pid, ::fdopen(fds[0], "r")};
}

TEST(PostgresAtomicity, TwoProcessesAdmitExactlyTheLimit) {
  const std::string table = testing::unique_table("tk_atomic");
  // The table does not exist yet: the children's first connections (eight
  // at once) create the schema concurrently, under the advisory lock.
  auto pg = testing::make_pg(testing::pg_options(table));
  const std::vector<StrategyOptions> all = strategies();
  for (size_t which = 0; which < all.size(); ++which) {
    const std::string key = "hot-" + std::to_string(which);
    const int64_t start_at = SystemClock{}.now_ms() + 800;
    std::vector<Child> children;
    for (int p = 0; p < kProcesses; ++p) {
      children.push_back(spawn(table, key, static_cast<int>(which), start_at));
    }
    int admitted = 0;
    for (Child& c : children) {
      int a = -1;
      int e = -1;
      ASSERT_EQ(std::fscanf(c.out, "%d %d", &a, &e), 2) << "child failed";
      std::fclose(c.out);
      int status = 0;
      ASSERT_EQ(::waitpid(c.pid, &status, 0), c.pid);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      EXPECT_EQ(e, 0);
      admitted += a;
    }
    EXPECT_EQ(admitted, kLimit) << strategy_name(*make_strategy(all[which]));
    // The key is spent: one more check is denied.
    EXPECT_FALSE(pg->check(*make_strategy(all[which]), key, kEpoch)->allowed);
  }
}

}  // namespace
}  // namespace atomicity_test
}  // namespace throttlekit

// The test runner, or a child process of the atomicity test.
int main(int argc, char** argv) {
  if (argc == 6 && std::strcmp(argv[1], "--tk-child") == 0) {
    return throttlekit::atomicity_test::child_main(
        argv[2], argv[3], std::atoi(argv[4]), std::atoll(argv[5]));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
