// tests/server/xds_control_plane.h
//
// Provides `ControlPlane`: an xDS control plane of the tests' own (the
// aggregated discovery service, state of the world, written from the
// published contract) that records every request, writes what `push`
// queues on the stream open now and ends that stream on `end_stream`;
// `serve` runs it on a free loopback port; `set_of` makes a
// RateLimitConfig set.

#ifndef THROTTLEKIT_TESTS_SERVER_XDS_CONTROL_PLANE_H_
#define THROTTLEKIT_TESTS_SERVER_XDS_CONTROL_PLANE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "envoy/service/discovery/v3/ads.grpc.pb.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"
#include "xds_config.h"

namespace throttlekit::testing {

namespace xds_discovery = ::envoy::service::discovery::v3;

class ControlPlane final
    : public xds_discovery::AggregatedDiscoveryService::Service {
 public:
  grpc::Status StreamAggregatedResources(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<xds_discovery::DiscoveryResponse,
                               xds_discovery::DiscoveryRequest>* stream)
      override {
    std::atomic<bool> reading{true};
    std::thread reader([&] {
      xds_discovery::DiscoveryRequest r;
      while (stream->Read(&r)) {
        std::lock_guard lock(mu_);
        requests_.push_back(r);
        cv_.notify_all();
      }
      reading = false;
      cv_.notify_all();
    });
    std::unique_lock lock(mu_);
    ++streams_;
    end_ = false;
    while (reading && !end_ && !context->IsCancelled()) {
      if (!pushes_.empty()) {
        xds_discovery::DiscoveryResponse r = std::move(pushes_.front());
        pushes_.pop_front();
        lock.unlock();
        stream->Write(r);
        lock.lock();
        continue;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    lock.unlock();
    context->TryCancel();
    reader.join();
    return grpc::Status::OK;
  }

  void push(xds_discovery::DiscoveryResponse r) {
    std::lock_guard lock(mu_);
    pushes_.push_back(std::move(r));
    cv_.notify_all();
  }
  void end_stream() {
    std::lock_guard lock(mu_);
    end_ = true;
    cv_.notify_all();
  }
  // The first request bearing `nonce` (its ACK or NACK), waiting up to 5 s.
  std::optional<xds_discovery::DiscoveryRequest> answer_to(
      const std::string& nonce) {
    std::unique_lock lock(mu_);
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (true) {
      for (const auto& r : requests_) {
        if (r.response_nonce() == nonce) return r;
      }
      if (cv_.wait_until(lock, until) == std::cv_status::timeout) {
        return std::nullopt;
      }
    }
  }
  std::vector<xds_discovery::DiscoveryRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  int streams() {
    std::lock_guard lock(mu_);
    return streams_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<xds_discovery::DiscoveryResponse> pushes_;
  std::vector<xds_discovery::DiscoveryRequest> requests_;
  int streams_ = 0;
  bool end_ = false;
};

// `plane` served on a free loopback port (in `*port`) with `credentials`.
inline std::unique_ptr<grpc::Server> serve(
    ControlPlane& plane,
    const std::shared_ptr<grpc::ServerCredentials>& credentials, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", credentials, port);
  builder.RegisterService(&plane);
  return builder.BuildAndStart();
}

// A set: `configs` as version `version`, sent with `nonce`.
inline xds_discovery::DiscoveryResponse set_of(
    const std::string& version, const std::string& nonce,
    const std::vector<::ratelimit::config::ratelimit::v3::RateLimitConfig>&
        configs) {
  xds_discovery::DiscoveryResponse r;
  r.set_version_info(version);
  r.set_nonce(nonce);
  r.set_type_url(server::kRateLimitConfigTypeUrl);
  for (const auto& c : configs) r.add_resources()->PackFrom(c);
  return r;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_XDS_CONTROL_PLANE_H_
