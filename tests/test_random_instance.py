"""Calls through ``random._inst`` itself, which library code holds (networkx), are recorded from the first one."""

from __future__ import annotations

import random
import sys
from random import randint as prebound_randint
from random import sample as prebound_sample

import pytest

from rngtrace import rng_trace

HERE = __file__


def _line() -> int:
    return sys._getframe(1).f_lineno


def test_calls_through_the_module_instance_are_recorded_from_the_first_call_at_the_callers_line():
    inst = random._inst  # what networkx's create_py_random_state(None) hands out
    with rng_trace(print=False) as trace:
        line = _line() + 1
        inst.choice("abc")
        inst.random()
        inst.sample(range(10), 3)
        inst.shuffle([1, 2, 3, 4])
    assert [(e.kind, e.api, e.count) for e in trace.events] == [
        ("draw", "random.choice", 1),
        ("draw", "random.random", 1),
        ("draw", "random.sample", 3),
        ("draw", "random.shuffle", 4),
    ]
    assert [(e.frame.filename, e.frame.lineno) for e in trace.events] == [(HERE, line + i) for i in range(4)]


def test_a_seed_through_the_instance_is_a_seed_with_its_value():
    saved = random.getstate()
    with rng_trace(print=False) as trace:
        random._inst.seed(42)
        random._inst.setstate(saved)  # changes the state back: a seed (one of the state held is none)
    assert [(e.kind, e.api, e.detail) for e in trace.events] == [
        ("seed", "random.seed", "42"),
        ("seed", "random.setstate", "<tuple>"),
    ]
    assert not trace.findings  # a deterministic seed and restore: nothing unseeded


def test_one_call_through_the_instance_is_one_event_whatever_it_calls_inside():
    with rng_trace(print=False) as trace:
        random._inst.randint(0, 10**40)  # randrange, then getrandbits several times, on the instance
        random._inst.sample(range(1000), 50)
        random._inst.betavariate(2.0, 3.0)  # gammavariate and random inside
    assert [e.api for e in trace.events] == ["random.randint", "random.sample", "random.betavariate"]


def test_module_functions_bound_before_tracing_are_attributed_from_the_first_call():
    with rng_trace(print=False) as trace:
        line = _line() + 1
        prebound_randint(1, 6)
        prebound_sample(range(100), 10)  # draws ten times inside: one event
    assert [(e.kind, e.api, e.frame.lineno) for e in trace.events] == [
        ("draw", "random.randint", line),
        ("draw", "random.sample", line + 1),
    ]
    assert trace.events[0].frame.filename == HERE


def test_a_programs_own_random_instance_stays_silent_and_draws_the_same():
    def run():
        mine = random.Random(7)
        return [mine.random(), mine.choice(range(50)), mine.sample(range(50), 5), mine.gauss(0, 1)]

    expected = run()
    with rng_trace(print=False) as trace:
        got = run()
    assert got == expected and trace.events == []


def test_a_subclass_instance_and_system_random_stay_silent():
    class Mine(random.Random):
        def random(self) -> float:
            return super().random()

    with rng_trace(print=False) as trace:
        Mine(3).choice("abc")
        random.SystemRandom().randint(0, 9)
    assert trace.events == []


def test_the_instance_draws_the_same_values_traced_as_untraced():
    def run():
        random.seed(11)
        inst = random._inst
        return [
            inst.random(),
            inst.randint(0, 99),
            inst.sample(range(99), 7),
            inst.gauss(0, 1),
            inst.choices("abcdef", k=4),
            inst.uniform(1, 2),
            random.random(),
            inst.getrandbits(70),
        ]

    expected = run()
    with rng_trace(print=False):
        got = run()
    assert got == expected


@pytest.mark.parametrize("pure", [False, True], ids=["accelerated", "pure"])
def test_networkx_generators_with_seed_none_name_their_line(pure, tmp_path):
    pytest.importorskip("networkx")
    import subprocess

    script = tmp_path / "graphs.py"
    script.write_text(
        "import networkx as nx\n"
        "from rngtrace import rng_trace\n"
        "with rng_trace(print=False) as trace:\n"
        "    nx.gnp_random_graph(20, 0.3)\n"
        "    nx.random_regular_graph(3, 10)\n"
        "    nx.watts_strogatz_graph(12, 4, 0.2)\n"
        "print(len(trace.events), sum(e.kind == 'unattributed' for e in trace.events))\n"
        "print(sorted({e.frame.filename.rsplit('/', 2)[-2] for e in trace.events if e.frame}))\n"
    )
    env = {**__import__("os").environ, **({"RNGTRACE_PURE": "1"} if pure else {})}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True).stdout
    counts, places = out.splitlines()
    events, unattributed = map(int, counts.split())
    assert events > 0 and unattributed == 0
    assert places == "['generators']"  # networkx's own lines, where the global stream is drawn
