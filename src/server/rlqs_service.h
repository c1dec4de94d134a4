// src/server/rlqs_service.h (internal)
//
// `RlqsService`: Envoy's rate limit quota service,
// `StreamRateLimitQuotas` (docs/rlqs.md), over the quota door
// (quota_door.h). On gRPC's callback API: one reactor per stream reads a
// report, hands it to the door (which matches, updates budgets and queues
// assignments without waiting on anything but short mutexes) and reads the
// next; writes go through the stream's outbox (quota_stream.h), one in
// flight at a time. A refused report ends the stream with its status; the
// client's half-close or cancel ends it OK (Envoy reconnects on its report
// timer). No gRPC thread waits on a store or a sleep.

#ifndef THROTTLEKIT_SRC_SERVER_RLQS_SERVICE_H_
#define THROTTLEKIT_SRC_SERVER_RLQS_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <memory>

#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "quota_door.h"
#include "quota_stream.h"
#include "service_support.h"

namespace throttlekit::server::services {

class RlqsService final
    : public rlqs_pb::RateLimitQuotaService::CallbackService {
 public:
  explicit RlqsService(QuotaDoor& door) : door_(door) {}

  grpc::ServerBidiReactor<rlqs_pb::RateLimitQuotaUsageReports,
                          rlqs_pb::RateLimitQuotaResponse>*
  StreamRateLimitQuotas(grpc::CallbackServerContext* /*ctx*/) override {
    return new Reactor(door_);
  }

 private:
  class Reactor final
      : public grpc::ServerBidiReactor<rlqs_pb::RateLimitQuotaUsageReports,
                                       rlqs_pb::RateLimitQuotaResponse>,
        public QuotaStreamWriter {
   public:
    explicit Reactor(QuotaDoor& door) : door_(door), stream_(door.open(this)) {
      if (stream_ == nullptr) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "StreamRateLimitQuotas: the server is shutting "
                            "down"));
        return;
      }
      StartRead(&in_);
      stream_->start();
    }

    void OnReadDone(bool ok) override {
      if (!ok) {  // half-close, cancel or a broken stream
        stream_->finish(grpc::Status::OK);
        return;
      }
      if (absl::Status s = door_.report(*stream_, in_); !s.ok()) {
        stream_->finish(to_grpc(s));
        return;
      }
      StartRead(&in_);
    }

    void OnWriteDone(bool ok) override { stream_->on_write_done(ok); }

    void OnDone() override {
      if (stream_ != nullptr) {
        stream_->detach();
        door_.close(*stream_);
      }
      delete this;
    }

    // QuotaStreamWriter.
    void start_write(const rlqs_pb::RateLimitQuotaResponse* r) override {
      StartWrite(r);
    }
    void finish(const grpc::Status& status) override { Finish(status); }

   private:
    QuotaDoor& door_;
    const std::shared_ptr<QuotaStream> stream_;
    rlqs_pb::RateLimitQuotaUsageReports in_;
  };

  QuotaDoor& door_;
};

}  // namespace throttlekit::server::services

#endif  // THROTTLEKIT_SRC_SERVER_RLQS_SERVICE_H_
