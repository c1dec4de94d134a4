// The quota door's pusher (src/server/quota_door.h) on a manual clock, over
// writers that complete each write at once: each budget and each stream's
// blanket buckets are refreshed at their own time whatever else is queued,
// a due time a report moved later is neither missed nor run early, a closed
// stream leaves the queue, a budget waiting for its share is assigned as
// soon as the share moves, and a fenced share keeps the buckets in force and
// lowers each at its refresh. The pusher is a thread: each expectation waits
// for it (it looks at least every 5 ms on a manual clock), and "nothing
// happens" is checked over 50 ms, ten of its looks.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "gtest/gtest.h"
#include "quota_door.h"
#include "quota_open_stream.h"
#include "support/eventually.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {
namespace quota_door_test {
namespace {

using testing::eventually;

constexpr const char* kYaml = R"(
version: 1
rlqs:
  domains:
    - domain: d
      assignmentTtl: 6s
      buckets:
        - match: {name: "*"}
          limit: {requests: 1000, per: 1s}
        - match: {open: "*"}
          allow: true
)";

RlqsConfig config() {
  absl::StatusOr<ServerConfig> c = parse_config(kYaml, "door.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c->rlqs;
}

// Counts the actions written per bucket id value; writes complete at once.
class CountingWriter final : public QuotaStreamWriter {
 public:
  void start_write(const rlqs_pb::RateLimitQuotaResponse* r) override {
    {
      MutexLock lock(mu_);
      for (const auto& a : r->bucket_action()) {
        const bool deny =
            a.quota_assignment_action().rate_limit_strategy().blanket_rule() ==
            ::envoy::type::v3::RateLimitStrategy::DENY_ALL;
        for (const auto& [k, v] : a.bucket_id().bucket()) {
          ++sent_[v];
          last_denied_[v] = deny;
        }
      }
    }
    stream->on_write_done(true);
  }
  void finish(const grpc::Status&) override {}
  int sent(const std::string& bucket) {
    MutexLock lock(mu_);
    return sent_[bucket];
  }
  // Whether the last action for `bucket` was DENY_ALL.
  bool last_denied(const std::string& bucket) {
    MutexLock lock(mu_);
    return last_denied_[bucket];
  }
  QuotaStream* stream = nullptr;

 private:
  Mutex mu_;
  std::map<std::string, int> sent_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> last_denied_ ABSL_GUARDED_BY(mu_);
};

// A share the test sets (nullopt: not known yet) and moves.
class TestShares final : public ShareSource {
 public:
  std::shared_ptr<BudgetShare> track(QuotaBudgetRef budget) override {
    MutexLock lock(mu_);
    changed_.push_back(budget.changed);
    return std::make_shared<Share>(this);
  }
  // Fences the share (at 0, `fenced` true) or lifts the fence.
  void fence(bool on) {
    fenced_.store(on);
    move_to(share_.load());
  }
  void move_to(int64_t share) {
    share_.store(share);
    std::vector<std::function<void()>> changed;
    {
      MutexLock lock(mu_);
      changed = changed_;
    }
    for (const auto& c : changed) c();
  }

 private:
  class Share final : public BudgetShare {
   public:
    explicit Share(TestShares* source) : source_(source) {}
    std::optional<int64_t> at(int64_t, int64_t) override {
      const int64_t s = source_->share_.load();
      if (s < 0) return std::nullopt;
      return source_->fenced_.load() ? 0 : s;
    }
    bool fenced(int64_t) override { return source_->fenced_.load(); }

   private:
    TestShares* const source_;
  };
  std::atomic<int64_t> share_{-1};
  std::atomic<bool> fenced_{false};
  Mutex mu_;
  std::vector<std::function<void()>> changed_ ABSL_GUARDED_BY(mu_);
};

// Lets the pusher look ten times.
void let_it_look() {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

class QuotaDoorPusher : public ::testing::Test {
 protected:
  // Opens a stream whose writes `writer` counts.
  std::shared_ptr<QuotaStream> open(QuotaDoor& door, CountingWriter& writer) {
    return testing::open_stream(door, writer);
  }
  // Reports `allowed` requests over a second for the bucket {key: value}.
  static void report(QuotaDoor& door, QuotaStream& s, const std::string& key,
                     const std::string& value, uint64_t allowed) {
    rlqs_pb::RateLimitQuotaUsageReports m;
    m.set_domain("d");
    auto* u = m.add_bucket_quota_usages();
    (*u->mutable_bucket_id()->mutable_bucket())[key] = value;
    u->mutable_time_elapsed()->set_seconds(1);
    u->set_num_requests_allowed(allowed);
    ASSERT_TRUE(door.report(s, m).ok());
  }

  ManualClock clock_;
  CountingWriter w1_;
  CountingWriter w2_;
};

TEST_F(QuotaDoorPusher, EachBudgetIsRefreshedAtItsOwnTimeAndAMovedDueIsKept) {
  QuotaDoor door(config(), ServerClock{&clock_});
  std::shared_ptr<QuotaStream> s = open(door, w1_);
  report(door, *s, "name", "a", 40);  // a: sent at 0, due at 3000
  EXPECT_EQ(w1_.sent("a"), 1);
  clock_.set_ms(1000);
  report(door, *s, "name", "b", 40);  // b: sent at 1000, due at 4000
  clock_.set_ms(2000);
  report(door, *s, "name", "a", 60);  // a raised at 2000: due at 5000
  EXPECT_EQ(w1_.sent("a"), 2);

  clock_.set_ms(3000);  // a's old due time: nothing is due
  let_it_look();
  EXPECT_EQ(w1_.sent("a"), 2);
  EXPECT_EQ(w1_.sent("b"), 1);

  clock_.set_ms(4000);  // b's refresh, not a's
  EXPECT_TRUE(eventually([&] { return w1_.sent("b") == 2; }));
  let_it_look();
  EXPECT_EQ(w1_.sent("a"), 2);

  clock_.set_ms(4999);
  let_it_look();
  EXPECT_EQ(w1_.sent("a"), 2);
  clock_.set_ms(5000);  // a's refresh, at its real time
  EXPECT_TRUE(eventually([&] { return w1_.sent("a") == 3; }));
  let_it_look();
  EXPECT_EQ(w1_.sent("b"), 2);
}

TEST_F(QuotaDoorPusher, EachStreamsBlanketsAreRefreshedAtTheirOwnTime) {
  QuotaDoor door(config(), ServerClock{&clock_});
  std::shared_ptr<QuotaStream> s1 = open(door, w1_);
  std::shared_ptr<QuotaStream> s2 = open(door, w2_);
  report(door, *s1, "open", "x", 1);  // ALLOW_ALL, refreshed every 3000
  clock_.set_ms(1000);
  report(door, *s2, "open", "y", 1);
  EXPECT_EQ(w1_.sent("x"), 1);
  EXPECT_EQ(w2_.sent("y"), 1);

  clock_.set_ms(3000);
  EXPECT_TRUE(eventually([&] { return w1_.sent("x") == 2; }));
  let_it_look();
  EXPECT_EQ(w2_.sent("y"), 1);
  clock_.set_ms(4000);
  EXPECT_TRUE(eventually([&] { return w2_.sent("y") == 2; }));

  // A closed stream leaves the queue; the other goes on.
  s1->detach();
  door.close(*s1);
  clock_.set_ms(6000);
  let_it_look();
  EXPECT_EQ(w1_.sent("x"), 2);
  clock_.set_ms(7000);
  EXPECT_TRUE(eventually([&] { return w2_.sent("y") == 3; }));
}

TEST_F(QuotaDoorPusher, ABudgetWaitingForItsShareIsAssignedWhenItMoves) {
  auto shares = std::make_unique<TestShares>();
  TestShares& source = *shares;
  QuotaDoor door(config(), ServerClock{&clock_}, std::move(shares));
  std::shared_ptr<QuotaStream> s = open(door, w1_);
  report(door, *s, "name", "a", 40);
  let_it_look();
  EXPECT_EQ(w1_.sent("a"), 0);  // no share known: nothing assigned

  source.move_to(100);  // no report: the pusher assigns it
  EXPECT_TRUE(eventually([&] { return w1_.sent("a") == 1; }));
  clock_.set_ms(3000);  // and it is due again at its refresh
  EXPECT_TRUE(eventually([&] { return w1_.sent("a") == 2; }));
}

TEST_F(QuotaDoorPusher, AFencedShareHoldsTheBucketsAndLowersThemAtRefresh) {
  auto shares = std::make_unique<TestShares>();
  TestShares& source = *shares;
  QuotaDoor door(config(), ServerClock{&clock_}, std::move(shares));
  source.move_to(100);
  std::shared_ptr<QuotaStream> s = open(door, w1_);
  report(door, *s, "name", "a", 40);  // a token bucket at 0, due at 3000
  EXPECT_TRUE(eventually([&] { return w1_.sent("a") == 1; }));
  EXPECT_FALSE(w1_.last_denied("a"));

  // Fenced at 1000: the bucket in force is kept, nothing is sent (a share
  // of 0 would lower it to DENY_ALL at once).
  clock_.set_ms(1000);
  source.fence(true);
  let_it_look();
  EXPECT_EQ(w1_.sent("a"), 1);
  // At its refresh it is lowered to DENY_ALL instead of refreshed.
  clock_.set_ms(3000);
  EXPECT_TRUE(eventually([&] { return w1_.sent("a") == 2; }));
  EXPECT_TRUE(w1_.last_denied("a"));
  // Unfenced: a new bucket at once, paid beside the old one (still
  // counted until 0 + 6 s + the 1 s slack): 40 + 40 within the 100.
  clock_.set_ms(4000);
  source.fence(false);
  EXPECT_TRUE(eventually([&] { return w1_.sent("a") == 3; }));
  EXPECT_FALSE(w1_.last_denied("a"));
}

}  // namespace
}  // namespace quota_door_test
}  // namespace throttlekit::server
