// The region pool on a real Redis (throttlekit/federation/
// redis_region_pool.h): the script equal to the C++ core
// (region_pool_step) step for step over random timelines, the stored hash
// read back and compared; the layout (`ws`, `w:<region>`, `g:<region>`,
// TTL to the window end) read by redis-cli on the Redis clock; other
// layouts, a full window and bad input refused; grants from threads never
// summing above L; a dead server kUnavailable, a silent one
// kDeadlineExceeded within the timeouts, and service resuming after a
// server restart.

#include "throttlekit/federation/redis_region_pool.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/forked_fleet.h"
#include "support/redis_test_server.h"
#include "support/region_pool_timeline.h"
#include "support/run_threads.h"

namespace throttlekit {
namespace redis_region_pool_test {
namespace {

std::string run_prefix(const char* stem) {
  return std::string(stem) + ":" + std::to_string(getpid()) + ":";
}

std::unique_ptr<RedisRegionPool> pool(RedisRegionPoolOptions o = {}) {
  if (o.port == 6379) o.port = testing::redis_port();
  auto p = RedisRegionPool::create(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

LeaseBudget budget(int64_t limit, int64_t window_ms) {
  return *LeaseBudget::create({limit, window_ms});
}

TEST(RedisRegionPoolConformance, ScriptEqualsTheCoreStepForStep) {
  // Keys outlive the timelines' caller times (which are in 2023).
  std::unique_ptr<RedisRegionPool> p = pool({.ttl_slack_ms = 600'000});
  EXPECT_EQ(testing::expect_region_pool_matches_core(*p, run_prefix("rfp-conf"),
                                                     12, 250),
            12 * 250);
}

TEST(RedisRegionPool, KeepsItsLayoutOnTheRedisClock) {
  std::unique_ptr<RedisRegionPool> p = pool({.ttl_slack_ms = 5000});
  const std::string key = run_prefix("rfp-layout") + "k";
  const LeaseBudget b = budget(90, 60'000);
  absl::StatusOr<RegionPoolGrant> eu = p->grant(b, key, "eu-west", 2, 10);
  ASSERT_TRUE(eu.ok()) << eu.status();
  absl::StatusOr<RegionPoolGrant> us = p->grant(b, key, "us-east", 1, 50);
  ASSERT_TRUE(us.ok()) << us.status();
  // The Redis clock chose the window: a minute-aligned start near now.
  const int64_t now = testing::wall_ms();
  EXPECT_EQ(eu->window_start_ms, b.window_start(eu->window_start_ms));
  EXPECT_LE(eu->window_start_ms, now + 1000);
  EXPECT_GT(eu->window_start_ms, now - 61'000);
  EXPECT_EQ(eu->granted, 10);
  // us: fair 30 (weights 2 : 1 of 90); eu's 60 reserved.
  EXPECT_EQ(*us, (RegionPoolGrant{30, 0, 30, 3, eu->window_start_ms}));
  const std::vector<std::string> hash =
      testing::redis_cli("HGETALL tk:rfp:" + key);
  std::map<std::string, std::string> fields;
  for (size_t i = 0; i + 1 < hash.size(); i += 2) fields[hash[i]] = hash[i + 1];
  EXPECT_EQ(fields, (std::map<std::string, std::string>{
                        {"ws", std::to_string(eu->window_start_ms)},
                        {"w:eu-west", "2"},
                        {"g:eu-west", "10"},
                        {"w:us-east", "1"},
                        {"g:us-east", "30"}}));
  const std::vector<std::string> pttl =
      testing::redis_cli("PTTL tk:rfp:" + key);
  ASSERT_EQ(pttl.size(), 1u);
  const long long ttl = std::atoll(pttl[0].c_str());
  // Until the window's end plus the slack.
  EXPECT_GT(ttl, 5000);
  EXPECT_LE(ttl, eu->window_start_ms + 60'000 - (now - 1000) + 5000);
  absl::StatusOr<RegionPoolState> st = p->state(key);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->regions.at("us-east"), (RegionPoolState::Region{1, 30}));
  EXPECT_EQ(p->backend(), "redis");
  EXPECT_NE(RedisRegionPool::lua_script().find("mul_div"), std::string::npos);
}

TEST(RedisRegionPool, RefusesOtherLayoutsAndBadInputWithoutWriting) {
  std::unique_ptr<RedisRegionPool> p = pool();
  const std::string pre = run_prefix("rfp-bad");
  const LeaseBudget b = budget(10, 1000);
  testing::redis_cli("SET tk:rfp:" + pre + "string x");
  testing::redis_cli("HSET tk:rfp:" + pre + "hash budget 5 expiresAt 7");
  for (const char* k : {"string", "hash"}) {
    EXPECT_EQ(p->grant(b, pre + k, "eu", 1, 1).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << k;
    EXPECT_EQ(p->state(pre + k).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << k;
  }
  EXPECT_EQ(testing::redis_cli("GET tk:rfp:" + pre + "string"),
            std::vector<std::string>{"x"});
  EXPECT_EQ(testing::redis_cli("HGET tk:rfp:" + pre + "hash budget"),
            std::vector<std::string>{"5"});
  // Bad arguments are refused before any I/O: even a pool whose server
  // does not exist answers kInvalidArgument.
  std::unique_ptr<RedisRegionPool> nowhere = pool({.port = 1});
  for (RegionPool* q : {static_cast<RegionPool*>(p.get()),
                        static_cast<RegionPool*>(nowhere.get())}) {
    const auto bad = absl::StatusCode::kInvalidArgument;
    EXPECT_EQ(q->grant(b, "", "eu", 1, 1).status().code(), bad);
    EXPECT_EQ(q->grant(b, "k", "", 1, 1).status().code(), bad);
    EXPECT_EQ(q->grant(b, "k", std::string(65, 'r'), 1, 1).status().code(),
              bad);
    EXPECT_EQ(q->grant(b, "k", "eu", 0, 1).status().code(), bad);
    EXPECT_EQ(q->grant(b, "k", "eu", kMaxRegionWeight + 1, 1).status().code(),
              bad);
    EXPECT_EQ(q->grant(b, "k", "eu", 1, -1).status().code(), bad);
    EXPECT_EQ(q->grant(b, "k", "eu", 1, kMaxSafeInteger + 1).status().code(),
              bad);
    EXPECT_EQ(q->grant(b, "k", "eu", 1, 1, -1).status().code(), bad);
    EXPECT_EQ(q->state("").status().code(), bad);
  }
}

TEST(RedisRegionPool, RefusesBadOptionsNamingTheField) {
  const auto message = [](RedisRegionPoolOptions o) {
    auto p = RedisRegionPool::create(o);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  EXPECT_EQ(message({.host = ""}),
            "redis_region_pool.host must be non-empty; got \"\"");
  EXPECT_EQ(message({.port = 0}),
            "redis_region_pool.port must be in [1, 65535]; got 0");
  EXPECT_EQ(message({.database = -1}),
            "redis_region_pool.database must be in [0, 1000000]; got -1");
  EXPECT_EQ(message({.connect_timeout = absl::ZeroDuration()}),
            "redis_region_pool.connect_timeout must be in (0, 10 min]; got 0");
  EXPECT_EQ(message({.command_timeout = absl::Minutes(11)}),
            "redis_region_pool.command_timeout must be in (0, 10 min]; got "
            "11m");
  EXPECT_EQ(message({.prefix = ""}),
            "redis_region_pool.prefix must be 1 .. 256 bytes; got 0");
  EXPECT_EQ(message({.ttl_slack_ms = -1}),
            "redis_region_pool.ttl_slack_ms must be in [0, 2^53-1]; got -1");
  EXPECT_EQ(message({.username = "u"}),
            "redis_region_pool.username needs a password");
}

TEST(RedisRegionPool, AFullWindowRefusesANewRegion) {
  std::unique_ptr<RedisRegionPool> p = pool();
  const std::string key = run_prefix("rfp-full") + "k";
  const LeaseBudget b = budget(100'000, 600'000);
  for (size_t i = 0; i < kMaxPoolRegions; ++i) {
    ASSERT_TRUE(p->grant(b, key, "r" + std::to_string(i), 1, 1).ok()) << i;
  }
  absl::StatusOr<RegionPoolGrant> g = p->grant(b, key, "late", 1, 1);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted)
      << g.status();
  EXPECT_EQ(testing::redis_cli("HEXISTS tk:rfp:" + key + " w:late"),
            std::vector<std::string>{"0"});
  EXPECT_TRUE(p->grant(b, key, "r5", 1, 2).ok());
}

TEST(RedisRegionPool, ConcurrentGrantsNeverExceedTheLimit) {
  // Four pools (four connections), eight threads.
  std::vector<std::unique_ptr<RedisRegionPool>> pools;
  for (int i = 0; i < 4; ++i) pools.push_back(pool());
  // One RegionPool that spreads calls over the four connections.
  class Spread final : public RegionPool {
   public:
    explicit Spread(std::vector<std::unique_ptr<RedisRegionPool>>& p) : p_(p) {}
    std::string_view backend() const noexcept override { return "spread"; }

   protected:
    absl::StatusOr<RegionPoolGrant> do_grant(const LeaseBudget& b,
                                             std::string_view key,
                                             std::string_view region,
                                             int64_t weight, int64_t want,
                                             int64_t now_ms) override {
      const size_t i = next_.fetch_add(1) % p_.size();
      return p_[i]->grant(b, key, region, weight, want, now_ms);
    }
    absl::StatusOr<RegionPoolState> do_state(std::string_view key) override {
      return p_[0]->state(key);
    }

   private:
    std::vector<std::unique_ptr<RedisRegionPool>>& p_;
    std::atomic<size_t> next_{0};
  } spread(pools);
  const int64_t most = testing::expect_concurrent_grants_never_exceed_limit(
      spread, run_prefix("rfp-hot") + "k");
  EXPECT_GT(most, 0);
}

TEST(RedisRegionPool, ADeadServerIsUnavailable) {
  // Port 1 on loopback: nothing listens (connection refused).
  std::unique_ptr<RedisRegionPool> p = pool({.port = 1});
  absl::StatusOr<RegionPoolGrant> g =
      p->grant(budget(10, 1000), "k", "eu", 1, 1);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable) << g.status();
}

TEST(RedisRegionPool, ASilentServerIsDeadlineExceededWithinTheTimeouts) {
  // A socket that accepts connections (the kernel completes the handshake
  // from the backlog) and never answers.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::unique_ptr<RedisRegionPool> p =
      pool({.port = ntohs(addr.sin_port),
            .connect_timeout = absl::Milliseconds(150),
            .command_timeout = absl::Milliseconds(100)});
  // The first call waits for the connection being opened until its
  // deadline; once the opening has failed for want of an answer, calls are
  // kUnavailable at once, naming why.
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<RegionPoolGrant> g =
        p->grant(budget(10, 1000), "k", "eu", 1, 1);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
    if (i == 0) {
      EXPECT_EQ(g.status().code(), absl::StatusCode::kDeadlineExceeded)
          << g.status();
      EXPECT_GE(ms, 100);
    } else {
      EXPECT_TRUE(absl::IsDeadlineExceeded(g.status()) ||
                  absl::IsUnavailable(g.status()))
          << g.status();
    }
    EXPECT_LT(ms, 1000);
  }
  absl::SleepFor(absl::Milliseconds(200));  // past the connect timeout
  const absl::Status known =
      p->grant(budget(10, 1000), "k", "eu", 1, 1).status();
  EXPECT_TRUE(absl::IsUnavailable(known)) << known;
  EXPECT_NE(known.message().find("no answer within the connect timeout"),
            std::string::npos)
      << known;
  close(fd);
}

// A private server (the fixture's is shared with tests running
// alongside): killed, the pool reports kUnavailable; restarted, the pool's
// coordinator reconnects by itself in the background (within its backoff:
// calls meanwhile are kUnavailable at once), and the restarted server
// starts empty.
TEST(RedisRegionPool, ResumesAfterTheServerRestarts) {
  testing::PrivateRedis server(testing::redis_port() + 51);
  ASSERT_TRUE(server.start());
  std::unique_ptr<RedisRegionPool> p = pool({.port = server.port()});
  const LeaseBudget b = budget(100, 600'000);
  absl::StatusOr<RegionPoolGrant> g = p->grant(b, "k", "eu", 1, 5);
  ASSERT_TRUE(g.ok()) << g.status();
  server.kill();
  g = p->grant(b, "k", "eu", 1, 7);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable) << g.status();
  ASSERT_TRUE(server.start());
  for (int i = 0; i < 1000; ++i) {
    g = p->grant(b, "k", "eu", 1, 7);
    if (g.ok() || !absl::IsUnavailable(g.status())) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->granted, 7);
  EXPECT_EQ(g->previous, 0);
}

}  // namespace
}  // namespace redis_region_pool_test
}  // namespace throttlekit
