// tests/support/eager_task.h
//
// `EagerTask`: the smallest coroutine type, for tests of awaitables. It
// starts at once, runs until its first real suspension, and destroys its
// frame when it ends; the test observes its effects, not its result.

#ifndef THROTTLEKIT_TESTS_SUPPORT_EAGER_TASK_H_
#define THROTTLEKIT_TESTS_SUPPORT_EAGER_TASK_H_

#include <coroutine>
#include <exception>

namespace throttlekit::testing {

struct EagerTask {
  struct promise_type {
    EagerTask get_return_object() { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_EAGER_TASK_H_
