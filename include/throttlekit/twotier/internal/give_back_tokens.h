// throttlekit/twotier/internal/give_back_tokens.h
//
// Provides `detail::GiveBackTokens`: the idempotency tokens under which a
// leasing engine hands credits back to their window
// (`Coordinator::give_back`, `Coordinator::reconcile`: once per window and
// token), shared by the leased limiter (leased_limiter.h: idle returns and
// `close`) and federation's credit source
// (federation/internal/federation_source.h: a grant's excess the regional
// escrow could not park). docs/twotier.md, "Leased mode".
//
// A token is `<why>:<nonce>:<n>`: a random 64-bit nonce drawn once per
// instance (not an address: processes forked from one parent share
// addresses) and a sequence number from 0, so no two give-backs share a
// token, in this process or another, and a retried call of one give-back
// (the same token) is applied once.
//
// Thread-safety: `next` is safe to call concurrently.

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_GIVE_BACK_TOKENS_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_GIVE_BACK_TOKENS_H_

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace throttlekit::detail {

class GiveBackTokens {
 public:
  GiveBackTokens() = default;
  GiveBackTokens(const GiveBackTokens&) = delete;
  GiveBackTokens& operator=(const GiveBackTokens&) = delete;

  // A token never returned before: `why:nonce:n`. `why` names the reason
  // for readers of the store (`close`, `idle`, `park`).
  std::string next(std::string_view why) {
    return absl::StrCat(absl::string_view(why.data(), why.size()), ":", nonce_,
                        ":", seq_.fetch_add(1));
  }

 private:
  const uint64_t nonce_ =
      std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  std::atomic<int64_t> seq_{0};
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_GIVE_BACK_TOKENS_H_
