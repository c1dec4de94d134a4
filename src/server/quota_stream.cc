// src/server/quota_stream.cc: one RLQS stream's outbox and blanket buckets
// (quota_stream.h).

#include "quota_stream.h"

#include <algorithm>
#include <limits>

namespace throttlekit::server {

void QuotaStream::take_queue_locked() {
  out_.Clear();
  for (auto& a : queue_) *out_.add_bucket_action() = std::move(a);
  queue_.clear();
  writing_ = true;
}

size_t QuotaStream::push(
    std::vector<rlqs_pb::RateLimitQuotaResponse::BucketAction> actions) {
  if (actions.empty()) return 0;
  QuotaStreamWriter* writer = nullptr;
  const rlqs_pb::RateLimitQuotaResponse* out = nullptr;
  const size_t n = actions.size();
  {
    MutexLock lock(mu_);
    if (finishing_ || writer_ == nullptr) return 0;
    for (auto& a : actions) queue_.push_back(std::move(a));
    if (writing_) return n;
    take_queue_locked();
    writer = writer_;
    out = &out_;
  }
  // Outside the lock: gRPC may run OnWriteDone before StartWrite returns.
  // The stream cannot finish meanwhile (writing_ defers it).
  writer->start_write(out);
  return n;
}

void QuotaStream::on_write_done(bool /*ok*/) {
  QuotaStreamWriter* writer = nullptr;
  const rlqs_pb::RateLimitQuotaResponse* out = nullptr;
  std::optional<grpc::Status> finish;
  {
    MutexLock lock(mu_);
    writing_ = false;
    if (pending_finish_.has_value() && started_) {
      finish = std::move(pending_finish_);
      pending_finish_.reset();
    } else if (!queue_.empty() && !finishing_) {
      take_queue_locked();
      out = &out_;
    } else {
      return;
    }
    writer = writer_;
  }
  if (writer == nullptr) return;
  if (finish.has_value()) {
    writer->finish(*finish);
  } else {
    writer->start_write(out);
  }
}

void QuotaStream::finish(const grpc::Status& status) {
  QuotaStreamWriter* writer = nullptr;
  {
    MutexLock lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    queue_.clear();
    if (writing_ || !started_) {
      pending_finish_ = status;
      return;
    }
    writer = writer_;
  }
  if (writer != nullptr) writer->finish(status);
}

void QuotaStream::start() {
  QuotaStreamWriter* writer = nullptr;
  std::optional<grpc::Status> finish;
  {
    MutexLock lock(mu_);
    started_ = true;
    if (writing_ || !pending_finish_.has_value()) return;
    finish = std::move(pending_finish_);
    pending_finish_.reset();
    writer = writer_;
  }
  if (writer != nullptr) writer->finish(*finish);
}

void QuotaStream::detach() {
  MutexLock lock(mu_);
  writer_ = nullptr;
  finishing_ = true;
  blankets_.clear();
}

bool QuotaStream::set_blanket(
    const std::string& key,
    const rlqs_pb::RateLimitQuotaResponse::BucketAction& action, int64_t ttl_ms,
    int64_t now_ms) {
  MutexLock lock(mu_);
  auto [it, added] = blankets_.try_emplace(key);
  // The key names the bucket id, so the action is the same when its kind
  // and its assignment (a TTL and a strategy, no map: serialized
  // deterministically) are: no reflection on the report path.
  if (!added && it->second.ttl_ms == ttl_ms &&
      it->second.action.bucket_action_case() == action.bucket_action_case() &&
      it->second.action.quota_assignment_action().SerializeAsString() ==
          action.quota_assignment_action().SerializeAsString()) {
    return false;
  }
  it->second = Blanket{action, ttl_ms, now_ms};
  return true;
}

int64_t QuotaStream::refresh_blankets(int64_t now_ms, int64_t* sent) {
  std::vector<rlqs_pb::RateLimitQuotaResponse::BucketAction> due;
  int64_t next = std::numeric_limits<int64_t>::max();
  {
    MutexLock lock(mu_);
    for (auto& [key, b] : blankets_) {
      if (now_ms >= b.sent_ms + b.ttl_ms / 2) {
        due.push_back(b.action);
        b.sent_ms = now_ms;
      }
      next = std::min(next, b.sent_ms + b.ttl_ms / 2);
    }
  }
  *sent += static_cast<int64_t>(push(std::move(due)));
  return next;
}

void QuotaStream::forget_blanket(const std::string& key) {
  MutexLock lock(mu_);
  blankets_.erase(key);
}

bool QuotaStream::idle_for(const std::string& key, bool used, int64_t now_ms,
                           int64_t idle_ms) {
  MutexLock lock(mu_);
  if (used || idle_ms <= 0) {
    idle_since_.erase(key);
    return false;
  }
  const auto it = idle_since_.try_emplace(key, now_ms).first;
  if (now_ms - it->second < idle_ms) return false;
  idle_since_.erase(it);
  return true;
}

}  // namespace throttlekit::server
