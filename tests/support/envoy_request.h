// Test support: building Envoy rate-limit requests
// (envoy.service.ratelimit.v3, proto/envoy/) for the Envoy door's tests.

#ifndef THROTTLEKIT_TESTS_SUPPORT_ENVOY_REQUEST_H_
#define THROTTLEKIT_TESTS_SUPPORT_ENVOY_REQUEST_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace throttlekit::testing {

using RlsEntries = std::vector<std::pair<std::string, std::string>>;

// A descriptor of `entries`, (key, value) in order.
inline ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor
rls_descriptor(const RlsEntries& entries) {
  ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor d;
  for (const auto& [key, value] : entries) {
    auto* e = d.add_entries();
    e->set_key(key);
    e->set_value(value);
  }
  return d;
}

// A request of `descriptors` in `domain`, with the request's hits_addend.
inline ::envoy::service::ratelimit::v3::RateLimitRequest rls_request(
    const std::string& domain,
    const std::vector<
        ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor>&
        descriptors,
    uint32_t hits = 0) {
  ::envoy::service::ratelimit::v3::RateLimitRequest r;
  r.set_domain(domain);
  for (const auto& d : descriptors) *r.add_descriptors() = d;
  r.set_hits_addend(hits);
  return r;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_ENVOY_REQUEST_H_
