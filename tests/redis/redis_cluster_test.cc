// The Redis coordinator on a real Redis Cluster (3 primaries with a replica
// each, started by the `redis_cluster` fixture; docs/redis.md, "Redis
// Cluster"): `key_slot` equals the cluster's own CLUSTER KEYSLOT on keys
// with and without hash tags; every strategy's strict checks on keys spread
// over all three primaries equal the memory coordinator's step for step,
// the calls going straight to each key's primary once the slot map is read
// (no redirect); while a slot migrates between primaries a key already
// moved is reached through ASK (ASKING at the importing node, the map left
// as it is) and, once the slot is reassigned, through MOVED (the map
// updated, later calls direct), on the blocking and the asynchronous path,
// its count continuing across the move; four threads' first calls race
// the first map read and all complete once (also under ThreadSanitizer);
// and bad cluster options are refused naming the field.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "support/redis_test_server.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/redis/key_slot.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_cluster_test {
namespace {

using testing::kEpoch;

int base_port() {
  return std::atoi(
      testing::env_or("THROTTLEKIT_REDIS_CLUSTER_PORT", "17100").c_str());
}

std::vector<int> ports() {
  std::vector<int> out;
  for (int i = 0; i < 6; ++i) out.push_back(base_port() + i);
  return out;
}

// `redis-cli -p <port>` fed `input` on stdin (one command per line): its
// output lines.
std::vector<std::string> cli(int port, const std::string& input) {
  const std::string path = absl::StrCat("/tmp/tk-cluster-", getpid(), ".in");
  std::ofstream(path) << input;
  std::vector<std::string> lines =
      testing::shell_lines(absl::StrCat("redis-cli -p ", port, " < ", path));
  std::remove(path.c_str());
  return lines;
}

std::string cli1(int port, const std::string& command) {
  std::vector<std::string> lines = cli(port, command + "\n");
  return lines.empty() ? "" : lines.front();
}

// A coordinator on the cluster, seeded with one node, whose slot map has
// been read.
std::unique_ptr<RedisCoordinator> cluster_coordinator() {
  auto c = RedisCoordinator::create(
      {.connections = 1,
       .command_timeout = absl::Seconds(2),
       .cluster_seeds = {absl::StrCat("127.0.0.1:", base_port())}});
  EXPECT_TRUE(c.ok()) << c.status();
  for (int i = 0; i < 200 && (*c)->stats().refreshes == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE((*c)->stats().refreshes, 1);
  return *std::move(c);
}

// The primaries' ports, each with its node id.
std::map<int, std::string> primaries() {
  std::map<int, std::string> out;
  for (int port : ports()) {
    if (cli1(port, "ROLE") == "master") out[port] = cli1(port, "CLUSTER MYID");
  }
  return out;
}

// The primary serving each of `keys` (-1: none found): the one whose read
// of it is not redirected. One redis-cli per primary.
std::vector<int> owners_of(const std::vector<std::string>& keys) {
  std::vector<int> out(keys.size(), -1);
  std::string input;
  for (const std::string& key : keys)
    absl::StrAppend(&input, "TYPE ", key, "\n");
  for (const auto& [port, id] : primaries()) {
    (void)id;
    // redis-cli prints an error and an empty line, a value (or nil) as
    // one line.
    const std::vector<std::string> lines = cli(port, input);
    size_t line = 0;
    for (size_t i = 0; i < keys.size() && line < lines.size(); ++i) {
      if (lines[line].starts_with("MOVED") || lines[line].starts_with("ASK")) {
        line += 2;
      } else {
        out[i] = port;
        line += 1;
      }
    }
  }
  return out;
}
int owner_of(const std::string& key) { return owners_of({key}).front(); }

TEST(RedisCluster, KeySlotEqualsTheClusters) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  std::mt19937_64 rng(20261127);
  const std::string alphabet = "abcxyz019:{}-";
  std::vector<std::string> keys;
  std::string input;
  for (int i = 0; i < 2000; ++i) {
    std::string key;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int j = 0; j < len; ++j) key += alphabet[rng() % alphabet.size()];
    keys.push_back(key);
    absl::StrAppend(&input, "CLUSTER KEYSLOT ", key, "\n");
  }
  const std::vector<std::string> got = cli(base_port(), input);
  ASSERT_EQ(got.size(), keys.size());
  int tagged = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(std::to_string(key_slot(keys[i])), got[i]) << keys[i];
    tagged += hash_tag(keys[i]) != keys[i];
  }
  EXPECT_GT(tagged, 100);
}

// Every strategy over keys spread across the three primaries: the same
// decisions as the memory coordinator at the same instants, each call sent
// straight to its key's primary.
TEST(RedisCluster, EveryStrategyEqualsTheMemoryCoordinator) {
  std::unique_ptr<RedisCoordinator> redis = cluster_coordinator();
  auto memory = *MemoryCoordinator::create();
  const std::vector<StrategyOptions> plans = {
      Gcra::Options{.limit = 5, .period_ms = 1000},
      TokenBucket::Options{.capacity = 5, .refill_per_sec = 4},
      FixedWindow::Options{.limit = 5, .window_ms = 1000},
      SlidingWindow::Options{.limit = 5, .window_ms = 1000, .buckets = 4},
      SlidingLog::Options{.limit = 5, .window_ms = 1000},
      Quota::Options{.limit = 5, .period = QuotaPeriod::kDay},
      TokenBudget::Options{.budget = 20, .window_ms = 1000},
  };
  const std::string run = absl::StrCat("cl:", getpid(), ":");
  std::mt19937_64 rng(7);
  const BackendStats before = redis->stats();
  std::vector<std::string> keys;
  int steps = 0, denials = 0;
  for (size_t s = 0; s < plans.size(); ++s) {
    const AnyStrategy strategy = *make_strategy(plans[s]);
    for (int k = 0; k < 12; ++k) {
      const std::string key = absl::StrCat(run, s, ":", k);
      keys.push_back(key);
      int64_t now = kEpoch;
      for (int i = 0; i < 12; ++i) {
        now += static_cast<int64_t>(rng() % 200);
        const double cost = 1 + static_cast<double>(rng() % 3);
        absl::StatusOr<Decision> got = redis->check(strategy, key, now, cost);
        absl::StatusOr<Decision> want = memory->check(strategy, key, now, cost);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, *want) << key << " step " << i;
        denials += !want->allowed;
        ++steps;
      }
    }
  }
  const BackendStats after = redis->stats();
  EXPECT_EQ(after.redirects - before.redirects, 0) << "calls went direct";
  EXPECT_EQ(after.requests - before.requests, steps);
  const std::vector<int> owners = owners_of(keys);
  EXPECT_EQ(std::set<int>(owners.begin(), owners.end()).size(), 3u)
      << "keys on every primary";
  EXPECT_GT(denials, 50);
}

// Migrates `key`'s slot from its primary to another one the way `redis-cli
// --cluster reshard` does, checking `key` along the way on the blocking
// and the asynchronous path: ASK once the key has moved but the slot has
// not, MOVED once it has; the count goes on across the move.
TEST(RedisCluster, ChecksFollowAskAndMovedWhileTheSlotMigrates) {
  std::unique_ptr<RedisCoordinator> redis = cluster_coordinator();
  const AnyStrategy strategy = *make_strategy(
      FixedWindow::Options{.limit = 1000, .window_ms = 3'600'000});
  const std::string key = absl::StrCat("{cl-move:", getpid(), "}");
  const int slot = key_slot(key);
  const int from = owner_of(key);
  ASSERT_GT(from, 0);
  const std::map<int, std::string> nodes = primaries();
  ASSERT_EQ(nodes.size(), 3u);
  const int to = nodes.upper_bound(from) != nodes.end()
                     ? nodes.upper_bound(from)->first
                     : nodes.begin()->first;
  int64_t remaining = 1000;
  const auto expect_next = [&](absl::StatusOr<Decision> d, const char* when) {
    ASSERT_TRUE(d.ok()) << when << ": " << d.status();
    EXPECT_TRUE(d->allowed) << when;
    EXPECT_EQ(d->remaining, --remaining) << when << ": the count went on";
  };
  const auto check_async = [&] {
    std::promise<absl::StatusOr<Decision>> p;
    redis->check_async(strategy, key, 0, 1, [&p](absl::StatusOr<Decision> d) {
      p.set_value(std::move(d));
    });
    return p.get_future().get();
  };
  expect_next(redis->check(strategy, key, 0, 1), "before");
  expect_next(check_async(), "before, async");
  EXPECT_EQ(redis->stats().redirects, 0);

  // The slot migrates; the key moves to the importing node.
  EXPECT_EQ(cli1(to, absl::StrCat("CLUSTER SETSLOT ", slot, " IMPORTING ",
                                  nodes.at(from))),
            "OK");
  EXPECT_EQ(cli1(from, absl::StrCat("CLUSTER SETSLOT ", slot, " MIGRATING ",
                                    nodes.at(to))),
            "OK");
  EXPECT_EQ(cli1(from, absl::StrCat("MIGRATE 127.0.0.1 ", to,
                                    " \"\" 0 5000 "
                                    "KEYS ",
                                    key)),
            "OK");
  int64_t redirects = redis->stats().redirects;
  expect_next(redis->check(strategy, key, 0, 1), "asked");
  EXPECT_EQ(redis->stats().redirects, redirects + 1) << "one ASK";
  expect_next(check_async(), "asked, async");
  EXPECT_EQ(redis->stats().redirects, redirects + 2)
      << "ASK again: the map still names the old node";

  // The slot is reassigned: the old node answers MOVED.
  for (const auto& [port, id] : nodes) {
    (void)id;
    EXPECT_EQ(cli1(port, absl::StrCat("CLUSTER SETSLOT ", slot, " NODE ",
                                      nodes.at(to))),
              "OK");
  }
  redirects = redis->stats().redirects;
  expect_next(check_async(), "moved, async");
  EXPECT_EQ(redis->stats().redirects, redirects + 1) << "one MOVED";
  expect_next(redis->check(strategy, key, 0, 1), "after");
  expect_next(check_async(), "after, async");
  EXPECT_EQ(redis->stats().redirects, redirects + 1) << "then direct";
  EXPECT_EQ(owner_of(key), to);
}

// A fresh coordinator's first calls race its first map read: from four
// threads, blocking and asynchronous checks on keys of every primary all
// complete once and admit (the early ones by way of MOVED from the seed).
TEST(RedisCluster, ThreadsCheckWhileTheFirstMapIsRead) {
  auto redis = *RedisCoordinator::create(
      {.connections = 2,
       .command_timeout = absl::Seconds(2),
       .cluster_seeds = {absl::StrCat("127.0.0.1:", base_port() + 1)}});
  const AnyStrategy strategy =
      *make_strategy(FixedWindow::Options{.limit = 1000, .window_ms = 60'000});
  const std::string run = absl::StrCat("cl-race:", getpid(), ":");
  constexpr int kThreads = 4, kEach = 150;
  std::atomic<int> completions{0}, allowed{0};
  std::latch done(kThreads * kEach);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string key = absl::StrCat(run, (t * kEach + i) % 40);
        const auto count = [&](const absl::StatusOr<Decision>& d) {
          EXPECT_TRUE(d.ok()) << d.status();
          if (d.ok() && d->allowed) ++allowed;
          ++completions;
          done.count_down();
        };
        if (i % 2 == 0) {
          count(redis->check(strategy, key, 0, 1));
        } else {
          redis->check_async(strategy, key, 0, 1,
                             [count](absl::StatusOr<Decision> d) { count(d); });
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  done.wait();
  EXPECT_EQ(completions.load(), kThreads * kEach);
  EXPECT_EQ(allowed.load(), kThreads * kEach);
  EXPECT_GE(redis->stats().refreshes, 1);
}

TEST(RedisCluster, BadClusterOptionsAreRefusedNamingTheField) {
  for (const auto& [seeds, database, field] :
       std::vector<std::tuple<std::vector<std::string>, int, std::string>>{
           {{"127.0.0.1"}, 0, "cluster_seeds"},
           {{"127.0.0.1:0"}, 0, "cluster_seeds"},
           {{":7000"}, 0, "cluster_seeds"},
           {{"127.0.0.1:7000"}, 3, "database"},
       }) {
    absl::StatusOr<std::unique_ptr<RedisCoordinator>> c =
        RedisCoordinator::create(
            {.database = database, .cluster_seeds = seeds});
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(c.status()));
    EXPECT_NE(c.status().message().find(field), std::string::npos)
        << c.status();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(
      RedisCoordinator::create({.max_redirects = 0}).status()));
}

}  // namespace
}  // namespace redis_cluster_test
}  // namespace throttlekit
