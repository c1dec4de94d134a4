// throttlekit/asio/async_check.h
//
// Provides `throttlekit::async_check(engine, key, cost, token)`: any
// asynchronous engine's check (`AsyncRateEngine`, core/rate_engine.h) as an
// Asio asynchronous operation, with every completion token standalone Asio
// offers (docs/async.md):
//
//     // in an asio::awaitable<void> coroutine
//     absl::StatusOr<Decision> d =
//         co_await throttlekit::async_check(*limiter, key, 1,
//         asio::use_awaitable);
//     // a future
//     std::future<absl::StatusOr<Decision>> f =
//         throttlekit::async_check(*limiter, key, 1, asio::use_future);
//     // a callback, run on `strand`
//     throttlekit::async_check(*limiter, key, 1,
//         asio::bind_executor(strand, [](absl::StatusOr<Decision> d) {...}));
//
// The completion signature is `void(absl::StatusOr<Decision>)`. The handler
// runs on its associated executor (the coroutine's, the strand's; the
// system executor for a handler without one), always through `post`: never
// inside `async_check`, even when the engine answered inline, and never on
// the store backend's I/O thread. Outstanding work is held on that
// executor until the handler has run, so `io_context::run` does not return
// with a check pending.
//
// Header-only; needs standalone Asio (Debian's libasio-dev, 1.22+) on the
// include path. `key` is copied by the engine before `async_check` returns.
// Thread-safety: as the engine's `check_async`.

#ifndef THROTTLEKIT_ASIO_ASYNC_CHECK_H_
#define THROTTLEKIT_ASIO_ASYNC_CHECK_H_

#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "asio/associated_executor.hpp"
#include "asio/async_result.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/post.hpp"
#include "throttlekit/core/decision.h"

namespace throttlekit {

template <class E, class CompletionToken>
auto async_check(E& engine, std::string_view key, double cost,
                 CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(absl::StatusOr<Decision>)>(
      [](auto handler, E* engine, std::string_view key, double cost) {
        auto work =
            asio::make_work_guard(asio::get_associated_executor(handler));
        engine->check_async(
            key, cost,
            [handler = std::move(handler),
             work = std::move(work)](absl::StatusOr<Decision> d) mutable {
              auto executor = work.get_executor();
              asio::post(executor, [handler = std::move(handler),
                                    d = std::move(d)]() mutable {
                std::move(handler)(std::move(d));
              });
              work.reset();
            });
      },
      token, &engine, key, cost);
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_ASIO_ASYNC_CHECK_H_
