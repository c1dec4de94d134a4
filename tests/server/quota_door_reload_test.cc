// Reloading the quota door's `rlqs:` block (src/server/quota_door.h,
// "Reload"; docs/rlqs.md, "Reloading"), driven without gRPC on a manual
// clock, over writers that record every action and complete each write at
// once: a rule whose requests alone change keeps its budget and its
// clients get the new limit at once, a rule inserted before another keeps
// the other's budget, a changed interval moves a bucket to a new budget
// through DENY_ALL, buckets move between budgets and blanket rules, a
// removed domain is an unknown one, a change of fleetHeartbeat is refused
// whole, and reloads racing reports on several threads (also under
// ThreadSanitizer) leave every budget on the block in force.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "gtest/gtest.h"
#include "quota_door.h"
#include "quota_open_stream.h"
#include "support/eventually.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {
namespace quota_door_reload_test {
namespace {

using testing::eventually;

// The `rlqs:` block of a document: domain `d`, TTL 6 s, `rules` under
// `buckets:`, and `extra` lines of the block itself.
RlqsConfig block(const std::string& rules, const std::string& extra = "") {
  const std::string yaml =
      absl::StrCat("version: 1\nrlqs:\n", extra,
                   "  domains:\n    - domain: d\n      assignmentTtl: 6s\n"
                   "      buckets:\n",
                   rules);
  absl::StatusOr<ServerConfig> c = parse_config(yaml, "door.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->rlqs : RlqsConfig{};
}

std::string api_limit(int requests, const std::string& per = "1s") {
  return absl::StrCat(
      "        - match: {name: api}\n          limit: {requests: ", requests,
      ", per: ", per, "}\n");
}

// Every action written, per value of the bucket id's `name`, as text:
// "tb <tokens>/<fill s>", "allow", "deny" or "abandon". Writes complete at
// once.
class RecordingWriter final : public QuotaStreamWriter {
 public:
  void start_write(const rlqs_pb::RateLimitQuotaResponse* r) override {
    {
      MutexLock lock(mu_);
      for (const auto& a : r->bucket_action()) {
        const auto it = a.bucket_id().bucket().find("name");
        const std::string name =
            it == a.bucket_id().bucket().end() ? "" : it->second;
        std::string what = "abandon";
        if (a.has_quota_assignment_action()) {
          const auto& s = a.quota_assignment_action().rate_limit_strategy();
          if (s.has_token_bucket()) {
            what = absl::StrCat("tb ", s.token_bucket().max_tokens(), "/",
                                s.token_bucket().fill_interval().seconds());
          } else {
            what = s.blanket_rule() ==
                           ::envoy::type::v3::RateLimitStrategy::ALLOW_ALL
                       ? "allow"
                       : "deny";
          }
        }
        sent_[name].push_back(what);
      }
    }
    stream->on_write_done(true);
  }
  void finish(const grpc::Status&) override {}
  std::vector<std::string> sent(const std::string& name) {
    MutexLock lock(mu_);
    return sent_[name];
  }
  std::string last(const std::string& name) {
    MutexLock lock(mu_);
    return sent_[name].empty() ? "" : sent_[name].back();
  }
  QuotaStream* stream = nullptr;

 private:
  Mutex mu_;
  std::map<std::string, std::vector<std::string>> sent_ ABSL_GUARDED_BY(mu_);
};

class QuotaDoorReload : public ::testing::Test {
 protected:
  std::shared_ptr<QuotaStream> open(QuotaDoor& door, RecordingWriter& w) {
    return testing::open_stream(door, w);
  }
  // Reports `allowed` requests over a second for the bucket {name: value}.
  static absl::Status report(QuotaDoor& door, QuotaStream& s,
                             const std::string& value, uint64_t allowed) {
    rlqs_pb::RateLimitQuotaUsageReports m;
    m.set_domain("d");
    auto* u = m.add_bucket_quota_usages();
    (*u->mutable_bucket_id()->mutable_bucket())["name"] = value;
    u->mutable_time_elapsed()->set_seconds(1);
    u->set_num_requests_allowed(allowed);
    return door.report(s, m);
  }
  static std::string metrics(QuotaDoor& door) {
    std::string out;
    door.append_prometheus(out);
    return out;
  }

  ManualClock clock_;
  RecordingWriter w1_;
  RecordingWriter w2_;
};

TEST_F(QuotaDoorReload, ARulesNewRequestsReachItsClientsAtOnce) {
  QuotaDoor door(block(api_limit(100)), ServerClock{&clock_});
  std::shared_ptr<QuotaStream> a = open(door, w1_);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  EXPECT_EQ(w1_.last("api"), "tb 100/1");

  // Lowered: the same budget, and the client lowered without a report.
  ASSERT_TRUE(door.reload(block(api_limit(40))).ok());
  EXPECT_TRUE(eventually([&] { return w1_.last("api") == "tb 40/1"; }))
      << w1_.last("api");
  EXPECT_EQ(door.budgets(), 1u);
  // Its old 100 counts until it expires: a newcomer gets nothing.
  std::shared_ptr<QuotaStream> b = open(door, w2_);
  ASSERT_TRUE(report(door, *b, "api", 500).ok());
  EXPECT_EQ(w2_.last("api"), "deny");

  // Raised again: its own commitment is no obstacle; the split follows.
  ASSERT_TRUE(door.reload(block(api_limit(100))).ok());
  EXPECT_TRUE(eventually([&] {
    return w1_.last("api") == "tb 50/1" || w1_.last("api") == "tb 100/1";
  })) << w1_.last("api");
  EXPECT_TRUE(absl::StrContains(
      metrics(door), "throttlekit_rlqs_reloads_total{result=\"applied\"} 2\n"));
}

TEST_F(QuotaDoorReload, ARuleInsertedBeforeAnotherKeepsTheOthersBudget) {
  QuotaDoor door(block(api_limit(100)), ServerClock{&clock_});
  std::shared_ptr<QuotaStream> a = open(door, w1_);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  ASSERT_EQ(w1_.sent("api"), std::vector<std::string>{"tb 100/1"});
  ASSERT_TRUE(
      door.reload(block(absl::StrCat(
                      "        - match: {name: new}\n          deny: true\n",
                      api_limit(100))))
          .ok());
  clock_.set_ms(1000);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  ASSERT_TRUE(report(door, *a, "new", 1).ok());
  // The same budget: nothing new to send (refreshed at ttl/2 only).
  EXPECT_EQ(w1_.sent("api"), std::vector<std::string>{"tb 100/1"});
  EXPECT_EQ(w1_.last("new"), "deny");
  EXPECT_EQ(door.budgets(), 1u);
}

TEST_F(QuotaDoorReload, AChangedIntervalMovesABucketToANewBudgetViaDenyAll) {
  QuotaDoor door(block(api_limit(100)), ServerClock{&clock_});
  std::shared_ptr<QuotaStream> a = open(door, w1_);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  ASSERT_TRUE(door.reload(block(api_limit(100, "2s"))).ok());
  clock_.set_ms(1000);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  // DENY_ALL first: Envoy would keep a bucket whose interval alone
  // changed; then the new budget's bucket, starting afresh.
  EXPECT_EQ(w1_.sent("api"),
            (std::vector<std::string>{"tb 100/1", "deny", "tb 100/2"}));
  // The old budget stays while the 100 it sent counts (to 0 + 6 s + 1 s),
  // then is dropped.
  EXPECT_EQ(door.budgets(), 2u);
  clock_.set_ms(7000);
  EXPECT_TRUE(eventually([&] { return door.budgets() == 1u; }));
}

TEST_F(QuotaDoorReload, ABucketMovesBetweenABudgetAndABlanketRule) {
  QuotaDoor door(block(api_limit(100)), ServerClock{&clock_});
  std::shared_ptr<QuotaStream> a = open(door, w1_);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  ASSERT_TRUE(
      door.reload(
              block("        - match: {name: api}\n          allow: true\n"))
          .ok());
  clock_.set_ms(1000);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  EXPECT_EQ(w1_.last("api"), "allow");
  // Its budget lost its client: dropped once the 100 expires; the
  // ALLOW_ALL is refreshed at 4000 and 7000.
  clock_.set_ms(4000);
  EXPECT_TRUE(eventually([&] { return w1_.sent("api").size() == 3; }));
  clock_.set_ms(7000);
  EXPECT_TRUE(eventually(
      [&] { return door.budgets() == 0u && w1_.sent("api").size() == 4; }));
  const size_t allows = w1_.sent("api").size();

  ASSERT_TRUE(door.reload(block(api_limit(30))).ok());
  clock_.set_ms(7500);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  EXPECT_EQ(w1_.last("api"), "tb 30/1");
  EXPECT_EQ(w1_.sent("api").size(), allows + 1);
  // No more ALLOW_ALL refreshes: only the budget's, at ttl/2.
  clock_.set_ms(10'499);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(w1_.sent("api").size(), allows + 1) << w1_.last("api");
  clock_.set_ms(10'500);
  EXPECT_TRUE(eventually([&] { return w1_.sent("api").size() == allows + 2; }));
  EXPECT_EQ(w1_.last("api"), "tb 30/1");
}

TEST_F(QuotaDoorReload, ARemovedDomainIsAnUnknownOne) {
  QuotaDoor door(block(api_limit(100), "  unknownDomain: notFound\n"),
                 ServerClock{&clock_});
  std::shared_ptr<QuotaStream> a = open(door, w1_);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  absl::StatusOr<ServerConfig> other = parse_config(
      "version: 1\nrlqs:\n  unknownDomain: notFound\n  domains:\n"
      "    - domain: e\n      buckets:\n" +
          api_limit(5),
      "door.yaml");
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(door.reload(other->rlqs).ok());
  EXPECT_EQ(door.domains(), 1u);
  const absl::Status s = report(door, *a, "api", 500);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "\"d\"")) << s;
}

TEST_F(QuotaDoorReload, AChangedFleetHeartbeatIsRefusedAndChangesNothing) {
  QuotaDoor door(block(api_limit(100)), ServerClock{&clock_});
  std::shared_ptr<QuotaStream> a = open(door, w1_);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  const RlqsConfig next = block(api_limit(5), "  fleetHeartbeat: 2s\n");
  EXPECT_EQ(door.check_reload(next).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status s = door.reload(next);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "rlqs.fleetHeartbeat: 2000 ms"))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "restart")) << s;
  // Still 100.
  std::shared_ptr<QuotaStream> b = open(door, w2_);
  clock_.set_ms(1000);
  ASSERT_TRUE(report(door, *a, "api", 500).ok());
  ASSERT_TRUE(report(door, *b, "api", 500).ok());
  // Half of 100 each, not of 5 (b capped until a's 100 expires).
  EXPECT_EQ(w1_.sent("api"), (std::vector<std::string>{"tb 100/1", "tb 50/1"}));
  EXPECT_EQ(w2_.last("api"), "deny");
  EXPECT_TRUE(absl::StrContains(
      metrics(door), "throttlekit_rlqs_reloads_total{result=\"refused\"} 1\n"));
}

TEST(QuotaDoorReloadThreads,
     ReloadsRacingReportsLeaveEveryBudgetOnTheBlockInForce) {
  // Eight buckets, one client each (one stream per thread); one thread
  // reloads the limit between 10 and 20 while four report. Then a last
  // reload to 30: every bucket's client, alone in its budget, is brought to
  // 30, whichever block the budget was made under.
  const auto rules = [](int requests) {
    return absl::StrCat(
        "        - match: {name: \"*\"}\n          limit: "
        "{requests: ",
        requests, ", per: 1s}\n");
  };
  QuotaDoor door(block(rules(10)), ServerClock{});
  constexpr int kThreads = 4;
  constexpr int kBuckets = 8;
  std::vector<RecordingWriter> writers(kThreads);
  std::vector<std::shared_ptr<QuotaStream>> streams;
  for (RecordingWriter& w : writers) {
    streams.push_back(testing::open_stream(door, w));
  }
  std::atomic<bool> stop{false};
  std::thread reloader([&] {
    for (int i = 0; !stop.load(); ++i) {
      EXPECT_TRUE(door.reload(block(rules(i % 2 == 0 ? 20 : 10))).ok());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::thread> reporters;
  for (int t = 0; t < kThreads; ++t) {
    reporters.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const int bucket =
            t * (kBuckets / kThreads) + i % (kBuckets / kThreads);
        rlqs_pb::RateLimitQuotaUsageReports m;
        m.set_domain("d");
        auto* u = m.add_bucket_quota_usages();
        (*u->mutable_bucket_id()->mutable_bucket())["name"] =
            absl::StrCat("b", bucket);
        u->mutable_time_elapsed()->set_seconds(1);
        u->set_num_requests_allowed(1000);
        EXPECT_TRUE(door.report(*streams[t], m).ok());
      }
    });
  }
  for (std::thread& r : reporters) r.join();
  stop = true;
  reloader.join();
  ASSERT_TRUE(door.reload(block(rules(30))).ok());
  EXPECT_EQ(door.budgets(), static_cast<size_t>(kBuckets));
  for (int b = 0; b < kBuckets; ++b) {
    RecordingWriter& w = writers[b / (kBuckets / kThreads)];
    EXPECT_TRUE(eventually([&] {
      return w.last(absl::StrCat("b", b)) == "tb 30/1";
    })) << "b"
        << b << ": " << w.last(absl::StrCat("b", b));
  }
  door.stop();
}

}  // namespace
}  // namespace quota_door_reload_test
}  // namespace throttlekit::server
