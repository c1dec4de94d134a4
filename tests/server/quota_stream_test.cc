// One RLQS stream's outbox (src/server/quota_stream.h) over a fake
// reactor: one write in flight, actions queued meanwhile going together in
// the next response, a finish waiting for the write in flight and for the
// reactor's first read, nothing written after it, and blanket buckets
// re-sent at half their TTL.

#include "quota_stream.h"

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace throttlekit::server {
namespace quota_stream_test {
namespace {

using Action = rlqs_pb::RateLimitQuotaResponse::BucketAction;

// Records what the stream asks of its reactor; the test plays gRPC's
// OnWriteDone.
class FakeWriter final : public QuotaStreamWriter {
 public:
  void start_write(const rlqs_pb::RateLimitQuotaResponse* r) override {
    writes.push_back(*r);
  }
  void finish(const grpc::Status& status) override {
    finishes.push_back(status);
  }
  std::vector<rlqs_pb::RateLimitQuotaResponse> writes;
  std::vector<grpc::Status> finishes;
};

Action action(const std::string& bucket) {
  Action a;
  (*a.mutable_bucket_id()->mutable_bucket())["name"] = bucket;
  a.mutable_quota_assignment_action()
      ->mutable_assignment_time_to_live()
      ->set_seconds(2);
  return a;
}

TEST(QuotaStream, OneWriteInFlightAndWhatQueuesMeanwhileGoesTogether) {
  FakeWriter w;
  QuotaStream s(7, &w);
  s.start();
  EXPECT_EQ(s.id(), 7);
  EXPECT_EQ(s.push({action("a")}), 1u);
  ASSERT_EQ(w.writes.size(), 1u);
  EXPECT_EQ(w.writes[0].bucket_action_size(), 1);
  EXPECT_EQ(s.push({action("b")}), 1u);
  EXPECT_EQ(s.push({action("c")}), 1u);
  EXPECT_EQ(w.writes.size(), 1u);  // the first is still out
  s.on_write_done(true);
  ASSERT_EQ(w.writes.size(), 2u);
  ASSERT_EQ(w.writes[1].bucket_action_size(), 2);
  EXPECT_EQ(w.writes[1].bucket_action(0).bucket_id().bucket().at("name"), "b");
  EXPECT_EQ(w.writes[1].bucket_action(1).bucket_id().bucket().at("name"), "c");
  s.on_write_done(true);
  EXPECT_EQ(w.writes.size(), 2u);  // nothing queued
  EXPECT_EQ(s.push({}), 0u);       // nothing to send
  EXPECT_EQ(w.writes.size(), 2u);
}

TEST(QuotaStream, AFinishWaitsForTheWriteInFlightAndEndsWriting) {
  FakeWriter w;
  QuotaStream s(1, &w);
  s.start();
  (void)s.push({action("a")});
  (void)s.push({action("b")});  // queued
  s.finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "bye"));
  EXPECT_TRUE(w.finishes.empty());
  s.on_write_done(true);
  ASSERT_EQ(w.finishes.size(), 1u);
  EXPECT_EQ(w.finishes[0].error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(w.writes.size(), 1u);  // the queued action was dropped
  s.finish(grpc::Status::OK);      // only the first finish counts
  EXPECT_EQ(s.push({action("c")}), 0u);
  EXPECT_EQ(w.finishes.size(), 1u);
  EXPECT_EQ(w.writes.size(), 1u);
}

TEST(QuotaStream, AFinishBeforeTheFirstReadWaitsForStart) {
  FakeWriter w;
  QuotaStream s(1, &w);
  s.finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
  EXPECT_TRUE(w.finishes.empty());
  s.start();
  EXPECT_EQ(w.finishes.size(), 1u);
}

TEST(QuotaStream, NothingIsWrittenOnceDetached) {
  FakeWriter w;
  QuotaStream s(1, &w);
  s.start();
  s.detach();
  EXPECT_EQ(s.push({action("a")}), 0u);
  s.finish(grpc::Status::OK);
  EXPECT_TRUE(w.writes.empty());
  EXPECT_TRUE(w.finishes.empty());
}

TEST(QuotaStream, BlanketBucketsAreResentAtHalfTheirTtl) {
  FakeWriter w;
  QuotaStream s(1, &w);
  s.start();
  EXPECT_TRUE(s.set_blanket("k", action("a"), 2000, 0));
  EXPECT_FALSE(s.set_blanket("k", action("a"), 2000, 500));  // unchanged
  EXPECT_TRUE(s.set_blanket("j", action("b"), 4000, 0));
  int64_t sent = 0;
  EXPECT_EQ(s.refresh_blankets(999, &sent), 1000);
  EXPECT_EQ(sent, 0);
  EXPECT_EQ(s.refresh_blankets(1000, &sent), 2000);  // k again at 2000
  EXPECT_EQ(sent, 1);
  ASSERT_EQ(w.writes.size(), 1u);
  EXPECT_EQ(w.writes[0].bucket_action(0).bucket_id().bucket().at("name"), "a");
  s.on_write_done(true);
  EXPECT_EQ(s.refresh_blankets(2000, &sent), 3000);  // both due: k and j
  EXPECT_EQ(sent, 3);
  ASSERT_EQ(w.writes.size(), 2u);
  EXPECT_EQ(w.writes[1].bucket_action_size(), 2);
}

}  // namespace
}  // namespace quota_stream_test
}  // namespace throttlekit::server
