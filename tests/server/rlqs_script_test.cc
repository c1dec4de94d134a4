// The quota door's shared stream script (tests/server/rlqs_script/,
// docs/rlqs.md, "The stream service"), the same one the Python grpcio
// client (rlqs_script/python_client.py) runs against the binary: a real
// server on loopback over the embedded store, on a manual clock that never
// moves (so no refresh or expiry can fall within the run), and raw
// `StreamRateLimitQuotas` streams. Each step's report or half-close is
// sent, then every stream must receive exactly the responses and the
// ending written after it, within 5 s, and nothing more within a quiet
// window; the bucket actions of a response are compared sorted by bucket
// id.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server.h"
#include "support/manual_clock_server.h"
#include "support/script_entries.h"
#include "support/test_time.h"

namespace throttlekit::server {
namespace rlqs_script_test {
namespace {

namespace rlqs_pb = ::envoy::service::rate_limit_quota::v3;
using Reports = rlqs_pb::RateLimitQuotaUsageReports;
using Response = rlqs_pb::RateLimitQuotaResponse;
using SteadyClock = std::chrono::steady_clock;

constexpr auto kStepDeadline = std::chrono::seconds(5);
constexpr auto kQuiet = std::chrono::milliseconds(100);

// `r` with its bucket actions sorted by bucket id (its keys and values in
// order), keeping the server's order among actions for one bucket.
Response normalised(const Response& r) {
  using Action = Response::BucketAction;
  const auto key = [](const Action& a) {
    return std::map<std::string, std::string>(a.bucket_id().bucket().begin(),
                                              a.bucket_id().bucket().end());
  };
  std::vector<Action> actions(r.bucket_action().begin(),
                              r.bucket_action().end());
  std::stable_sort(
      actions.begin(), actions.end(),
      [&](const Action& a, const Action& b) { return key(a) < key(b); });
  Response out;
  for (Action& a : actions) *out.add_bucket_action() = std::move(a);
  return out;
}

std::string one_line(const google::protobuf::Message& m) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string out;
  printer.PrintToString(m, &out);
  return out;
}

// What a stream received, or what it must: a response, or its end with a
// status code's name.
struct Item {
  std::optional<Response> response;
  std::string end;
  std::string details;  // the end's message, as received

  std::string describe() const {
    return response.has_value()
               ? absl::StrCat("response ", one_line(*response))
               : absl::StrCat("end ", end, details.empty() ? "" : ": ",
                              details);
  }
};

std::string code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    default:
      return absl::StrCat("code ", static_cast<int>(code));
  }
}

// One StreamRateLimitQuotas call: the test thread writes; a reader thread
// queues what arrives, and the stream's end is taken (Finish) on the test
// thread, never concurrently with a write.
class ScriptStream {
 public:
  explicit ScriptStream(rlqs_pb::RateLimitQuotaService::Stub& stub)
      : rw_(stub.StreamRateLimitQuotas(&ctx_)),
        reader_([this] { read_loop(); }) {}
  ~ScriptStream() {
    ctx_.TryCancel();
    reader_.join();
    if (!ended_) (void)rw_->Finish();
  }
  ScriptStream(const ScriptStream&) = delete;
  ScriptStream& operator=(const ScriptStream&) = delete;

  void send(const Reports& r) { rw_->Write(r); }
  void close() { rw_->WritesDone(); }
  bool ended() const { return ended_; }

  // What arrives next before `deadline`: a response, or the stream's end;
  // nullopt if nothing does.
  std::optional<Item> next(SteadyClock::time_point deadline) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline,
                        [&] { return !inbox_.empty() || read_ended_; })) {
      return std::nullopt;
    }
    if (!inbox_.empty()) {
      Item item{.response = std::move(inbox_.front())};
      inbox_.pop_front();
      return item;
    }
    if (ended_) return std::nullopt;
    lock.unlock();
    const grpc::Status s = rw_->Finish();
    ended_ = true;
    return Item{.end = code_name(s.error_code()), .details = s.error_message()};
  }

 private:
  void read_loop() {
    Response r;
    while (rw_->Read(&r)) {
      std::lock_guard lock(mu_);
      inbox_.push_back(normalised(r));
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    read_ended_ = true;
    cv_.notify_all();
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<
      grpc::ClientReaderWriter<Reports, rlqs_pb::RateLimitQuotaResponse>>
      rw_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Response> inbox_;  // guarded by mu_
  bool read_ended_ = false;     // guarded by mu_
  bool ended_ = false;          // the test thread's: Finish was called
  std::thread reader_;
};

// A step: a report on a stream, or its half-close, and what each stream
// must receive as a result, in order.
struct Step {
  int line = 0;
  std::string verb;  // "report" or "close"
  std::string stream;
  Reports report;
  std::map<std::string, std::vector<Item>> expected;
};

// The script's steps; a failure (ADD_FAILURE) for a line it cannot read.
std::vector<Step> read_steps(const std::string& path) {
  const auto entries = testing::read_script_entries(path);
  if (!entries.ok()) {
    ADD_FAILURE() << entries.status();
    return {};
  }
  std::vector<Step> steps;
  for (const auto& [line, tag, body] : *entries) {
    const size_t space = tag.find(' ');
    const std::string verb = tag.substr(0, space);
    const std::string stream =
        space == std::string::npos ? "" : tag.substr(space + 1);
    const std::string where = absl::StrCat("script.txt:", line);
    if (stream.empty()) {
      ADD_FAILURE() << where << ": " << tag << " names no stream";
      return {};
    }
    if (verb == "report" || verb == "close") {
      Step& s = steps.emplace_back(Step{.line = line, .verb = verb});
      s.stream = stream;
      if (verb == "report" &&
          !google::protobuf::TextFormat::ParseFromString(body, &s.report)) {
        ADD_FAILURE() << where << ": not a RateLimitQuotaUsageReports";
        return {};
      }
    } else if ((verb == "expect" || verb == "end") && !steps.empty()) {
      Item item;
      if (verb == "end") {
        item.end = body;
      } else {
        Response r;
        if (!google::protobuf::TextFormat::ParseFromString(body, &r)) {
          ADD_FAILURE() << where << ": not a RateLimitQuotaResponse";
          return {};
        }
        item.response = normalised(r);
      }
      steps.back().expected[stream].push_back(std::move(item));
    } else {
      ADD_FAILURE() << where << ": unexpected line " << tag;
      return {};
    }
  }
  return steps;
}

// Runs `step` over `streams` (opening its stream at its first report);
// the mismatches, empty when every answer is as written.
std::vector<std::string> run_step(
    const Step& step, rlqs_pb::RateLimitQuotaService::Stub& stub,
    std::map<std::string, std::unique_ptr<ScriptStream>>& streams) {
  const std::string where = absl::StrCat("script.txt:", step.line, ": ");
  std::unique_ptr<ScriptStream>& stream = streams[step.stream];
  if (stream == nullptr) {
    if (step.verb == "close") return {where + "close of a stream never opened"};
    stream = std::make_unique<ScriptStream>(stub);
  }
  if (stream->ended()) return {absl::StrCat(where, step.stream, " has ended")};
  if (step.verb == "report") {
    stream->send(step.report);
  } else {
    stream->close();
  }
  std::vector<std::string> mismatches;
  const SteadyClock::time_point deadline = SteadyClock::now() + kStepDeadline;
  for (const auto& [name, items] : step.expected) {
    const auto it = streams.find(name);
    if (it == streams.end() || it->second == nullptr) {
      mismatches.push_back(absl::StrCat(where, name, " is not open"));
      continue;
    }
    for (const Item& want : items) {
      const std::optional<Item> got = it->second->next(deadline);
      if (!got.has_value()) {
        mismatches.push_back(absl::StrCat(where, name, ": expected ",
                                          want.describe(),
                                          "\n  got nothing within 5 s"));
        break;
      }
      const bool same =
          want.response.has_value()
              ? got->response.has_value() &&
                    google::protobuf::util::MessageDifferencer::Equals(
                        *got->response, *want.response)
              : !got->response.has_value() && got->end == want.end;
      if (!same) {
        mismatches.push_back(absl::StrCat(where, name, ": expected ",
                                          want.describe(), "\n  got ",
                                          got->describe()));
      }
    }
  }
  std::this_thread::sleep_for(kQuiet);
  for (const auto& [name, s] : streams) {
    if (s == nullptr) continue;
    for (std::optional<Item> extra = s->next(SteadyClock::now());
         extra.has_value(); extra = s->next(SteadyClock::now())) {
      mismatches.push_back(
          absl::StrCat(where, name, ": unexpected ", extra->describe()));
    }
  }
  return mismatches;
}

// Every step of the shared script (tests/server/rlqs_script/script.txt,
// also run by the Python client) answers exactly as written.
TEST(QuotaDoor, TheSharedStreamScriptAnswersAsWritten) {
  const char* dir = std::getenv("THROTTLEKIT_RLQS_SCRIPT_DIR");
  ASSERT_NE(dir, nullptr) << "THROTTLEKIT_RLQS_SCRIPT_DIR is not set";
  const std::vector<Step> steps = read_steps(absl::StrCat(dir, "/script.txt"));
  ASSERT_EQ(steps.size(), 26u);
  ManualClock clock(testing::kEpoch);
  std::unique_ptr<Server> server = testing::start_manual_clock_server(
      load_config(absl::StrCat(dir, "/server.yaml")), nullptr, clock);
  ASSERT_NE(server, nullptr);
  auto stub = rlqs_pb::RateLimitQuotaService::NewStub(
      testing::loopback_channel(server->port()));
  std::map<std::string, std::unique_ptr<ScriptStream>> streams;
  for (const Step& step : steps) {
    const std::vector<std::string> mismatches = run_step(step, *stub, streams);
    // The first step that differs: those after it would differ too.
    ASSERT_TRUE(mismatches.empty()) << absl::StrJoin(mismatches, "\n");
  }
  streams.clear();
  server->shutdown();
}

}  // namespace
}  // namespace rlqs_script_test
}  // namespace throttlekit::server
