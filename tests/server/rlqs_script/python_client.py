#!/usr/bin/env python3
"""The quota door from another language: a Python grpcio client.

Generates Python stubs from our proto/envoy files at test time (protoc and
grpc_python_plugin, the ones the C++ build uses), starts throttlekit-server
with server.yaml beside this file, and runs script.txt over its named
`StreamRateLimitQuotas` streams: each step's report (or half-close) is
sent, then every stream must receive exactly the responses and the ending
written after it, within 5 s, and nothing more within a quiet window. The
same script and answers the C++ test (tests/server/rlqs_script_test.cc)
holds the server to. Usage and exit codes: ../script_support.py.
"""

import os
import queue
import sys
import threading
import time

# The shared helpers, one directory up; no bytecode left in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from script_support import (Server, beside, client_main,  # noqa: E402
                            fail, read_entries)

PROTOS = [
    "envoy/service/rate_limit_quota/v3/rlqs.proto",
    "envoy/type/v3/ratelimit_strategy.proto",
    "envoy/type/v3/token_bucket.proto",
    "envoy/type/v3/ratelimit_unit.proto",
]
STEP_DEADLINE_S = 5.0
QUIET_S = 0.1
# Refreshes fall due at half the shortest TTL of server.yaml (60 s); a run
# slower than this may have seen one.
SLOW_RUN_S = 25.0


class Step:
    def __init__(self, number, action, stream, message):
        self.number = number
        self.action = action  # "report" or "close"
        self.stream = stream
        self.message = message  # the report; None for a close
        # Per stream, in order: ("response", message) or ("end", code).
        self.expected = {}


def read_script(rlqs_pb2, text_format):
    steps = []
    for number, tag, body in read_entries(beside(__file__, "script.txt")):
        verb, _, stream = tag.partition(" ")
        if not stream:
            fail(f"script.txt:{number}: {tag!r} names no stream", 2)
        if verb == "report":
            steps.append(Step(number, verb, stream, text_format.Parse(
                body, rlqs_pb2.RateLimitQuotaUsageReports())))
        elif verb == "close":
            steps.append(Step(number, verb, stream, None))
        elif verb in ("expect", "end") and steps:
            item = ("end", body) if verb == "end" else (
                "response", normalised(text_format.Parse(
                    body, rlqs_pb2.RateLimitQuotaResponse())))
            steps[-1].expected.setdefault(stream, []).append(item)
        else:
            fail(f"script.txt:{number}: unexpected line {tag!r}", 2)
    return steps


def bucket_key(action):
    return sorted(action.bucket_id.bucket.items())


def normalised(response):
    """`response` with its bucket actions sorted by bucket id (stable)."""
    out = type(response)()
    for action in sorted(response.bucket_action, key=bucket_key):
        out.bucket_action.add().CopyFrom(action)
    return out


class Stream:
    """One StreamRateLimitQuotas call: reports go through a queue the call
    consumes; a reader thread queues ("response", message) items and, last,
    ("end", code name, details)."""

    def __init__(self, grpc, stub):
        self.grpc = grpc
        self.outbox = queue.Queue()
        self.inbox = queue.Queue()
        self.ended = False
        self.call = stub.StreamRateLimitQuotas(self._requests())
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _requests(self):
        while True:
            message = self.outbox.get()
            if message is None:
                return
            yield message

    def _read(self):
        try:
            for response in self.call:
                self.inbox.put(("response", normalised(response)))
            self.inbox.put(("end", "OK", ""))
        except self.grpc.RpcError as e:
            self.inbox.put(("end", e.code().name, e.details()))

    def send(self, message):
        self.outbox.put(message)

    def close(self):
        self.outbox.put(None)

    def stop(self):
        self.outbox.put(None)
        self.call.cancel()
        self.reader.join(timeout=10)


def describe(item):
    """An inbox item or an expectation, one line."""
    if item[0] == "response":
        from google.protobuf import text_format  # imported by main
        return "response " + text_format.MessageToString(item[1],
                                                         as_one_line=True)
    return f"end {item[1]}" + (f": {item[2]}" if len(item) > 2 and item[2]
                               else "")


def run_step(step, streams, grpc, stub):
    """The mismatches of one step (empty: every answer as written)."""
    where = f"script.txt:{step.number}"
    mismatches = []
    stream = streams.get(step.stream)
    if stream is None:
        if step.action == "close":
            return [f"{where}: close of {step.stream}, never opened"]
        stream = streams[step.stream] = Stream(grpc, stub)
    if stream.ended:
        return [f"{where}: {step.stream} has ended"]
    if step.action == "report":
        stream.send(step.message)
    else:
        stream.close()
    deadline = time.monotonic() + STEP_DEADLINE_S
    for name, items in step.expected.items():
        s = streams.get(name)
        if s is None:
            mismatches.append(f"{where}: {name} is not open")
            continue
        for want in items:
            try:
                got = s.inbox.get(
                    timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                mismatches.append(f"{where}: {name}: expected "
                                  f"{describe(want)}\n  got nothing within "
                                  f"{STEP_DEADLINE_S} s")
                break
            if got[0] == "end":
                s.ended = True
            if got[:2] != want:
                mismatches.append(f"{where}: {name}: expected "
                                  f"{describe(want)}\n  got {describe(got)}")
    time.sleep(QUIET_S)
    for name, s in streams.items():
        while not s.inbox.empty():
            extra = s.inbox.get()
            if extra[0] == "end":
                s.ended = True
            mismatches.append(f"{where}: {name}: unexpected "
                              f"{describe(extra)}")
    return mismatches


def run_steps(binary, grpc, rlqs_pb2_grpc, steps):
    """The mismatches of the first step that has any, and the run's
    seconds."""
    began = time.monotonic()
    mismatches = []
    with Server(binary, beside(__file__, "server.yaml")) as server:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = rlqs_pb2_grpc.RateLimitQuotaServiceStub(channel)
        streams = {}
        try:
            for step in steps:
                mismatches = run_step(step, streams, grpc, stub)
                if mismatches:
                    break
        finally:
            for s in streams.values():
                s.stop()
            channel.close()
    return mismatches + server.problems, time.monotonic() - began


def run(binary, grpc, text_format):
    from envoy.service.rate_limit_quota.v3 import rlqs_pb2, rlqs_pb2_grpc
    steps = read_script(rlqs_pb2, text_format)
    if not steps:
        fail("script.txt holds no steps", 2)
    mismatches, seconds = run_steps(binary, grpc, rlqs_pb2_grpc, steps)
    if mismatches and seconds > SLOW_RUN_S:
        mismatches.append(f"(the run took {seconds:.1f} s: a refresh may "
                          "have fallen within it)")
    return mismatches, (f"{len(steps)} steps, every answer as written in "
                        f"{seconds:.1f} s")


if __name__ == "__main__":
    client_main(PROTOS, run)
