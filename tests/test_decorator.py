"""rng_trace as a decorator and a reusable tracer: each call and each block has its own trace."""

from __future__ import annotations

import asyncio
import gc
import inspect
import io
import random
import threading
from collections import defaultdict

import pytest

from rngtrace import GlobalRNGError, rng_trace
from rngtrace._hub import HUB


def apis(trace) -> list[str]:
    return [event.api for event in trace.events]


class LogPerThread:
    """A file that keeps what each thread wrote apart, so a log can be traced to the call that printed it."""

    def __init__(self) -> None:
        self.by_thread: dict[str, str] = defaultdict(str)
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self.by_thread[threading.current_thread().name] += text
        return len(text)

    def flush(self) -> None:
        pass


def run_threads(**targets) -> None:
    threads = [threading.Thread(target=target, name=name) for name, target in targets.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"


# -- each call and each block stops the session it started ---------------------------------------
#
# The order below is fixed with events, so the old swap shows on every run: the first call starts,
# draws and is still open when the second starts; the first returns; only then does the second draw.
# A tracer that stops "the newest session" would end the second call's trace when the first returns.


def test_one_decorated_function_in_two_threads_prints_each_call_its_own_log():
    log = LogPerThread()

    @rng_trace(file=log)
    def steps(*actions) -> None:
        for action in actions:
            action()

    first_drew, second_entered, first_returned = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        # A lambda, so the draw looks random.random up inside the call, where it is traced.
        steps(lambda: random.random(), first_drew.set, lambda: second_entered.wait(10))
        first_returned.set()

    def second() -> None:
        first_drew.wait(10)
        steps(second_entered.set, lambda: first_returned.wait(10), lambda: random.uniform(0, 1))

    run_threads(first=first, second=second)
    assert "random.random" in log.by_thread["first"]
    assert "random.uniform" not in log.by_thread["first"]
    assert "random.uniform" in log.by_thread["second"]
    assert "random.random" not in log.by_thread["second"]


def test_one_tracer_entered_in_two_threads_ends_each_block_with_its_own_trace():
    tracer = rng_trace(print=False)
    traces = {}
    first_drew, second_entered, first_left = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with tracer as traces["first"]:
            random.random()
            first_drew.set()
            second_entered.wait(10)
        first_left.set()

    def second() -> None:
        first_drew.wait(10)
        with tracer as traces["second"]:
            second_entered.set()
            first_left.wait(10)
            random.uniform(0, 1)

    run_threads(first=first, second=second)
    assert apis(traces["first"]) == ["random.random"]
    assert apis(traces["second"]) == ["random.uniform"]


def test_one_tracer_entered_in_two_asyncio_tasks_ends_each_block_with_its_own_trace():
    tracer = rng_trace(print=False)
    traces = {}

    async def main() -> None:
        first_drew, second_entered, first_left = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def first() -> None:
            with tracer as traces["first"]:
                random.random()
                first_drew.set()
                await second_entered.wait()
            first_left.set()

        async def second() -> None:
            await first_drew.wait()
            with tracer as traces["second"]:
                second_entered.set()
                await first_left.wait()
                random.uniform(0, 1)

        await asyncio.gather(first(), second())

    asyncio.run(main())
    assert apis(traces["first"]) == ["random.random"]
    assert apis(traces["second"]) == ["random.uniform"]


def test_one_tracer_nested_in_itself_gives_each_block_its_own_trace():
    tracer = rng_trace(print=False)
    with tracer as outer:
        random.random()
        with tracer as inner:
            random.uniform(0, 1)
        random.random()
    assert apis(outer) == ["random.random", "random.uniform", "random.random"]
    assert apis(inner) == ["random.uniform"]


def test_a_block_entered_in_one_task_and_exited_in_another_is_ended():
    tracer = rng_trace(print=False)

    async def setup():
        return tracer.__enter__()

    async def teardown() -> None:
        tracer.__exit__(None, None, None)

    # As pytest-asyncio runs an async fixture: setup and teardown each in a task of their own.
    loop = asyncio.new_event_loop()
    try:
        trace = loop.run_until_complete(setup())
        random.random()
        loop.run_until_complete(teardown())
    finally:
        loop.close()
    assert apis(trace) == ["random.random"]
    assert tracer.last_trace is trace
    assert HUB.hooked() == {}


def test_an_exit_with_no_block_open_says_what_to_do():
    with pytest.raises(RuntimeError, match="pair each exit with one enter"):
        rng_trace(print=False).__exit__(None, None, None)


def test_a_recursive_decorated_function_prints_one_log_per_call():
    log = io.StringIO()

    @rng_trace(file=log)
    def descend(levels: int) -> None:
        random.random()
        if levels:
            descend(levels - 1)

    descend(2)
    assert log.getvalue().count("rngtrace: ") == 3


def test_last_trace_holds_the_trace_of_the_most_recent_call():
    tracer = rng_trace(print=False)

    @tracer
    def draw(n: int) -> None:
        for _ in range(n):
            random.random()

    assert tracer.last_trace is None
    draw(2)
    assert apis(tracer.last_trace) == ["random.random"] * 2
    draw(1)
    assert apis(tracer.last_trace) == ["random.random"]


# -- generators, coroutines and async generators are traced over their whole run ------------------


def test_a_decorated_generator_is_traced_from_its_first_resume_until_it_is_exhausted():
    log = io.StringIO()
    tracer = rng_trace(file=log)

    @tracer
    def numbers(n: int):
        for _ in range(n):
            yield random.random()

    random.seed(3)
    expected = [random.random() for _ in range(3)]
    random.seed(3)
    gen = numbers(3)
    assert tracer.last_trace is None and log.getvalue() == ""
    first = next(gen)
    assert log.getvalue() == "", "the log must wait for the generator to finish"
    assert [first, *gen] == expected
    assert apis(tracer.last_trace) == ["random.random"] * 3
    assert log.getvalue().startswith("rngtrace: 3 events")
    assert log.getvalue().count("rngtrace: ") == 1


def test_send_throw_and_the_return_value_pass_through_a_decorated_generator():
    tracer = rng_trace(print=False)

    @tracer
    def collect():
        got = []
        while True:
            try:
                item = yield len(got)
            except KeyError as error:
                got.append(("thrown", error.args[0]))
                continue
            if item is None:
                random.random()
                return got
            got.append(item)

    def delegate():
        return (yield from collect())

    gen = delegate()
    assert next(gen) == 0
    assert gen.send("a") == 1
    assert gen.throw(KeyError("k")) == 2
    with pytest.raises(StopIteration) as stop:
        gen.send(None)
    assert stop.value.value == ["a", ("thrown", "k")]
    assert apis(tracer.last_trace) == ["random.random"]


def test_a_decorated_generator_closed_early_or_dropped_ends_its_trace():
    tracer = rng_trace(print=False)
    cleaned = []

    @tracer
    def endless():
        try:
            while True:
                yield random.random()
        finally:
            cleaned.append("cleaned")

    gen = endless()
    next(gen), next(gen)
    gen.close()
    assert cleaned == ["cleaned"]
    assert apis(tracer.last_trace) == ["random.random"] * 2
    assert HUB.hooked() == {}

    gen = endless()
    next(gen)
    del gen
    gc.collect()
    assert cleaned == ["cleaned"] * 2
    assert apis(tracer.last_trace) == ["random.random"]
    assert HUB.hooked() == {}


def test_an_error_raised_in_a_decorated_generator_ends_its_trace_and_propagates():
    log = io.StringIO()

    @rng_trace(file=log)
    def failing():
        yield random.random()
        raise LookupError("from the body")

    with pytest.raises(LookupError, match="from the body"):
        list(failing())
    assert "random.random" in log.getvalue()


def test_on_draw_raise_stops_the_first_draw_in_a_decorated_generator_body():
    @rng_trace(on_draw="raise", print=False)
    def numbers():
        yield random.random()

    gen = numbers()
    with pytest.raises(GlobalRNGError, match="random.random"):
        next(gen)


def test_a_decorated_coroutine_is_traced_across_its_awaits():
    tracer = rng_trace(print=False)

    @tracer
    async def fetch(n: int) -> list[float]:
        values = []
        for _ in range(n):
            values.append(random.random())
            await asyncio.sleep(0)
        return values

    coro = fetch(2)
    random.uniform(0, 1)  # made, not yet started: this draw is not the coroutine's
    assert len(asyncio.run(coro)) == 2
    assert apis(tracer.last_trace) == ["random.random"] * 2


def test_a_decorated_async_generator_is_traced_until_it_is_exhausted():
    tracer = rng_trace(print=False)

    @tracer
    async def ticks(n: int):
        for i in range(n):
            random.random()
            await asyncio.sleep(0)
            yield i

    async def main() -> list[int]:
        return [i async for i in ticks(3)]

    assert asyncio.run(main()) == [0, 1, 2]
    assert apis(tracer.last_trace) == ["random.random"] * 3


def test_asend_athrow_and_aclose_pass_through_a_decorated_async_generator():
    tracer = rng_trace(print=False)
    cleaned = []

    @tracer
    async def collect():
        got = []
        try:
            while True:
                try:
                    item = yield len(got)
                except KeyError as error:
                    got.append(("thrown", error.args[0]))
                    continue
                got.append(item)
                random.random()
                await asyncio.sleep(0)
        finally:
            cleaned.append(got)

    async def main() -> None:
        agen = collect()
        assert await agen.asend(None) == 0
        assert await agen.asend("a") == 1
        assert await agen.athrow(KeyError("k")) == 2
        await agen.aclose()

    asyncio.run(main())
    assert cleaned == [["a", ("thrown", "k")]]
    assert apis(tracer.last_trace) == ["random.random"]


def test_decorated_generator_and_coroutine_functions_keep_their_kind_and_signature():
    def gen(n: int, *, step: int = 1):
        yield n

    async def coro(n: int, *, step: int = 1) -> int:
        return n

    async def agen(n: int, *, step: int = 1):
        yield n

    kinds = (inspect.isgeneratorfunction, inspect.iscoroutinefunction, inspect.isasyncgenfunction)
    for original in (gen, coro, agen):
        decorated = rng_trace(original)
        assert [kind(decorated) for kind in kinds] == [kind(original) for kind in kinds]
        assert inspect.signature(decorated) == inspect.signature(original)


def test_an_unknown_option_is_a_type_error_that_names_it():
    with pytest.raises(TypeError, match="'stream'"):
        rng_trace(stream=["numpy"])
