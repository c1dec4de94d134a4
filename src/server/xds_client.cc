// src/server/xds_client.cc: the aggregated discovery stream
// (xds_client.h).

#include "xds_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "envoy/service/discovery/v3/ads.grpc.pb.h"
#include "xds_config.h"

namespace throttlekit::server {
namespace {

namespace discovery = ::envoy::service::discovery::v3;

}  // namespace

absl::StatusOr<std::unique_ptr<XdsClient>> XdsClient::start(
    XdsClientOptions options, Policies& policies) {
  if (options.server.empty()) {
    return absl::InvalidArgumentError(
        "xds: the control plane's HOST:PORT is "
        "empty");
  }
  if (options.node_id.empty()) {
    return absl::InvalidArgumentError("xds: the node id is empty");
  }
  for (const int64_t ms :
       {options.initial_backoff_ms, options.max_backoff_ms}) {
    if (ms < 1 || ms > 3'600'000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "xds: a backoff must be in [1 ms, 1 h]; got ", ms, " ms"));
    }
  }
  std::unique_ptr<XdsClient> c(new XdsClient(std::move(options), policies));
  policies.feed_envoy_from_control_plane();
  c->thread_ = std::thread([p = c.get()] { p->run(); });
  return c;
}

XdsClient::XdsClient(XdsClientOptions options, Policies& policies)
    : options_(std::move(options)), policies_(policies) {}

XdsClient::~XdsClient() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string XdsClient::version() {
  MutexLock lock(mu_);
  return version_;
}

void XdsClient::run() {
  const std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      options_.server, options_.credentials != nullptr
                           ? options_.credentials
                           : grpc::InsecureChannelCredentials());
  int64_t backoff = options_.initial_backoff_ms;
  while (true) {
    const int64_t acks_before = acks_.load() + nacks_.load();
    stream_once(channel);
    // A stream that got answers starts the backoff again.
    if (acks_.load() + nacks_.load() > acks_before) {
      backoff = options_.initial_backoff_ms;
    }
    MutexLock lock(mu_);
    if (stop_) return;
    NativeWait native(mu_);
    cv_.wait_for(native.lock(), std::chrono::milliseconds(backoff),
                 [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; });
    if (stop_) return;
    backoff = std::min(backoff * 2, options_.max_backoff_ms);
  }
}

void XdsClient::stream_once(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = discovery::AggregatedDiscoveryService::NewStub(channel);
  grpc::ClientContext context;
  {
    MutexLock lock(mu_);
    if (stop_) return;
    context_ = &context;
  }
  streams_.fetch_add(1, std::memory_order_relaxed);
  auto stream = stub->StreamAggregatedResources(&context);
  discovery::DiscoveryRequest request;
  request.mutable_node()->set_id(options_.node_id);
  request.mutable_node()->set_cluster(options_.node_cluster);
  request.mutable_node()->set_user_agent_name("throttlekit-server");
  request.set_type_url(kRateLimitConfigTypeUrl);
  request.set_version_info(version());  // a new stream names what it has
  if (stream->Write(request)) {
    discovery::DiscoveryResponse response;
    while (stream->Read(&response)) {
      request.set_response_nonce(response.nonce());
      request.clear_error_detail();
      absl::Status applied;
      if (response.type_url() != kRateLimitConfigTypeUrl) {
        applied = absl::InvalidArgumentError(
            absl::StrCat("xds: a response of type ", response.type_url(),
                         " on a subscription to ", kRateLimitConfigTypeUrl));
      } else {
        absl::StatusOr<std::vector<EnvoyDomain>> domains =
            xds_domains(response);
        if (!domains.ok()) {
          applied = domains.status();
        } else {
          // The server's envoy: block, its domains the pushed ones.
          EnvoyConfig next = policies_.config().envoy;
          next.domains = *std::move(domains);
          next.files.clear();
          applied = policies_.reload_envoy(next);
        }
      }
      if (applied.ok()) {
        MutexLock lock(mu_);
        version_ = response.version_info();
        request.set_version_info(version_);
        acks_.fetch_add(1, std::memory_order_relaxed);
      } else {
        // A NACK names the version still in force.
        request.mutable_error_detail()->set_code(
            static_cast<int>(applied.code()));
        request.mutable_error_detail()->set_message(
            std::string(applied.message()));
        nacks_.fetch_add(1, std::memory_order_relaxed);
      }
      if (!stream->Write(request)) break;
    }
  }
  stream->WritesDone();
  (void)stream->Finish();
  MutexLock lock(mu_);
  context_ = nullptr;
}

}  // namespace throttlekit::server
