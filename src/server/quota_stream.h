// src/server/quota_stream.h (internal)
//
// Provides `QuotaStream`: one RLQS stream as the quota door sees it
// (docs/rlqs.md, "The stream service"): its client id, the domain its
// first report fixed, the blanket-rule buckets it reported (refreshed at
// half their TTL), since when each bucket has been reported idle, and its
// outbox. gRPC allows one write in flight per
// stream, so actions queue while a write is out and go together in the
// next response; `finish` waits for the write in flight. The stream talks
// to its reactor through `QuotaStreamWriter`, so the door never touches
// gRPC's reactor types.
//
// Thread-safety: `push`, `finish`, `on_write_done`, `detach` and the
// blanket methods are safe to call concurrently; `domain` is touched only
// by the stream's reads (gRPC runs them one at a time).

#ifndef THROTTLEKIT_SRC_SERVER_QUOTA_STREAM_H_
#define THROTTLEKIT_SRC_SERVER_QUOTA_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

namespace rlqs_pb = ::envoy::service::rate_limit_quota::v3;

// What a stream's reactor does for it. Each call is made at most as gRPC
// allows: one `start_write` until `on_write_done`, and `finish` once, with
// no write in flight.
class QuotaStreamWriter {
 public:
  virtual void start_write(const rlqs_pb::RateLimitQuotaResponse* response) = 0;
  virtual void finish(const grpc::Status& status) = 0;

 protected:
  ~QuotaStreamWriter() = default;
};

class QuotaStream {
 public:
  QuotaStream(int64_t id, QuotaStreamWriter* writer)
      : id_(id), writer_(writer) {}
  QuotaStream(const QuotaStream&) = delete;
  QuotaStream& operator=(const QuotaStream&) = delete;

  // Unique among the server's streams; also the budgets' client id prefix.
  int64_t id() const { return id_; }

  // Queues `actions` and starts a write unless one is in flight. Returns
  // the number of actions queued (0 once the stream is finishing).
  size_t push(
      std::vector<rlqs_pb::RateLimitQuotaResponse::BucketAction> actions);
  // The reactor has started its first read: a finish asked for before it
  // (a shutdown racing the stream's creation) runs now, so gRPC never sees
  // StartRead after Finish.
  void start();
  // The reactor's OnWriteDone: sends what queued meanwhile, or the
  // deferred finish.
  void on_write_done(bool ok);
  // Ends the stream with `status` (after the write in flight, if any, and
  // not before `start`);
  // the first call wins, pushes after it are dropped.
  void finish(const grpc::Status& status);
  // The reactor is gone (OnDone): nothing more is written.
  void detach();

  // The domain fixed by the first report; empty before it. Reads only.
  std::string& domain() { return domain_; }

  // A blanket-rule bucket of this stream: `action` re-sent every ttl/2.
  struct Blanket {
    rlqs_pb::RateLimitQuotaResponse::BucketAction action;
    int64_t ttl_ms = 0;
    int64_t sent_ms = 0;
  };
  // Records `action` (a blanket assignment) for the bucket `key` (which
  // names its bucket id) and returns true if it was not already recorded
  // unchanged (then it is to be sent now, at `now_ms`).
  bool set_blanket(const std::string& key,
                   const rlqs_pb::RateLimitQuotaResponse::BucketAction& action,
                   int64_t ttl_ms, int64_t now_ms);
  // Pushes the blanket assignments due (sent ttl/2 or more before
  // `now_ms`); returns when the next is due (INT64_MAX: none) and adds the
  // number pushed to `*sent`.
  int64_t refresh_blankets(int64_t now_ms, int64_t* sent);
  // Stops re-sending the blanket assignment of bucket `key` (abandoned).
  void forget_blanket(const std::string& key);

  // Notes a report of bucket `key` at `now_ms` that counted requests
  // (`used`) or none, and returns true when the bucket has been reported
  // with none for `idle_ms` or more (it is then forgotten here, as if never
  // reported). `idle_ms` 0: never.
  bool idle_for(const std::string& key, bool used, int64_t now_ms,
                int64_t idle_ms);

 private:
  // Takes the queue into `out_`; requires mu_, a queue and no write out.
  void take_queue_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t id_;
  std::string domain_;

  Mutex mu_;
  QuotaStreamWriter* writer_ ABSL_GUARDED_BY(mu_);  // null once detached
  std::vector<rlqs_pb::RateLimitQuotaResponse::BucketAction> queue_
      ABSL_GUARDED_BY(mu_);
  // The response being written: owned here until OnWriteDone.
  rlqs_pb::RateLimitQuotaResponse out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Blanket> blankets_ ABSL_GUARDED_BY(mu_);
  // Buckets reported with no requests: since when.
  std::map<std::string, int64_t> idle_since_ ABSL_GUARDED_BY(mu_);
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_QUOTA_STREAM_H_
