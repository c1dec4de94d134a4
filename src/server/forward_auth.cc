// src/server/forward_auth.cc: the forward-auth door's translation
// (forward_auth.h).

#include "forward_auth.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace throttlekit::server {
namespace {

namespace rls = ::envoy::service::ratelimit::v3;

// `s` without its leading and trailing spaces and tabs.
std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// The value of `entry` in the request, or nullopt.
std::optional<std::string_view> value_of(const ForwardAuthEntry& entry,
                                         ForwardAuthHeaders headers,
                                         ForwardAuthSubrequest subrequest) {
  if (entry.from == ForwardAuthFrom::kLiteral) return entry.value;
  for (const std::string& name : forward_auth_headers(entry)) {
    std::optional<std::string_view> v = headers(name);
    if (!v.has_value()) continue;
    std::string_view value = trim(*v);
    if (entry.from == ForwardAuthFrom::kClientAddress &&
        name == "x-forwarded-for") {
      // The first address: the client, as the proxy nearest it saw it.
      value = trim(value.substr(0, value.find(',')));
    }
    if (entry.from == ForwardAuthFrom::kPath) {
      value = value.substr(0, value.find('?'));
    }
    if (value.empty()) continue;
    return value;
  }
  // The subrequest's own method and target (ext_authz's).
  std::string_view own;
  if (entry.from == ForwardAuthFrom::kMethod) own = subrequest.method;
  if (entry.from == ForwardAuthFrom::kUri) own = subrequest.rest;
  if (entry.from == ForwardAuthFrom::kPath) {
    own = subrequest.rest.substr(0, subrequest.rest.find('?'));
  }
  if (!own.empty()) return own;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<rls::RateLimitRequest> forward_auth_request(
    const ForwardAuthRoute& route, ForwardAuthHeaders headers,
    ForwardAuthSubrequest subrequest) {
  rls::RateLimitRequest request;
  request.set_domain(route.domain);
  for (size_t d = 0; d < route.descriptors.size(); ++d) {
    auto* descriptor = request.add_descriptors();
    for (const ForwardAuthEntry& e : route.descriptors[d]) {
      const std::optional<std::string_view> v =
          value_of(e, headers, subrequest);
      if (!v.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "forward auth ", route.path, ": descriptors[", d, "] entry \"",
            e.key, "\" reads ", forward_auth_headers_named(e),
            ", and the request has none (or only empty ones)"));
      }
      auto* entry = descriptor->add_entries();
      entry->set_key(e.key);
      entry->set_value(std::string(*v));
    }
  }
  return request;
}

ForwardAuthAnswer forward_auth_answer(const rls::RateLimitResponse& response,
                                      const ForwardAuthRoute& route) {
  ForwardAuthAnswer a;
  bool retry_after = false;
  for (const auto& h : response.response_headers_to_add()) {
    a.headers.emplace_back(h.key(), h.value());
    retry_after = retry_after || absl::EqualsIgnoreCase(h.key(), "retry-after");
  }
  if (response.overall_code() != rls::RateLimitResponse::OVER_LIMIT) {
    a.body = "ok\n";
    return a;
  }
  a.status = route.deny_status;
  a.body = "rate limited\n";
  if (!retry_after) {
    // Until the latest refusing window ends, whole seconds rounded up.
    int64_t ms = -1;
    for (const auto& s : response.statuses()) {
      if (s.code() != rls::RateLimitResponse::OVER_LIMIT ||
          !s.has_duration_until_reset()) {
        continue;
      }
      ms = std::max<int64_t>(ms,
                             s.duration_until_reset().seconds() * 1000 +
                                 s.duration_until_reset().nanos() / 1'000'000);
    }
    if (ms >= 0) {
      a.headers.emplace_back(
          "Retry-After", absl::StrCat(std::max<int64_t>(1, (ms + 999) / 1000)));
    }
  }
  return a;
}

ForwardAuthAnswer forward_auth_error(const absl::Status& status) {
  return ForwardAuthAnswer{
      .status = status.code() == absl::StatusCode::kInvalidArgument ? 400 : 503,
      .headers = {},
      .body = absl::StrCat(status.message(), "\n")};
}

}  // namespace throttlekit::server
